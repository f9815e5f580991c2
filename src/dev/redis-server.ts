/**
 * Spawns private `redis-server` processes: one per test run (test/support/global-setup.ts)
 * and, for `npm start`, a local Redis with AOF on when nothing answers on 6379.
 *
 * Every server started here is a child of this process and is sent SIGTERM when this
 * process exits, so none outlives the process that needed it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { sleep } from '../wait.js';

export interface RedisServerOptions {
  /** TCP port; a free one is chosen when omitted. */
  port?: number;
  /** Working directory (AOF/RDB files); a temporary directory, removed on stop, when omitted. */
  dir?: string;
  appendonly?: boolean;
  appendfsync?: 'everysec' | 'always';
  /** Write the server log to this file instead of collecting it from stdout. */
  logFile?: string;
  /** How long to wait for the first PING answer (default 10000 ms). */
  startTimeoutMs?: number;
  extraArgs?: string[];
}

export interface RedisServerHandle {
  url: string;
  port: number;
  pid: number;
  /** Graceful stop (SIGTERM: no RDB save since `--save ''`, AOF flushed); waits for exit. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash would. Does not wait; await `exited` for that. */
  kill9(): void;
  /** Settles when the process has exited. */
  exited: Promise<void>;
}

const LOG_LINES = 30;
/** Children to stop, each with its signal, when this process exits. */
const live = new Map<ChildProcess, NodeJS.Signals>();
let exitHookInstalled = false;

/**
 * Stops `child` with `signal` when this process exits, unless it has exited first: a local
 * server never outlives the process that started it. The hook is synchronous, as `exit` hooks
 * must be (SIGTERM lets a redis-server shut down cleanly on its own; S3Proxy takes SIGKILL).
 */
export function stopOnExit(child: ChildProcess, signal: NodeJS.Signals): void {
  live.set(child, signal);
  child.once('exit', () => live.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [c, sig] of live) {
      try {
        c.kill(sig);
      } catch {
        /* already gone */
      }
    }
  });
}

/** Asks the OS for a free port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('could not determine a free port'))));
    });
  });
}

/**
 * Connects to `url`, sends PING and, when it answers PONG, returns the server's
 * `process_id` from INFO (so a caller can tell which process answered); null otherwise.
 */
async function probe(url: string, timeoutMs: number): Promise<number | null> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    // ioredis arms a timer of this length when disconnecting a stream that already
    // closed (a refused connection); the 2 s default would hold the process open.
    disconnectTimeout: 50,
  });
  client.on('error', () => {
    /* reported through the rejected promises below */
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const work = (async () => {
      await client.connect();
      if ((await client.ping()) !== 'PONG') return null;
      const pid = /^process_id:(\d+)/m.exec(await client.info('server'));
      return pid ? Number(pid[1]) : 0;
    })();
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(resolve, timeoutMs, null);
    });
    return await Promise.race([work, timeout]);
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
    if (client.status !== 'end') client.disconnect();
  }
}

/** Resolves true when something on `url` answers PING with PONG within `timeoutMs`. */
export async function pingRedis(url: string, timeoutMs = 1000): Promise<boolean> {
  return (await probe(url, timeoutMs)) !== null;
}

function tail(lines: string[], logFile: string | undefined): string {
  let text = lines.join('');
  if (logFile && existsSync(logFile)) {
    try {
      text += readFileSync(logFile, 'utf8');
    } catch {
      /* ignore */
    }
  }
  const last = text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-LOG_LINES);
  return last.length ? last.map((l) => `  | ${l}`).join('\n') : '  (no output)';
}

