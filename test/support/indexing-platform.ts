import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadSettings } from '../../config/settings.js';
import { ContentStore } from '../../src/adapters/content-store.js';
import { startPlatform } from '../../src/main.js';
import { checked } from './openapi-check.js';
import { Client } from './platform.js';
import { ensureTestSolr } from './solr.js';

/** A document as the test Solr holds it. */
export type SolrDoc = Record<string, unknown> & { id: string };

/** Documents of the test Solr's collection straight from the engine, behind the platform's filters. */
export async function solrSelect(solr: string, q: string, fl = '*', rows = 100): Promise<SolrDoc[]> {
  const r = await fetch(`${solr}/content/select?${new URLSearchParams({ q, fl, rows: String(rows), wt: 'json' })}`);
  return ((await r.json()) as { response: { docs: SolrDoc[] } }).response.docs;
}

export type IndexingPlatform = Awaited<ReturnType<typeof startPlatform>> & { base: string };

/**
 * A whole platform (every role, indexing into the test Solr, 8 partitions) whose log lines are
 * kept in `lines` (JSON, level info and up), with an editor, an anonymous client and a content
 * store on its Redis: for tests of what the indexer sends and logs.
 */
export async function startIndexingPlatform(overrides: Record<string, string> = {}): Promise<{
  p: IndexingPlatform;
  solr: string;
  editor: Client;
  anon: Client;
  store: ContentStore;
  lines: { msg: string; [k: string]: unknown }[];
}> {
  const solr = await ensureTestSolr();
  const settings = loadSettings({ ...process.env, PORT: '0', PARTITIONS: '8', LEASE_MS: '2000', SOLR_URL: solr, ...overrides });
  const lines: { msg: string; [k: string]: unknown }[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
      cb();
    },
  });
  const platform = checked(await startPlatform({ settings, log: pino({ level: 'info' }, sink) }));
  const p = Object.assign(platform, { base: `${platform.url}/content-service` });
  return {
    p,
    solr,
    editor: await new Client(p.base).login('editor'),
    anon: new Client(p.base),
    store: new ContentStore(p.redis, settings.PARTITIONS, settings.EVENTS_MAXLEN, settings.DEDUP_TTL_SECONDS),
    lines,
  };
}
