/**
 * Re-index rate: creates N contents (default 50,000) through the HTTP API, waits until the
 * indexer has caught up, then runs a full re-index session and reports the rate from the
 * session's completion log line. Starts its own Redis and embedded Solr; leaves nothing behind.
 *   node --import tsx bench/reindex-rate.ts [N]
 * With BENCH_URL, BENCH_REDIS_URL (and BENCH_PARTITIONS, default 64) set, as `npm run bench`
 * does, it creates the N contents on that running platform instead, and the session re-indexes
 * every content there (those of earlier workloads too). Prints `RESULT {json}` with the rate
 * (the session's total over the time from its start to its completion, read from Redis).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadSettings } from '../config/settings.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { startSolr } from '../src/dev/solr-server.js';
import { startPlatform } from '../src/main.js';
import { Redis } from 'ioredis';
import { indexerSettled, result } from './lib.js';

const N = Number(process.argv[2] ?? 50000);
const EXTERNAL = process.env.BENCH_URL;
const PARTITIONS = Number(process.env.BENCH_PARTITIONS ?? 64);
const dir = mkdtempSync(join(tmpdir(), 'reindex-bench-'));
const redis = EXTERNAL ? null : await startRedisServer({});
const solr = EXTERNAL ? null : await startSolr({ dataDir: join(dir, 'solr'), log: (m) => console.log(m) });
const redisUrl = redis?.url ?? process.env.BENCH_REDIS_URL;
if (!redisUrl) throw new Error('BENCH_REDIS_URL is needed with BENCH_URL');
const lines: string[] = [];
const log = pino(
  { level: 'info' },
  new Writable({
    write(c, _e, cb) {
      for (const l of String(c).split('\n'))
        if (l) {
          const m = JSON.parse(l).msg as string;
          if (m?.startsWith('Re-indexing')) {
            lines.push(m);
            console.log(m);
          }
        }
      cb();
    },
  }),
);
const p =
  solr && redis
    ? await startPlatform({ settings: loadSettings({ ...process.env, PORT: '0', REDIS_URL: redis.url, SOLR_URL: solr.url, LOG_LEVEL: 'info' }), log })
    : { url: EXTERNAL!.replace(/\/+$/, ''), stop: async () => undefined };
const base = `${p.url}/content-service`;
const tok = (await (
  await fetch(`${base}/security/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: 'sysadmin', password: 'sysadmin' }),
  })
).json()) as { token: string };
const headers = { 'Content-Type': 'application/json', 'X-Auth-Token': tok.token };

let made = 0;
const t0 = Date.now();
await Promise.all(
  Array.from({ length: 64 }, async () => {
    while (made < N) {
      made++;
      const r = await fetch(`${base}/content`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          system: { contentType: 'article' },
          aspects: { body: { title: `t${made}`, text: 'lorem ipsum '.repeat(20) } },
          operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
        }),
      });
      if (r.status !== 201) throw new Error(`create ${r.status}`);
      await r.arrayBuffer();
    }
  }),
);
const createSeconds = (Date.now() - t0) / 1000;
console.log(`created ${N} contents in ${createSeconds.toFixed(1)} s`);
const settled = await indexerSettled(redisUrl, PARTITIONS, 300_000);
const catchUpSeconds = (Date.now() - t0) / 1000;
console.log(`indexer caught up (backlog ${settled.backlog}) ${catchUpSeconds.toFixed(1)} s after the first create`);
const res = await fetch(`${base}/index/reindex/full`, { method: 'POST', headers });
const answer = await res.text();
console.log(answer);
const session = /session (\S+) started/.exec(answer)?.[1];
if (res.status !== 200 || !session) throw new Error(`re-index answered ${res.status}: ${answer}`);
const r = new Redis(redisUrl);
let h: Record<string, string> = {};
for (const deadline = Date.now() + 600_000; Date.now() < deadline; await new Promise((w) => setTimeout(w, 100))) {
  h = await r.hgetall(`reindex:${session}`);
  if (h.completed) break;
}
r.disconnect();
const total = Number(h.total);
const seconds = (Number(h.completed) - Number(h.started)) / 1000;
const rate = Math.round(total / Math.max(seconds, 0.001));
console.log(`full re-index: ${total} contents in ${seconds.toFixed(1)} s, ${rate} contents/s`);
result({
  workload: 'full re-index',
  contents: total,
  created: N,
  seconds: +seconds.toFixed(2),
  contentsPerSecond: h.completed ? rate : 0,
  completed: Boolean(h.completed),
  createSeconds: +createSeconds.toFixed(1),
  catchUpSeconds: +catchUpSeconds.toFixed(1),
});
await p.stop();
await solr?.stop();
await redis?.stop();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
