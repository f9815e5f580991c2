/**
 * Image renditions (issue 21, CONTRACT §17). Starts its own Redis and the platform (one process,
 * disk store in a temporary directory), uploads a 12-megapixel JPEG and measures:
 *   - first renders to a 1200-wide WebP (each a new rendition: the width steps down by one),
 *     target p99 < 300 ms;
 *   - cached rendition throughput against raw delivery of a file of the same size (8 clients),
 *     target at least 80 %;
 *   - the process's peak RSS during 20 concurrent first renders.
 *   node --import tsx bench/renditions.ts [seconds per throughput run, default 5]
 * Prints one `RESULT {json}` line per measurement for the bench harness.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { loadSettings } from '../config/settings.js';
import { createLogger } from '../src/adapters/log.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { startPlatform } from '../src/main.js';
import { latencyOf, request, result, round2 } from './lib.js';

const SECONDS = Number(process.argv[2] ?? 5);
const FIRST_RENDERS = Number(process.env.RENDITION_BENCH_RENDERS ?? 30);
const dir = mkdtempSync(join(tmpdir(), 'renditions-bench-'));
const redis = await startRedisServer({});
const settings = loadSettings({
  ...process.env,
  PORT: '0',
  REDIS_URL: redis.url,
  FILES_DIR: join(dir, 'files'),
  SOLR_URL: 'http://127.0.0.1:1/solr',
  RENDITION_MAX_CONCURRENT: '32',
  // One editor asks for all the renders at once.
  RENDITION_AT_ONCE_PER_CALLER: '32',
});
const p = await startPlatform({ settings, log: createLogger('warn'), roles: ['web', 'actors'] });
const url = p.url!;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const login = await request(
  agent,
  'POST',
  `${url}/content-service/security/token`,
  { 'Content-Type': 'application/json' },
  JSON.stringify({ username: 'editor', password: 'editor' }),
);
const token = (JSON.parse(login.body.toString()) as { token: string }).token;
const auth = { 'X-Auth-Token': token };

let peakRss = 0;
const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) * 1024;
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, rss());
}, 20);

async function upload(path: string, body: Buffer, type: string): Promise<string> {
  const r = await request(agent, 'POST', `${url}/file-service/file/content/bench/${path}`, { ...auth, 'Content-Type': type }, body);
  if (r.status !== 201) throw new Error(`upload ${r.status} ${r.body}`);
  return (JSON.parse(r.body.toString()) as { URI: string }).URI;
}

try {
  // A photo-like 4000×3000 JPEG: noise over a colour, so the encoder has real work.
  const photo = await sharp({ create: { width: 4000, height: 3000, channels: 3, background: '#6a8', noise: { type: 'gaussian', mean: 120, sigma: 40 } } })
    .jpeg({ quality: 90 })
    .toBuffer();
  const source = await upload('photo.jpg', photo, 'image/jpeg');
  const c = await request(
    agent,
    'POST',
    `${url}/content-service/content`,
    { ...auth, 'Content-Type': 'application/json' },
    JSON.stringify({
      system: { contentType: 'article' },
      aspects: { body: { title: 'bench' }, svcFiles: { files: { 'photo.jpg': { fileUri: source, filePath: 'photo.jpg' } } } },
    }),
  );
  if (c.status !== 201) throw new Error(`create ${c.status} ${c.body}`);
  const version = (JSON.parse(c.body.toString()) as { system: { version: string } }).system.version;
  const base = `${url}/file-delivery-service/version/${version}/photo.jpg`;

  // First renders, one at a time.
  const firsts: number[] = [];
  for (let i = 0; i < FIRST_RENDERS; i++) {
    const r = await request(agent, 'GET', `${base}?w=${1200 - i}&fm=webp`, auth);
    if (r.status !== 200) throw new Error(`render ${r.status} ${r.body}`);
    firsts.push(r.ms);
  }
  const first = latencyOf(firsts);
  result({ name: 'rendition first render 12MP JPEG → 1200w WebP', n: firsts.length, ...first, target: 'p99 < 300 ms', ok: first.p99 < 300 });

  // Cached rendition against a raw file of the same bytes.
  const cachedUrl = `${base}?w=1200&fm=webp`;
  const rendition = (await request(agent, 'GET', cachedUrl, auth)).body;
  const rawUri = await upload('same.webp', rendition, 'image/webp');
  const c2 = await request(
    agent,
    'POST',
    `${url}/content-service/content`,
    { ...auth, 'Content-Type': 'application/json' },
    JSON.stringify({
      system: { contentType: 'article' },
      aspects: { body: { title: 'raw' }, svcFiles: { files: { 'same.webp': { fileUri: rawUri, filePath: 'same.webp' } } } },
    }),
  );
  const rawUrl = `${url}/file-delivery-service/version/${(JSON.parse(c2.body.toString()) as { system: { version: string } }).system.version}/same.webp`;
  const throughput = async (target: string) => {
    const ms: number[] = [];
    const end = performance.now() + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (performance.now() < end) {
          const r = await request(agent, 'GET', target, auth);
          if (r.status !== 200) throw new Error(`get ${r.status}`);
          ms.push(r.ms);
        }
      }),
    );
    return { rps: round2(ms.length / SECONDS), latency: latencyOf(ms) };
  };
  const raw = await throughput(rawUrl);
  const cached = await throughput(cachedUrl);
  const ratio = round2(cached.rps / raw.rps);
  result({
    name: 'rendition cached vs raw delivery (same size, 8 clients)',
    bytes: rendition.length,
    rawRps: raw.rps,
    cachedRps: cached.rps,
    ratio,
    cachedP99: cached.latency.p99,
    target: 'ratio ≥ 0.8',
    ok: ratio >= 0.8,
  });

  // 20 concurrent first renders: the process's peak RSS.
  const idle = rss();
  peakRss = idle;
  const t0 = performance.now();
  const all = await Promise.all(Array.from({ length: 20 }, (_, i) => request(agent, 'GET', `${base}?w=${800 - i}&fm=webp`, auth)));
  const statuses = [...new Set(all.map((r) => r.status))];
  result({
    name: 'rendition 20 concurrent first renders',
    statuses,
    ms: round2(performance.now() - t0),
    rssIdleMiB: round2(idle / 2 ** 20),
    rssPeakMiB: round2(peakRss / 2 ** 20),
  });
} finally {
  clearInterval(sampler);
  agent.destroy();
  await p.stop();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
