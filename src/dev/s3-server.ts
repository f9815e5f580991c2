/**
 * A local S3-compatible server for tests and local runs: S3Proxy (org.gaul:s3proxy, from Maven
 * Central through tools/s3proxy/pom.xml) with the jclouds `filesystem` backend.
 *
 * The jar is fetched once (cached in ~/.m2 and tools/s3proxy/target/s3proxy.jar). Each server
 * gets a free port and fresh random credentials (AWS v2 or v4 signatures, as minio sends), and
 * is killed when this process exits.
 *
 * What S3Proxy 4.1.0 cannot do, as far as this platform needs: bucket lifecycle rules
 * (PutBucketLifecycleConfiguration answers 501 NotImplemented), so `tmp/` expiry there relies
 * on the store's sweeper. Multipart uploads, listing and aborting incomplete uploads, ranged
 * reads and user metadata work.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { sleep } from '../wait.js';
import { onFreePort, stopOnExit } from './redis-server.js';
import { repoPath } from '../repo-files.js';

/** tools/s3proxy of this repository (from src/dev or dist/src/dev). */
const TOOL_DIR = dirname(repoPath('tools', 's3proxy', 'pom.xml'));

/** The S3Proxy jar with its dependencies, as the Maven build leaves it. */
export const S3PROXY_JAR = join(TOOL_DIR, 'target', 's3proxy.jar');

export interface S3ServerOptions {
  /** TCP port on 127.0.0.1; a free one is chosen when omitted. */
  port?: number;
  /** Where the buckets live (`<dataDir>/buckets`) and the server's properties file. */
  dataDir: string;
  log?: (msg: string) => void;
  /** Credentials; random ones when omitted. */
  accessKey?: string;
  secretKey?: string;
  /** How long to wait for the first answer (default 60000 ms). */
  startTimeoutMs?: number;
}

export interface S3ServerHandle {
  /** Host for minio's `endPoint`: 127.0.0.1. */
  endPoint: string;
  port: number;
  useSSL: false;
  accessKey: string;
  secretKey: string;
  pid: number;
  /** SIGTERM, SIGKILL after 10 s; settles when the process has exited. */
  stop(): Promise<void>;
}

let building: Promise<void> | undefined;

/** Fetches S3Proxy with Maven unless tools/s3proxy/target/s3proxy.jar is newer than the pom. */
export function buildS3Proxy(log: (m: string) => void = () => undefined): Promise<void> {
  const pom = join(TOOL_DIR, 'pom.xml');
  if (existsSync(S3PROXY_JAR) && statSync(S3PROXY_JAR).mtimeMs >= statSync(pom).mtimeMs) return Promise.resolve();
  building ??= new Promise<void>((ok, fail) => {
    log('fetching S3Proxy with Maven (from Maven Central on first use)');
    const child = spawn('mvn', ['-q', '-B', '-f', pom, 'package'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.once('error', (e) => fail(new Error(`could not run mvn (${e.message}): the local S3 server needs Java 17+ and Maven, or set S3_ENDPOINT`)));
    child.once('exit', (code) => {
      if (code === 0 && existsSync(S3PROXY_JAR)) return ok();
      fail(new Error(`Maven could not fetch S3Proxy (tools/s3proxy/pom.xml), exit ${code}:\n${out.split('\n').slice(-30).join('\n')}`));
    });
  }).finally(() => (building = undefined));
  return building;
}

/** Resolves with the HTTP status of GET / (any status: the server answers), or null. */
function probe(port: number): Promise<number | null> {
  return new Promise((done) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', timeout: 1000 }, (res) => {
      res.resume();
      done(res.statusCode ?? null);
    });
    req.once('timeout', () => req.destroy());
    req.once('error', () => done(null));
  });
}

async function startOnce(opts: S3ServerOptions, port: number): Promise<S3ServerHandle> {
  const log = opts.log ?? (() => undefined);
  const dataDir = resolve(opts.dataDir);
  const baseDir = join(dataDir, 'buckets');
  mkdirSync(baseDir, { recursive: true });
  const accessKey = opts.accessKey ?? `local-${randomBytes(6).toString('hex')}`;
  const secretKey = opts.secretKey ?? randomBytes(24).toString('base64url');
  const properties = join(dataDir, 's3proxy.properties');
  writeFileSync(
    properties,
    [
      `s3proxy.endpoint=http://127.0.0.1:${port}`,
      's3proxy.authorization=aws-v2-or-v4',
      `s3proxy.identity=${accessKey}`,
      `s3proxy.credential=${secretKey}`,
      'jclouds.provider=filesystem',
      `jclouds.filesystem.basedir=${baseDir}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );

  const started = Date.now();
  const child = spawn('java', ['-Xms64m', '-Xmx512m', '-jar', S3PROXY_JAR, '--properties', properties], {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: dataDir,
    // S3Proxy's logback reads LOG_LEVEL; the platform's own LOG_LEVEL must not leak into it.
    env: { ...process.env, LOG_LEVEL: 'warn', JETTY_LOG_LEVEL: 'warn' },
  });
  stopOnExit(child, 'SIGKILL');
  let output = '';
  const collect = (b: Buffer) => {
    output = (output + b.toString()).slice(-8000);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  let exitInfo: string | null = null;
  const exited = new Promise<void>((done) =>
    child.once('exit', (code, signal) => {
      exitInfo = signal ? `killed by ${signal}` : `exited with code ${code}`;
      done();
    }),
  );
  let spawnError: Error | null = null;
  child.once('error', (e) => (spawnError = e));
  // The server must not keep this process alive on its own; the exit hook kills it.
  child.unref();
  for (const s of [child.stdout, child.stderr]) (s as unknown as { unref?: () => void }).unref?.();

  const stop = async (): Promise<void> => {
    if (exitInfo || spawnError) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(timer);
  };

  const timeoutMs = opts.startTimeoutMs ?? 60000;
  for (;;) {
    if (spawnError) {
      const code = (spawnError as NodeJS.ErrnoException).code;
      throw new Error(
        code === 'ENOENT'
          ? 'java is not installed (not found on PATH): the local S3 server needs Java 17+'
          : `could not run java: ${(spawnError as Error).message}`,
      );
    }
    if (exitInfo) {
      const e = new Error(`S3Proxy ${exitInfo} before answering on port ${port}:\n${output.split('\n').slice(-30).join('\n')}`);
      (e as Error & { addressInUse?: boolean }).addressInUse = /address already in use|BindException/i.test(output);
      throw e;
    }
    // 403 (anonymous request refused) is the answer of a live S3Proxy.
    if ((await probe(port)) !== null && !exitInfo) break;
    if (Date.now() - started > timeoutMs) {
      await stop();
      throw new Error(`S3Proxy did not answer on port ${port} within ${timeoutMs} ms:\n${output.split('\n').slice(-30).join('\n')}`);
    }
    await sleep(100);
  }
  // Keep draining its output so the pipes never fill.
  child.stdout!.resume();
  child.stderr!.resume();
  log(`S3Proxy (pid ${child.pid}) on http://127.0.0.1:${port}, data under ${baseDir}, up in ${Date.now() - started} ms`);
  return { endPoint: '127.0.0.1', port, useSSL: false, accessKey, secretKey, pid: child.pid!, stop };
}

/** Starts S3Proxy on 127.0.0.1 (fetching it first if needed) and waits until it answers. */
export async function startS3Server(opts: S3ServerOptions): Promise<S3ServerHandle> {
  await buildS3Proxy(opts.log);
  return opts.port !== undefined ? startOnce(opts, opts.port) : onFreePort((port) => startOnce(opts, port));
}
