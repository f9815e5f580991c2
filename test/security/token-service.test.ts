import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { expect } from 'chai';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { createClient } from 'redis';
import { loadSettings, type Settings } from '../../config/settings.js';
import { AppError } from '../../src/errors.js';
import { GLOBAL_CONTEXT } from '../../src/security/permissions.js';
import { tokenRequestSchema, TokenService, type LogLevel } from '../../src/security/token-service.js';

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
          const s = net.connect(port, '127.0.0.1', () => (s.end(), res(true)));
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
      expect(err!.message).to.match(/production/).and.to.match(/default password/);
      for (const u of DEV_USERS) expect(err!.message).to.include(u);

      // Changing three of the four is not enough...
      const admin = make({}, prefix).svc;
      await admin.connect();
      for (const u of ['sysadmin', 'editor', 'reader']) await admin.setPassword(u, `${u}-changed-pw`);
      const err2 = await make({ NODE_ENV: 'production' }, prefix).svc.start().then(
        () => null,
        (e: Error) => e,
      );
      expect(err2?.message).to.include('sportseditor').and.not.include('sysadmin,');
      // ...a password reset to the default (new salt) is caught too...
      await admin.setPassword('reader', 'reader');
      const err3 = await make({ NODE_ENV: 'production' }, prefix).svc.start().then(
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
      const err = await make({ NODE_ENV: 'production' }, prefix).svc.start().then(
        () => null,
        (e: Error) => e,
      );
      expect(err?.message).to.match(/production/).and.to.match(/no accounts/);
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

    it('tokens are unguessable: 256 random bits each, no two alike, no shared structure', async () => {
      const tokens = await Promise.all(Array.from({ length: 200 }, () => svc.login('reader', 'reader').then((r) => r.token)));
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

    it('an unknown user costs a password hash too (no timing shortcut)', async () => {
      const time = async (f: () => Promise<unknown>) => {
        const t = performance.now();
        await f().catch(() => undefined);
        return performance.now() - t;
      };
      let unknown = 0;
      let wrong = 0;
      for (let i = 0; i < 3; i++) {
        unknown += await time(() => svc.login('nobody-here', 'x'));
        wrong += await time(() => svc.login('editor', 'x'));
      }
      expect(unknown).to.be.greaterThan(wrong * 0.5);
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
      await sleep(1100);
      expect((await appError(short.renew('reader', t.token))).http).to.equal(401);
      expect(await short.authenticate(t.token)).to.equal(null);
    });
  });

  describe('revocation', () => {
    it('takes effect at once in the revoking process', async () => {
      const t = await svc.login('editor', 'editor');
      expect(await svc.authenticate(t.token)).not.to.equal(null);
      await svc.revoke(t.token);
      expect(await svc.authenticate(t.token)).to.equal(null);
      expect(await raw.exists(svc.keyOfToken(t.token))).to.equal(0);
    });

    it('takes effect within 2 s in another process that cached the token', async () => {
      const other = make().svc;
      await other.start();
      const t = await svc.login('editor', 'editor');
      expect(await other.authenticate(t.token)).not.to.equal(null); // now cached there
      const revokedAt = Date.now();
      await svc.revoke(t.token);
      while ((await other.authenticate(t.token)) !== null) {
        expect(Date.now() - revokedAt).to.be.below(2100);
        await sleep(50);
      }
      expect(Date.now() - revokedAt).to.be.below(2100);
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
      const rs = (key: typeof privateKey) =>
        new SignJWT({}).setProtectedHeader({ alg: 'RS256' }).setSubject('reader').setExpirationTime('5m').sign(key);
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
