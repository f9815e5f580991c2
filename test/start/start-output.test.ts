import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from '../support/wait.js';

/**
 * What a person sees at start (issue 22 part 6): the ready line with the addresses, once per
 * process with the web role; LOG_FORMAT=pretty lines with the settings one a line (never a
 * JSON blob, never a secret); accounts-cli naming the Redis it writes to. Each case spawns the
 * real entry point (src/main.ts, src/security/accounts-cli.ts) and reads its output.
 */

/** Unreachable: the web role needs an engine address but never calls it here (and no embedded Solr starts). */
const NO_SOLR = 'http://solruser:solr-pass-5ecret@127.0.0.1:9/solr';
const JWT_SECRET = 'jwt-5ecret-value-0123456789';

interface Run {
  child: ChildProcess;
  out: string[];
  exited: Promise<number | null>;
}

function run(script: string, args: string[], env: Record<string, string>): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  let partial = '';
  const take = (b: Buffer) => {
    const lines = (partial + b.toString()).split('\n');
    partial = lines.pop()!;
    out.push(...lines);
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const exited = new Promise<number | null>((done) =>
    child.once('close', (code) => {
      if (partial) out.push(partial);
      done(code);
    }),
  );
  return { child, out, exited };
}

/** The ready line's text in a JSON log line or a pretty one. */
const READY = /ready at (http:\/\/127\.0\.0\.1:(\d+)) — API document at (\S+), health at (\S+), metrics at (\S+)$/;
const msgOf = (line: string): string => {
  try {
    return String((JSON.parse(line) as { msg?: unknown }).msg ?? '');
  } catch {
    return line;
  }
};

describe('start output: ready line, LOG_FORMAT=pretty, accounts-cli (issue 22 part 6)', function () {
  this.timeout(120_000);
  let dir: string;
  const started: ChildProcess[] = [];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'test-start-'));
  });
  after(() => {
    for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** Starts src/main.ts with the roles, waits for the ready line, checks its addresses answer, stops it; answers its whole output. */
  async function startAndStop(roles: string[], env: Record<string, string>): Promise<string[]> {
    const r = run('src/main.ts', roles, { PORT: '0', SOLR_URL: NO_SOLR, FILES_DIR: dir, EXTERNAL_JWT_SECRET: JWT_SECRET, ...env });
    started.push(r.child);
    await until(async () => r.out.some((l) => READY.test(msgOf(l))) || r.child.exitCode !== null, 60_000, 'the ready line');
    const m = READY.exec(msgOf(r.out.find((l) => READY.test(msgOf(l)))!));
    expect(m, r.out.join('\n')).to.not.equal(null);
    const [, base, , openapi, health, metrics] = m!;
    expect([openapi, health, metrics]).to.deep.equal([`${base}/openapi.json`, `${base}/health`, `${base}/metrics`]);
    const doc = await fetch(openapi);
    expect(doc.status).to.equal(200);
    expect(((await doc.json()) as { openapi: string }).openapi).to.match(/^3\./);
    expect((await fetch(metrics)).status).to.equal(200);
    expect((await fetch(health)).headers.get('content-type')).to.match(/json/);
    r.child.kill('SIGTERM');
    expect(await r.exited).to.equal(0);
    const all = r.out.join('\n');
    for (const secret of ['solr-pass-5ecret', JWT_SECRET]) expect(all, 'a secret in the start output').not.to.include(secret);
    expect(
      r.out.filter((l) => READY.test(msgOf(l))),
      'the ready line, once',
    ).to.have.length(1);
    return r.out;
  }

  it('the web role logs the ready line once, as JSON by default, with the settings masked', async () => {
    const out = await startAndStop(['web'], {});
    for (const l of out.filter(Boolean)) expect(() => JSON.parse(l), l).not.to.throw();
    const starting = out.map((l) => JSON.parse(l) as { msg: string; settings?: Record<string, unknown> }).find((l) => l.msg === 'starting');
    expect(starting?.settings).to.include({ LOG_FORMAT: 'json', EXTERNAL_JWT_SECRET: '***', SOLR_URL: 'http://***@127.0.0.1:9/solr' });
  });

  it('LOG_FORMAT=pretty: every role in one process (npm start), readable lines, settings one a line, the ready line once', async () => {
    const out = await startAndStop([], { LOG_FORMAT: 'pretty' });
    const text = out.join('\n');
    expect(
      out.filter((l) => l.trimStart().startsWith('{')),
      'no JSON lines',
    ).to.deep.equal([]);
    expect(Math.max(...out.map((l) => l.length)), 'no giant line').to.be.below(240);
    expect(text).to.match(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: starting$/m);
    expect(text).to.match(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: ready at http:\/\/127\.0\.0\.1:\d+ — API document at /m);
    expect(text).to.match(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[web\] gateway listening$/m);
    // the settings, one aligned line each, masked
    expect(text).to.match(/^ +LOG_FORMAT +pretty$/m);
    expect(text).to.match(/^ +EXTERNAL_JWT_SECRET +\*\*\*$/m);
    expect(text).to.match(/^ +SOLR_URL +http:\/\/\*\*\*@127\.0\.0\.1:9\/solr$/m);
    expect(text).to.match(/^ +PARTITIONS +\d+$/m);
  });

  it('a LOG_FORMAT that is neither json nor pretty stops the start naming the variable', async () => {
    const r = run('src/main.ts', ['web'], { LOG_FORMAT: 'xml', SOLR_URL: NO_SOLR, FILES_DIR: dir });
    started.push(r.child);
    expect(await r.exited).to.equal(2);
    expect(r.out.join('\n')).to.match(/LOG_FORMAT/);
  });

  it('accounts-cli prints the Redis it writes to, without credentials', async () => {
    const url = new URL(process.env.REDIS_URL!);
    const plain = run('src/security/accounts-cli.ts', ['delete', `nobody-${Date.now()}`], { REDIS_URL: `redis://${url.host}/0` });
    started.push(plain.child);
    expect(await plain.exited, plain.out.join('\n')).to.equal(0);
    expect(plain.out[0]).to.equal(`accounts-cli: Redis redis://${url.host}/0 (REDIS_URL)`);
    // credentials in the URL are masked (the server has no password, so the login fails after the line)
    const withPassword = run('src/security/accounts-cli.ts', ['delete', `nobody-${Date.now()}`], { REDIS_URL: `redis://admin:redis-pa55word@${url.host}/0` });
    started.push(withPassword.child);
    await until(async () => withPassword.out.length > 0, 20_000, 'the first line of accounts-cli');
    expect(withPassword.out[0]).to.equal(`accounts-cli: Redis redis://***@${url.host}/0 (REDIS_URL)`);
    withPassword.child.kill('SIGTERM');
    await withPassword.exited;
    expect(withPassword.out.join('\n')).not.to.include('redis-pa55word');
  });
});
