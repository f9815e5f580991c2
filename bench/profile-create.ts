/**
 * Where a create's or a versioned read's CPU goes (issue 9 and 23: "what bounds it, with a
 * profile"). Starts a private Redis, the embedded Solr and the built platform
 * (`dist/src/main.js`, every role) under `node --cpu-prof`, sends creates (or versioned reads
 * of 1,000 seeded contents) with wrk for SECONDS, stops the platform (the profile is written at
 * its exit), and prints the CPU of each process over the load, the CPU per request, and the
 * platform's self time during the load grouped by where the code lives (node_modules package,
 * node internals, this repository's modules), with the top functions.
 *   npm run build && node --import tsx bench/profile-create.ts [seconds, default 10] [create|read] [fleet]
 * With `fleet` after the mode, the creates go through the fleet of the bench (src/fleet.ts: 2
 * web, 2 actors, 1 indexer, every command through the streams) and each process is profiled:
 *   node --import tsx bench/profile-create.ts 10 create fleet
 * PROFILE_WEB and PROFILE_ACTORS set how many web and actor processes the fleet has (2 each).
 * With `idle` as the mode, nothing is sent for the seconds after the warm-up's creates: what each
 * process takes by itself.
 * With `bulk` as the mode, one bulk import of PROFILE_BULK_N (50,000) creates with Solr paused,
 * as `npm run bench` runs it (the seconds are ignored):
 *   node --import tsx bench/profile-create.ts 0 bulk
 * With `export`, that import is made first (not profiled), then one export of its type is:
 *   node --import tsx bench/profile-create.ts 0 export
 * The .cpuprofile stays in .cache/profile/ (open it in Chrome DevTools or speedscope for a
 * flame graph).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, startRedisServer } from '../src/dev/redis-server.js';
import { startSolr } from '../src/dev/solr-server.js';
import { Fleet } from '../src/fleet.js';
import { NODE_FLAGS } from '../src/main.js';
import { CREATE_ENVELOPE, cpuOf, indexerSettled, login, sleep, wakeupsOf, ioCallsOf } from './lib.js';

const SECONDS = Number(process.argv[2] ?? 10);
const MODE = process.argv[3] ?? 'create';
const FLEET = process.argv[4] === 'fleet';
/** The fleet's web and actor processes (PROFILE_WEB, PROFILE_ACTORS; 2 each, as in the bench). */
const FLEET_WEB = Number(process.env.PROFILE_WEB ?? 2);
const FLEET_ACTORS = Number(process.env.PROFILE_ACTORS ?? 2);
if (MODE !== 'create' && MODE !== 'read' && MODE !== 'bulk' && MODE !== 'export' && MODE !== 'idle')
  throw new Error('the mode is create, read, bulk, export or idle');
/** Lines of the bulk import in `bulk` mode (one POST /bulk of creates, bench/bulk.ts, Solr paused as in the bench). */
const BULK_LINES = Number(process.env.PROFILE_BULK_N ?? 50000);
const PARTITIONS = 64; // as in the bench
const DIR = join('.cache', 'profile');
rmSync(DIR, { recursive: true, force: true });
mkdirSync(DIR, { recursive: true });

