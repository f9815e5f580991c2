/**
 * The version archive (issue 25). Starts its own Redis and the platform (web, actors, archiver in
 * one process; the file store on disk in a temporary directory, or S3Proxy with ARCHIVE_BENCH_STORE=s3),
 * writes CONTENTS contents of about 1 KB with VERSIONS versions each, then measures:
 *   - Redis bytes per content (MEMORY USAGE of every key of a sample of contents) before and
 *     after one archiving pass with ARCHIVE_KEEP_REVISIONS=1 (every version but the newest moves),
 *     and the index's bytes per archived version (target ≤ 100);
 *   - the archive rate: versions (and revisions) moved per second by one archiver;
 *   - versioned reads, one client: the hot read (the head revision, from Redis), the archived read
 *     cold (the first revision: its segment comes from the object store) and cached (the second
 *     revision: the same segment, from the archive's cache), each a first read of its URL, so the
 *     gateway's own answer cache does not serve it.
 *   node --import tsx bench/archive.ts [contents, default 2000] [versions, default 5]
 * Prints one `RESULT {json}` line per measurement for the bench harness.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings } from '../config/settings.js';
import { partitionOf } from '../src/adapters/ids.js';
import { createLogger } from '../src/adapters/log.js';
import { keys } from '../src/adapters/redis.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { startS3Server } from '../src/dev/s3-server.js';
import { startPlatform } from '../src/main.js';
import { latencyOf, request, result, round2 } from './lib.js';

const CONTENTS = Number(process.argv[2] ?? 2000);
const VERSIONS = Number(process.argv[3] ?? 5);
const SAMPLE = Math.min(CONTENTS, 300);
const dir = mkdtempSync(join(tmpdir(), 'archive-bench-'));
const redis = await startRedisServer({});
// ARCHIVE_BENCH_STORE=s3: the archive on S3Proxy (started here), else on disk.
const s3 = process.env.ARCHIVE_BENCH_STORE === 's3' ? await startS3Server({ dataDir: join(dir, 's3') }) : null;
const s3env = s3
  ? {
      S3_ENDPOINT: s3.endPoint,
      S3_PORT: String(s3.port),
      S3_USE_SSL: 'false',
      S3_ACCESS_KEY: s3.accessKey,
      S3_SECRET_KEY: s3.secretKey,
      S3_BUCKET: 'archive-bench',
    }
  : {};
const settings = loadSettings({
  ...process.env,
  PORT: '0',
  REDIS_URL: redis.url,
  FILES_DIR: join(dir, 'files'),
  SOLR_URL: 'http://127.0.0.1:1/solr',
  ARCHIVE_KEEP_REVISIONS: '1',
  ARCHIVE_AFTER_DAYS: '3650',
  ARCHIVE_INTERVAL_SECONDS: '604800',
  ...s3env,
});
const p = await startPlatform({ settings, log: createLogger('warn'), roles: ['web', 'actors', 'archiver'] });
const url = `${p.url!}/content-service`;
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });

try {
  const login = await request(
    agent,
    'POST',
    `${url}/security/token`,
    { 'Content-Type': 'application/json' },
    JSON.stringify({ username: 'editor', password: 'editor' }),
  );
  const auth = { 'X-Auth-Token': (JSON.parse(login.body.toString()) as { token: string }).token };
  const json = { ...auth, 'Content-Type': 'application/json' };
  const text = (i: number, v: number) => `Version ${v} of article ${i}. ${'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(15)}`;
  const envelope = (i: number, v: number) =>
    JSON.stringify({
      system: { contentType: 'article' },
      aspects: { body: { _type: 'body', title: `Article ${i} v${v}`, text: text(i, v), tags: ['news', 'bench'] } },
    });

  // ---- write: CONTENTS contents, VERSIONS versions each, 16 at a time
  const ids: string[] = new Array(CONTENTS);
  let next = 0;
  const writer = async () => {
    while (next < CONTENTS) {
      const i = next++;
      const c = await request(agent, 'POST', `${url}/content`, json, envelope(i, 0));
      if (c.status !== 201) throw new Error(`create ${c.status} ${c.body}`);
      const id = (JSON.parse(c.body.toString()) as { system: { id: string } }).system.id;
      let etag = String(c.headers.etag);
      for (let v = 1; v < VERSIONS; v++) {
        const u = await request(agent, 'PUT', `${url}/content/alias/${id}`, { ...json, 'If-Match': etag }, envelope(i, v));
        if (u.status !== 200) throw new Error(`update ${u.status} ${u.body}`);
        etag = String(u.headers.etag);
      }
      ids[i] = id;
    }
  };
  await Promise.all(Array.from({ length: 16 }, writer));

  /** Redis bytes of a content's keys (MEMORY USAGE), averaged over the sample. */
  const P = settings.PARTITIONS;
  const sample = ids.slice(0, SAMPLE).map((id) => id.split('/')[1]);
  async function bytesPerContent(): Promise<{ total: number; index: number }> {
    let total = 0;
    let index = 0;
    for (const cid of sample) {
      const part = partitionOf(cid, P);
      for (const k of [keys.content, keys.revisions, keys.versions, keys.versionIndex, keys.viewHistory, keys.archiveIndex]) {
        const n = Number((await p.redis.call('MEMORY', 'USAGE', k(part, cid), 'SAMPLES', '0')) ?? 0);
        total += n;
        if (k === keys.archiveIndex) index += n;
      }
    }
    return { total: total / sample.length, index: index / sample.length };
  }
  const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await p.redis.info('memory'))?.[1] ?? 0);

  const before = await bytesPerContent();
  const memBefore = await usedMemory();
  const t0 = performance.now();
  const stats = await p.archiver!.runOnce();
  const seconds = (performance.now() - t0) / 1000;
  const after = await bytesPerContent();
  const memAfter = await usedMemory();
  const archivedPerContent = VERSIONS - 1;
  result({
    name: 'archive redis bytes per content',
    contents: CONTENTS,
    versions: VERSIONS,
    before: Math.round(before.total),
    after: Math.round(after.total),
    indexPerArchivedVersion: round2(after.index / archivedPerContent),
    usedMemoryBeforeMiB: round2(memBefore / 1048576),
    usedMemoryAfterMiB: round2(memAfter / 1048576),
    objectBytesPerVersion: round2(stats.bytes / Math.max(1, stats.versions)),
    store: s3 ? 's3' : 'disk',
  });
  result({
    name: 'archive rate',
    versions: stats.versions,
    revisions: stats.revisions,
    segments: stats.moved,
    seconds: round2(seconds),
    versionsPerSecond: Math.round(stats.versions / seconds),
    failed: stats.failed,
  });

  // ---- reads: one client, each URL read once (the gateway's answer cache never serves them)
  async function reads(rev: (i: number) => number): Promise<number[]> {
    const ms: number[] = [];
    for (const id of ids.slice(0, SAMPLE)) {
      const r = await request(agent, 'GET', `${url}/content/alias/${id}/${rev(ids.indexOf(id))}`, auth);
      if (r.status !== 200) throw new Error(`read ${r.status} ${r.body}`);
      ms.push(r.ms);
    }
    return ms;
  }
  const hot = latencyOf(await reads(() => VERSIONS));
  const cold = latencyOf(await reads(() => 1));
  const cached = latencyOf(await reads(() => 2));
  for (const [name, l] of [
    ['archive read hot (head, Redis)', hot],
    ['archive read archived cold (object store)', cold],
    ['archive read archived cached (segment cache)', cached],
  ] as const) {
    result({ name, n: SAMPLE, p50: l.p50, p99: l.p99, p999: l.p999 });
  }
} finally {
  await p.stop();
  await redis.stop();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
  agent.destroy();
}
