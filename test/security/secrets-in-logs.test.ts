import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { SignJWT } from 'jose';
import { describeSettings, loadSettings, type Settings } from '../../config/settings.js';
import { createLogger, type Logger } from '../../src/adapters/log.js';
import { startPlatform, type Platform } from '../../src/main.js';
import { Client, article } from '../support/platform.js';
import { startFakeSolr, type FakeSolr } from '../support/fake-solr.js';
import { ensureTestS3 } from '../support/s3.js';
import { until } from '../support/wait.js';

/**
 * No secret in any log line (issue 8, item 4): the platform runs with every role and debug
 * logging into a sink this test reads, with S3 (S3Proxy) and search-engine credentials and an
 * external JWT secret in its settings, while users log in with passwords (right and wrong, in
 * well-formed and broken bodies), use, renew and forge tokens, exchange external JWTs, and the
 * search engine and the file store fail in the ways that make the platform log errors. Then no
 * line (nor anything written to stdout or stderr meanwhile) may hold a password, a token, a JWT
 * or a configured secret, in clear or URL- or base64-encoded.
 */

const rand = () => randomBytes(9).toString('base64url');

describe('no password, token or secret in any log line (issue 8, item 4)', function () {
  this.timeout(90_000);

  const lines: string[] = [];
  const secrets = new Map<string, string>();
  const secret = (what: string, value: string) => {
    secrets.set(value, what);
    return value;
  };
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(l);
      cb();
    },
  });
  let log: Logger;
  let solr: FakeSolr;
  let settings: Settings;
  let p: Platform & { url?: string };
  let base: string;

  // Whatever reaches stdout or stderr while the platform runs (a library's console output).
  const consoleOut: string[] = [];
  const writes = { out: process.stdout.write.bind(process.stdout), err: process.stderr.write.bind(process.stderr) };
  const tap = (orig: typeof writes.out) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      consoleOut.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      return (orig as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof writes.out;

  before(async () => {
    const s3 = await ensureTestS3();
    secret('S3_SECRET_KEY', s3.secretKey);
    const solrUser = 'solr-user';
    const solrPassword = secret('SOLR_PASSWORD', `solr-pw-${rand()}`);
    solr = await startFakeSolr({ basicAuth: { username: solrUser, password: solrPassword } });
    secret('Solr basic credentials', Buffer.from(`${solrUser}:${solrPassword}`).toString('base64'));
    settings = loadSettings({
      ...process.env,
      PORT: '0',
      PARTITIONS: '8',
      LEASE_MS: '2000',
      ...s3.env,
      S3_BUCKET: `secrets-${Date.now().toString(36)}`,
      SOLR_URL: solr.url,
      SOLR_AUTHENTICATION_ENABLED: 'true',
      SOLR_USERNAME: solrUser,
      SOLR_PASSWORD: solrPassword,
      EXTERNAL_JWT_SECRET: secret('EXTERNAL_JWT_SECRET', `jwt-secret-${rand()}`),
      LOG_LEVEL: 'debug',
    });
    log = createLogger('debug', sink);
    process.stdout.write = tap(writes.out);
    process.stderr.write = tap(writes.err);
    // The start-up line of `npm start` (src/main.ts cli()).
    log.info({ settings: describeSettings(settings) }, 'starting');
    p = await startPlatform({ settings, log });
    base = `${p.url}/content-service`;
  });

  after(async () => {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    await p?.stop();
    await solr?.close();
  });

  it('through logins, token use, external JWTs, search engine and file store failures', async () => {
    const anon = new Client(base);
    const post = (body: unknown, raw?: string) =>
      anon.req('POST', '/security/token', raw === undefined ? { body, token: null } : { raw, headers: { 'Content-Type': 'application/json' }, token: null });

    // An account with a real password.
    const password = secret('password', `pw-${rand()}`);
    await p.tokens!.createAccount('secretuser', password, { __global__: ['editor'] });
    const login = await post({ username: 'secretuser', password });
    expect(login.status, login.text).to.equal(200);
    const token = secret('token', login.json.token);
    const user = new Client(base, token);

    // Wrong passwords, unknown users, passwords in bodies that are refused.
    for (const body of [
      { username: 'secretuser', password: secret('wrong password', `wrong-${rand()}`) },
      { username: 'nobody', password: secret('password of an unknown user', `nobody-${rand()}`) },
      { username: 'secretuser', password: secret('password in a refused body', `extra-${rand()}`), extra: 1 },
      { username: 'secretuser', password: [secret('password as an array', `arr-${rand()}`)] },
      { username: '', password: secret('password with an empty user', `empty-${rand()}`) },
    ]) {
      const r = await post(body);
      expect(r.status, r.text).to.be.oneOf([400, 401]);
    }
    const broken = await post(undefined, `{"username":"secretuser","password":"${secret('password in broken JSON', `broken-${rand()}`)}"`);
    expect(broken.status).to.equal(400);

    // Token use: valid, forged, renewed.
    const created = await user.create(article('secret holder'));
    expect(created.status, created.text).to.equal(201);
    expect((await user.readContent(created.json.system.id)).status).to.equal(200);
    for (const forged of [secret('forged token', `tok-${rand()}`), secret('long forged token', `tok-${rand()}${'x'.repeat(600)}`)]) {
      const r = await anon.req('GET', `/content/alias/${created.json.system.id}`, { token: forged });
      expect(r.status).to.equal(401);
      expect((await anon.req('GET', `${p.url}/search-service/content/select?q=*:*`, { token: forged })).status).to.equal(401);
      expect((await anon.req('GET', `${p.url}/file-service/file/info/content/x/y`, { token: forged })).status).to.equal(401);
    }
    const renewed = await post({ username: 'secretuser', token });
    expect(renewed.status, renewed.text).to.equal(200);
    secret('renewed token', renewed.json.token);
    expect((await post({ username: 'secretuser', token: secret('forged renewal', `ren-${rand()}`) })).status).to.equal(401);

    // External JWTs: a good one, one without exp (CONTRACT §20: refused), one signed with another key, one with alg none.
    const jwtKey = new TextEncoder().encode(settings.EXTERNAL_JWT_SECRET);
    const jwt = secret(
      'external JWT',
      await new SignJWT({ sub: 'secretuser' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('5m').sign(jwtKey),
    );
    const exchanged = await post({ token: jwt });
    expect(exchanged.status, exchanged.text).to.equal(200);
    secret('token from a JWT', exchanged.json.token);
    const noExp = secret('JWT without exp', await new SignJWT({ sub: 'secretuser' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().sign(jwtKey));
    expect((await post({ token: noExp })).status).to.equal(401);
    const otherKey = new TextEncoder().encode(secret('another JWT key', `other-key-${rand()}`));
    const badJwt = secret('JWT with a bad signature', await new SignJWT({ sub: 'sysadmin' }).setProtectedHeader({ alg: 'HS256' }).sign(otherKey));
    expect((await post({ token: badJwt })).status).to.equal(401);
    const none = secret(
      'JWT with alg none',
      `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from('{"sub":"sysadmin"}').toString('base64url')}.`,
    );
    expect((await post({ token: none })).status).to.equal(401);

    // Search through basic authentication, then an engine answer the proxy cannot read (500).
    expect((await user.req('GET', `${p.url}/search-service/content/select?q=*:*`)).status).to.equal(200);
    solr.selectRaw = '{"response": not json';
    const bad = await user.req('GET', `${p.url}/search-service/content/select?q=*:*&inlineData=true`);
    solr.selectRaw = undefined;
    expect(bad.status, bad.text).to.equal(500);
    expect(bad.json).to.deep.equal({ message: 'Internal server error', statusCode: '50000', extraInfo: {} });

    // The engine hangs up on updates: the indexer logs its failure and retries.
    solr.updates = 'hang-up';
    expect((await user.create(article('indexed while Solr fails'))).status).to.equal(201);
    await until(async () => lines.some((l) => l.includes('indexing failed')), 20_000, 'an indexing failure in the log');
    solr.updates = 500;
    const failures = lines.filter((l) => l.includes('indexing failed')).length;
    await until(async () => lines.filter((l) => l.includes('indexing failed')).length > failures, 20_000, 'a second indexing failure');
    solr.updates = 'ok';
    expect(solr.authorizations.length).to.be.greaterThan(0);

    // Files on S3 with the right key, then a platform with a wrong secret key.
    const up = await user.req('POST', `${p.url}/file-service/file/tmp/secretuser/a.txt`, {
      raw: Buffer.from('hello'),
      headers: { 'Content-Type': 'text/plain' },
    });
    expect(up.status, up.text).to.equal(201);
    const wrong = await startPlatform({ settings: { ...settings, S3_SECRET_KEY: secret('wrong S3 secret key', `wrong-s3-${rand()}`) }, roles: ['web'], log });
    try {
      const c = await new Client(`${wrong.url}/content-service`).login('secretuser', password);
      const r = await c.req('POST', `${wrong.url}/file-service/file/tmp/secretuser/b.txt`, {
        raw: Buffer.from('hello'),
        headers: { 'Content-Type': 'text/plain' },
      });
      expect(r.status, r.text).to.be.at.least(500);
      expect(r.text).not.to.include(settings.S3_SECRET_KEY!).and.not.to.include('wrong-s3-');
    } finally {
      await wrong.stop();
    }
    await until(async () => lines.some((l) => l.includes('file store could not be set up')), 5000, 'the S3 failure in the log');

    // The log saw all of it.
    for (const msg of ['starting', 'request failed', 'indexing failed', 'file store could not be set up']) {
      expect(
        lines.some((l) => l.includes(msg)),
        `a '${msg}' line`,
      ).to.equal(true);
    }
    if (process.env.SECRETS_TEST_DUMP) console.log(lines.join('\n'));
    console.log(`    ${lines.length} log lines and ${consoleOut.length} console writes checked against ${secrets.size} secrets`);

    const leaks: string[] = [];
    const all = [...lines.map((l) => ['log', l] as const), ...consoleOut.map((l) => ['console', l] as const)];
    for (const [value, what] of secrets) {
      const forms = new Set([
        value,
        encodeURIComponent(value),
        Buffer.from(value).toString('base64'),
        Buffer.from(value).toString('base64url'),
        JSON.stringify(value).slice(1, -1),
      ]);
      if (value.split('.').length === 3) forms.add(value.split('.')[2]); // a JWT's signature alone
      for (const [where, line] of all) {
        for (const f of forms) {
          if (f.length >= 8 && line.includes(f)) leaks.push(`${what} in a ${where} line: ${line.split(f).join(`<${what}>`).slice(0, 400)}`);
        }
      }
    }
    expect(leaks, leaks.join('\n')).to.deep.equal([]);
  });

  it('the start-up line masks credentials in every setting, URLs included', () => {
    const s = loadSettings({
      ...process.env,
      REDIS_URL: `redis://:${secret('Redis password', `redis-pw-${rand()}`)}@127.0.0.1:6379`,
      SOLR_URL: `http://solr-user:${secret('password in SOLR_URL', `solr-url-pw-${rand()}`)}@127.0.0.1:8983/solr`,
      PUBLIC_URL: `https://user:${secret('password in PUBLIC_URL', `public-pw-${rand()}`)}@example.com`,
      S3_ACCESS_KEY: 'access',
      S3_SECRET_KEY: secret('S3 secret key', `s3-${rand()}`),
      SOLR_PASSWORD: secret('Solr password', `solr-${rand()}`),
      EXTERNAL_JWT_SECRET: secret('JWT secret', `jwt-${rand()}-0123456789`),
    });
    const line = JSON.stringify(describeSettings(s));
    for (const [value, what] of secrets) expect(line, `${what} in the start-up line`).not.to.include(value);
    expect(line).to.include('127.0.0.1:8983/solr');
  });
});
