import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSettings } from '../config/settings.js';
import { createLogger, type Logger } from './adapters/log.js';
import { NODE_FLAGS, ROLES, withLocalServices, type Role } from './main.js';
import { sleep } from './wait.js';

/**
 * A fleet on one machine: the Procfile's roles as separate processes (by default 2 web, 2
 * actors, 1 indexer, 1 reindexer, 1 webhooks), sharing one Redis, one Solr and one file store, as a
 * deployment runs them on several machines. Web process i listens on PORT + i.
 *
 *   node dist/src/fleet.js [--web 2] [--actors 2] [--indexer 1] [--reindexer 1] [--webhooks 1]   (npm run fleet)
 *
 * Each process's output is passed through with its name (`web-1`, `actors-2`, ...) in every
 * JSON line. SIGINT/SIGTERM stop every process gracefully (each drains and hands its partitions
 * over); a process that exits by itself is reported, not restarted: that is the job of the
 * supervisor of a real deployment (systemd, Kubernetes).
 */

export interface FleetProcess {
  role: Role;
  name: string;
  child: ChildProcess;
  /** Web processes: their address. */
  url?: string;
  /** Settles when the process has exited. */
  exited: Promise<void>;
}

export interface FleetOptions {
  /** Environment of every process (REDIS_URL, SOLR_URL, FILES_DIR, PARTITIONS, ...). */
  env: Record<string, string | undefined>;
  /** Port of the first web process; the next ones count up. */
  basePort: number;
  /** Entry point (default: main.js beside this file, that is dist/src/main.js once built). */
  entry?: string;
  /** V8 flags of every process (default: NODE_FLAGS). */
  nodeFlags?: readonly string[];
  /** Where the processes' output goes (default: this process's stdout, line by line). */
  output?: (name: string, line: string) => void;
  log?: Logger;
}

const MAIN = join(dirname(fileURLToPath(import.meta.url)), 'main.js');

export class Fleet {
  readonly processes: FleetProcess[] = [];
  private readonly counters: Record<string, number> = {};
  private nextPort: number;
  private stopping = false;

  constructor(private readonly opts: FleetOptions) {
    this.nextPort = opts.basePort;
  }

  /** Starts one process of `role`; web processes get the next port. */
  add(role: Role, extraEnv: Record<string, string> = {}): FleetProcess {
    const n = (this.counters[role] ?? 0) + 1;
    this.counters[role] = n;
    const name = `${role}-${n}`;
    const env: Record<string, string | undefined> = { ...process.env, ...this.opts.env, ...extraEnv };
    let url: string | undefined;
    if (role === 'web') {
      const port = extraEnv.PORT ? Number(extraEnv.PORT) : this.nextPort++;
      env.PORT = String(port);
      url = `http://${env.HOST ?? '127.0.0.1'}:${port}`;
    }
    const child = spawn(process.execPath, [...(this.opts.nodeFlags ?? NODE_FLAGS), this.opts.entry ?? MAIN, role], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = this.opts.output ?? ((who: string, line: string) => process.stdout.write(`${who} ${line}\n`));
    for (const stream of [child.stdout!, child.stderr!]) {
      let rest = '';
      stream.on('data', (b: Buffer) => {
        const lines = (rest + b.toString()).split('\n');
        rest = lines.pop()!;
        for (const line of lines) if (line) out(name, line);
      });
    }
    const exited = new Promise<void>((done) =>
      child.once('exit', (code, signal) => {
        if (!this.stopping) this.opts.log?.warn({ member: name, code, signal }, 'fleet process exited');
        done();
      }),
    );
    const p: FleetProcess = { role, name, child, url, exited };
    this.processes.push(p);
    this.opts.log?.info({ member: name, memberPid: child.pid, url }, 'fleet process started');
    return p;
  }

  /** Stops one process: SIGTERM (drain, hand partitions over), SIGKILL after `graceMs`. */
  async stop(p: FleetProcess, graceMs = 20_000): Promise<void> {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      p.child.kill('SIGTERM');
      const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
      await p.exited;
      clearTimeout(timer);
    }
    this.processes.splice(this.processes.indexOf(p), 1);
  }

  /** kill -9: no drain, no hand-over (its leases expire). */
  async kill(p: FleetProcess): Promise<void> {
    p.child.kill('SIGKILL');
    await p.exited;
    this.processes.splice(this.processes.indexOf(p), 1);
  }

  /** Every web process answers /health with Redis ok (search and files may still be coming). */
  async ready(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const p of this.processes.filter((x) => x.role === 'web')) {
      for (;;) {
        const h = await fetch(`${p.url}/health`)
          .then((r) => r.json() as Promise<{ redis?: string }>)
          .catch(() => null);
        if (h?.redis === 'ok') break;
        if (p.child.exitCode !== null || Date.now() > deadline) throw new Error(`${p.name} did not get ready`);
        await sleep(100);
      }
    }
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.processes].map((p) => this.stop(p)));
  }
}

/** `--web 2 --actors 2 --indexer 1 --reindexer 1 --webhooks 1 --archiver 1` → counts per role. */
export function parseFleetArgs(args: string[]): Record<Role, number> {
  const counts: Record<Role, number> = { web: 2, actors: 2, indexer: 1, reindexer: 1, webhooks: 1, archiver: 1 };
  for (let i = 0; i < args.length; i += 2) {
    const role = args[i]?.replace(/^--/, '') as Role;
    const n = Number(args[i + 1]);
    if (!ROLES.includes(role) || !Number.isInteger(n) || n < 0 || n > 32)
      throw new Error(`bad argument ${args[i]} ${args[i + 1] ?? ''}: use --<${ROLES.join('|')}> <count 0-32>`);
    counts[role] = n;
  }
  return counts;
}

async function cli(): Promise<void> {
  const log = createLogger().child({ process: 'fleet' });
  let counts: Record<Role, number>;
  let settings: ReturnType<typeof loadSettings>;
  try {
    counts = parseFleetArgs(process.argv.slice(2));
    settings = loadSettings();
  } catch (e) {
    log.fatal((e as Error).message);
    process.exit(2);
  }
  // One Redis and one Solr for the whole fleet, as in a deployment.
  settings = await withLocalServices(settings, log, counts.web + counts.indexer + counts.reindexer > 0);
  const env: Record<string, string> = {};
  if (settings.REDIS_URL) env.REDIS_URL = settings.REDIS_URL;
  env.SOLR_URL = settings.SOLR_URL ?? 'http://127.0.0.1:1/solr-unavailable';
  const fleet = new Fleet({
    env,
    basePort: settings.PORT,
    log,
    output: (name, line) => process.stdout.write(line.startsWith('{') ? `{"process":"${name}",${line.slice(1)}\n` : `${name} ${line}\n`),
  });
  for (const role of ROLES) for (let i = 0; i < counts[role]; i++) fleet.add(role);
  const shutdown = (signal: string) => {
    log.info({ signal }, 'stopping the fleet');
    void fleet.stopAll().then(() => process.exit(0));
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  await fleet.ready(60_000).catch((e: unknown) => log.error((e as Error).message));
  log.info({ web: fleet.processes.filter((p) => p.url).map((p) => p.url) }, 'fleet running');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  cli().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
