import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sleep } from '../wait.js';

/**
 * The Java parts of this repository (tools/solr, tools/solrj-check): a Maven project each, built
 * with `mvn package` into its target/ (classes, and its dependencies copied to target/lib) once,
 * and again only when its sources are newer than the last successful build.
 */

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

/** Written after a successful Maven build; its mtime is compared with the sources. */
const stampOf = (dir: string) => join(dir, 'target', '.built');

function upToDate(dir: string): boolean {
  const stamp = stampOf(dir);
  return (
    existsSync(stamp) && existsSync(join(dir, 'target', 'lib')) && statSync(stamp).mtimeMs >= Math.max(newest(join(dir, 'src')), newest(join(dir, 'pom.xml')))
  );
}

/** Runs `mvn -q package`; resolves with its exit code and the tail of its output. */
function runMaven(dir: string): Promise<{ code: number | null; out: string }> {
  return new Promise((done) => {
    let out = '';
    const mvn = spawn('mvn', ['-q', '-B', '-Dstyle.color=never', '-f', join(dir, 'pom.xml'), 'package', '-DskipTests'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (b: Buffer) => (out = (out + b.toString()).slice(-20000));
    mvn.stdout.on('data', keep);
    mvn.stderr.on('data', keep);
    mvn.once('error', (e) => done({ code: null, out: String(e) }));
    mvn.once('close', (code) => done({ code, out }));
  });
}

export interface MavenTool {
  /** The directory of its pom.xml and src/. */
  dir: string;
  /** What it is, for the log and errors ("the embedded Solr"). */
  what: string;
  /** Said before a build starts (what the first run downloads). */
  buildNote?: string;
}

/**
 * Builds a Maven tool (target/classes + target/lib) unless the last successful build is newer
 * than its sources. Several processes may call this at once: one builds (holding a lock
 * directory in target/), the others wait for it. Answers the class path of the built tool.
 */
export async function buildMavenTool(tool: MavenTool, log: (m: string) => void = () => undefined): Promise<string> {
  const target = join(tool.dir, 'target');
  const classPath = `${join(target, 'classes')}:${join(target, 'lib', '*')}`;
  if (upToDate(tool.dir)) return classPath;
  const lock = join(target, '.build-lock');
  mkdirSync(target, { recursive: true });
  const waitUntil = Date.now() + 15 * 60_000;
  for (let said = false; ; ) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // Another process builds; a lock older than 10 minutes is left over from a killed build.
      const held = statSync(lock, { throwIfNoEntry: false });
      if (held && Date.now() - held.mtimeMs > 10 * 60_000) rmSync(lock, { recursive: true, force: true });
      if (!said) log(`waiting for another process that builds ${tool.what}`);
      said = true;
      if (Date.now() > waitUntil) throw new Error(`${tool.what}: build lock ${lock} held for 15 minutes`);
      await sleep(500);
      if (upToDate(tool.dir)) return classPath;
    }
  }
  try {
    if (upToDate(tool.dir)) return classPath;
    log(`building ${tool.what} with Maven${tool.buildNote ? ` (${tool.buildNote})` : ''}`);
    const t0 = Date.now();
    const { code, out } = await runMaven(tool.dir);
    if (code !== 0)
      throw new Error(
        `Maven could not build ${tool.what} (${tool.dir}, exit ${code}):\n${out
          .replace(/\x1b\[[0-9;]*m/g, '')
          .split('\n')
          .slice(-30)
          .join('\n')}`,
      );
    writeFileSync(stampOf(tool.dir), `${new Date().toISOString()}\n`);
    log(`built ${tool.what} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return classPath;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