const redis = await startRedisServer({});
const solr = await startSolr({ dataDir: join(DIR, 'solr'), log: () => undefined });
const env = { REDIS_URL: redis.url, SOLR_URL: solr.url, HOST: '127.0.0.1', LOG_LEVEL: 'warn', FILES_DIR: join(DIR, 'files'), PARTITIONS: String(PARTITIONS) };
/** PROFILE=0: the same run without the profiler, for CPU figures without its overhead. */
const PROFILE = process.env.PROFILE !== '0';
const profFlags = PROFILE ? [...NODE_FLAGS, '--cpu-prof', `--cpu-prof-dir=${DIR}`] : [...NODE_FLAGS];
/** The profiled processes by name, with their pids (a profile's file name carries its pid). */
const procs = new Map<string, ChildProcess>();
let fleet: Fleet | undefined;
let single: ChildProcess | undefined;
let root: string;
let addrs: string[] = [];
if (FLEET) {
  const log = join(DIR, 'fleet.log');
  writeFileSync(log, '');
  fleet = new Fleet({ env, basePort: 0, entry: 'dist/src/main.js', nodeFlags: profFlags, output: (n, l) => appendFileSync(log, `${n} ${l}\n`) });
  for (let i = 0; i < FLEET_WEB; i++) fleet.add('web', { PORT: String(await freePort()) });
  for (let i = 0; i < FLEET_ACTORS; i++) fleet.add('actors');
  fleet.add('indexer');
  await fleet.ready(60_000);
  await actorsBalanced(FLEET_ACTORS);
  for (const p of fleet.processes) procs.set(p.name, p.child);
  const webs = fleet.processes.filter((p) => p.url).map((p) => p.url!);
  root = webs[0];
  addrs = webs.map((w) => new URL(w).host);
} else {
  const port = await freePort();
  const logFd = openSync(join(DIR, 'platform.log'), 'a');
  single = spawn(process.execPath, [...profFlags, 'dist/src/main.js'], {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  procs.set('platform', single);
  root = `http://127.0.0.1:${port}`;
}
let rps = 0;
/** The load's window on the monotonic clock, in µs: V8 stamps profiles with the same clock. */
const window = { from: 0, to: Number.POSITIVE_INFINITY };
const monoUs = () => Number(process.hrtime.bigint() / 1000n);
try {
  for (let i = 0; ; i++) {
    const ok = await fetch(`${root}/health`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) break;
    if (i > 300) throw new Error('the platform did not start');
    await sleep(100);
  }
  const token = await login(root, 'editor');
  let seeded = '';
  if (MODE === 'read') {
    seeded = join(DIR, 'seed');
    const s = spawnSync(process.execPath, ['--import', 'tsx', 'bench/load.ts', 'seed', root, '1000', seeded], { stdio: 'inherit' });
    if (s.status !== 0) throw new Error('seeding failed');
    // Warm the caches as the bench does, so the profile shows the steady state.
    spawnSync('wrk', ['-t1', '-c50', '-d3s', '-s', 'bench/wrk-report.lua', `${root}/content-service/content`], {
      env: { ...process.env, TOKEN: token, WRK_PATHS: join(seeded, 'versioned.txt') },
    });
  }
  const bulkRun = (what: 'import' | 'export') => {
    const run = spawnSync(
      '/usr/bin/time',
      [
        '-f',
        'loadgen CPU: %U s user, %S s system, %e s',
        process.execPath,
        '--import',
        'tsx',
        'bench/bulk.ts',
        root,
        what,
        ...(what === 'import' ? [String(BULK_LINES)] : []),
        'bulkprofile',
      ],
      { encoding: 'utf8' },
    );
    console.log(run.stderr.trim().split('\n').at(-1));
    const res = JSON.parse(/RESULT (.*)/.exec(run.stdout)?.[1] ?? '{}') as { linesPerSecond?: number; contentsPerSecond?: number };
    const rate = res.linesPerSecond ?? res.contentsPerSecond;
    if (!rate) throw new Error(`the bulk ${what} failed: ${run.stdout} ${run.stderr}`);
    return rate;
  };
  if (MODE === 'export') {
    bulkRun('import');
    await indexerSettled(redis.url, PARTITIONS, 300_000); // the export alone, as the bench measures it
  }
  // Against the fleet: one wrk thread per gateway (WRK_ADDRS), as the bench runs it.
  const load = (seconds: number) =>
    spawnSync('wrk', [`-t${FLEET ? 2 : 1}`, '-c50', `-d${seconds}s`, '--latency', '-s', 'bench/wrk-report.lua', `${root}/content-service/content`], {
      env: {
        ...process.env,
        TOKEN: token,
        ...(MODE !== 'read' ? { WRK_METHOD: 'POST', WRK_BODY_FILE: body } : { WRK_PATHS: join(seeded, 'versioned.txt') }),
        ...(FLEET ? { WRK_ADDRS: addrs.join(',') } : {}),
        // PROFILE_DELAY_MS: each connection pauses that long before a request (the rate held near
        // 50 / (pause + latency)), to compare CPU per request at like rates.
        WRK_DELAY_MS: process.env.PROFILE_DELAY_MS ?? '',
      },
      encoding: 'utf8',
    });
  const body = join(DIR, 'create.json');
  writeFileSync(body, JSON.stringify(CREATE_ENVELOPE));
  /** PROFILE_WARM seconds of the same load first, unmeasured: Solr's and V8's compilers settle (default 5; creates and reads). */
  const warm = Number(process.env.PROFILE_WARM ?? 5);
  if (warm > 0 && (MODE === 'create' || MODE === 'read' || MODE === 'idle')) {
    load(warm);
    if (MODE !== 'read') await indexerSettled(redis.url, PARTITIONS, 120_000);
  }
  const pids: Record<string, number> = { ...Object.fromEntries([...procs].map(([n, c]) => [n, c.pid!])), solr: solr.pid!, redis: redis.pid };
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuOf(pid)]));
  const sysBefore = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, sysCpuOf(pid)]));
  const wokeBefore = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, wakeupsOf(pid)]));
  const ioBefore = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, ioCallsOf(pid)]));
  const statsBefore = await commandStats();
  const t0 = Date.now();
  window.from = monoUs();
  if (MODE === 'bulk') {
    process.kill(solr.pid!, 'SIGSTOP');
    try {
      rps = bulkRun('import');
    } finally {
      process.kill(solr.pid!, 'SIGCONT');
    }
  } else if (MODE === 'export') rps = bulkRun('export');
  if (MODE === 'idle') await sleep(SECONDS * 1000);
  const wrk = MODE === 'bulk' || MODE === 'export' || MODE === 'idle' ? undefined : load(SECONDS);
  const secs = (Date.now() - t0) / 1000;
  window.to = monoUs();
  if (wrk) rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(wrk.stdout)?.[1] ?? 0);
  if (MODE === 'bulk') console.log(`bulk creates: ${rps} lines/s (${BULK_LINES} lines, one request, Solr paused)`);
  else if (MODE === 'export') console.log(`export: ${rps} contents/s (${BULK_LINES} contents, one request)`);
  else if (MODE === 'idle') console.log(`idle for ${SECONDS} s, after ${warm} s of creates`);
  else {
    const pct = (q: string) => /\s+(\d+(?:\.\d+)?)(us|ms|s)\s*$/m.exec(wrk?.stdout.split('\n').find((l) => l.trim().startsWith(`${q}%`)) ?? '');
    const ms = (m: RegExpExecArray | null) => (m ? (Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2] as 'us' | 'ms' | 's']).toFixed(2) : '?');
    console.log(
      `${MODE === 'create' ? 'creates' : 'versioned reads'}: ${rps} req/s over ${SECONDS} s (wrk -c50${FLEET ? ', the fleet' : ''}), p50 ${ms(pct('50'))} ms, p99 ${ms(pct('99'))} ms`,
    );
  }
  const used = Object.entries(pids).map(([k, pid]) => [k, (cpuOf(pid) - before[k]) / secs] as const);
  console.log(`CPU over the load, % of one core: ${used.map(([k, c]) => `${k} ${Math.round(c)}%`).join(', ')}`);
  const own = used.filter(([k]) => k !== 'solr' && k !== 'redis').reduce((a, [, c]) => a + c, 0);
  // cpuOf counts clock ticks (1/100 s): % of a core over requests/s gives ms per request.
  if (rps)
    console.log(`platform CPU per request: ${((own / rps) * 10).toFixed(3)} ms (${used.map(([k, c]) => `${k} ${((c / rps) * 10).toFixed(3)}`).join(', ')})`);
  // The kernel's part of it (system calls, socket writes and reads, wake-ups).
  if (rps)
    console.log(
      `of which system CPU per request: ${Object.entries(pids)
        .map(([k, pid]) => `${k} ${(((sysCpuOf(pid) - sysBefore[k]) / secs / rps) * 10).toFixed(3)}`)
        .join(', ')}`,
    );
  // How often each process went to sleep waiting for I/O, per request: on shared cores every
  // wake-up is a context switch, so batching shows here first.
  if (rps)
    console.log(
      `wake-ups per request: ${Object.entries(pids)
        .map(([k, pid]) => `${k} ${((wakeupsOf(pid) - wokeBefore[k]) / (rps * secs)).toFixed(2)}`)
        .join(', ')}`,
    );
  if (rps)
    console.log(
      `read and write calls per request: ${Object.entries(pids)
        .map(([k, pid]) => `${k} ${((ioCallsOf(pid) - ioBefore[k]) / (rps * secs)).toFixed(2)}`)
        .join(', ')}`,
    );
  // Redis commands per request, by name (INFO commandstats): what the streams path asks of Redis.
  if (rps) {
    const after = await commandStats();
    const n = rps * secs;
    const per = [...after]
      .map(([c, calls]) => [c, (calls - (statsBefore.get(c) ?? 0)) / n] as const)
      .filter(([, v]) => v >= 0.01)
      .sort((a, b) => b[1] - a[1]);
    console.log(`Redis commands per request: ${per.reduce((a, [, v]) => a + v, 0).toFixed(2)} (${per.map(([c, v]) => `${c} ${v.toFixed(2)}`).join(', ')})`);
  }
} finally {
  if (fleet) await fleet.stopAll();
  if (single) {
    single.kill('SIGTERM');
    await new Promise((r) => single!.once('exit', r));
  }
  await solr.stop();
  await redis.stop();
}

