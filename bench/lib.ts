/**
 * Helpers shared by the bench scripts (bench/bench.ts and the load generators it starts):
 * keep-alive HTTP requests with their latency, percentiles, the `RESULT {json}` line every
 * load generator prints for the harness, and the indexer's lag read from Redis.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import { Redis } from 'ioredis';
import type { AnyJson } from '../src/client/index.js';
import { NODE_FLAGS } from '../src/main.js';

/** V8 flags of the platform processes: the product's (NODE_FLAGS), or BENCH_NODE_FLAGS to compare others ('' for none). */
export const PLATFORM_FLAGS: readonly string[] =
  process.env.BENCH_NODE_FLAGS === undefined ? NODE_FLAGS : process.env.BENCH_NODE_FLAGS.split(' ').filter(Boolean);

/** The article every create workload sends (the benchmark's, the profile's and the Redis ceiling's). */
export const CREATE_ENVELOPE = {
  system: { contentType: 'article' },
  aspects: {
    body: {
      _type: 'body',
      title: 'Benchmark article',
      lead: 'A short lead for the benchmark.',
      text: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.',
      tags: ['bench', 'wrk', 'article'],
    },
    byline: { _type: 'byline', author: 'Bench Writer' },
  },
};

/**
 * The node arguments of a platform process with `roles`, as `npm start` runs it: the built
 * dist/src/main.js with PLATFORM_FLAGS (the TypeScript source through tsx when nothing is built).
 */
export function platformArgs(roles: readonly string[]): string[] {
  return existsSync('dist/src/main.js') ? [...PLATFORM_FLAGS, 'dist/src/main.js', ...roles] : [...PLATFORM_FLAGS, '--import', 'tsx', 'src/main.ts', ...roles];
}

/** Latency summary in milliseconds. */
export interface Latency {
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

/** p50/p90/p99/p999/max/mean of `ms` (milliseconds), rounded to 0.01 ms; zeros when empty. */
export function latencyOf(ms: ArrayLike<number>): Latency {
  const a = Float64Array.from(ms).sort();
  if (a.length === 0) return { p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0 };
  const q = (x: number) => round2(a[Math.min(a.length - 1, Math.floor(x * a.length))]);
  let sum = 0;
  for (const v of a) sum += v;
  return { p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: round2(a[a.length - 1]), mean: round2(sum / a.length) };
}

export const round2 = (x: number) => Math.round(x * 100) / 100;

/** Prints the line the harness (bench/bench.ts) collects. */
export function result(r: Record<string, unknown>): void {
  console.log(`RESULT ${JSON.stringify(r)}`);
}

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** From the request's start to the last byte of the answer. */
  ms: number;
}

/** One HTTP request on a keep-alive agent; never throws for a status, rejects on a connection error. */
export function request(agent: http.Agent, method: string, url: string, headers: Record<string, string> = {}, body?: string | Buffer): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const h: Record<string, string | number> = { ...headers };
    if (body !== undefined) h['Content-Length'] = Buffer.byteLength(body);
    const req = http.request(url, { method, agent, headers: h }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), ms: performance.now() - t0 }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export const json = (a: HttpAnswer): AnyJson => {
  try {
    return JSON.parse(a.body.toString('utf8'));
  } catch {
    return undefined;
  }
};

/** Logs in (the development accounts: password = user name) at a gateway root; the token. */
export async function login(root: string, user: string): Promise<string> {
  const r = await fetch(`${root}/content-service/security/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: user, password: user }),
  });
  if (r.status !== 200) throw new Error(`login ${user} at ${root}: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { token: string }).token;
}

/** The revision an ETag `W/"<key>/<rev>"` names. */
export const revOf = (etag: string | undefined): number => Number(/\/(\d+)"$/.exec(etag ?? '')?.[1] ?? NaN);

/**
 * Content events not yet followed: read by no consumer of the group yet, plus read and not yet
 * done, over every partition. `groups` names the consumer groups counted (default the indexer's);
 * `'all'` counts every group of the event streams (indexer, audit trail, time-state schedule,
 * webhooks fan-out).
 */
export async function eventsBacklog(redis: Redis, partitions: number, groups: readonly string[] | 'all' = ['indexer']): Promise<number> {
  const infos = await Promise.all(
    Array.from({ length: partitions }, (_, p) => (redis.xinfo('GROUPS', `events:{${p}}`) as Promise<unknown[][]>).catch(() => [] as unknown[][])),
  );
  let n = 0;
  for (const gs of infos) {
    for (const g of gs) {
      if (groups !== 'all' && !groups.includes(String(g[1]))) continue;
      const field = (name: string) => Number(g[g.indexOf(name) + 1] ?? 0) || 0;
      n += field('lag') + field('pending');
    }
  }
  return n;
}

/** Waits until the groups (eventsBacklog) have followed every content event (or `timeoutMs`); the seconds waited and the backlog left. */
export async function indexerSettled(
  redisUrl: string,
  partitions: number,
  timeoutMs: number,
  groups: readonly string[] | 'all' = ['indexer'],
): Promise<{ seconds: number; backlog: number }> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 2 });
  const t0 = Date.now();
  try {
    for (;;) {
      const backlog = await eventsBacklog(redis, partitions, groups);
      if (backlog === 0 || Date.now() - t0 > timeoutMs) return { seconds: round2((Date.now() - t0) / 1000), backlog };
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    redis.disconnect();
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** utime + stime of a process, in jiffies (1/100 s); 0 once it is gone. */
/**
 * The voluntary context switches of process `pid` (every thread), 0 when it is gone: each is a
 * wait for I/O, so their count per request says how often a process goes to sleep and wakes up.
 */
export function wakeupsOf(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/task`).reduce((n, t) => {
      const m = /voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8'));
      return n + Number(m?.[1] ?? 0);
    }, 0);
  } catch {
    return 0;
  }
}

/** The read and write system calls process `pid` made (every thread; /proc/<pid>/io), 0 when it is gone. */
export function ioCallsOf(pid: number): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return Number(/syscr:\s+(\d+)/.exec(io)?.[1] ?? 0) + Number(/syscw:\s+(\d+)/.exec(io)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

export function cpuOf(pid: number): number {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const x = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return Number(x[11]) + Number(x[12]);
  } catch {
    return 0;
  }
}
