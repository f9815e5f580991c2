import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { javaAndMavenAvailable, startSolr } from '../../src/dev/solr-server.js';

let solr: Promise<string> | undefined;

/**
 * One Solr for the whole test process: TEST_SOLR_URL when given (its `content` collection
 * receives test documents; SOLR_URL is never used, so a developer's Solr is left alone), else
 * the embedded Solr, built with Maven on first use and started once in a temporary directory
 * that is removed when the test process exits.
 */
export function ensureTestSolr(): Promise<string> {
  const given = process.env.TEST_SOLR_URL;
  if (given) {
    solr ??= Promise.resolve(given.replace(/\/+$/, ''));
    return solr;
  }
  if (!javaAndMavenAvailable()) {
    return Promise.reject(
      new Error('The search tests need Solr: install Java 17 and Maven (the embedded Solr is built from Maven Central), or set TEST_SOLR_URL'),
    );
  }
  solr ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'test-solr-'));
    const h = await startSolr({ dataDir: dir, log: (m) => console.log(`[test setup] ${m}`) });
    // startSolr kills the JVM on exit (registered first, so it runs first); then its files go.
    process.once('exit', () => {
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // a JVM still closing files; the OS temp cleaner gets the rest
      }
    });
    return h.url;
  })();
  return solr;
}
