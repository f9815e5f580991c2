import { spawn, type ChildProcess } from 'node:child_process';
import { createHook } from 'node:async_hooks';
import { createHash, randomBytes, scryptSync } from 'node:crypto';
import net from 'node:net';
import { expect } from 'chai';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { createClient } from 'redis';
import { loadSettings, type Settings } from '../../config/settings.js';
import { AppError } from '../../src/errors.js';
import { GLOBAL_CONTEXT } from '../../src/content/permissions.js';
import { tokenRequestSchema, TokenService, type LogLevel } from '../../src/security/token-service.js';
import { until } from '../support/wait.js';

// Spec "Token response" and "Authentication", CONTRACT §3 (development accounts) and §4 (tokens),
// against a real Redis: the private one of the test run (REDIS_URL), or one started here.

const DEV_USERS = ['sysadmin', 'editor', 'reader', 'sportseditor'];
const RUN = `test:security:${randomBytes(6).toString('hex')}:`;
let prefixCounter = 0;
/** A fresh key prefix: a Redis namespace with no account yet. */
const freshPrefix = (): string => `${RUN}${++prefixCounter}:`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Expects the promise to reject with an AppError and returns it. */
async function appError(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(AppError);
    return e as AppError;
  }
  throw new Error('expected a rejection');
}

