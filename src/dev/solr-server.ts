import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { sleep } from '../wait.js';
import { freePort } from './redis-server.js';
import { repoPath } from '../repo-files.js';

/** tools/solr of this repository (from src/dev or dist/src/dev). */
const TOOL_DIR = dirname(repoPath('tools', 'solr', 'pom.xml'));
const TARGET = join(TOOL_DIR, 'target');
/** Written after a successful Maven build; its mtime is compared with the sources. */
const STAMP = join(TARGET, '.built');
const LOCK = join(TARGET, '.build-lock');

export interface SolrHandle {
  /** Base URL, e.g. http://127.0.0.1:8983/solr (the core is `content`). */
  url: string;
  /** Every node's base URL (one, unless SolrCloud). */
  nodes: string[];
  pid: number;
  stop(): Promise<void>;
}

export interface StartSolrOptions {
  /** Solr home: solr.xml, the `content` core (its conf copied from the configset on every start) and its index. */
  dataDir: string;
  /** Port on 127.0.0.1; a free one when omitted. */
  port?: number;
  log?: (m: string) => void;
  /** How long the JVM may take to serve after it was launched (default 180 s; the Maven build is not counted). */
  startTimeoutMs?: number;
  /** Maximum heap, e.g. `512m` (default: env SOLR_HEAP, else 512m). */
  heap?: string;
  /** security.json for the Solr home (e.g. basic authentication). */
  securityJson?: string;
  /**
   * SolrCloud instead of a single core: an embedded ZooKeeper and `nodes` Solr nodes on free
   * ports, the `content` collection in `shards` shards (`port` and `securityJson` do not apply).
   */
  cloud?: { nodes: number; shards: number };
}

let toolsChecked: boolean | undefined;
/** Are `java` and `mvn` on PATH? (checked once per process) */
export function javaAndMavenAvailable(): boolean {
  toolsChecked ??= ['java', 'mvn'].every((cmd) => spawnSync(cmd, ['-version'], { stdio: 'ignore' }).status === 0);
  return toolsChecked;
}

function newest(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((f) => newest(join(path, f))));
}

function upToDate(): boolean {
  return (
    existsSync(STAMP) &&
    existsSync(join(TARGET, 'lib')) &&
    statSync(STAMP).mtimeMs >= Math.max(newest(join(TOOL_DIR, 'src')), newest(join(TOOL_DIR, 'pom.xml')))
  );
}

