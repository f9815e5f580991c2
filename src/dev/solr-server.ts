import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { buildMavenTool, javaAndMavenAvailable } from './maven-tool.js';
import { freePort } from './redis-server.js';
import { repoPath } from '../repo-files.js';

/** tools/solr of this repository (from src/dev or dist/src/dev). */
const TOOL_DIR = dirname(repoPath('tools', 'solr', 'pom.xml'));
const TARGET = join(TOOL_DIR, 'target');

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
  /**
   * Niceness of the JVM (default: env SOLR_NICE, else 0): above 0, on a machine it shares with
   * the platform, the platform's requests go first and indexing takes the CPU they leave. At 10,
   * creates with indexing went from 2,098-2,781 to 3,762-4,141 req/s and their p50 from 16-21 to
   * 9-11 ms, but their p99 from 95-124 to 410-450 ms (bench/RESULTS.md, 2026-11-25): so not by
   * default.
   */
  nice?: number;
  /** security.json for the Solr home (e.g. basic authentication). */
  securityJson?: string;
  /**
   * SolrCloud instead of a single core: an embedded ZooKeeper and `nodes` Solr nodes on free
   * ports, the `content` collection in `shards` shards (`port` and `securityJson` do not apply).
   */
  cloud?: { nodes: number; shards: number };
}

export { javaAndMavenAvailable };

/** Builds tools/solr with Maven unless its last successful build is newer than its sources (maven-tool.ts). */
export async function buildEmbeddedSolr(log: (m: string) => void = () => undefined): Promise<void> {
  await buildMavenTool(
    { dir: TOOL_DIR, what: 'the embedded Solr', buildNote: 'the first run downloads Solr 9 from Maven Central into ~/.m2, about 120 MB' },
    log,
  );
}

/**
 * The embedded Solr compiles with C1 only. With C2 as well (the JVM's default), its compiler
 * threads took 20-30 % of a core for minutes under load (18-31 % measured in every 10 s of a
 * 130-s run of creates; the request threads that index took 3-15 %), which on a machine of two
 * cores shared with the platform, Redis and the load cost the platform's creates their CPU:
 * Solr 0.46-0.55 ms of CPU a fleet create with C2, 0.15-0.19 ms with C1 only, fleet creates
 * 1,014-1,361 against 1,271-2,069 a second, alternated (bench/RESULTS.md, twenty-third session).
 * C1's code is slower once C2 would have compiled it: a full re-index ran 3,483 against 5,355
 * contents a second. A production search engine is a real Solr of its own, which runs long
 * enough for C2; this one runs for tests, `npm start` and the bench.
 */
const EMBEDDED_JIT = '-XX:TieredStopAtLevel=1';

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
  const nice = opts.nice ?? Number(process.env.SOLR_NICE ?? 0);
  if (!Number.isInteger(nice) || nice < 0 || nice > 19) throw new Error(`SOLR_NICE must be an integer from 0 to 19, not ${process.env.SOLR_NICE}`);
  // Through nice(1), so that every JVM thread has the niceness from its start (setpriority on
  // the pid would reach only the main thread on Linux).
  const child: ChildProcess = spawn(
    nice > 0 ? 'nice' : 'java',
    [
      ...(nice > 0 ? ['-n', String(nice), 'java'] : []),
      '-Xms128m',
      `-Xmx${heap}`,
      '-XX:+UseG1GC',
      EMBEDDED_JIT,
      // More JVM options and Solr properties (e.g. -Dsolr.autoSoftCommit.maxTime=1000), space-separated;
      // a flag given again here wins over the one above (-XX:TieredStopAtLevel=4: C2 as well).
      ...(process.env.SOLR_JAVA_OPTS ?? '').split(' ').filter(Boolean),
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