/** stime of a process, in jiffies (1/100 s); 0 once it is gone. */
function sysCpuOf(pid: number): number {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[12]);
  } catch {
    return 0;
  }
}

/** Calls of each Redis command so far (INFO commandstats). */
async function commandStats(): Promise<Map<string, number>> {
  const r = new Redis(redis.url);
  try {
    const text = await r.info('commandstats');
    return new Map([...text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [m[1], Number(m[2])]));
  } finally {
    r.disconnect();
  }
}

/** Waits until `n` actor processes hold an equal share of the partitions' leases. */
async function actorsBalanced(n: number): Promise<void> {
  const r = new Redis(redis.url);
  try {
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(250)) {
      const owners = await r.mget(Array.from({ length: PARTITIONS }, (_, p) => `lease:{${p}}`));
      const counts = new Map<string, number>();
      for (const o of owners) if (o) counts.set(o, (counts.get(o) ?? 0) + 1);
      if (owners.every(Boolean) && counts.size === n && [...counts.values()].every((c) => c === PARTITIONS / n)) return;
    }
    console.log('the partitions were not evenly shared after 30 s');
  } finally {
    r.disconnect();
  }
}

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
/** Where a frame's code lives: a package, node's internals, a module of this repository, or V8 itself. */
const where = (url: string, name: string): string => {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return 'node internals';
  const own = /\/(src\/.+)\.js$/.exec(url);
  return own ? own[1] : url;
};

