/**
 * Webhooks benchmark (issue 18, ARCHITECTURE "Webhook deliveries"): deliveries per second to a
 * local receiver, draining a backlog of events × webhooks, and commit → delivery p50/p99 at a
 * fixed commit rate.
 *
 *   node --import tsx bench/webhooks.ts
 *   WEBHOOKS_BENCH_HOOKS=20 WEBHOOKS_BENCH_EVENTS=5000 WEBHOOKS_BENCH_RATE=1000 WEBHOOKS_BENCH_SECONDS=10 node --import tsx bench/webhooks.ts
 *
 * Starts its own redis-server, one platform process (web and actors) and one webhooks process,
 * and a receiver process (bench/webhook-receiver.ts: a bare node:http server answering 204). Prints a `RESULT {json}`
 * line per measurement. Latency runs from the event's `time` (the commit's clock, this machine)
 * to the request's arrival at the receiver.
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { freePort, startRedisServer } from '../src/dev/redis-server.js';
import { cpuOf, latencyOf, login, result, platformArgs } from './lib.js';

const HOOKS = Number(process.env.WEBHOOKS_BENCH_HOOKS ?? 20);
const EVENTS = Number(process.env.WEBHOOKS_BENCH_EVENTS ?? 5000);
const RATE = Number(process.env.WEBHOOKS_BENCH_RATE ?? 1000);
const SECONDS = Number(process.env.WEBHOOKS_BENCH_SECONDS ?? 10);

function role(roles: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, platformArgs(roles), {
    env: { ...process.env, LOG_LEVEL: 'warn', SOLR_URL: '', NODE_ENV: 'development', WEBHOOK_ALLOW_PRIVATE: 'true', ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

/** WEBHOOKS_BENCH_PROBE=1: prints, once a second, the events no webhooks process has read yet and those read but not queued. */
async function probeLag(url: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const r = new Redis(url);
  let lag = 0;
  let pending = 0;
  let queued = 0;
  let due = 0;
  const now = Date.now();
  for (let p = 0; p < 64; p++) {
    queued += await r.zcard(`wh:{${p}}:pending`);
    due += await r.zcount(`wh:{${p}}:due`, '-inf', now);
    const groups = (await r.xinfo('GROUPS', `events:{${p}}`)) as unknown[][];
    const g = groups.find((x) => x[1] === 'webhooks');
    if (!g) continue;
    lag += Number(g[g.indexOf('lag') + 1] ?? 0);
    pending += Number(g[g.indexOf('pending') + 1] ?? 0);
  }
  console.log(`probe: webhooks group lag ${lag}, pending ${pending}, deliveries waiting ${queued}, queues due ${due}`);
  r.disconnect();
}

