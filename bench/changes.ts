/**
 * Change-feed benchmark (issue 17, ARCHITECTURE "Commit → change-feed delivery"): commit →
 * delivery p50/p99 with 1, 100, ... subscribers over SSE and WebSocket on one web process while
 * commits run at a fixed rate, the web process's RSS, and page catch-up in events/s.
 *
 *   node --import tsx bench/changes.ts
 *   CHANGES_BENCH_SUBSCRIBERS=1,100,10000 CHANGES_BENCH_RATE=1000 CHANGES_BENCH_SECONDS=10 node --import tsx bench/changes.ts
 *
 * Starts its own redis-server and one platform process (roles web and actors, no search) and
 * prints a `RESULT {json}` line per measurement. Latency is taken from the event's `time` (the
 * commit's clock on this machine) to its arrival at the subscriber; with many subscribers it is
 * sampled on the first 200 of them, and every subscriber's deliveries are counted. The subscribers
 * are native (bench/feed-load.c) where a C compiler is found, in Node otherwise.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { WebSocket } from 'ws';
import http from 'node:http';
import net from 'node:net';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { freePort, startRedisServer } from '../src/dev/redis-server.js';
import { cpuOf, type Latency, latencyOf, login, platformArgs, request, result } from './lib.js';

const SUBSCRIBERS = (process.env.CHANGES_BENCH_SUBSCRIBERS ?? '1,100').split(',').map(Number);
const TRANSPORTS = (process.env.CHANGES_BENCH_TRANSPORTS ?? 'sse,ws').split(',') as ('sse' | 'ws')[];
const RATE = Number(process.env.CHANGES_BENCH_RATE ?? 1000);
const SECONDS = Number(process.env.CHANGES_BENCH_SECONDS ?? 8);
const SAMPLED = 200;
/** Commits at RATE before the first workload, not measured. */
const WARM_UP_SECONDS = Number(process.env.CHANGES_BENCH_WARM_UP_SECONDS ?? 3);

type WsLike = { on(e: string, cb: (...a: unknown[]) => void): void; send(t: string): void; terminate(): void };
const WebSocketCtor = WebSocket as unknown as new (url: string) => WsLike;

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : 0;
}

interface Sub {
  close(): void;
}

const EVENT_LINE = Buffer.from('\nevent: ');
/** WebSockets the bench closed itself (any other close is reported). */
const closedByBench = new WeakSet<object>();

/**
 * Opens one subscriber; `onEvent` gets each event's `time` (ms), or NaN when the subscriber is
 * not `sampled`: then its events are only counted, on the bytes of a bare socket (SSE) or per
 * message (WebSocket), so that the load generator spends little on each of 10,000 streams (it
 * shares the machine's two cores with the platform).
 */
