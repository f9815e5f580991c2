import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createClient } from 'redis';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

/**
 * Failed logins over HTTP (CONTRACT §20 "Tokens", issue 14 finding 12): past 10 failures in 15
 * minutes per username and per client address, `POST security/token` answers 429 with
 * `Retry-After` and the error body, the same whether or not the user exists. The client address
 * is the socket's; `X-Forwarded-For` counts only from a proxy named in TRUSTED_PROXIES.
 *
 * The platforms here use the contract's default limit (10). Addresses are made distinct per test
 * through a trusted proxy, so that these failures never count against 127.0.0.1 for other suites.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

describe('security: failed logins are limited per username and per client address (CONTRACT §20)', function () {
  this.timeout(60000);
  let proxied: P;
  let n = 0;
  const fresh = (what: string) => `${what}-${++n}-${randomBytes(3).toString('hex')}`;
  const addr = () => `203.0.113.${(n++ % 250) + 1}`;
  const redis = createClient({ url: process.env.REDIS_URL });

  before(async () => {
    await redis.connect();
    // LOGIN_MAX_FAILURES '' is unset: the contract's default of 10 (the test run sets a high one).
    proxied = await startTestPlatform({ LOGIN_MAX_FAILURES: '', LOGIN_WINDOW_SECONDS: '', TRUSTED_PROXIES: '127.0.0.1,::1' });
  });

  after(async () => {
    await proxied?.stop();
    await redis.quit();
  });

  const login = (p: P, username: string, password: string, from?: string) =>
    new Client(p.base).req('POST', '/security/token', { body: { username, password }, token: null, headers: from ? { 'X-Forwarded-For': from } : {} });

  it('10 wrong passwords, then 429 with Retry-After and the error body, also for the right password', async () => {
    const user = fresh('http-limited');
    await proxied.tokens!.createAccount(user, 'right-password', { __global__: ['reader'] });
    for (let i = 0; i < 10; i++) {
      const r = await login(proxied, user, 'wrong', addr());
      expect(r.status, `attempt ${i + 1}: ${r.text}`).to.equal(401);
    }
    const r = await login(proxied, user, 'right-password', addr());
    expect(r.status, r.text).to.equal(429);
    expect(r.headers.get('content-type')).to.equal('application/json');
    expect(r.json).to.have.keys('message', 'statusCode', 'extraInfo');
    expect(r.json.statusCode).to.equal('42900');
    expect(Number(r.headers.get('retry-after'))).to.be.within(1, 900);
    expect(r.headers.get('retry-after')).to.match(/^\d+$/);
  });

  it('an unknown user gets the same answers, headers aside from Retry-After and X-Request-Id', async () => {
    const known = fresh('http-known');
    await proxied.tokens!.createAccount(known, 'right-password', { __global__: ['reader'] });
    const run = async (user: string) => {
      const out: unknown[] = [];
      for (let i = 0; i < 12; i++) {
        const r = await login(proxied, user, 'wrong', addr());
        out.push([r.status, r.text, r.headers.has('retry-after')]);
      }
      return out;
    };
    expect(await run(fresh('http-unknown'))).to.deep.equal(await run(known));
  });

  it('per client address across usernames; other addresses go on', async () => {
    const from = addr();
    for (let i = 0; i < 10; i++) expect((await login(proxied, fresh('someone'), 'wrong', from)).status).to.equal(401);
    expect((await login(proxied, 'reader', 'reader', from)).status).to.equal(429);
    expect((await login(proxied, 'reader', 'reader', addr())).status).to.equal(200);
  });

  it('without TRUSTED_PROXIES, X-Forwarded-For is not believed: the socket address counts', async () => {
    // Failures of the loopback address (other suites log in from it): forgotten before and after.
    const forgetLoopback = async () => {
      const keys: string[] = [];
      for await (const k of redis.scanIterator({ MATCH: 'security:login-failures:address:*' })) if (!k.includes(':203.0.113.')) keys.push(k);
      if (keys.length) await redis.del(keys);
      return keys.length;
    };
    await forgetLoopback();
    const direct = await startTestPlatform({ LOGIN_MAX_FAILURES: '3' });
    try {
      for (let i = 0; i < 3; i++) expect((await login(direct, fresh('xff'), 'wrong', addr())).status).to.equal(401);
      const r = await login(direct, 'reader', 'reader', addr());
      expect(r.status, r.text).to.equal(429);
    } finally {
      await direct.stop();
      expect(await forgetLoopback()).to.be.greaterThan(0);
    }
  });

  it('a trusted proxy: the address is the nearest untrusted one in X-Forwarded-For', async () => {
    const from = addr();
    // A client can prepend anything; the proxy appends what it saw.
    for (let i = 0; i < 10; i++) expect((await login(proxied, fresh('chain'), 'wrong', `${addr()}, ${from}`)).status).to.equal(401);
    expect((await login(proxied, 'reader', 'reader', `198.51.100.7, ${from}`)).status).to.equal(429);
    expect((await login(proxied, 'reader', 'reader', `${from}, ${addr()}`)).status).to.equal(200);
  });

  it('the window passes (LOGIN_WINDOW_SECONDS)', async () => {
    const short = await startTestPlatform({ LOGIN_MAX_FAILURES: '2', LOGIN_WINDOW_SECONDS: '2', TRUSTED_PROXIES: '127.0.0.1,::1' });
    try {
      const from = addr();
      for (let i = 0; i < 2; i++) expect((await login(short, fresh('w'), 'wrong', from)).status).to.equal(401);
      expect((await login(short, 'reader', 'reader', from)).status).to.equal(429);
      await until(async () => (await login(short, 'reader', 'reader', from)).status === 200, 6000, 'the window to pass');
    } finally {
      await short.stop();
    }
  });
});