/** Prints one profile's self time grouped by place, and its top functions. */
function summarize(file: string, label: string): void {
  const profile = JSON.parse(readFileSync(join(DIR, file), 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number };
  const self = new Map<number, number>();
  // Only the samples taken during the load: start-up (module loading) and shut-down are left out.
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (at >= window.from && at <= window.to) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const groups = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const g = where(n.callFrame.url, n.callFrame.functionName);
    groups.set(g, (groups.get(g) ?? 0) + us);
    const f = `${n.callFrame.functionName || '(anonymous)'} ${g}:${n.callFrame.lineNumber + 1}`;
    fns.set(f, (fns.get(f) ?? 0) + us);
  }
  const pct = (us: number) => `${((us / total) * 100).toFixed(1)}%`;
  console.log(`\n${label} self time by place (${(total / 1e6).toFixed(1)} s sampled during the load):`);
  for (const [g, us] of [...groups].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${pct(us).padStart(6)}  ${g}`);
  console.log(`\n${label} top functions:`);
  for (const [f, us] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${pct(us).padStart(6)}  ${f}`);
  console.log(`\nprofile: ${join(DIR, file)}`);
}

// PROFILE=0: the CPU figures above are the run's; there is no profile to read.
if (!PROFILE) process.exit(0);
const files = readdirSync(DIR).filter((f) => f.endsWith('.cpuprofile'));
if (!files.length) throw new Error('no .cpuprofile written');
for (const [name, child] of procs) {
  const file = files.find((f) => f.split('.').includes(String(child.pid)));
  if (file) summarize(file, name);
  else console.log(`\n${name}: no profile written`);
}
process.exit(0);