function subscribe(transport: 'sse' | 'ws', root: string, token: string, since: string, sampled: boolean, onEvent: (time: number) => void): Promise<Sub> {
  if (transport === 'ws') {
    return new Promise((resolve, reject) => {
      const ws = new WebSocketCtor(`${root.replace('http', 'ws')}/content-service/changes/ws`);
      ws.on('open', () => {
        ws.send(JSON.stringify({ token, since }));
        resolve({
          close: () => {
            closedByBench.add(ws);
            ws.terminate();
          },
        });
      });
      ws.on('message', (data) => {
        if (!sampled) return onEvent(Number.NaN);
        const s = String(data);
        const at = s.indexOf('"time":"');
        onEvent(Date.parse(s.slice(at + 8, at + 32)));
      });
      ws.on('error', (e) => reject(e));
      ws.on('close', (code: unknown, reason: unknown) => {
        if (!closedByBench.has(ws)) console.log(`a subscriber's WebSocket closed: ${code} ${String(reason)}`);
      });
    });
  }
  if (!sampled) {
    // A bare socket: no HTTP client, no decoding. Each event has one `event:` line; one cut by a
    // chunk's end is found with the next chunk.
    return new Promise((resolve, reject) => {
      const { hostname, port } = new URL(root);
      const socket = net.connect(Number(port), hostname, () => {
        socket.write(`GET /content-service/changes?since=${since}&feed=sse HTTP/1.1\r\nHost: ${hostname}\r\nX-Auth-Token: ${token}\r\n\r\n`);
        resolve({ close: () => socket.destroy() });
      });
      let tail = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        const b = tail.length ? Buffer.concat([tail, chunk]) : chunk;
        let end = 0;
        for (let at = b.indexOf(EVENT_LINE); at >= 0; at = b.indexOf(EVENT_LINE, end)) {
          onEvent(Number.NaN);
          end = at + EVENT_LINE.length;
        }
        tail = Buffer.from(b.subarray(Math.max(end, b.length - EVENT_LINE.length + 1)));
      });
      socket.on('error', reject);
    });
  }
  return new Promise((resolve, reject) => {
    const req = http.get(`${root}/content-service/changes?since=${since}&feed=sse`, { headers: { 'X-Auth-Token': token }, agent: false }, (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        // A time cut by the end of a chunk waits for the next one (it would parse as another date).
        let at = buf.indexOf('"time":"');
        while (at >= 0 && buf.length >= at + 32) {
          onEvent(Date.parse(buf.slice(at + 8, at + 32)));
          buf = buf.slice(at + 32);
          at = buf.indexOf('"time":"');
        }
        if (at < 0) buf = buf.slice(-8);
      });
      resolve({ close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

/** The native subscribers (bench/feed-load.c), built once; null without a C compiler. */
function feedLoadTool(): string | null {
  const src = 'bench/feed-load.c';
  const bin = '.cache/feed-load';
  if (existsSync(bin) && statSync(bin).mtimeMs >= statSync(src).mtimeMs) return bin;
  mkdirSync('.cache', { recursive: true });
  const cc = spawnSync('cc', ['-O2', '-o', bin, src], { stdio: 'inherit' });
  if (cc.status !== 0) {
    console.log('no C compiler: the subscribers run in Node, beside the writers');
    return null;
  }
  return bin;
}

/**
 * The subscribers in one native process (bench/feed-load.c: epoll, one thread), which counts
 * their events and takes the latencies of the first SAMPLED: in Node, reading and counting 10,000
 * streams took more CPU than the web process spent writing them (both share the two cores), and a
 * sampled subscriber read its events when the event loop that also drives the commits got to
 * them (with one subscriber, p50 72 ms in Node against a few ms natively), so the figures measured
 * the load generator. Asked for its counts and latencies over stdin.
 */
class NativeSubscribers {
  private readonly lines: AsyncIterator<string>;

  get pid(): number {
    return this.child.pid!;
  }

  private constructor(private readonly child: ChildProcess) {
    this.lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }

  static async start(
    tool: string,
    transport: 'sse' | 'ws',
    root: string,
    token: string,
    since: string,
    n: number,
    sampled: number,
  ): Promise<NativeSubscribers> {
    const { hostname, port } = new URL(root);
    const path = transport === 'ws' ? '/content-service/changes/ws' : '/content-service/changes';
    const child = spawn(tool, [transport, hostname, port, path, token, since, String(n), String(sampled)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const subs = new NativeSubscribers(child);
    const ready = await subs.lines.next();
    if (ready.done || !ready.value.startsWith('ready ')) throw new Error(`feed-load did not start: ${ready.value}`);
    return subs;
  }

  /** Events counted so far, and the connections open. */
  async count(): Promise<{ connected: number; events: number; closed: number }> {
    this.child.stdin!.write('c\n');
    const line = await this.lines.next();
    const [connected, events, closed] = String(line.value).split(' ').map(Number);
    return { connected, events, closed };
  }

  /** The sampled connections' latencies (ms) so far. */
  async latency(): Promise<Latency & { count: number }> {
    this.child.stdin!.write('l\n');
    const line = await this.lines.next();
    const [count, p50, p90, p99, p999, max, mean] = String(line.value).split(' ').map(Number);
    return { count, p50, p90, p99, p999, max, mean };
  }

  close(): void {
    this.child.stdin!.end();
    this.child.kill();
  }
}

async function main(): Promise<void> {
  const redis = await startRedisServer({ appendonly: false });
  const port = await freePort();
  const root = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    REDIS_URL: redis.url,
    PORT: String(port),
    LOG_LEVEL: 'warn',
    SOLR_URL: '',
    NODE_ENV: 'development',
    CHANGES_SUBSCRIBER_BUFFER: '20000',
    // Every subscriber is the one user's (editor): the per-user bound (default 16) must hold them all,
    // and the process bound (default 10,000) the largest run.
    CHANGES_MAX_STREAMS_PER_USER: String(Math.max(...SUBSCRIBERS)),
    CHANGES_MAX_SUBSCRIBERS: String(Math.max(10000, ...SUBSCRIBERS)),
    // Every WebSocket comes from this machine's address, thousands at once before their first message.
    CHANGES_WS_WAITING_PER_ADDRESS: String(Math.max(10000, ...SUBSCRIBERS)),
  };
  const startPlatform = async (): Promise<ChildProcess> => {
    const p = spawn(process.execPath, platformArgs(['web', 'actors']), { env, stdio: ['ignore', 'inherit', 'inherit'] });
    for (let i = 0; ; i++) {
      const ok = await fetch(`${root}/health`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return p;
      if (i > 600 || p.exitCode !== null) throw new Error('the platform did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stopPlatform = async (p: ChildProcess): Promise<void> => {
    if (p.exitCode !== null) return;
    p.kill('SIGTERM');
    await new Promise((r) => p.once('exit', r));
  };
  let child = await startPlatform();
  try {
    const token = await login(root, 'editor');
    const base = `${root}/content-service`;
    const headers = { 'X-Auth-Token': token, 'Content-Type': 'application/json' };
    const ids: string[] = [];
    for (let i = 0; i < 64; i++) {
      const r = await fetch(`${base}/content`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ system: { contentType: 'article' }, aspects: { body: { n: i } } }),
      });
      ids.push(((await r.json()) as { system: { id: string } }).system.id);
    }
    const start = ((await (await fetch(`${base}/changes?since=now`, { headers })).json()) as { last: string }).last;
    const writers = new http.Agent({ keepAlive: true, maxSockets: 64 });
    // Commits at RATE per second, paced every 10 ms, each content updated in turn (node:http on
    // keep-alive sockets: fetch took about three quarters of a core for 1,000 a second, on the
    // cores the platform serves from).
    let commits = 0;
    const commitAtRate = async (seconds: number): Promise<{ sent: number; failed: number }> => {
      let sent = 0;
      let failed = 0;
      const t0 = Date.now();
      const inflight = new Set<Promise<void>>();
      while (Date.now() - t0 < seconds * 1000) {
        const due = Math.floor(((Date.now() - t0) / 1000) * RATE);
        while (sent < due && inflight.size < 256) {
          const id = ids[commits++ % ids.length];
          sent++;
          const pr: Promise<void> = request(
            writers,
            'PUT',
            `${base}/content/alias/${id}?unsafeUpdate=true`,
            headers,
            JSON.stringify({ aspects: { body: { s: commits } } }),
          )
            .then((r) => {
              if (r.status !== 200) failed++;
            })
            .catch(() => {
              failed++;
            })
            .finally(() => inflight.delete(pr));
          inflight.add(pr);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      await Promise.all(inflight);
      return { sent, failed };
    };
    // The process's first seconds of commits compile its code and size its heap: the first
    // workload measured would carry them (its web CPU above a core, its p99 the worst of the run).
    await commitAtRate(WARM_UP_SECONDS);

    // Fewest subscribers first, both transports at each count: the web process's RSS is a high
    // water mark, so a run after a larger one would report that one's memory as its own.
    for (const n of SUBSCRIBERS) {
      for (const transport of TRANSPORTS) {
        const since = ((await (await fetch(`${base}/changes?since=now`, { headers })).json()) as { last: string }).last;
        const lat: number[] = [];
        let delivered = 0;
        const subs: Sub[] = [];
        const tool = feedLoadTool();
        const native = tool ? await NativeSubscribers.start(tool, transport, root, token, since, n, Math.min(n, SAMPLED)) : null;
        for (let i = 0; i < (native ? 0 : n); i++) {
          const sampled = i < SAMPLED;
          subs.push(
            await subscribe(transport, root, token, since, sampled, (t) => {
              delivered++;
              if (sampled) lat.push(Date.now() - t);
            }),
          );
        }
        await new Promise((r) => setTimeout(r, 500));
        // CPU over the commits and the wait for the last deliveries (clock ticks: 1/100 s).
        const cpu0 = { web: cpuOf(child.pid!), native: native ? cpuOf(native.pid) : 0, self: process.cpuUsage() };
        const t0 = Date.now();
        const { sent, failed } = await commitAtRate(SECONDS);
        const seconds = (Date.now() - t0) / 1000;
        const want = (sent - failed) * n;
        const until = Date.now() + 10_000;
        const total = async () => delivered + (native ? (await native.count()).events : 0);
        while ((await total()) < want && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
        const all = await total();
        const nativeEnd = native ? await native.count() : null;
        const latencyMs = native ? await native.latency() : latencyOf(lat);
        const cpuSeconds = (Date.now() - t0) / 1000;
        const self = process.cpuUsage(cpu0.self);
        const cpuPercent = {
          web: Math.round((cpuOf(child.pid!) - cpu0.web) / cpuSeconds),
          loadgen: Math.round((self.user + self.system) / 1e4 / cpuSeconds + (native ? (cpuOf(native.pid) - cpu0.native) / cpuSeconds : 0)),
        };
        const rss = rssMb(child.pid!);
        // What the RSS holds: the V8 heap, and memory outside it (Buffers, uWS's own), from /metrics.
        const metrics = await (await fetch(`${root}/metrics`)).text();
        const gauge = (name: string) => Math.round(Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN) / 2 ** 20);
        for (const s of subs) s.close();
        native?.close();
        result({
          workload: `change feed ${transport}, ${n} subscriber${n === 1 ? '' : 's'}`,
          commitsPerSecond: Math.round((sent - failed) / seconds),
          failedCommits: failed,
          delivered: all,
          expected: want,
          cpuPercent,
          ...(nativeEnd ? { subscribersBy: 'bench/feed-load.c (epoll, one thread)', subscribersClosed: nativeEnd.closed } : {}),
          latencyMs,
          webRssMb: rss,
          webHeapUsedMb: gauge('nodejs_heap_size_used_bytes'),
          webExternalMb: gauge('nodejs_external_memory_bytes'),
        });
        await new Promise((r) => setTimeout(r, 1000));
      }
    }

    // Page catch-up: every event from the start, 1,000 a page. First in the process that delivered
    // them live (its resolved entries in memory), then in a fresh one (every snapshot read from Redis).
    const catchUp = async (workload: string, auth: Record<string, string>) => {
      let since = start;
      let events = 0;
      const t0 = performance.now();
      for (;;) {
        const r = (await (await fetch(`${base}/changes?since=${since}&limit=1000`, { headers: auth })).json()) as { changes: unknown[]; last: string };
        events += r.changes.length;
        since = r.last;
        if (!r.changes.length) break;
      }
      const s = (performance.now() - t0) / 1000;
      result({ workload, events, seconds: Math.round(s * 100) / 100, eventsPerSecond: Math.round(events / s) });
    };
    await catchUp('change feed page catch-up', headers);
    await stopPlatform(child);
    child = await startPlatform();
    await catchUp('change feed page catch-up, fresh process', { ...headers, 'X-Auth-Token': await login(root, 'editor') });
  } finally {
    await stopPlatform(child);
    await redis.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
