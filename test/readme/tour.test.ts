import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { repoPath } from '../../src/repo-files.js';
import { startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

/** The `sh` blocks of the README's guided tour, in order. */
function tourBlocks(readme: string): string[] {
  const start = readme.indexOf('\n## A guided tour\n');
  if (start < 0) throw new Error('README.md has no "## A guided tour" section');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
}

/**
 * The README's guided tour works as written: every block, in order, in bash with `set -eu` and
 * `curl -f`, against a fresh platform (its own Redis, so the tour's aliases and taxonomy ids are
 * free) with search. A block that answers an HTTP error stops the tour and fails this test.
 */
describe('README guided tour', function () {
  this.timeout(120_000);
  let redis: RedisServerHandle;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let dir: string;

  before(async () => {
    redis = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: redis.url, SOLR_URL: await ensureTestSolr() });
    dir = mkdtempSync(join(tmpdir(), 'tour-'));
  });
  after(async () => {
    await p?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** bash in a child process, asynchronously: the platform answers from this process's event loop. */
  function bash(script: string, env: Record<string, string>): Promise<{ status: number | null; out: string }> {
    return new Promise((resolve) => {
      const child = spawn('bash', ['-c', script], { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 100_000);
      child.on('close', (status) => {
        clearTimeout(timer);
        resolve({ status, out });
      });
    });
  }

  it('runs every block in order, each answer a success', async () => {
    const blocks = tourBlocks(readFileSync(repoPath('README.md'), 'utf8'));
    expect(blocks.length).to.be.greaterThan(8);
    const script = `set -eu\n${blocks.join('\n')}`;
    const { status, out } = await bash(script, { H: p.url });
    expect(status, out.slice(-3000)).to.equal(0);
    // what each service answered, beyond the exit status
    expect(out).to.include('"headline":"Turnout high in the city election"');
    expect(out).to.match(/Svc-Api-Version/i);
    expect(out).to.include('Content-Type: image/gif');
    expect(out).to.include('"workspaceId":"evening"');
    expect(out).to.include('"headline":"Results expected after 10 pm"');
    expect(out).to.match(/Re-indexing session \S+ started/);
    expect(out).to.include('"id":"politics"');
    expect(out).to.include('"changes":[');
    expect(out).to.include('"patch":[');
    expect(out).to.match(/(^|\})200$/m); // the restore
    expect(out).to.include('"line":3,"status":201');
  });
});