describe('security: token service (spec Token response, CONTRACT §3-4)', function () {
  this.timeout(20000);

  let redisUrl: string;
  let ownServer: ChildProcess | undefined;
  let raw: ReturnType<typeof createClient>;
  const services: TokenService[] = [];
  let baseSettings: Settings;

  function settings(over: Partial<Settings> = {}): Settings {
    return { ...baseSettings, ...over };
  }

  interface Made {
    svc: TokenService;
    logs: { level: LogLevel; msg: string }[];
  }

  function make(over: Partial<Settings> = {}, keyPrefix = sharedPrefix): Made {
    const logs: Made['logs'] = [];
    const svc = new TokenService({ redisUrl, settings: settings(over), keyPrefix, log: (level, msg) => logs.push({ level, msg }) });
    services.push(svc);
    return { svc, logs };
  }

  let sharedPrefix: string;
  let svc: TokenService;

  before(async () => {
    const env = process.env.REDIS_URL;
    // Never write test data into a default local Redis: only a private server will do.
    if (env && !/^redis:\/\/(127\.0\.0\.1|localhost)(:6379)?\/?$/.test(env)) {
      redisUrl = env;
    } else {
      const port = await freePort();
      ownServer = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
        stdio: 'ignore',
      });
      redisUrl = `redis://127.0.0.1:${port}`;
      for (let i = 0; i < 100; i++) {
        const ok = await new Promise<boolean>((res) => {
          const s = net.connect(port, '127.0.0.1', () => {
            s.end();
            res(true);
          });
          s.on('error', () => res(false));
        });
        if (ok) break;
        await sleep(50);
      }
    }
    raw = createClient({ url: redisUrl });
    raw.on('error', () => undefined);
    await raw.connect();
    baseSettings = { ...loadSettings({ NODE_ENV: 'test', REDIS_URL: redisUrl }), EXTERNAL_JWT_SECRET: undefined, EXTERNAL_JWT_PUBLIC_KEY: undefined };
    sharedPrefix = freshPrefix();
    svc = make().svc;
    await svc.start();
  });

  after(async () => {
    for (const s of services) await s.stop().catch(() => undefined);
    if (raw?.isOpen) {
      // Remove only the keys this file wrote.
      const keys: string[] = [];
      for await (const k of raw.scanIterator({ MATCH: `${RUN}*`, COUNT: 1000 })) keys.push(k);
      if (keys.length) await raw.del(keys);
      await raw.quit();
    }
    ownServer?.kill('SIGTERM');
  });

  describe('development accounts (CONTRACT §3)', () => {
    it('are created on first start with no accounts, with a warning naming them', async () => {
      const { svc: s, logs } = make({}, freshPrefix());
      await s.start();
      const warns = logs.filter((l) => l.level === 'warn');
      expect(warns).to.have.length(1);
      for (const u of DEV_USERS) expect(warns[0].msg).to.include(u);
      for (const u of DEV_USERS) expect((await s.login(u, u)).userId).to.equal(u);
      const sports = await s.principalFor('sportseditor');
      expect(sports.contexts).to.deep.equal({ sports: ['editor'] });
    });

    it('are not created again by a later start', async () => {
      const prefix = freshPrefix();
      await make({}, prefix).svc.start();
      const { svc: again, logs } = make({}, prefix);
      await again.start();
      expect(logs.filter((l) => l.level === 'warn')).to.deep.equal([]);
    });

    it('are not created when any other account exists', async () => {
      const prefix = freshPrefix();
      const first = make({}, prefix).svc;
      await first.connect();
      await first.createAccount('alice', 'alice-secret', { news: ['editor'] });
      const { svc: s, logs } = make({}, prefix);
      await s.start();
      expect(logs.filter((l) => l.level === 'warn')).to.deep.equal([]);
      expect((await appError(s.login('sysadmin', 'sysadmin'))).http).to.equal(401);
      expect((await s.login('alice', 'alice-secret')).userId).to.equal('alice');
    });

    it('store only a scrypt hash in Redis', async () => {
      const h = await raw.hGetAll(`${sharedPrefix}account:editor`);
      expect(h.username).to.equal('editor');
      expect(h.passwordHash).to.match(/^scrypt\$/);
      expect(JSON.parse(h.contexts)).to.deep.equal({ [GLOBAL_CONTEXT]: ['editor'] });
    });
  });

  describe('NODE_ENV=production', () => {
    it('refuses to start while a development account keeps its default password', async () => {
      const prefix = freshPrefix();
      await make({}, prefix).svc.start(); // seeded in development
      const prod = make({ NODE_ENV: 'production' }, prefix).svc;
      const err = await prod.start().then(
        () => null,
        (e: Error) => e,
      );
      expect(err).to.be.instanceOf(Error);
      expect(err!.message)
        .to.match(/production/)
        .and.to.match(/default password/);
      for (const u of DEV_USERS) expect(err!.message).to.include(u);

      // Changing three of the four is not enough...
      const admin = make({}, prefix).svc;
      await admin.connect();
      for (const u of ['sysadmin', 'editor', 'reader']) await admin.setPassword(u, `${u}-changed-pw`);
      const err2 = await make({ NODE_ENV: 'production' }, prefix)
        .svc.start()
        .then(
          () => null,
          (e: Error) => e,
        );
      expect(err2?.message).to.include('sportseditor').and.not.include('sysadmin,');
      // ...a password reset to the default (new salt) is caught too...
      await admin.setPassword('reader', 'reader');
      const err3 = await make({ NODE_ENV: 'production' }, prefix)
        .svc.start()
        .then(
          () => null,
          (e: Error) => e,
        );
      expect(err3?.message).to.include('reader');
      // ...and with every default gone it starts.
      await admin.setPassword('reader', 'reader-changed-pw');
      await admin.deleteAccount('sportseditor');
      const ok = make({ NODE_ENV: 'production' }, prefix).svc;
      await ok.start();
      expect((await ok.login('editor', 'editor-changed-pw')).userId).to.equal('editor');
    });

    it('refuses to start, and seeds nothing, when Redis holds no account', async () => {
      const prefix = freshPrefix();
      const err = await make({ NODE_ENV: 'production' }, prefix)
        .svc.start()
        .then(
          () => null,
          (e: Error) => e,
        );
      expect(err?.message)
        .to.match(/production/)
        .and.to.match(/no accounts/);
      const keys: string[] = [];
      for await (const k of raw.scanIterator({ MATCH: `${prefix}*` })) keys.push(k);
      expect(keys).to.deep.equal([]);
    });
  });

  describe('login', () => {
    it('answers the Token response; renewTime is half way to expireTime', async () => {
      const before = Date.now();
      const r = await svc.login('editor', 'editor');
      const after = Date.now();
      expect(Object.keys(r).sort()).to.deep.equal(['expireTime', 'renewTime', 'token', 'userId']);
      expect(r.userId).to.equal('editor');
      expect(r.token).to.match(/^[A-Za-z0-9_-]{43}$/);
      expect(r.expireTime).to.match(/^\d+$/);
      expect(r.renewTime).to.match(/^\d+$/);
      const exp = Number(r.expireTime);
      const ttlMs = baseSettings.TOKEN_TTL_SECONDS * 1000;
      expect(exp).to.be.within(before + ttlMs, after + ttlMs);
      expect(Number(r.renewTime)).to.be.closeTo(exp - ttlMs / 2, 1);
      const p = await svc.authenticate(r.token);
      expect(p).to.deep.equal({ userId: 'editor', contexts: { [GLOBAL_CONTEXT]: ['editor'] } });
    });

    it('sets a Redis TTL of TOKEN_TTL_SECONDS on the token key, which holds no raw token', async () => {
      const r = await svc.login('reader', 'reader');
      const key = svc.keyOfToken(r.token);
      const ttl = await raw.ttl(key);
      expect(ttl).to.be.within(baseSettings.TOKEN_TTL_SECONDS - 5, baseSettings.TOKEN_TTL_SECONDS);
      const h = await raw.hGetAll(key);
      expect(h.userId).to.equal('reader');
      expect(Object.values(h)).not.to.include(r.token);
    });

    it('tokens are unguessable: 256 random bits each, no two alike, no shared structure', async function () {
      // 200 logins are 200 scrypt hashes: beside a benchmark they took longer than the suite's 20 s (soak of 2026-11-25)
      this.timeout(120_000);
      // in rounds of 10: the login limiter holds an attempt of a user past LOGIN_MAX_FAILURES (10)
      // in progress until the others end, which a loaded machine could stretch past its wait
      const tokens: string[] = [];
      for (let round = 0; round < 20; round++)
        tokens.push(...(await Promise.all(Array.from({ length: 10 }, () => svc.login('reader', 'reader').then((r) => r.token)))));
      expect(new Set(tokens).size).to.equal(tokens.length);
      const bytes = tokens.map((t) => Buffer.from(t, 'base64url'));
      for (const b of bytes) expect(b.length).to.equal(32);
      // every bit position is set in some tokens and clear in others (no fixed prefix, counter or time)
      for (let bit = 0; bit < 256; bit++) {
        const ones = bytes.filter((b) => (b[bit >> 3] >> (bit & 7)) & 1).length;
        expect(ones, `bit ${bit}`).to.be.within(50, 150);
      }
      // a token of the same shape that was never issued authenticates no one
      expect(await svc.authenticate(Buffer.alloc(32, 7).toString('base64url'))).to.equal(null);
    });

    it('401 with the same body for an unknown user and a wrong password', async () => {
      const unknown = await appError(svc.login('nobody-here', 'editor'));
      const wrong = await appError(svc.login('editor', 'not-the-password'));
      expect(unknown.http).to.equal(401);
      expect(wrong.http).to.equal(401);
      expect(unknown.toBody()).to.deep.equal(wrong.toBody());
    });
  });

  describe('renewal', () => {
    it('gives a new token while the old one stays valid', async () => {
      const first = await svc.login('editor', 'editor');
      const second = await svc.renew('editor', first.token);
      expect(second.token).not.to.equal(first.token);
      expect(second.userId).to.equal('editor');
      expect((await svc.authenticate(first.token))?.userId).to.equal('editor');
      expect((await svc.authenticate(second.token))?.userId).to.equal('editor');
    });

    it('401 when the token belongs to another user or is unknown', async () => {
      const t = await svc.login('reader', 'reader');
      expect((await appError(svc.renew('editor', t.token))).http).to.equal(401);
      expect((await appError(svc.renew('reader', 'no-such-token'))).http).to.equal(401);
    });

    it('401 once the token has expired (and authenticate answers null)', async () => {
      const short = make({ TOKEN_TTL_SECONDS: 1 }).svc;
      await short.start();
      const t = await short.login('reader', 'reader');
      expect(await raw.ttl(short.keyOfToken(t.token))).to.be.within(0, 1);
      // Looked up once: cached, and known at once (the reads' path that awaits nothing).
      expect((await short.authenticate(t.token))?.userId).to.equal('reader');
      expect(short.known(t.token)?.userId).to.equal('reader');
      // Redis expires the token; wait until it has, then the service must refuse it.
      await until(async () => (await raw.exists(short.keyOfToken(t.token))) === 0, 15_000, 'the token to expire in Redis');
      expect((await appError(short.renew('reader', t.token))).http).to.equal(401);
      expect(short.known(t.token), 'an expired token is not known from the cache').to.equal(undefined);
      expect(await short.authenticate(t.token)).to.equal(null);
    });
  });

  describe('live tokens per user (TOKENS_PER_USER_MAX)', () => {
    let n = 0;
    /** A service of its own (a fresh prefix) with a bound of `max`, and an account of its own. */
    const bounded = async (max: number, over: Partial<Settings> = {}) => {
      const s = make({ TOKENS_PER_USER_MAX: max, ...over }, freshPrefix()).svc;
      await s.start();
      const name = `many-${process.pid}-${++n}`;
      await s.createAccount(name, 'a-password', { [GLOBAL_CONTEXT]: ['reader'] });
      return { s, name };
    };
    const tokenKeys = async (s: TokenService, tokens: string[]) => (await Promise.all(tokens.map((t) => raw.exists(s.keyOfToken(t))))).filter((e) => e).length;

    it('the default is 1000', () => {
      expect(loadSettings({}).TOKENS_PER_USER_MAX).to.equal(1000);
    });

    it('past the bound a login and a renewal answer 429 with Retry-After until the oldest live token expires; every token issued stays valid and nothing more is stored', async () => {
      const { s, name } = await bounded(5);
      const issued = [(await s.login(name, 'a-password')).token];
      for (let i = 0; i < 4; i++) issued.push((await s.renew(name, issued[i])).token);
      const before = Date.now();
      const renewal = await appError(s.renew(name, issued[4]));
      expect(renewal.http).to.equal(429);
      expect(renewal.toBody().statusCode).to.equal('42900');
      // the oldest token expires a TTL after it was issued, a moment before this refusal
      const ttl = baseSettings.TOKEN_TTL_SECONDS;
      expect(renewal.retryAfter).to.be.within(ttl - 10, ttl);
      const login = await appError(s.login(name, 'a-password'));
      expect(login.http).to.equal(429);
      expect(login.retryAfter).to.be.within(ttl - 10, ttl);
      expect(Date.now() - before).to.be.below(5000);
      // CONTRACT §4: the tokens issued stay valid until their own expiry
      for (const t of issued) expect((await s.authenticate(t))?.userId).to.equal(name);
      expect(await tokenKeys(s, issued)).to.equal(5);
      // the bound is per user: another one logs in
      expect((await s.login('reader', 'reader')).userId).to.equal('reader');
    });

    it('a revoked token frees its place', async () => {
      const { s, name } = await bounded(3);
      const a = await s.login(name, 'a-password');
      const b = await s.renew(name, a.token);
      await s.renew(name, b.token);
      expect((await appError(s.renew(name, b.token))).http).to.equal(429);
      await s.revoke(a.token);
      const c = await s.renew(name, b.token);
      expect((await s.authenticate(c.token))?.userId).to.equal(name);
      expect((await appError(s.renew(name, c.token))).http).to.equal(429);
    });

    it('an expired token frees its place', async () => {
      const { s, name } = await bounded(2, { TOKEN_TTL_SECONDS: 2 });
      const a = await s.login(name, 'a-password');
      await s.renew(name, a.token);
      const e = await appError(s.login(name, 'a-password'));
      expect(e.http).to.equal(429);
      expect(e.retryAfter).to.be.within(1, 2);
      await sleep(e.retryAfter! * 1000 + 100);
      expect((await s.login(name, 'a-password')).userId).to.equal(name);
    });

    it('many renewals at once never pass the bound', async () => {
      const { s, name } = await bounded(5);
      const first = await s.login(name, 'a-password');
      const outcomes = await Promise.all(
        Array.from({ length: 30 }, () =>
          s.renew(name, first.token).then(
            (r) => r.token,
            (e: AppError) => e.http,
          ),
        ),
      );
      expect(outcomes.filter((o) => typeof o === 'string')).to.have.length(4);
      expect(outcomes.filter((o) => o === 429)).to.have.length(26);
    });

    it('a password change or a deletion of the account starts its count afresh (its tokens ended with it)', async () => {
      const { s, name } = await bounded(2);
      const a = await s.login(name, 'a-password');
      await s.renew(name, a.token);
      expect((await appError(s.login(name, 'a-password'))).http).to.equal(429);
      await s.setPassword(name, 'another-password');
      const b = await s.login(name, 'another-password');
      await s.renew(name, b.token);
      expect((await appError(s.login(name, 'another-password'))).http).to.equal(429);
      await s.deleteAccount(name);
      await s.createAccount(name, 'a-password', { [GLOBAL_CONTEXT]: ['reader'] });
      const c = await s.login(name, 'a-password');
      expect((await s.renew(name, c.token)).userId).to.equal(name);
    });

    it('the record is one key per user (one Redis Cluster slot), expiring with its newest token; every other key it writes expires too', async () => {
      const prefix = freshPrefix();
      const s = make({ TOKENS_PER_USER_MAX: 3 }, prefix).svc;
      await s.start();
      const t = await s.login('editor', 'editor');
      await s.renew('editor', t.token);
      await s.login('reader', 'reader');
      const keys: string[] = [];
      for await (const k of raw.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) keys.push(k);
      const records = keys.filter((k) => k.startsWith(`${prefix}user-tokens:`));
      expect(records).to.have.length(2);
      for (const k of records) {
        expect(await raw.type(k)).to.equal('zset');
        expect(await raw.pTTL(k), k).to.be.within((baseSettings.TOKEN_TTL_SECONDS - 10) * 1000, baseSettings.TOKEN_TTL_SECONDS * 1000);
      }
      expect(await raw.zCard(records.find((k) => k.endsWith(createHash('sha256').update('editor').digest('hex')))!)).to.equal(2);
      for (const k of keys.filter((k) => !k.startsWith(`${prefix}account:`))) expect(await raw.ttl(k), k).to.be.greaterThan(0);
    });
  });

  describe("an account's change ends its tokens (password, deletion, re-creation)", () => {
    let n = 0;
    /** A new account of its own, with a token cached in `svc` and in another process. */
    const withToken = async (contexts: Record<string, string[]> = { [GLOBAL_CONTEXT]: ['reader'] }) => {
      const name = `changing-${process.pid}-${++n}`;
      await svc.createAccount(name, 'a-password', contexts);
      const other = make().svc;
      await other.start();
      const t = await svc.login(name, 'a-password');
      expect((await svc.authenticate(t.token))?.userId).to.equal(name);
      expect((await other.authenticate(t.token))?.userId, 'cached in the other process').to.equal(name);
      return { name, other, token: t.token };
    };

    it('a new password: every token issued before answers 401 at once in every process, and cannot be renewed', async () => {
      const { name, other, token } = await withToken();
      await svc.setPassword(name, 'another-password');
      expect(await svc.authenticate(token)).to.equal(null);
      expect(await other.authenticate(token), 'the other process, no wait').to.equal(null);
      expect((await appError(svc.renew(name, token))).http).to.equal(401);
      const fresh = await svc.login(name, 'another-password');
      expect((await other.authenticate(fresh.token))?.userId).to.equal(name);
      expect((await svc.renew(name, fresh.token)).userId).to.equal(name);
    });

    it('the account written again with the same password changes its roles only: its tokens stay valid and act with the new roles in every process at once', async () => {
      const { name, other, token } = await withToken();
      await svc.createAccount(name, 'a-password', { [GLOBAL_CONTEXT]: ['editor'] });
      expect((await other.authenticate(token))?.contexts).to.deep.equal({ [GLOBAL_CONTEXT]: ['editor'] });
      await svc.createAccount(name, 'a-new-password', { [GLOBAL_CONTEXT]: ['editor'] });
      expect(await other.authenticate(token), 'another password: a new generation').to.equal(null);
    });

    it('a login whose password was checked before a password change gets a token of the old generation (it ends with the change)', async () => {
      const { name } = await withToken();
      const accountKey = `${sharedPrefix}account:${name}`;
      // A hash of a high cost (N = 2^18: about a second to check), so that the change's write
      // surely lands while the login checks the password.
      const salt = randomBytes(16);
      const slow = scryptSync('a-password', salt, 32, { N: 2 ** 18, r: 8, p: 1, maxmem: 512 * 2 ** 20 });
      await raw.hSet(accountKey, 'passwordHash', `scrypt$${2 ** 18}$8$1$${salt.toString('base64')}$${slow.toString('base64')}`);
      const login = svc.login(name, 'a-password');
      await sleep(150);
      await raw.hSet(accountKey, 'generation', 'changed-meanwhile');
      const t = await login;
      expect(await svc.authenticate(t.token)).to.equal(null);
    });

    it('a deleted account: its tokens answer 401 and cannot be renewed', async () => {
      const { name, other, token } = await withToken();
      await svc.deleteAccount(name);
      expect(await svc.authenticate(token)).to.equal(null);
      expect(await other.authenticate(token)).to.equal(null);
      expect((await appError(svc.renew(name, token))).http).to.equal(401);
    });

    it("an account created again under the same name never inherits the old account's tokens (nor its new roles)", async () => {
      const { name, other, token } = await withToken();
      await svc.deleteAccount(name);
      await svc.createAccount(name, 'a-password', { [GLOBAL_CONTEXT]: ['sysadmin'] });
      expect(await svc.authenticate(token)).to.equal(null);
      expect(await other.authenticate(token)).to.equal(null);
      expect((await appError(svc.renew(name, token))).http).to.equal(401);
    });

    it('an account and a token stored before generations existed stay valid until the account changes', async () => {
      const { name, token } = await withToken();
      const accountKey = `${sharedPrefix}account:${name}`;
      const tokenKey = svc.keyOfToken(token);
      expect(await raw.hExists(accountKey, 'generation'), 'the account has a generation').to.equal(true);
      await raw.hDel(accountKey, 'generation');
      await raw.hDel(tokenKey, 'generation');
      const fresh = make().svc;
      await fresh.start();
      expect((await fresh.authenticate(token))?.userId).to.equal(name);
      await svc.deleteAccount(name);
      expect(await fresh.authenticate(token)).to.equal(null);
    });
  });

  describe('revocation (CONTRACT §20 "Tokens")', () => {
    it('takes effect at once in the revoking process', async () => {
      const t = await svc.login('editor', 'editor');
      expect(await svc.authenticate(t.token)).not.to.equal(null);
      await svc.revoke(t.token);
      expect(await svc.authenticate(t.token)).to.equal(null);
      expect(await raw.exists(svc.keyOfToken(t.token))).to.equal(0);
    });

    it('takes effect at once in every other process, also one that cached the token', async () => {
      const others = [make().svc, make().svc];
      for (const o of others) await o.start();
      const t = await svc.login('editor', 'editor');
      for (const o of others) expect(await o.authenticate(t.token)).not.to.equal(null); // now cached there
      await svc.revoke(t.token);
      // No wait: once revoke has answered, no process accepts the token.
      for (const o of others) expect(await o.authenticate(t.token)).to.equal(null);
      expect(await svc.authenticate(t.token)).to.equal(null);
    });

    it("a revocation makes the open requests watching that token check it, not every open request's token", async () => {
      const other = make().svc;
      await other.start();
      const [a, b, c] = await Promise.all([svc.login('editor', 'editor'), svc.login('editor', 'editor'), svc.login('reader', 'reader')]);
      const opened = (await other.authenticate(a.token))!;
      const checked = new Map<string, number>();
      const authenticate = other.authenticate.bind(other);
      other.authenticate = (token: string | undefined) => {
        if (token) checked.set(token, (checked.get(token) ?? 0) + 1);
        return authenticate(token);
      };
      // 50 requests open with token a (feed streams, imports, exports), one with b
      const ended: string[] = [];
      const stops = Array.from({ length: 50 }, () => other.watch(a.token, opened, () => ended.push('a')));
      stops.push(other.watch(b.token, opened, (now) => ended.push(now === null ? 'b revoked' : 'b changed')));
      await sleep(50); // each checked its token once as it started
      checked.clear();
      // c is revoked (here and by the feed in the other process): nobody watches it
      await svc.revoke(c.token);
      await sleep(50);
      expect(checked.get(a.token) ?? 0, 'checks of token a after the revocation of c').to.equal(0);
      expect(checked.get(b.token) ?? 0, 'checks of token b after the revocation of c').to.equal(0);
      // b is revoked in another process: its watcher checks it and ends, a's do not check
      await svc.revoke(b.token);
      await until(async () => ended.includes('b revoked'), 5000);
      expect(checked.get(a.token) ?? 0, 'checks of token a after the revocation of b').to.equal(0);
      // a token revoked in this process: the same
      const d = await svc.login('editor', 'editor');
      await other.revoke(d.token);
      expect(checked.get(a.token) ?? 0, 'checks of token a after a local revocation').to.equal(0);
      expect(ended).to.deep.equal(['b revoked']);
      for (const stop of stops) stop();
    });

    it('a lookup in flight while the token is revoked elsewhere does not cache it', async () => {
      const other = make().svc;
      await other.start();
      for (let i = 0; i < 20; i++) {
        const t = await svc.login('editor', 'editor');
        const pending = other.authenticate(t.token);
        await svc.revoke(t.token);
        await pending;
        expect(await other.authenticate(t.token), `round ${i}`).to.equal(null);
      }
    });

    it('a process whose revocation feed is down does not use its cache; it catches up when the feed is back', async () => {
      const other = make().svc;
      await other.start();
      const t = await svc.login('editor', 'editor');
      expect(await other.authenticate(t.token)).not.to.equal(null);
      // Kill the other process's subscriber connection from the server side.
      const clients = await raw.sendCommand(['CLIENT', 'LIST', 'TYPE', 'pubsub']);
      const ids = String(clients)
        .split('\n')
        .filter((l) => l.includes(`name=${other.feedName}`))
        .map((l) => /id=(\d+)/.exec(l)![1]);
      expect(ids).to.have.length(1);
      await raw.sendCommand(['CLIENT', 'KILL', 'ID', ids[0]]);
      await svc.revoke(t.token);
      expect(await other.authenticate(t.token)).to.equal(null);
      // Back again: new tokens are cached and revocations reach it.
      const t2 = await svc.login('editor', 'editor');
      await until(async () => other.feedUp, 5000, 'the revocation feed back up');
      expect(await other.authenticate(t2.token)).not.to.equal(null);
      await svc.revoke(t2.token);
      expect(await other.authenticate(t2.token)).to.equal(null);
    });

    it("revoking one token leaves the user's other tokens valid", async () => {
      const a = await svc.login('reader', 'reader');
      const b = await svc.login('reader', 'reader');
      await svc.revoke(a.token);
      expect(await svc.authenticate(a.token)).to.equal(null);
      expect((await svc.authenticate(b.token))?.userId).to.equal('reader');
    });

    it('a revoked token cannot be renewed', async () => {
      const t = await svc.login('reader', 'reader');
      await svc.revoke(t.token);
      expect((await appError(svc.renew('reader', t.token))).http).to.equal(401);
    });

    it('the revocation message carries no token, only its digest', async () => {
      const sub = raw.duplicate();
      await sub.connect();
      const seen: string[] = [];
      await sub.pSubscribe(`${sharedPrefix}*`, (m) => void seen.push(m));
      const t = await svc.login('reader', 'reader');
      await svc.revoke(t.token);
      await until(async () => seen.length > 0, 2000, 'the revocation message');
      await sub.quit();
      expect(seen.join(' ')).not.to.include(t.token);
    });
  });

  describe('failed logins (CONTRACT §20 "Tokens")', () => {
    // The defaults of the contract: past 10 failures in 15 minutes, 429 with Retry-After.
    const LIMITED = 429;
    const statusOf = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (e: AppError) => e.http,
      );
    let n = 0;
    const fresh = (what: string) => `${what}-${++n}-${randomBytes(3).toString('hex')}`;

    it('the defaults are 10 failures in 900 s', () => {
      expect(baseSettings.LOGIN_MAX_FAILURES).to.equal(10);
      expect(baseSettings.LOGIN_WINDOW_SECONDS).to.equal(900);
    });

    it('10 wrong passwords, then 429 with Retry-After for that user, even with the right password', async () => {
      const user = fresh('limited');
      await svc.createAccount(user, 'right-password', { [GLOBAL_CONTEXT]: ['reader'] });
      for (let i = 0; i < 10; i++) expect(await statusOf(svc.login(user, 'wrong', fresh('addr'))), `attempt ${i + 1}`).to.equal(401);
      const e = await appError(svc.login(user, 'right-password', fresh('addr')));
      expect(e.http).to.equal(LIMITED);
      expect(e.statusCode).to.equal('42900');
      expect(e.retryAfter).to.be.within(1, 900);
      // Other users are not affected.
      expect((await svc.login('reader', 'reader', fresh('addr'))).userId).to.equal('reader');
    });

    it('an unknown user gets the same sequence of answers', async () => {
      const known = fresh('known');
      await svc.createAccount(known, 'right-password', { [GLOBAL_CONTEXT]: ['reader'] });
      const unknown = fresh('unknown');
      const run = async (user: string) => {
        const out: unknown[] = [];
        for (let i = 0; i < 12; i++) {
          const e = await appError(svc.login(user, 'wrong', fresh('addr')));
          out.push([e.http, e.toBody(), e.retryAfter === undefined ? 'none' : 'set']);
        }
        return out;
      };
      const a = await run(known);
      const b = await run(unknown);
      expect(b).to.deep.equal(a);
      expect(a.filter((x) => (x as number[])[0] === LIMITED)).to.have.length(2);
    });

    it('an unknown user costs a password hash too, and so does a known one (no timing shortcut)', async () => {
      // Counted, not timed: every scrypt run is one SCRYPTREQUEST on the thread pool.
      let scrypts = 0;
      const hook = createHook({ init: (_id, type) => void (type === 'SCRYPTREQUEST' && scrypts++) });
      const count = async (f: () => Promise<unknown>) => {
        scrypts = 0;
        hook.enable();
        try {
          await f().catch(() => undefined);
        } finally {
          hook.disable();
        }
        return scrypts;
      };
      const addr = fresh('addr');
      expect(await count(() => svc.login(fresh('nobody'), 'x', addr)), 'an unknown user').to.equal(1);
      expect(await count(() => svc.login('sportseditor', 'x')), 'a wrong password').to.equal(1);
      expect(await count(() => svc.login('sportseditor', 'sportseditor')), 'the right password').to.equal(1);
    });

    it('per client address, across usernames; a success does not reset it for other users', async () => {
      const addr = fresh('addr');
      for (let i = 0; i < 9; i++) expect(await statusOf(svc.login(fresh('someone'), 'wrong', addr))).to.equal(401);
      // A right password from that address: a success, which forgives nothing of the others.
      expect((await svc.login('editor', 'editor', addr)).userId).to.equal('editor');
      expect(await statusOf(svc.login(fresh('someone'), 'wrong', addr))).to.equal(401); // the 10th failure
      expect(await statusOf(svc.login('editor', 'editor', addr))).to.equal(LIMITED);
      expect(await statusOf(svc.login(fresh('someone'), 'wrong', addr))).to.equal(LIMITED);
      // Another address is not affected.
      expect((await svc.login('editor', 'editor', fresh('addr'))).userId).to.equal('editor');
    });

    it('many attempts at once count as many: no more than the limit reach the password check', async () => {
      const user = fresh('burst');
      const statuses = await Promise.all(Array.from({ length: 40 }, () => statusOf(svc.login(user, 'wrong', fresh('addr')))));
      expect(statuses.filter((s) => s === 401)).to.have.length(10);
      expect(statuses.filter((s) => s === LIMITED)).to.have.length(30);
    });

    it('the window expires (LOGIN_WINDOW_SECONDS); the limit is LOGIN_MAX_FAILURES', async () => {
      const s = make({ LOGIN_MAX_FAILURES: 3, LOGIN_WINDOW_SECONDS: 2 }).svc;
      await s.start();
      const user = fresh('window');
      await s.createAccount(user, 'right-password', { [GLOBAL_CONTEXT]: ['reader'] });
      for (let i = 0; i < 3; i++) expect(await statusOf(s.login(user, 'wrong'))).to.equal(401);
      const e = await appError(s.login(user, 'right-password'));
      expect(e.http).to.equal(LIMITED);
      expect(e.retryAfter).to.be.within(1, 2);
      await until(async () => (await statusOf(s.login(user, 'right-password'))) === 200, 5000, 'the window to pass');
    });

    it('keeps its state in Redis: another process (or a restart) sees the same failures', async () => {
      const user = fresh('shared');
      for (let i = 0; i < 10; i++) await statusOf(svc.login(user, 'wrong'));
      const other = make().svc;
      await other.start();
      expect(await statusOf(other.login(user, 'wrong'))).to.equal(LIMITED);
      const keys: string[] = [];
      for await (const k of raw.scanIterator({ MATCH: `${sharedPrefix}login-failures:*` })) keys.push(k);
      expect(keys.length).to.be.greaterThan(0);
      // No username or password in clear in the key names.
      expect(keys.join(' ')).not.to.include(user);
    });

    it('renewals and external JWTs are not password logins and are not limited by them', async () => {
      const user = fresh('renewer');
      await svc.createAccount(user, 'right-password', { [GLOBAL_CONTEXT]: ['reader'] });
      const t = await svc.login(user, 'right-password');
      for (let i = 0; i < 10; i++) await statusOf(svc.login(user, 'wrong'));
      expect((await svc.renew(user, t.token)).userId).to.equal(user);
    });
  });

  describe('authenticate', () => {
    it('null for missing, empty, unknown and absurdly long tokens', async () => {
      expect(await svc.authenticate(undefined)).to.equal(null);
      expect(await svc.authenticate('')).to.equal(null);
      expect(await svc.authenticate('unknown-token')).to.equal(null);
      expect(await svc.authenticate('x'.repeat(10000))).to.equal(null);
    });

    it('concurrent calls for one token agree', async () => {
      const t = await svc.login('sportseditor', 'sportseditor');
      const fresh = make().svc;
      await fresh.start();
      const all = await Promise.all(Array.from({ length: 20 }, () => fresh.authenticate(t.token)));
      for (const p of all) expect(p).to.deep.equal({ userId: 'sportseditor', contexts: { sports: ['editor'] } });
    });

    it('authorizationInfo of the principal', async () => {
      const t = await svc.login('sportseditor', 'sportseditor');
      const p = await svc.authenticate(t.token);
      expect(svc.authorizationInfo(p!)).to.deep.equal({
        contexts: { sports: ['editor'] },
        roles: { editor: { '*': ['Create', 'Read', 'Update', 'Delete', 'Write', 'AssignToView'] } },
      });
    });
  });

  it('an external JWT exchanged again and again takes a place each time, like a login (TOKENS_PER_USER_MAX)', async () => {
    const secret = 'a-very-secret-shared-key-for-hs256';
    const s = make({ EXTERNAL_JWT_SECRET: secret, TOKENS_PER_USER_MAX: 3 }, freshPrefix()).svc;
    await s.start();
    const jwt = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(`sso-${process.pid}`)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(secret));
    const issued = [];
    for (let i = 0; i < 3; i++) issued.push((await s.exchangeExternal(jwt)).token);
    const e = await appError(s.exchangeExternal(jwt));
    expect([e.http, e.toBody().statusCode]).to.deep.equal([429, '42900']);
    for (const t of issued) expect((await s.authenticate(t))?.userId).to.equal(`sso-${process.pid}`);
  });

  describe('external identity provider', () => {
    const secret = 'a-very-secret-shared-key-for-hs256';
    const hs = (sub: string, key = secret, exp = '5m') =>
      new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(sub).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(key));

    it('401 when no external key is configured', async () => {
      expect((await appError(svc.exchangeExternal(await hs('editor')))).http).to.equal(401);
    });

    it('HS256: sub is the user id; roles come from the account of that name', async () => {
      const s = make({ EXTERNAL_JWT_SECRET: secret }).svc;
      await s.start();
      const r = await s.exchangeExternal(await hs('editor'));
      expect(r.userId).to.equal('editor');
      expect(await s.authenticate(r.token)).to.deep.equal({ userId: 'editor', contexts: { [GLOBAL_CONTEXT]: ['editor'] } });
      const stranger = await s.exchangeExternal(await hs('someone-from-sso'));
      expect(stranger.userId).to.equal('someone-from-sso');
      expect(await s.authenticate(stranger.token)).to.deep.equal({ userId: 'someone-from-sso', contexts: {} });
      // A renewal works like for any token.
      expect((await s.renew('someone-from-sso', stranger.token)).userId).to.equal('someone-from-sso');
    });

    it('HS256: 401 for a bad signature, an expired JWT, garbage', async () => {
      const s = make({ EXTERNAL_JWT_SECRET: secret }).svc;
      await s.start();
      expect((await appError(s.exchangeExternal(await hs('editor', 'another-secret-of-enough-length')))).http).to.equal(401);
      const expired = await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject('editor')
        .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
        .sign(new TextEncoder().encode(secret));
      expect((await appError(s.exchangeExternal(expired))).http).to.equal(401);
      expect((await appError(s.exchangeExternal('not.a.jwt'))).http).to.equal(401);
      const noSub = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(secret));
      expect((await appError(s.exchangeExternal(noSub))).http).to.equal(401);
    });

    it('RS256 with a PEM public key; a wrong key, or the PEM used as an HMAC secret, is refused', async () => {
      const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
      const other = await generateKeyPair('RS256');
      const pem = await exportSPKI(publicKey);
      const s = make({ EXTERNAL_JWT_PUBLIC_KEY: pem }).svc;
      await s.start();
      const rs = (key: typeof privateKey) => new SignJWT({}).setProtectedHeader({ alg: 'RS256' }).setSubject('reader').setExpirationTime('5m').sign(key);
      const r = await s.exchangeExternal(await rs(privateKey));
      expect(r.userId).to.equal('reader');
      expect((await s.authenticate(r.token))?.contexts).to.deep.equal({ [GLOBAL_CONTEXT]: ['reader'] });
      expect((await appError(s.exchangeExternal(await rs(other.privateKey)))).http).to.equal(401);
      // Algorithm confusion: an HS256 JWT whose "secret" is the public PEM.
      expect((await appError(s.exchangeExternal(await hs('sysadmin', pem)))).http).to.equal(401);
    });

    it('a malformed EXTERNAL_JWT_PUBLIC_KEY stops the start with a message naming it', async () => {
      const s = make({ EXTERNAL_JWT_PUBLIC_KEY: '-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----' }).svc;
      const err = await s.start().then(
        () => null,
        (e: Error) => e,
      );
      expect(err?.message).to.include('EXTERNAL_JWT_PUBLIC_KEY');
    });

    it('401 for a JWT without exp (CONTRACT §20)', async () => {
      const s = make({ EXTERNAL_JWT_SECRET: secret }).svc;
      await s.start();
      const noExp = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('editor').setIssuedAt().sign(new TextEncoder().encode(secret));
      expect((await appError(s.exchangeExternal(noExp))).http).to.equal(401);
    });

    it('EXTERNAL_JWT_ISSUER and EXTERNAL_JWT_AUDIENCE, when set, must match (CONTRACT §20)', async () => {
      const s = make({ EXTERNAL_JWT_SECRET: secret, EXTERNAL_JWT_ISSUER: 'https://idp.example', EXTERNAL_JWT_AUDIENCE: 'content-platform' }).svc;
      await s.start();
      const jwt = (iss?: string, aud?: string) => {
        const j = new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('editor').setExpirationTime('5m');
        if (iss !== undefined) j.setIssuer(iss);
        if (aud !== undefined) j.setAudience(aud);
        return j.sign(new TextEncoder().encode(secret));
      };
      expect((await s.exchangeExternal(await jwt('https://idp.example', 'content-platform'))).userId).to.equal('editor');
      for (const [iss, aud] of [
        ['https://evil.example', 'content-platform'],
        ['https://idp.example', 'another-service'],
        [undefined, 'content-platform'],
        ['https://idp.example', undefined],
      ]) {
        expect((await appError(s.exchangeExternal(await jwt(iss, aud)))).http, `iss ${iss} aud ${aud}`).to.equal(401);
      }
      // Unset, they are not checked (exp still is).
      const open = make({ EXTERNAL_JWT_SECRET: secret }).svc;
      await open.start();
      expect((await open.exchangeExternal(await jwt('https://anyone.example', 'anything'))).userId).to.equal('editor');
    });
  });

  describe('POST /security/token body (issue)', () => {
    it('accepts exactly the three shapes', () => {
      expect(tokenRequestSchema.safeParse({ username: 'a', password: 'b' }).success).to.equal(true);
      expect(tokenRequestSchema.safeParse({ username: 'a', token: 'b' }).success).to.equal(true);
      expect(tokenRequestSchema.safeParse({ token: 'b' }).success).to.equal(true);
      for (const bad of [
        {},
        { username: 'a' },
        { password: 'b' },
        { username: '', password: 'b' },
        { username: 'a', password: 1 },
        { username: 'a', password: 'b', token: 'c' },
        { token: 'x'.repeat(4097) },
        null,
        'token',
        [],
      ]) {
        expect(tokenRequestSchema.safeParse(bad).success, JSON.stringify(bad)).to.equal(false);
      }
    });

    it('400 for a bad body; dispatches login, renewal and external', async () => {
      const bad = await appError(svc.issue({ username: 'editor' }));
      expect(bad.http).to.equal(400);
      expect(bad.statusCode).to.equal('40000');
      const login = await svc.issue({ username: 'editor', password: 'editor' });
      expect(login.userId).to.equal('editor');
      const renewed = await svc.issue({ username: 'editor', token: login.token });
      expect(renewed.token).not.to.equal(login.token);
      expect((await appError(svc.issue({ token: login.token }))).http).to.equal(401); // no external key here
      expect((await appError(svc.issue({ username: 'editor', password: 'wrong' }))).statusCode).to.equal('40100');
    });
  });
});