async function main(): Promise<void> {
  const redis = await startRedisServer({ appendonly: false });
  const port = await freePort();
  const root = `http://127.0.0.1:${port}`;
  const env = { REDIS_URL: redis.url, PORT: String(port) };
  const web = role(['web', 'actors'], env);
  let hooks: ChildProcess | undefined;
  // The receiver, in its own process (bench/webhook-receiver.ts).
  const receiver = fork('bench/webhook-receiver.ts', [], { execArgv: ['--import', 'tsx'] });
  const ask = <T>(cmd: string) =>
    new Promise<T>((resolve) => {
      receiver.once('message', (m) => resolve(m as T));
      if (cmd) receiver.send({ cmd });
    });
  const { port: rport } = await ask<{ port: number }>('');
  let received = 0;
  try {
    for (let i = 0; ; i++) {
      if (
        await fetch(`${root}/health`).then(
          (r) => r.status === 200,
          () => false,
        )
      )
        break;
      if (i > 600) throw new Error('the platform did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
    const admin = { 'X-Auth-Token': await login(root, 'sysadmin'), 'Content-Type': 'application/json' };
    const headers = { 'X-Auth-Token': await login(root, 'editor'), 'Content-Type': 'application/json' };
    const base = `${root}/content-service`;
    const ids: string[] = [];
    for (let i = 0; i < 64; i++) {
      const r = await fetch(`${base}/content`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ system: { contentType: 'article' }, aspects: { body: { n: i } } }),
      });
      ids.push(((await r.json()) as { system: { id: string } }).system.id);
    }
    const hookIds: string[] = [];
    for (let i = 0; i < HOOKS; i++) {
      const r = await fetch(`${base}/webhooks`, { method: 'POST', headers: admin, body: JSON.stringify({ url: `http://127.0.0.1:${rport}/h${i}` }) });
      if (r.status !== 201) throw new Error(`webhook create: ${r.status} ${await r.text()}`);
      hookIds.push(((await r.json()) as { id: string }).id);
    }
    /** Commits `n` updates, `rate` per second (0: as fast as 128 in flight allow). */
    const commit = async (n: number, rate: number) => {
      let sent = 0;
      const t0 = Date.now();
      const inflight = new Set<Promise<void>>();
      while (sent < n) {
        const due = rate ? Math.min(n, Math.floor(((Date.now() - t0) / 1000) * rate)) : n;
        while (sent < due && inflight.size < 128) {
          const id = ids[sent % ids.length];
          sent++;
          const pr: Promise<void> = fetch(`${base}/content/alias/${id}?unsafeUpdate=true`, {
            method: 'PUT',
            headers,
            body: JSON.stringify({ aspects: { body: { s: sent } } }),
          })
            .then((r) => r.arrayBuffer())
            .then(() => undefined)
            .finally(() => inflight.delete(pr));
          inflight.add(pr);
        }
        await (inflight.size >= 128 || !rate ? Promise.race(inflight) : new Promise((r) => setTimeout(r, 5)));
      }
      await Promise.all(inflight);
    };

    // 1. Throughput: a backlog of EVENTS events × HOOKS webhooks, drained by one webhooks process started after the commits.
    await commit(EVENTS, 0);
    const want = EVENTS * HOOKS;
    const t0 = Date.now();
    hooks = role(['webhooks'], env);
    let first = 0;
    while (received < want) {
      received = (await ask<{ received: number }>('count')).received;
      if (!first && received > 0) first = Date.now();
      if (Date.now() - t0 > 300_000) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const seconds = (Date.now() - (first || t0)) / 1000;
    result({
      workload: 'webhook deliveries (backlog drain)',
      webhooks: HOOKS,
      events: EVENTS,
      deliveries: received,
      seconds: Math.round(seconds * 100) / 100,
      deliveriesPerSecond: Math.round(received / seconds),
      target: 5000,
    });

    // 2. Latency: one webhook, commits at RATE per second.
    for (const id of hookIds.slice(1)) await fetch(`${base}/webhooks/${id}`, { method: 'DELETE', headers: admin });
    await new Promise((r) => setTimeout(r, 1500));
    await ask('measure');
    const cpu0 = [cpuOf(web.pid!), cpuOf(hooks.pid!), cpuOf(receiver.pid!), cpuOf(process.pid)];
    const c0 = Date.now();
    const probe = process.env.WEBHOOKS_BENCH_PROBE ? setInterval(() => void probeLag(redis.url), 1000) : undefined;
    await commit(RATE * SECONDS, RATE);
    clearInterval(probe);
    const cpuSeconds = (Date.now() - c0) / 1000;
    const cpu = [cpuOf(web.pid!), cpuOf(hooks.pid!), cpuOf(receiver.pid!), cpuOf(process.pid)].map((v, i) => Math.round((v - cpu0[i]) / cpuSeconds));
    const end = Date.now() + 10_000;
    let lat: number[] = [];
    for (;;) {
      lat = (await ask<{ lat: number[] }>('report')).lat;
      if (lat.length >= RATE * SECONDS || Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    result({
      workload: 'commit → webhook delivery',
      rate: RATE,
      seconds: SECONDS,
      delivered: lat.length,
      committed: RATE * SECONDS,
      ...latencyOf(lat),
      targetP99Ms: 200,
      cpuPercent: { webAndActors: cpu[0], webhooks: cpu[1], receiver: cpu[2], load: cpu[3] },
    });
  } finally {
    hooks?.kill('SIGTERM');
    web.kill('SIGTERM');
    receiver.kill();
    await new Promise((r) => setTimeout(r, 500));
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
