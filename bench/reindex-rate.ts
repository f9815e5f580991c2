/**
 * Re-index rate: creates N contents (default 50,000) through the HTTP API, waits until the
 * indexer has caught up, then runs a full re-index session and reports the rate from the
 * session's completion log line. Starts its own Redis and embedded Solr; leaves nothing behind.
 *   node --import tsx bench/reindex-rate.ts [N]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadSettings } from '../config/settings.js';
import { startRedisServer } from '../src/adapters/redis-server.js';
import { startSolr } from '../src/adapters/solr-server.js';
import { startPlatform } from '../src/main.js';

const N = Number(process.argv[2] ?? 50000);
const dir = mkdtempSync(join(tmpdir(), 'reindex-bench-'));
const redis = await startRedisServer({});
const solr = await startSolr({ dataDir: join(dir, 'solr'), log: (m) => console.log(m) });
const lines: string[] = [];
const log = pino({ level: 'info' }, new Writable({ write(c, _e, cb) { for (const l of String(c).split('\n')) if (l) { const m = JSON.parse(l).msg as string; if (m?.startsWith('Re-indexing')) { lines.push(m); console.log(m); } } cb(); } }));
const settings = loadSettings({ ...process.env, PORT: '0', REDIS_URL: redis.url, SOLR_URL: solr.url, LOG_LEVEL: 'info' });
const p = await startPlatform({ settings, log });
const base = `${p.url}/content-service`;
const tok = (await (await fetch(`${base}/security/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username: 'sysadmin', password: 'sysadmin' }) })).json()) as { token: string };
const headers = { 'Content-Type': 'application/json', 'X-Auth-Token': tok.token };

let made = 0;
const t0 = Date.now();
await Promise.all(Array.from({ length: 64 }, async () => {
  while (made < N) {
    made++;
    const r = await fetch(`${base}/content`, { method: 'POST', headers, body: JSON.stringify({ system: { contentType: 'article' }, aspects: { body: { title: `t${made}`, text: 'lorem ipsum '.repeat(20) } }, operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }] }) });
    if (r.status !== 201) throw new Error(`create ${r.status}`);
    await r.arrayBuffer();
  }
}));
console.log(`created ${N} contents in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const count = async () => ((await (await fetch(`${solr.url}/content/select?q=*:*&rows=0`)).json()) as { response: { numFound: number } }).response.numFound;
while ((await count()) < N) await new Promise((r) => setTimeout(r, 500));
console.log(`indexer caught up: ${await count()} documents ${((Date.now() - t0) / 1000).toFixed(1)} s after the first create`);
const res = await fetch(`${base}/index/reindex/full`, { method: 'POST', headers });
console.log(await res.text());
while (!lines.some((l) => l.includes('complete.'))) await new Promise((r) => setTimeout(r, 200));
await p.stop();
await solr.stop();
await redis.stop();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
