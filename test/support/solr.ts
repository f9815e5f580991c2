import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { javaAndMavenAvailable, startSolr } from '../../src/adapters/solr-server.js';

let solr: Promise<string> | undefined;

/**
 * One Solr for the whole test run: SOLR_URL when given, else the embedded Solr started once
 * (built with Maven on first use) in a temporary directory; it ends with the test process.
 */
export function ensureTestSolr(): Promise<string> {
  if (!process.env.TEST_SOLR_URL && !javaAndMavenAvailable()) {
    throw new Error('The search tests need Solr: install Java 17 and Maven (the embedded Solr is built from Maven Central), or set TEST_SOLR_URL');
  }
  solr ??= process.env.TEST_SOLR_URL
    ? Promise.resolve(process.env.TEST_SOLR_URL)
    : startSolr({ dataDir: mkdtempSync(join(tmpdir(), 'test-solr-')), log: (m) => console.log(`[test setup] ${m}`) }).then((h) => h.url);
  return solr;
}