async function startOnce(opts: RedisServerOptions, port: number): Promise<RedisServerHandle> {
  const ownDir = !opts.dir;
  const dir = path.resolve(opts.dir ?? mkdtempSync(path.join(os.tmpdir(), 'redis-')));
  mkdirSync(dir, { recursive: true });
  const logFile = opts.logFile ? path.resolve(opts.logFile) : undefined;
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--daemonize',
    'no',
    '--save',
    '',
    '--appendonly',
    opts.appendonly ? 'yes' : 'no',
    '--dir',
    dir,
    '--logfile',
    logFile ?? '',
  ];
  if (opts.appendonly) args.push('--appendfsync', opts.appendfsync ?? 'everysec');
  args.push(...(opts.extraArgs ?? []));

  const output: string[] = [];
  const collect = (chunk: Buffer) => {
    output.push(chunk.toString('utf8'));
    if (output.length > LOG_LINES * 4) output.splice(0, output.length - LOG_LINES * 4);
  };

  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir });
  let exitInfo: string | null = null;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo = signal ? `killed by ${signal}` : `exited with code ${code}`;
      if (ownDir) rmSync(dir, { recursive: true, force: true });
      resolve();
    });
  });
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  // The server must not keep this process alive on its own; the exit hook stops it.
  child.unref();
  (child.stdout as unknown as net.Socket).unref?.();
  (child.stderr as unknown as net.Socket).unref?.();
  stopOnExit(child, 'SIGTERM');

  const url = `redis://127.0.0.1:${port}`;
  const timeoutMs = opts.startTimeoutMs ?? 10000;
  const deadline = Date.now() + timeoutMs;
  let failure: string | null = null;
  let spawnFailed = false;
  for (;;) {
    const err = await Promise.race([spawnError, new Promise<null>((r) => setTimeout(r, 0, null))]);
    if (err) {
      spawnFailed = true;
      if (ownDir) rmSync(dir, { recursive: true, force: true });
      failure =
        (err as NodeJS.ErrnoException).code === 'ENOENT'
          ? 'redis-server is not installed (not found on PATH); install it, e.g. apt-get install redis-server'
          : `could not run redis-server: ${err.message}`;
      break;
    }
    if (exitInfo) {
      failure = `redis-server ${exitInfo} before answering PING`;
      break;
    }
    const answeredBy = await probe(url, 500);
    // Only our own process counts: another server may hold the port until ours gives up.
    if (answeredBy === child.pid) break;
    if (Date.now() > deadline) {
      failure = `redis-server on port ${port} did not answer PING within ${timeoutMs} ms`;
      break;
    }
    await sleep(50);
  }
  if (failure) {
    if (!exitInfo && !spawnFailed) {
      child.kill('SIGKILL');
      await exited;
    }
    const e = new Error(`${failure}\n  redis-server ${args.map((a) => (a === '' ? "''" : a)).join(' ')}\n${tail(output, logFile)}`);
    (e as Error & { addressInUse?: boolean }).addressInUse = /address already in use/i.test(tail(output, logFile));
    throw e;
  }

  return {
    url,
    port,
    pid: child.pid!,
    exited,
    kill9() {
      if (!exitInfo) child.kill('SIGKILL');
    },
    async stop() {
      if (exitInfo) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Starts a private redis-server bound to 127.0.0.1 and waits until it answers PING. */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServerHandle> {
  return opts.port !== undefined ? startOnce(opts, opts.port) : onFreePort((port) => startOnce(opts, port));
}

/**
 * Starts a server on a free port. A port found free can be taken by someone else before the
 * server binds it: then (the start failed with `addressInUse` set) up to three ports are tried.
 */
export async function onFreePort<T>(start: (port: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(await freePort());
    } catch (e) {
      if (attempt >= 3 || !(e as { addressInUse?: boolean }).addressInUse) throw e;
    }
  }
}

/**
 * For `npm start`: returns redis://127.0.0.1:6379 when something answers PING there;
 * otherwise starts redis-server on 6379 (`port` is for tests) with AOF on (appendfsync everysec) under
 * `<dataDir>/redis` as a child of this process, stopped when this process exits.
 */
export async function ensureLocalRedis(dataDir: string, log: (msg: string) => void, port = 6379): Promise<string> {
  const url = `redis://127.0.0.1:${port}`;
  if (await pingRedis(url, 1000)) return url;
  const dir = path.resolve(dataDir, 'redis');
  mkdirSync(dir, { recursive: true });
  const server = await startRedisServer({
    port,
    dir,
    appendonly: true,
    appendfsync: 'everysec',
    logFile: path.join(dir, 'redis.log'),
    startTimeoutMs: 60000, // replaying a large AOF takes a while
  });
  log(`started local redis-server (pid ${server.pid}) on ${server.url} with AOF under ${dir}`);

  // Signals: when nobody else handles them, stop Redis cleanly and exit as the signal would.
  // When the application has its own handlers, it decides when to exit, and the exit hook
  // stops Redis after the application's own shutdown (which may still need Redis).
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = () => {
      if (process.listenerCount(sig) > 1) return;
      process.removeListener(sig, onSignal);
      void server.stop().finally(() => process.kill(process.pid, sig));
    };
    process.on(sig, onSignal);
  }
  return server.url;
}
