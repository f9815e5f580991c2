/**
 * File upload and download throughput (budget: ≥ 200 MB/s on loopback, flat memory).
 * Starts its own Redis and the platform (one process, disk store in a temporary directory, or
 * S3 when S3_ENDPOINT is set), then for 1 MB files (8 clients) and 100 MB files (1 client)
 * uploads and downloads for a while each, and prints MB/s and the process's peak RSS.
 *   node --import tsx bench/files.ts [seconds per workload, default 10]
 * With BENCH_URL set (a running gateway, e.g. http://127.0.0.1:8080; `npm run bench` sets it),
 * it loads that platform instead of starting its own, and the peak RSS is the harness's to
 * sample. FILES_SIZES=1,100 (MB) picks the file sizes.
 * Prints one JSON line per workload (prefixed `RESULT `) for the bench harness, with the
 * latency of each file's upload or download (p50/p99/p999, ms).
 */
import { randomFillSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings } from '../config/settings.js';
import { createLogger } from '../src/adapters/log.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { startPlatform } from '../src/main.js';

const SECONDS = Number(process.argv[2] ?? 10);
const MB = 1_000_000;
const EXTERNAL = process.env.BENCH_URL;
const dir = mkdtempSync(join(tmpdir(), 'files-bench-'));
const redis = EXTERNAL ? null : await startRedisServer({});
const settings = redis
  ? loadSettings({
      ...process.env,
      PORT: '0',
      REDIS_URL: redis.url,
      FILES_DIR: join(dir, 'files'),
      SOLR_URL: 'http://127.0.0.1:1/solr',
      MAX_UPLOAD_BYTES: String(1024 * MB),
    })
  : null;
const p = settings
  ? await startPlatform({ settings, log: createLogger('warn'), roles: ['web', 'actors'] })
  : { url: EXTERNAL!.replace(/\/+$/, ''), stop: async () => undefined };
const token = (
  (await (
    await fetch(`${p.url}/content-service/security/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: 'editor', password: 'editor' }),
    })
  ).json()) as { token: string }
).token;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

let peakRss = 0;
const sampler = setInterval(() => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  if (m) peakRss = Math.max(peakRss, Number(m[1]) * 1024);
}, 50);

/** One upload of `size` bytes (1 MiB chunks of one random block, with backpressure); resolves with its Location. */
function upload(size: number, block: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${p.url}/file-service/file/tmp/bench/f.bin`, {
      method: 'POST',
      agent,
      headers: { 'X-Auth-Token': token, 'Content-Length': String(size) },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 201 ? resolve(res.headers.location!) : reject(new Error(`upload ${res.statusCode}`))));
    });
    req.on('error', reject);
    void (async () => {
      for (let n = 0; n < size; ) {
        const c = block.subarray(0, Math.min(block.length, size - n));
        n += c.length;
        if (!req.write(c)) await new Promise((r) => req.once('drain', r));
      }
      req.end();
    })();
  });
}

function download(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers: { 'X-Auth-Token': token } }, (res) => {
        let n = 0;
        res.on('data', (d: Buffer) => (n += d.length));
        res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`download ${res.statusCode}`))));
      })
      .on('error', reject);
  });
}

async function workload(name: string, size: number, clients: number): Promise<void> {
  const block = randomFillSync(Buffer.allocUnsafe(Math.min(size, 1 << 20)));
  const locations: string[] = [];
  for (const [kind, op] of [
    ['upload', async () => void locations.push(await upload(size, block))],
    ['download', async () => void (await download(locations[Math.floor(Math.random() * locations.length)]))],
  ] as const) {
    peakRss = 0;
    let bytes = 0;
    let ops = 0;
    const times: number[] = [];
    const t0 = performance.now();
    const until = t0 + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (performance.now() < until) {
          const t = performance.now();
          await op();
          times.push(performance.now() - t);
          bytes += size;
          ops++;
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    times.sort((a, b) => a - b);
    const q = (x: number) => +times[Math.min(times.length - 1, Math.floor(x * times.length))].toFixed(2);
    const result = {
      workload: `${kind} ${name}`,
      clients,
      ops,
      seconds: +secs.toFixed(2),
      mbPerSecond: +(bytes / MB / secs).toFixed(1),
      p50: q(0.5),
      p99: q(0.99),
      p999: q(0.999),
      ...(EXTERNAL ? {} : { peakRssMiB: Math.round(peakRss / 2 ** 20) }),
    };
    console.log(
      `${result.workload.padEnd(18)} ${String(result.mbPerSecond).padStart(7)} MB/s  ${ops} files in ${result.seconds} s, ${clients} client(s), p50 ${result.p50} ms, p99 ${result.p99} ms${EXTERNAL ? '' : `, peak RSS ${result.peakRssMiB} MiB`}`,
    );
    console.log(`RESULT ${JSON.stringify(result)}`);
  }
}

try {
  for (const mb of (process.env.FILES_SIZES ?? '1,100').split(',').map(Number)) await workload(`${mb} MB`, mb * MB, mb >= 100 ? 1 : 8);
} finally {
  clearInterval(sampler);
  agent.destroy();
  await p.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
