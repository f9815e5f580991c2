/**
 * What one operation costs Redis: commands by name, bytes in and out, and memory, counted (not
 * timed) from INFO before and after N operations, less what the platform's background work
 * (leases, the time-state schedule, the audit copier, webhooks) sends in the same time when idle.
 * Counts do not depend on the machine's load, so they are the inputs of bench/SCALING.md.
 *
 *   node --import tsx bench/redis-costs.ts [N=2000]
 *
 * Runs every role in this process against a private redis-server and the embedded Solr, twice:
 * with local dispatch (one process: commands of its own partitions skip the streams) and without
 * (every command through the command and reply streams, as in the fleet). Prints a Markdown table
 * and a RESULT line.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { loadSettings } from '../config/settings.js';
import { createLogger } from '../src/adapters/log.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { startSolr } from '../src/dev/solr-server.js';
import { startPlatform } from '../src/main.js';
import { indexerSettled, login, request, result, round2, sleep } from './lib.js';

const N = Number(process.argv[2] ?? 2000);
const CONCURRENCY = 20;

type Info = { calls: Map<string, number>; netIn: number; netOut: number; memory: number };

async function info(redis: Redis): Promise<Info> {
  const stats = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1], Number(m[2]));
  const s = await redis.info('stats');
  const mem = await redis.info('memory');
  const num = (text: string, name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { calls, netIn: num(s, 'total_net_input_bytes'), netOut: num(s, 'total_net_output_bytes'), memory: num(mem, 'used_memory') };
}

function diff(a: Info, b: Info): Info {
  const calls = new Map<string, number>();
  for (const [k, v] of b.calls) calls.set(k, v - (a.calls.get(k) ?? 0));
  return { calls, netIn: b.netIn - a.netIn, netOut: b.netOut - a.netOut, memory: b.memory - a.memory };
}

/** Runs `op(i)` for i < n, `CONCURRENCY` at a time; answers the seconds it took. */
async function run(n: number, op: (i: number) => Promise<void>): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) await op(next++);
    }),
  );
  return (performance.now() - t0) / 1000;
}

interface Cost {
  mode: string;
  op: string;
  commandsPerOp: number;
  byCommand: Record<string, number>;
  bytesInPerOp: number;
  bytesOutPerOp: number;
  memoryPerOp?: number;
}

async function measure(mode: 'one process' | 'streams', solrUrl: string): Promise<Cost[]> {
  const server = await startRedisServer({ appendonly: false });
  const files = mkdtempSync(join(tmpdir(), 'costs-files-'));
  const settings = loadSettings({
    ...process.env,
    REDIS_URL: server.url,
    SOLR_URL: solrUrl,
    PORT: '0',
    FILES_DIR: files,
    LOCAL_DISPATCH: mode === 'one process' ? 'true' : 'false',
    LOG_LEVEL: 'warn',
  });
  const p = await startPlatform({ settings, log: createLogger('warn') });
  const redis = new Redis(server.url);
  const root = p.url!;
  const base = `${root}/content-service`;
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const token = await login(root, 'editor');
  const json = { 'Content-Type': 'application/json', 'X-Auth-Token': token };
  const body = (i: number) =>
    JSON.stringify({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', headline: `Headline ${i}`, text: 'lorem ipsum '.repeat(60) } } });
  const costs: Cost[] = [];
  try {
    await sleep(3000); // leases taken, groups created
    // The background work's own rate, to take off each measurement.
    const idle0 = await info(redis);
    const idleT0 = performance.now();
    await sleep(3000);
    const idle = diff(idle0, await info(redis));
    const idlePerSecond = (k: 'netIn' | 'netOut') => idle[k] / ((performance.now() - idleT0) / 1000);
    const idleCalls = (cmd: string, seconds: number) => ((idle.calls.get(cmd) ?? 0) / 3) * seconds;

    const measured = async (op: string, n: number, fn: (i: number) => Promise<void>, memory = false) => {
      await indexerSettled(server.url, settings.PARTITIONS, 30_000).catch(() => undefined);
      const before = await info(redis);
      const seconds = await run(n, fn);
      await indexerSettled(server.url, settings.PARTITIONS, 60_000).catch(() => undefined);
      const d = diff(before, await info(redis));
      const total = seconds + 0.5;
      const byCommand: Record<string, number> = {};
      let commands = 0;
      for (const [cmd, calls] of d.calls) {
        const net = calls - idleCalls(cmd, total);
        if (net / n < 0.01) continue;
        byCommand[cmd] = round2(net / n);
        commands += net / n;
      }
      costs.push({
        mode,
        op,
        commandsPerOp: round2(commands),
        byCommand,
        bytesInPerOp: Math.round((d.netIn - idlePerSecond('netIn') * total) / n),
        bytesOutPerOp: Math.round((d.netOut - idlePerSecond('netOut') * total) / n),
        ...(memory ? { memoryPerOp: Math.round(d.memory / n) } : {}),
      });
    };

    const created: { path: string; etag: string }[] = [];
    await measured(
      'create (indexed)',
      N,
      async (i) => {
        const r = await request(agent, 'POST', `${base}/content`, json, body(i));
        if (r.status !== 201) throw new Error(`create: ${r.status} ${r.body}`);
        created[i] = { path: new URL(String(r.headers.location)).pathname, etag: String(r.headers.etag) };
      },
      true,
    );
    await measured('versioned read (first read of each)', N, async (i) => {
      const r = await request(agent, 'GET', `${root}${created[i].path}`, { 'X-Auth-Token': token });
      if (r.status !== 200) throw new Error(`read: ${r.status}`);
    });
    await measured('versioned read (cached)', N, async (i) => {
      const r = await request(agent, 'GET', `${root}${created[i].path}`, { 'X-Auth-Token': token });
      if (r.status !== 200) throw new Error(`read: ${r.status}`);
    });
    await measured('update with If-Match (indexed)', N, async (i) => {
      const alias = created[i].path.replace(/\/\d+$/, '');
      const r = await request(agent, 'PUT', `${root}${alias}`, { ...json, 'If-Match': created[i].etag }, body(i + N));
      if (r.status !== 200) throw new Error(`update: ${r.status} ${r.body}`);
    });
  } finally {
    agent.destroy();
    redis.disconnect();
    await p.stop();
    await server.stop();
    rmSync(files, { recursive: true, force: true });
  }
  return costs;
}

const solrDir = mkdtempSync(join(tmpdir(), 'costs-solr-'));
const solr = await startSolr({ dataDir: solrDir, log: () => undefined });
const all: Cost[] = [];
try {
  for (const mode of ['one process', 'streams'] as const) all.push(...(await measure(mode, solr.url)));
} finally {
  await solr.stop();
  rmSync(solrDir, { recursive: true, force: true });
}
console.log(`\n| Mode | Operation | Redis commands per op | Bytes to Redis | Bytes from Redis | Memory per op | Commands (per op) |`);
console.log('|---|---|---|---|---|---|---|');
for (const c of all) {
  const top = Object.entries(c.byCommand)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  console.log(`| ${c.mode} | ${c.op} | ${c.commandsPerOp} | ${c.bytesInPerOp} | ${c.bytesOutPerOp} | ${c.memoryPerOp ?? '—'} | ${top} |`);
}
result({ n: N, costs: all });
process.exit(0);
