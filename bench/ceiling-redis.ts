/**
 * The Redis ceiling of this machine for `npm run bench`: the round trip of the platform's own
 * commit script (src/actors/scripts/commit-content-n.lua, one commit a call: lease check, revision check, head,
 * revision snapshot, version, version index, catalog, view history, event XADD, recorded reply)
 * through ioredis (auto-pipelined, as the platform's connection is), with msgpack blobs of the
 * sizes a create writes, `concurrency` commits in flight from one connection, for `seconds`.
 * Each commit creates a new content (expected revision 0), so nothing conflicts. Run it against
 * a Redis of its own: it leaves every key it wrote.
 *   node --import tsx bench/ceiling-redis.ts <redis url> [seconds, 8] [concurrency, 50] [partitions, 64]
 * Prints `RESULT {"workload":"redis lua commit", "commitsPerSecond", p50/p99/p999 (ms), ...}`.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { pack } from 'msgpackr';
import { packScriptArgs } from '../src/adapters/redis.js';
import { CommitOutcome } from '../src/adapters/content-store.js';
import { CREATE_ENVELOPE, latencyOf, result, round2 } from './lib.js';

const [url, secondsArg, concurrencyArg, partitionsArg] = process.argv.slice(2);
if (!url) throw new Error('usage: ceiling-redis.ts <redis url> [seconds] [concurrency] [partitions]');
const SECONDS = Number(secondsArg ?? 8);
const CONCURRENCY = Number(concurrencyArg ?? 50);
const PARTITIONS = Number(partitionsArg ?? 64);
const script = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'actors', 'scripts', 'commit-content-n.lua'), 'utf8');

type Commit = (...args: (string | number | Buffer)[]) => Promise<[number, number?]>;
const redis = new Redis(url, { enableAutoPipelining: true, maxRetriesPerRequest: null });
redis.defineCommand('commitContent', { lua: script }); // the number of keys first: 12, one commit
const commit = (redis as unknown as { commitContent: Commit }).commitContent.bind(redis);
const OWNER = `bench:${process.pid}`;
for (let p = 0; p < PARTITIONS; p++) await redis.set(`lease:{${p}}`, OWNER);

const aspects = CREATE_ENVELOPE.aspects;
let seq = 0;
const id = () => `01JBENCH${process.pid.toString(36)}${(seq++).toString(36).padStart(8, '0')}`.toUpperCase();

// The blobs are packed once: what is measured is the script's round trip, not msgpack in this client.
const now = Date.now();
const vk = id();
const snapshot = {
  cid: vk,
  rev: 1,
  type: 'article',
  head: vk,
  created: now,
  modified: now,
  committer: 'editor',
  deleted: false,
  views: { svcLatest: vk },
  symbolic: {},
  meta: {},
  aliases: [],
};
const version = { key: vk, type: 'article', aspects, created: now, creator: 'editor', rev: 1 };
const blobs = {
  snapshot: pack(snapshot),
  version: pack(version),
  index: pack({ key: vk, rev: 1, created: now, creator: 'editor' }),
  event: pack({ kind: 'created', cid: vk, rev: 1, type: 'article', version: vk, ts: now, userId: 'editor', requestId: 'req-bench' }),
  reply: pack({ id: 'cmd-bench', ok: true, value: { snapshot, version, status: 'created' } }),
  view: pack({ view: 'svcLatest', userId: 'editor', version: vk, rev: 1, ts: now }),
};

async function one(): Promise<number> {
  const cid = id();
  const p = seq % PARTITIONS;
  const t0 = performance.now();
  const res = await commit(
    12,
    `lease:{${p}}`,
    `ct:{${p}}:${cid}`,
    `rv:{${p}}:${cid}`,
    `vr:{${p}}:${cid}`,
    `vi:{${p}}:${cid}`,
    `vh:{${p}}:${cid}`,
    `events:{${p}}`,
    `done:{${p}}:cmd-${cid}`,
    `dr:{${p}}:${cid}`,
    `cmd:{${p}}`,
    `cat:{${p}}`,
    `cat:{${p}}:t:article`,
    packScriptArgs({
      owner: OWNER,
      expectedRev: 0,
      rev: 1,
      snapshot: blobs.snapshot,
      head: vk,
      versionKey: vk,
      version: blobs.version,
      versionIndexEntry: blobs.index,
      event: blobs.event,
      eventsMaxLen: 1000000,
      reply: blobs.reply,
      dedupTtl: 86400,
      ts: Date.now(),
      group: 'actors',
      viewEvents: [blobs.view],
    }),
  );
  if (res[0] !== CommitOutcome.Committed) throw new Error(`commit answered ${JSON.stringify(res)}`);
  return performance.now() - t0;
}

// Warm up (script load, connection), then measure.
await Promise.all(Array.from({ length: CONCURRENCY }, () => one()));
const times: number[] = [];
let errors = 0;
const t0 = performance.now();
const until = t0 + SECONDS * 1000;
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < until) {
      try {
        times.push(await one());
      } catch {
        errors++;
      }
    }
  }),
);
const secs = (performance.now() - t0) / 1000;
const lat = latencyOf(times);
const r = {
  workload: 'redis lua commit',
  commits: times.length,
  seconds: round2(secs),
  concurrency: CONCURRENCY,
  commitsPerSecond: Math.round(times.length / secs),
  errors,
  ...lat,
};
console.log(
  `redis lua commit: ${r.commitsPerSecond} commits/s, p50 ${lat.p50} ms, p99 ${lat.p99} ms, p999 ${lat.p999} ms (${CONCURRENCY} in flight, ${r.commits} commits in ${r.seconds} s)`,
);
result(r);
redis.disconnect();
process.exit(0);
