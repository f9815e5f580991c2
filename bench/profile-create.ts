/**
 * Where a create's or a versioned read's CPU goes (issue 9 and 23: "what bounds it, with a
 * profile"). Starts a private Redis, the embedded Solr and the built platform
 * (`dist/src/main.js`, every role) under `node --cpu-prof`, sends creates (or versioned reads
 * of 1,000 seeded contents) with wrk for SECONDS, stops the platform (the profile is written at
 * its exit), and prints the CPU of each process over the load and the platform's self time
 * grouped by where the code lives (node_modules package, node internals, this repository's
 * modules), with the top functions.
 *   npm run build && node --import tsx bench/profile-create.ts [seconds, default 10] [create|read]
 * The .cpuprofile stays in .cache/profile/ (open it in Chrome DevTools or speedscope for a
 * flame graph).
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, startRedisServer } from '../src/dev/redis-server.js';
import { startSolr } from '../src/dev/solr-server.js';
import { NODE_FLAGS } from '../src/main.js';
import { cpuOf, login, sleep } from './lib.js';

const SECONDS = Number(process.argv[2] ?? 10);
const MODE = process.argv[3] ?? 'create';
if (MODE !== 'create' && MODE !== 'read') throw new Error('the mode is create or read');
const DIR = join('.cache', 'profile');
rmSync(DIR, { recursive: true, force: true });
mkdirSync(DIR, { recursive: true });

const redis = await startRedisServer({});
const solr = await startSolr({ dataDir: join(DIR, 'solr'), log: () => undefined });
const port = await freePort();
const logFd = openSync(join(DIR, 'platform.log'), 'a');
const platform = spawn(process.execPath, [...NODE_FLAGS, '--cpu-prof', `--cpu-prof-dir=${DIR}`, 'dist/src/main.js'], {
  env: { ...process.env, REDIS_URL: redis.url, SOLR_URL: solr.url, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', FILES_DIR: join(DIR, 'files') },
  stdio: ['ignore', logFd, logFd],
});
closeSync(logFd);
const root = `http://127.0.0.1:${port}`;
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
  const pids: Record<string, number> = { platform: platform.pid!, solr: solr.pid!, redis: redis.pid };
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuOf(pid)]));
  const t0 = Date.now();
  const script = MODE === 'create' ? 'bench/create.lua' : 'bench/wrk-report.lua';
  const wrk = spawnSync('wrk', ['-t1', '-c50', `-d${SECONDS}s`, '--latency', '-s', script, `${root}/content-service/content`], {
    env: { ...process.env, TOKEN: token, ...(seeded ? { WRK_PATHS: join(seeded, 'versioned.txt') } : {}) },
    encoding: 'utf8',
  });
  const secs = (Date.now() - t0) / 1000;
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(wrk.stdout)?.[1];
  console.log(`${MODE === 'create' ? 'creates' : 'versioned reads'}: ${rps} req/s over ${SECONDS} s (wrk -t1 -c50)`);
  console.log(
    `CPU over the load, % of one core: ${Object.entries(pids)
      .map(([k, pid]) => `${k} ${Math.round((cpuOf(pid) - before[k]) / secs)}%`)
      .join(', ')}`,
  );
} finally {
  platform.kill('SIGTERM');
  await new Promise((r) => platform.once('exit', r));
  await solr.stop();
  await redis.stop();
}

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
const file = readdirSync(DIR).find((f) => f.endsWith('.cpuprofile'));
if (!file) throw new Error('no .cpuprofile written');
const profile = JSON.parse(readFileSync(join(DIR, file), 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const self = new Map<number, number>();
profile.samples.forEach((id, i) => {
  self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const groups = new Map<string, number>();
const fns = new Map<string, number>();
/** Where a frame's code lives: a package, node's internals, a module of this repository, or V8 itself. */
const where = (url: string, name: string): string => {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return 'node internals';
  const own = /\/(src\/.+)\.js$/.exec(url);
  return own ? own[1] : url;
};
for (const [id, us] of self) {
  const n = byId.get(id)!;
  const g = where(n.callFrame.url, n.callFrame.functionName);
  groups.set(g, (groups.get(g) ?? 0) + us);
  const f = `${n.callFrame.functionName || '(anonymous)'} ${g}:${n.callFrame.lineNumber + 1}`;
  fns.set(f, (fns.get(f) ?? 0) + us);
}
const pct = (us: number) => `${((us / total) * 100).toFixed(1)}%`;
console.log(`\nplatform self time by place (${(total / 1e6).toFixed(1)} s sampled, the whole run):`);
for (const [g, us] of [...groups].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${pct(us).padStart(6)}  ${g}`);
console.log('\ntop functions:');
for (const [f, us] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${pct(us).padStart(6)}  ${f}`);
console.log(`\nprofile: ${join(DIR, file)}`);
process.exit(0);
