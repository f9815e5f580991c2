import { readFileSync } from 'node:fs';
import { indexSchemaOf, parseSchemaXml, type IndexSchema, type RawSchema } from '../content/search-document.js';
import type { Logger } from './log.js';
import { repoPath } from '../repo-files.js';

/** How often a web process asks an engine that did not answer for its schema again. */
const RELEARN_MS = 30_000;

/** The configset's schema in this repository (from src/adapters or dist/src/adapters). */
const BUNDLED = repoPath('tools', 'solr', 'configsets', 'content', 'conf', 'schema.xml');

let current: { schema: IndexSchema; source: 'engine' | 'bundled' } | undefined;

/**
 * The schema the write-time check of svcSolrDocument uses (CONTRACT §20): the collection's, as
 * the engine's Schema API gave it to this process, or until then the bundled
 * tools/solr/configsets/content/conf/schema.xml (the configset the embedded Solr and the
 * README's SolrCloud setup use).
 */
export function indexSchema(): IndexSchema {
  current ??= { schema: indexSchemaOf(parseSchemaXml(readFileSync(BUNDLED, 'utf8'))), source: 'bundled' };
  return current.schema;
}

/**
 * Learns the collection's schema from the engine: once at start, then every 30 s until the
 * engine answers (it may start after the platform). It is not learnt again after that: a
 * schema changed in the engine is seen by web processes started after the change.
 */
export function learnIndexSchema(engine: { schema(): Promise<RawSchema> }, log: Logger): { stop(): void; firstAttempt: Promise<void> } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const attempt = async (first: boolean) => {
    try {
      const raw = await engine.schema();
      current = { schema: indexSchemaOf(raw), source: 'engine' };
      log.info(
        { fields: raw.fields.length, dynamicFields: raw.dynamicFields.length },
        'search documents are checked against the schema of the search collection',
      );
    } catch (e) {
      if (first) log.warn({ err: String(e) }, `search documents are checked against the bundled schema (${BUNDLED}) until the search engine answers`);
      if (!stopped) {
        timer = setTimeout(() => void attempt(false), RELEARN_MS);
        timer.unref();
      }
    }
  };
  return {
    firstAttempt: attempt(true),
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
