import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './redis-server.js';

/** tools/solr of this repository (from src/adapters or dist/src/adapters). */
const TOOL_DIR = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++, dir = dirname(dir)) if (existsSync(join(dir, 'tools', 'solr', 'pom.xml'))) return join(dir, 'tools', 'solr');
  throw new Error('tools/solr not found');
})();

export interface SolrHandle {
  /** Base URL, e.g. http://127.0.0.1:8983/solr (the collection is `content`). */
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Are `java` and `mvn` on PATH? */
export function javaAndMavenAvailable(): boolean {
  return ['java', 'mvn'].every((cmd) => spawnSync(cmd, ['-version'], { stdio: 'ignore' }).status === 0);
}

function newest(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((f) => newest(join(path, f))));
}

/** Builds tools/solr with Maven when its classes are missing or older than its sources. */
export function buildEmbeddedSolr(log: (m: string) => void = () => undefined): void {
  const classes = join(TOOL_DIR, 'target', 'classes', 'platform', 'EmbeddedSolr.class');
  const lib = join(TOOL_DIR, 'target', 'lib');
  if (existsSync(classes) && existsSync(lib) && statSync(classes).mtimeMs >= Math.max(newest(join(TOOL_DIR, 'src')), newest(join(TOOL_DIR, 'pom.xml')))) return;
  log('building the embedded Solr with Maven (the first run downloads Solr from Maven Central)');
  const r = spawnSync('mvn', ['-q', '-B', '-f', join(TOOL_DIR, 'pom.xml'), 'package', '-DskipTests'], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`Maven could not build tools/solr:\n${(r.stdout + r.stderr).split('\n').slice(-30).join('\n')}`);
}

/**
 * Starts Solr (the `content` core from tools/solr/configsets/content) on a free port with its
 * home and data under `dataDir`; stopped with the returned handle or when this process exits.
 */
export async function startSolr(opts: { dataDir: string; port?: number; log?: (m: string) => void; startTimeoutMs?: number; /** security.json for the Solr home (e.g. basic authentication). */ securityJson?: string }): Promise<SolrHandle> {
  const log = opts.log ?? (() => undefined);
  buildEmbeddedSolr(log);
  const home = resolve(opts.dataDir);
  const core = join(home, 'content');
  mkdirSync(core, { recursive: true });
  // The configset is copied on every start, so a schema change in the repo takes effect.
  cpSync(join(TOOL_DIR, 'configsets', 'content', 'conf'), join(core, 'conf'), { recursive: true });
  writeFileSync(join(core, 'core.properties'), 'name=content\n');
  if (opts.securityJson) writeFileSync(join(home, 'security.json'), opts.securityJson);
  const port = opts.port ?? (await freePort());
  const child: ChildProcess = spawn(
    'java',
    ['-Xms256m', '-Xmx1g', `-Dsolr.log.dir=${join(home, 'logs')}`, '-cp', `${join(TOOL_DIR, 'target', 'classes')}:${join(TOOL_DIR, 'target', 'lib', '*')}`, 'platform.EmbeddedSolr', String(port), home],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  let output = '';
  const url = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`Solr did not start within ${opts.startTimeoutMs ?? 120000} ms:\n${output.slice(-2000)}`)), opts.startTimeoutMs ?? 120000);
    const onData = (b: Buffer) => {
      output += b.toString();
      const m = /SOLR READY (\S+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        ok(m[1]);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`Solr exited (${code}) before it was ready:\n${output.slice(-2000)}`));
    });
  });
  // Keep draining its output so the pipes never fill.
  child.stdout!.resume();
  child.stderr!.resume();
  log(`embedded Solr (pid ${child.pid}) serving ${url}`);
  return {
    url,
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
}
