import { expect } from 'chai';
import { AppError } from '../../src/errors.js';
import * as passwords from '../../src/security/passwords.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Logins and libuv's thread pool (the security review of the seventeenth session, F3). Only failed
 * logins count against the login limit, and each login runs scrypt (16 MiB, ~40 ms) on libuv's
 * thread pool (4 threads), which also runs every fs call of the disk file store. A reader logging
 * in and out again with its own password, 10 logins in flight (73 logins/s), kept the pool busy:
 * a 2-MB file GET went from 6 ms to 1.2 s (p50) for every user. Now at most SCRYPT_CONCURRENCY
 * hashes run at once in a process (src/security/passwords.ts); the others wait their turn, and
 * past SCRYPT_QUEUE_MAX waiting one more answers 503.
 */
describe('security: logins leave libuv thread pool threads for file reads', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  before(async () => {
    p = await startTestPlatform();
  });
  after(async () => p?.stop());

  const p50 = (ms: number[]) => [...ms].sort((a, b) => a - b)[Math.floor(ms.length / 2)];

  async function timeReads(c: Client, url: string, n: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const r = await c.req('GET', url);
      expect(r.status).to.equal(200);
      expect(r.text.length).to.equal(2 * 1024 * 1024);
      out.push(performance.now() - t0);
    }
    return out;
  }

  it('a burst of valid logins (10 in flight, each token revoked) leaves file reads fast, and every login succeeds', async () => {
    const editor = await new Client(p.base).login('editor');
    const up = await editor.req('POST', `${p.url}/file-service/file/tmp/editor/login-threadpool.bin`, {
      raw: Buffer.alloc(2 * 1024 * 1024, 7),
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    expect(up.status, up.text).to.equal(201);
    const url = up.headers.get('location')!;
    await timeReads(editor, url, 5); // warm up
    const quiet = p50(await timeReads(editor, url, 20));

    // The attacker: a reader with its own password, 10 logins in flight, each token revoked at
    // once (TOKENS_PER_USER_MAX never bites); no failure is ever counted.
    const attacker = new Client(p.base);
    let stop = false;
    let logins = 0;
    const refused: string[] = [];
    const loop = async () => {
      while (!stop) {
        const r = await attacker.issueToken({ username: 'reader', password: 'reader' });
        if (r.status !== 200) {
          refused.push(`${r.status} ${r.text}`);
          continue;
        }
        logins++;
        const out = await attacker.req('DELETE', '/security/token', { token: r.json.token });
        expect(out.status).to.equal(204);
      }
    };
    const loops = Array.from({ length: 10 }, loop);
    try {
      await new Promise((r) => setTimeout(r, 500));
      const before = logins;
      const t0 = performance.now();
      const during = p50(await timeReads(editor, url, 20));
      const rate = ((logins - before) * 1000) / (performance.now() - t0);
      console.log(`      2-MB file GET p50: ${quiet.toFixed(1)} ms quiet, ${during.toFixed(1)} ms during the logins (${rate.toFixed(0)} logins/s)`);
      // Old code: p50 1.2-1.5 s against 5-6 ms quiet; two of the pool's four threads stay free for fs calls now.
      expect(during, 'p50 of file reads during the login burst (ms)').to.be.below(200 + 5 * quiet);
    } finally {
      stop = true;
      await Promise.all(loops);
    }
    // Logins waited their turn and all succeeded.
    expect(refused).to.deep.equal([]);
    expect(logins).to.be.above(20);
  });

  it('at most SCRYPT_CONCURRENCY hashes run at once, the others in order, and past SCRYPT_QUEUE_MAX waiting one more is refused with 503', async () => {
    const { SCRYPT_CONCURRENCY, SCRYPT_QUEUE_MAX } = passwords;
    const stored = await passwords.hashPassword('right');
    const ended: number[] = [];
    const n = SCRYPT_CONCURRENCY + SCRYPT_QUEUE_MAX + 5;
    const checks = Array.from({ length: n }, (_, i) =>
      passwords.verifyPassword(i % 2 ? 'right' : 'wrong', i % 3 ? stored : undefined).then(
        (ok) => {
          ended.push(i);
          return ok;
        },
        (e: unknown) => e,
      ),
    );
    expect(passwords.scryptLoad()).to.deep.equal({ running: SCRYPT_CONCURRENCY, waiting: SCRYPT_QUEUE_MAX });
    const results = await Promise.all(checks);
    const refused = results.slice(SCRYPT_CONCURRENCY + SCRYPT_QUEUE_MAX);
    for (const e of refused) {
      expect(e).to.be.instanceOf(AppError);
      expect((e as AppError).http).to.equal(503);
      expect((e as AppError).retryAfter).to.equal(1);
    }
    // The others answered as ever: right only for the right password of a known user.
    expect(results.slice(0, SCRYPT_CONCURRENCY + SCRYPT_QUEUE_MAX)).to.deep.equal(
      Array.from({ length: SCRYPT_CONCURRENCY + SCRYPT_QUEUE_MAX }, (_, i) => i % 2 === 1 && i % 3 !== 0),
    );
    // In order: none ended before one that started a turn (SCRYPT_CONCURRENCY) earlier.
    for (const [at, i] of ended.entries()) expect(i, `the ${at + 1}th to end`).to.be.below(at + SCRYPT_CONCURRENCY);
    expect(passwords.scryptLoad()).to.deep.equal({ running: 0, waiting: 0 });
  });
});