/** Runs `mvn -q package`; resolves with its exit code and the tail of its output. */
function runMaven(): Promise<{ code: number | null; out: string }> {
  return new Promise((done) => {
    let out = '';
    const mvn = spawn('mvn', ['-q', '-B', '-Dstyle.color=never', '-f', join(TOOL_DIR, 'pom.xml'), 'package', '-DskipTests'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (b: Buffer) => (out = (out + b.toString()).slice(-20000));
    mvn.stdout.on('data', keep);
    mvn.stderr.on('data', keep);
    mvn.once('error', (e) => done({ code: null, out: String(e) }));
    mvn.once('close', (code) => done({ code, out }));
  });
}

/**
 * Builds tools/solr with Maven (target/classes + target/lib) unless the last successful build is
 * newer than its sources. Several processes may call this at once: one builds (holding a lock
 * directory in target/), the others wait for it.
 */
export async function buildEmbeddedSolr(log: (m: string) => void = () => undefined): Promise<void> {
  if (upToDate()) return;
  mkdirSync(TARGET, { recursive: true });
  const waitUntil = Date.now() + 15 * 60_000;
  for (let said = false; ; ) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      // Another process builds; a lock older than 10 minutes is left over from a killed build.
      const held = statSync(LOCK, { throwIfNoEntry: false });
      if (held && Date.now() - held.mtimeMs > 10 * 60_000) rmSync(LOCK, { recursive: true, force: true });
      if (!said) log('waiting for another process that builds the embedded Solr');
      said = true;
      if (Date.now() > waitUntil) throw new Error(`tools/solr build lock ${LOCK} held for 15 minutes`);
      await sleep(500);
      if (upToDate()) return;
    }
  }
  try {
    if (upToDate()) return;
    log('building the embedded Solr with Maven (the first run downloads Solr 9 from Maven Central into ~/.m2, about 120 MB)');
    const t0 = Date.now();
    const { code, out } = await runMaven();
    if (code !== 0)
      throw new Error(
        `Maven could not build tools/solr (exit ${code}):\n${out
          .replace(/\x1b\[[0-9;]*m/g, '')
          .split('\n')
          .slice(-30)
          .join('\n')}`,
      );
    writeFileSync(STAMP, `${new Date().toISOString()}\n`);
    log(`built the embedded Solr in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

/**
 * Starts Solr (the `content` core from tools/solr/configsets/content) on 127.0.0.1 with its home
 * and data under `dataDir`, building it first when needed. It is stopped with the returned handle,
 * killed when this process exits, and stops by itself when this process dies without exiting
 * (it watches its stdin, a pipe from this process).
 */
export async function startSolr(opts: StartSolrOptions): Promise<SolrHandle> {
  const log = opts.log ?? (() => undefined);
  await buildEmbeddedSolr(log);
  const home = resolve(opts.dataDir);
  const core = join(home, 'content');
  mkdirSync(core, { recursive: true });
  // The configset is copied on every start, so a schema change in the repo takes effect.
  cpSync(join(TOOL_DIR, 'configsets', 'content', 'conf'), join(core, 'conf'), { recursive: true });
  writeFileSync(join(core, 'core.properties'), 'name=content\n');
  if (opts.securityJson) writeFileSync(join(home, 'security.json'), opts.securityJson);
  const port = opts.cloud ? 0 : (opts.port ?? (await freePort()));
  const heap = opts.heap ?? process.env.SOLR_HEAP ?? '512m';
  const timeoutMs = opts.startTimeoutMs ?? 180_000;
  const t0 = Date.now();
  const child: ChildProcess = spawn(
    'java',
    [
      '-Xms128m',
      `-Xmx${heap}`,
      '-XX:+UseG1GC',
      `-Dsolr.log.dir=${join(home, 'logs')}`,
      '-cp',
      `${join(TARGET, 'classes')}:${join(TARGET, 'lib', '*')}`,
      ...(opts.cloud
        ? ['platform.EmbeddedSolrCloud', String(opts.cloud.nodes), String(opts.cloud.shards), join(home, 'cloud'), join(core, 'conf')]
        : ['platform.EmbeddedSolr', String(port), home]),
      '--exit-on-stdin-eof',
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  let output = '';
  try {
    const url = await new Promise<string>((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`Solr did not start within ${timeoutMs} ms:\n${output.slice(-2000)}`)), timeoutMs);
      child.stdout!.on('data', (b: Buffer) => {
        output += b.toString();
        const m = /SOLR READY (\S+)/.exec(output);
        if (m) {
          clearTimeout(timer);
          ok(m[1]);
        }
      });
      child.stderr!.on('data', (b: Buffer) => (output = (output + b.toString()).slice(-20000)));
      child.once('error', (e) => {
        clearTimeout(timer);
        fail(e);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        const reason = /EMBEDDED SOLR FAILED: (.*)/.exec(output)?.[1];
        fail(new Error(`Solr exited (${code ?? signal}) before it was ready${reason ? `: ${reason}` : `:\n${output.slice(-2000)}`}`));
      });
    });
    // Keep draining its output so the pipes never fill.
    child.stdout!.resume();
    child.stderr!.resume();
    log(`embedded Solr (pid ${child.pid}) serving ${url}, started in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return {
      url,
      nodes: /SOLR NODES (\S+)/.exec(output)?.[1].split(',') ?? [url],
      pid: child.pid!,
      stop: () =>
        new Promise<void>((done) => {
          process.removeListener('exit', kill);
          if (child.exitCode !== null || child.signalCode !== null) return done();
          child.once('exit', () => done());
          child.kill('SIGTERM');
          setTimeout(kill, 10000).unref();
        }),
    };
  } catch (e) {
    process.removeListener('exit', kill);
    kill();
    throw e;
  }
}
