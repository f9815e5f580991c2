import { createHash } from 'node:crypto';
import net from 'node:net';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { rawRequest, type RawRequest, type RawResponse } from '../support/raw-http.js';
import { isVolatileKey } from '../support/volatile-keys.js';

/**
 * Hostile and malformed input at the content service's write endpoints (create, update,
 * delete, token, release) and its read paths (CONTRACT §5, §11, §12; spec Errors).
 *
 * Every bad request must answer 4xx with the error body `{message, statusCode, extraInfo}`
 * (statusCode five digits whose first three are the HTTP status), carry no stack trace, inject
 * no header, and change nothing in Redis. Requests go over a raw socket so that paths reach
 * the server exactly as written (no `..` normalization, raw braces, chunked bodies, lying
 * Content-Length), and so that the response head can be checked byte by byte.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const MAX_BODY = 65536;

/** Sends bytes as they are; resolves with what came back ('' when the server just closed). */
function rawBytes(port: number, bytes: string, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let out = '';
    const timer = setTimeout(() => {
      sock.destroy();
      resolve(`${out}(timeout)`);
    }, timeoutMs);
    sock.on('data', (d: Buffer) => (out += d.toString('latin1')));
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    sock.on('connect', () => sock.write(bytes));
  });
}

// ---- Redis snapshot -------------------------------------------------------------------------

// Keys that change with no request are left out of the snapshot (support/volatile-keys.ts); of a
// stream only its entries count (the consumer groups' positions move as the roles read).

interface Snap {
  keys: number;
  tokens: number;
  hash: string;
}

async function snapshot(redis: Redis): Promise<Snap> {
  const all: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    all.push(...batch);
  } while (cursor !== '0');
  const tokens = all.filter((k) => k.startsWith('security:token:')).length;
  const keys = all.filter((k) => !isVolatileKey(k)).sort();
  const h = createHash('sha256');
  const types = await Promise.all(keys.map((k) => redis.type(k)));
  const states = await Promise.all(
    keys.map(async (k, i) => {
      if (types[i] !== 'stream') return (await redis.dumpBuffer(k)) ?? Buffer.from('(gone)');
      const [len, last] = await Promise.all([redis.xlen(k), redis.xrevrange(k, '+', '-', 'COUNT', 1)]);
      return Buffer.from(`stream ${len} ${last[0]?.[0] ?? '-'}`);
    }),
  );
  keys.forEach((k, i) => {
    h.update(k).update('\0').update(states[i]).update('\0');
  });
  return { keys: keys.length, tokens, hash: h.digest('hex') };
}

/** A snapshot taken once the content state is quiet (two equal snapshots 50 ms apart). */
async function stableSnapshot(redis: Redis): Promise<Snap> {
  let prev = await snapshot(redis);
  const end = Date.now() + 20_000;
  for (;;) {
    await new Promise((r) => setTimeout(r, 50));
    const cur = await snapshot(redis);
    if (cur.hash === prev.hash && cur.tokens === prev.tokens) return cur;
    if (Date.now() > end) throw new Error('the content state in Redis does not settle');
    prev = cur;
  }
}

// ---- assertions -----------------------------------------------------------------------------

const HEADER_LINE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+:[ \t]*[\x20-\x7e\t]*$/;

function expectCleanError(res: RawResponse, what: string, status?: number | number[]): void {
  const ctx = `${what}: ${res.status} ${res.body.slice(0, 300)}`;
  expect(res.status, ctx).to.be.within(400, 499);
  if (status !== undefined) expect([status].flat(), ctx).to.include(res.status);
  // The error body of CONTRACT §11.
  expect(res.headers['content-type'], ctx).to.equal('application/json');
  expect(res.json, ctx).to.be.an('object');
  expect(res.json.message, ctx).to.be.a('string').and.not.equal('');
  expect(res.json.statusCode, ctx)
    .to.be.a('string')
    .and.match(/^\d{5}$/);
  expect(res.json.statusCode.slice(0, 3), ctx).to.equal(String(res.status));
  expect(res.json.extraInfo, ctx).to.be.an('object').and.not.an('array');
  // No stack trace, no source paths.
  expect(res.body, ctx).not.to.match(/\n\s*at\s/);
  expect(res.body, ctx).not.to.match(/\bat (?:async )?[\w$.<>]+ \(/);
  expect(res.body, ctx).not.to.match(/file:\/\/|node_modules|\/work\/|\/src\/|\.[cm]?[jt]s:\d+/);
  expectCleanHead(res, ctx);
}

/** Every header line well formed, nothing injected. */
function expectCleanHead(res: RawResponse, ctx: string): void {
  for (const line of res.headerLines) expect(line, `${ctx}: header line`).to.match(HEADER_LINE);
  const names = res.headerLines.map((l) => l.slice(0, l.indexOf(':')).toLowerCase());
  expect(
    names.filter((n) => /injected|set-cookie/.test(n)),
    ctx,
  ).to.deep.equal([]);
  expect(res.headers['svc-api-version'], ctx).to.match(/^\d+(\.\d+)*$/);
}

// ---- the tests ------------------------------------------------------------------------------

describe('gateway: bad input is refused cleanly and changes nothing (CONTRACT §11, §12)', function () {
  this.timeout(60000);

  let p: P;
  let port: number;
  let redis: Redis;
  let editorToken: string;
  let sysadminToken: string;
  /** The content the bad updates and deletes aim at. */
  let key: string;
  let etag: string;
  /** A non-main alias held by that content (release target). */
  const held = { ns: 'badinput', alias: 'held' };

  let own: Awaited<ReturnType<typeof startRedisServer>>;

  before(async () => {
    // A Redis of its own: every bad request snapshots the whole store three times, and the shared
    // one holds what every earlier suite wrote (a pass took 266 s on a loaded machine with it).
    own = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: own.url, MAX_BODY_BYTES: String(MAX_BODY) });
    port = Number(new URL(p.url).port);
    redis = new Redis(own.url, { lazyConnect: false, maxRetriesPerRequest: 1 });
    const editor = await new Client(p.base).login('editor');
    const sysadmin = await new Client(p.base).login('sysadmin');
    editorToken = editor.token!;
    sysadminToken = sysadmin.token!;
    const r = await editor.create({ ...article('Target'), operations: [{ _type: 'svcSetAlias', namespace: held.ns, alias: held.alias }] });
    expect(r.status, r.text).to.equal(201);
    key = r.json.system.id.split('/')[1];
    etag = r.headers.get('etag')!;
  });

  after(async () => {
    redis?.disconnect();
    await p?.stop();
    await own?.stop();
  });

  /** Sends one bad request and checks the answer and that Redis did not change. */
  async function refused(what: string, req: RawRequest, status?: number | number[]): Promise<RawResponse> {
    const before = await stableSnapshot(redis);
    const res = await rawRequest(port, req);
    expectCleanError(res, what, status);
    const after = await snapshot(redis);
    expect(after, `${what}: Redis changed`).to.deep.equal(before);
    return res;
  }

  const cs = (path: string) => `/content-service${path}`;
  const target = () => cs(`/content/alias/contentid/${key}`);
  const pad = (json: string, size: number) => json + ' '.repeat(size - json.length);
  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
  const deepObj = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;

  const validEnvelope = JSON.stringify(article('Valid but refused'));

  /** Bodies that are not JSON, or JSON that is not an object. */
  const NOT_AN_OBJECT: [string, string | Buffer][] = [
    ['truncated JSON', '{"system": {"contentType": "article"'],
    ['JSON with trailing garbage', '{"system":{"contentType":"article"}} x'],
    ['single quotes', "{'system': {}}"],
    ['unquoted keys', '{system: {contentType: "article"}}'],
    ['NUL byte', '{"system":\u0000{}}'],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
    ['empty body', ''],
    ['whitespace only', '   \r\n  '],
    ['JSON array', '[]'],
    ['JSON array of an envelope', `[${validEnvelope}]`],
    ['JSON string', '"hello"'],
    ['JSON number', '42'],
    ['JSON null', 'null'],
    ['JSON true', 'true'],
  ];

  /** Envelopes that are JSON objects but break the schema. */
  const BAD_ENVELOPES: [string, unknown][] = [
    ['aspects as an array', { system: { contentType: 'article' }, aspects: [{ _type: 'body' }] }],
    ['aspects as a string', { system: { contentType: 'article' }, aspects: 'body' }],
    ['an aspect as a string', { system: { contentType: 'article' }, aspects: { body: 'text' } }],
    ['an aspect as an array', { system: { contentType: 'article' }, aspects: { body: [1, 2] } }],
    ['aspect _type as a number', { system: { contentType: 'article' }, aspects: { body: { _type: 7 } } }],
    ['aspect name with a slash', { system: { contentType: 'article' }, aspects: { 'a/b': { _type: 'x' } } }],
    ['aspect name with braces', { system: { contentType: 'article' }, aspects: { '{0}': { _type: 'x' } } }],
    ['operations as an object', { system: { contentType: 'article' }, operations: { _type: 'svcSetAlias', namespace: 'n', alias: 'a' } }],
    ['operations as a string', { system: { contentType: 'article' }, operations: 'svcSetAlias' }],
    ['an operation as null', { system: { contentType: 'article' }, operations: [null] }],
    ['contentType as a number', { system: { contentType: 42 }, aspects: {} }],
    ['contentType with a slash', { system: { contentType: 'a/b' }, aspects: {} }],
    ['system as a string', { system: 'article', aspects: {} }],
    ['views not an array', { system: { contentType: 'article' }, operations: [{ _type: 'svcAssignToViews', views: 'svcPublic' }] }],
    ['views holding a number', { system: { contentType: 'article' }, operations: [{ _type: 'svcAssignToViews', views: [1] }] }],
    ['views with a slash', { system: { contentType: 'article' }, operations: [{ _type: 'svcAssignToViews', views: ['a/b'] }] }],
    ['unknown operation _type', { system: { contentType: 'article' }, operations: [{ _type: 'svcDropEverything' }] }],
    ['operation without _type', { system: { contentType: 'article' }, operations: [{ namespace: 'n', alias: 'a' }] }],
    ['svcSetAlias without alias', { system: { contentType: 'article' }, operations: [{ _type: 'svcSetAlias', namespace: 'n' }] }],
    ['svcSetAlias alias as a number', { system: { contentType: 'article' }, operations: [{ _type: 'svcSetAlias', namespace: 'n', alias: 5 }] }],
    [
      'symbolic targetView without @',
      { system: { contentType: 'article' }, operations: [{ _type: 'svcAssignToSymbolicViews', views: ['v'], targetView: 'svcLatest' }] },
    ],
    ['metadata aspects as an array', { system: { contentType: 'article' }, operations: [{ _type: 'svcContentMetadata', aspects: [] }] }],
    ['body nested 1000 levels (array)', { system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: JSON.parse(deep(1000)) } } }],
    ['body nested 1000 levels (object)', { system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: JSON.parse(deepObj(1000)) } } }],
    [
      'operation nested 1000 levels',
      { system: { contentType: 'article' }, operations: [{ _type: 'svcContentMetadata', aspects: { m: { _type: 'm', x: JSON.parse(deep(1000)) } } }] },
    ],
  ];

  /** Names that must never become a namespace or alias. */
  const long = 'a'.repeat(300);
  const BAD_NAMES: [string, string][] = [
    ['a slash', 'a/b'],
    ['..', '..'],
    ['.', '.'],
    ['.. inside', 'a..b'],
    ['NUL', 'a\u0000b'],
    ['CRLF header injection', 'x\r\nX-Injected: 1'],
    ['LF', 'x\ny'],
    ['DEL', 'x\u007fy'],
    ['empty', ''],
    ['braces', '{0}'],
    ['300 characters', long],
    ['a space', 'a b'],
    ['percent', '%2F'],
    ['backslash', 'a\\b'],
    ['non-ASCII', 'ä'],
  ];

  const svcSetAlias = (namespace: string, alias: string) => ({ _type: 'svcSetAlias', namespace, alias });

  // --- create ---

  describe('create: POST /content-service/content', () => {
    const post = (body: string | Buffer, extra: Partial<RawRequest> = {}): RawRequest => ({
      method: 'POST',
      path: cs('/content'),
      headers: { 'X-Auth-Token': editorToken, 'Content-Type': 'application/json' },
      body,
      ...extra,
    });

    it('refuses bodies that are not a JSON object with 400', async () => {
      for (const [what, body] of NOT_AN_OBJECT) await refused(`create, ${what}`, post(body), 400);
    });

    it('refuses envelopes that break the schema with 400 (40000)', async () => {
      for (const [what, env] of BAD_ENVELOPES) {
        const res = await refused(`create, ${what}`, post(JSON.stringify(env)), 400);
        expect(res.json.statusCode).to.equal('40000');
      }
    });

    it('refuses bad namespaces and aliases in svcSetAlias with 400', async () => {
      for (const [what, name] of BAD_NAMES) {
        await refused(`create, svcSetAlias alias ${what}`, post(JSON.stringify({ ...article('x'), operations: [svcSetAlias('ns', name)] })), 400);
        await refused(`create, svcSetAlias namespace ${what}`, post(JSON.stringify({ ...article('x'), operations: [svcSetAlias(name, 'a')] })), 400);
      }
      await refused(
        'create, svcSetAlias into the main namespace',
        post(JSON.stringify({ ...article('x'), operations: [svcSetAlias('contentid', 'mine')] })),
        400,
      );
    });

    it('refuses a body over MAX_BODY_BYTES with 413, with Content-Length and chunked', async () => {
      const big = pad(validEnvelope, MAX_BODY + 1);
      await refused('create, oversized, Content-Length', post(big), 413);
      await refused('create, oversized, chunked', post(big, { chunked: 8192 }), 413);
      await refused('create, oversized, chunked in one chunk', post(big, { chunked: big.length }), 413);
      await refused('create, 2 MB chunked', post(pad(validEnvelope, 2 * 1024 * 1024), { chunked: 65536 }), 413);
      await refused('create, Content-Length of 999999999 announced', post('{}', { contentLength: 999_999_999 }), 413);
    });

    it('accepts the same envelope within the limit, chunked or not (the harness reaches the server)', async () => {
      const ok = await rawRequest(port, post(pad(validEnvelope, MAX_BODY - 10)));
      expect(ok.status, ok.body).to.equal(201);
      const chunked = await rawRequest(port, post(pad(validEnvelope, MAX_BODY - 10), { chunked: 1000 }));
      expect(chunked.status, chunked.body).to.equal(201);
      expectCleanHead(chunked, 'chunked create');
    });
  });

  // --- update ---

  describe('update: PUT /content-service/content/alias/<ns>/<alias>', () => {
    const put = (body: string | Buffer, extra: Partial<RawRequest> = {}, query = ''): RawRequest => ({
      method: 'PUT',
      path: `${target()}${query}`,
      headers: { 'X-Auth-Token': editorToken, 'Content-Type': 'application/json', 'If-Match': etag },
      body,
      ...extra,
    });

    it('refuses bodies that are not a JSON object with 400', async () => {
      for (const [what, body] of NOT_AN_OBJECT) await refused(`update, ${what}`, put(body), 400);
    });

    it('refuses envelopes that break the schema with 400 (40000)', async () => {
      for (const [what, env] of BAD_ENVELOPES) {
        const res = await refused(`update, ${what}`, put(JSON.stringify(env)), 400);
        expect(res.json.statusCode).to.equal('40000');
      }
    });

    it('refuses bad names in svcSetAlias with 400', async () => {
      for (const [what, name] of BAD_NAMES) {
        await refused(`update, svcSetAlias alias ${what}`, put(JSON.stringify({ aspects: {}, operations: [svcSetAlias('ns', name)] })), 400);
        await refused(`update, svcSetAlias namespace ${what}`, put(JSON.stringify({ aspects: {}, operations: [svcSetAlias(name, 'a')] })), 400);
      }
    });

    it('refuses an unknown updateMode with 400', async () => {
      for (const mode of ['bogus', 'REPLACE', 'merge%00', 'update%0d%0aX-Injected:%201', '%zz']) {
        await refused(`update, updateMode=${mode}`, put(validEnvelope, {}, `?updateMode=${mode}`), 400);
      }
    });

    it('refuses an update without If-Match (400) and with a variant (400)', async () => {
      await refused('update without If-Match', put(validEnvelope, { headers: { 'X-Auth-Token': editorToken, 'Content-Type': 'application/json' } }), 400);
      await refused('update with a variant', put(validEnvelope, {}, '?variant=svcIndexing'), 400);
    });

    it('refuses a body over MAX_BODY_BYTES with 413, with Content-Length and chunked', async () => {
      const big = pad(validEnvelope, MAX_BODY + 1);
      await refused('update, oversized, Content-Length', put(big), 413);
      await refused('update, oversized, chunked', put(big, { chunked: 4096 }), 413);
      await refused('update, Content-Length of 999999999 announced', put('{}', { contentLength: 999_999_999 }), 413);
    });

    it('the snapshot sees a real change (control: a valid update changes Redis)', async () => {
      const before = await stableSnapshot(redis);
      const ok = await rawRequest(port, put(validEnvelope));
      expect(ok.status, ok.body).to.equal(200);
      etag = ok.headers.etag;
      expect(await snapshot(redis)).not.to.deep.equal(before);
    });
  });

  // --- delete and release ---

  describe('delete: DELETE /content-service/content/alias/<ns>/<alias>', () => {
    const del = (body: string | Buffer | undefined, extra: Partial<RawRequest> = {}): RawRequest => ({
      method: 'DELETE',
      path: target(),
      headers: { 'X-Auth-Token': editorToken, 'Content-Type': 'application/json', 'If-Match': etag },
      body,
      ...extra,
    });

    it('refuses a request body (a delete takes none) with 400, whatever it holds', async () => {
      for (const [what, body] of NOT_AN_OBJECT.filter(([, b]) => b.length > 0)) await refused(`delete, ${what}`, del(body), 400);
      for (const [what, env] of BAD_ENVELOPES.slice(0, 5)) await refused(`delete, ${what}`, del(JSON.stringify(env)), 400);
      await refused('delete, a valid envelope as body', del(validEnvelope), 400);
      await refused('delete, body nested 1000 levels', del(deep(1000)), 400);
    });

    it('refuses a body over MAX_BODY_BYTES with 413, with Content-Length and chunked', async () => {
      const big = pad(validEnvelope, MAX_BODY + 1);
      await refused('delete, oversized, Content-Length', del(big), 413);
      await refused('delete, oversized, chunked', del(big, { chunked: 4096 }), 413);
      await refused('delete, Content-Length of 999999999 announced', del('{}', { contentLength: 999_999_999 }), 413);
    });

    it('refuses a delete without If-Match (400)', async () => {
      await refused('delete without If-Match', del(undefined, { headers: { 'X-Auth-Token': editorToken } }), 400);
    });
  });

  describe('release: DELETE /content-service/content/alias/<ns>/<alias>/release', () => {
    const rel = (body: string | Buffer | undefined, extra: Partial<RawRequest> = {}): RawRequest => ({
      method: 'DELETE',
      path: cs(`/content/alias/${held.ns}/${held.alias}/release`),
      headers: { 'X-Auth-Token': sysadminToken, 'Content-Type': 'application/json' },
      body,
      ...extra,
    });

    it('refuses a request body with 400, whatever it holds', async () => {
      for (const [what, body] of NOT_AN_OBJECT.filter(([, b]) => b.length > 0)) await refused(`release, ${what}`, rel(body), 400);
      await refused('release, an object body', rel('{"namespace":"badinput","alias":"held"}'), 400);
      await refused('release, body nested 1000 levels', rel(deepObj(1000)), 400);
    });

    it('refuses a body over MAX_BODY_BYTES with 413, with Content-Length and chunked', async () => {
      const big = pad('{}', MAX_BODY + 1);
      await refused('release, oversized, Content-Length', rel(big), 413);
      await refused('release, oversized, chunked', rel(big, { chunked: 4096 }), 413);
      await refused('release, Content-Length of 999999999 announced', rel('{}', { contentLength: 999_999_999 }), 413);
    });

    it('the alias is still held afterwards', async () => {
      const r = await rawRequest(port, { method: 'GET', path: cs(`/content/alias/${held.ns}/${held.alias}`), headers: { 'X-Auth-Token': editorToken } });
      expect(r.status, r.body).to.equal(303);
      expect(r.headers.location).to.match(new RegExp(`/content/alias/${held.ns}/${held.alias}/\\d+$`));
    });
  });

  // --- the response format of a write ---

  describe('an unknown response format on a write (format=...)', () => {
    const write = (method: string, path: string, body: string | undefined, headers: Record<string, string> = {}): RawRequest => ({
      method,
      path,
      headers: { 'X-Auth-Token': editorToken, 'Content-Type': 'application/json', ...headers },
      body,
    });

    it('is refused with 400 before anything is written: create, update, workspace create, update and promote', async () => {
      const valid = JSON.stringify(article('format'));
      // A draft to update and promote, written before the snapshot of each refused request.
      const draft = await rawRequest(port, write('PUT', cs(`/content/workspace/fmt/alias/contentid/${key}`), valid));
      expect(draft.status, draft.body).to.equal(200);
      for (const format of ['xml', '__proto__', 'json%0d%0aX-Injected:%201', 'JSON']) {
        await refused(`create, format=${format}`, write('POST', cs(`/content?format=${format}`), valid), 400);
        await refused(`update, format=${format}`, write('PUT', `${target()}?format=${format}`, valid, { 'If-Match': etag }), 400);
        await refused(`workspace create, format=${format}`, write('POST', cs(`/content/workspace/fmt?format=${format}`), valid), 400);
        await refused(`workspace update, format=${format}`, write('PUT', cs(`/content/workspace/fmt/alias/contentid/${key}?format=${format}`), valid), 400);
        await refused(`promote, format=${format}`, write('POST', cs(`/content/workspace/fmt/alias/contentid/${key}/promote?format=${format}`), undefined), 400);
      }
      // Control: the same requests with a known format are written.
      const ok = await rawRequest(port, write('POST', cs('/content/workspace/fmt?format=json%2Bpretty'), valid));
      expect(ok.status, ok.body).to.equal(201);
      expect(ok.body).to.contain('\n  "system"');
      await rawRequest(port, write('DELETE', cs('/content/workspace/fmt'), undefined));
    });
  });
  // --- token ---

  describe('token: POST /content-service/security/token', () => {
    const tok = (body: string | Buffer, extra: Partial<RawRequest> = {}): RawRequest => ({
      method: 'POST',
      path: cs('/security/token'),
      headers: { 'Content-Type': 'application/json' },
      body,
      ...extra,
    });
    const login = JSON.stringify({ username: 'editor', password: 'editor' });

    it('refuses bodies that are not a JSON object with 400, and mints no token', async () => {
      for (const [what, body] of NOT_AN_OBJECT) await refused(`token, ${what}`, tok(body), 400);
    });

    it('refuses bodies that break the schema with 400', async () => {
      const bad: [string, unknown][] = [
        ['username as a number', { username: 1, password: 'editor' }],
        ['password as an array', { username: 'editor', password: ['editor'] }],
        ['password as an object', { username: 'editor', password: { $ne: null } }],
        ['an unknown field', { username: 'editor', password: 'editor', admin: true }],
        ['empty username', { username: '', password: 'editor' }],
        ['nothing', {}],
        ['password nested 1000 levels', { username: 'editor', password: JSON.parse(deep(1000)) }],
        ['5000-character username', { username: 'e'.repeat(5000), password: 'editor' }],
      ];
      for (const [what, body] of bad) await refused(`token, ${what}`, tok(JSON.stringify(body)), 400);
      await refused('token, whole body nested 1000 levels', tok(deepObj(1000)), 400);
    });

    it('refuses a body over MAX_BODY_BYTES with 413, with Content-Length and chunked', async () => {
      const big = pad(login, MAX_BODY + 1);
      await refused('token, oversized, Content-Length', tok(big), 413);
      await refused('token, oversized, chunked', tok(big, { chunked: 4096 }), 413);
      await refused('token, Content-Length of 999999999 announced', tok('{}', { contentLength: 999_999_999 }), 413);
    });

    it('wrong credentials: 401, no token minted', async () => {
      await refused('token, wrong password', tok(JSON.stringify({ username: 'editor', password: 'nope' })), 401);
      await refused('token, user with CRLF', tok(JSON.stringify({ username: 'editor\r\nX-Injected: 1', password: 'editor' })), [400, 401]);
    });
  });

  // --- paths ---

  describe('namespaces and aliases in the path', () => {
    /** Path segments that must be refused (raw, as they go on the wire). */
    const BAD_SEGMENTS: [string, string][] = [
      ['percent-encoded slash', 'a%2Fb'],
      ['lower-case %2f', 'a%2fb'],
      ['..', '..'],
      ['encoded ..', '%2E%2E'],
      ['.', '.'],
      ['encoded .', '%2e'],
      ['%00', 'a%00b'],
      ['%0d%0a header injection', 'x%0d%0aX-Injected:%201'],
      ['%0a', 'x%0ay'],
      ['%7f', 'x%7f'],
      ['raw braces', '{0}'],
      ['encoded braces', '%7B0%7D'],
      ['300 characters', long],
      ['300 characters encoded', '%61'.repeat(300)],
      ['bad percent-encoding %zz', '%zz'],
      ['lone %', 'a%'],
      ['truncated %4', 'a%4'],
      ['broken UTF-8', '%E0%A4%A'],
      ['overlong UTF-8 slash', '%C0%AF'],
      ['encoded space', 'a%20b'],
      ['backslash', 'a%5Cb'],
    ];

    const requests = (ns: string, alias: string): [string, RawRequest][] => [
      ['read', { method: 'GET', path: cs(`/content/alias/${ns}/${alias}`), headers: { 'X-Auth-Token': editorToken } }],
      [
        'update',
        {
          method: 'PUT',
          path: cs(`/content/alias/${ns}/${alias}?unsafeUpdate=true`),
          headers: { 'X-Auth-Token': editorToken, 'Content-Type': 'application/json' },
          body: validEnvelope,
        },
      ],
      ['delete', { method: 'DELETE', path: cs(`/content/alias/${ns}/${alias}`), headers: { 'X-Auth-Token': editorToken, 'If-Match': etag } }],
      ['release', { method: 'DELETE', path: cs(`/content/alias/${ns}/${alias}/release`), headers: { 'X-Auth-Token': sysadminToken } }],
      ['metadata', { method: 'GET', path: cs(`/content/alias/${ns}/${alias}/metadata`), headers: { 'X-Auth-Token': editorToken } }],
      ['versioned read', { method: 'GET', path: cs(`/content/alias/${ns}/${alias}/1`), headers: { 'X-Auth-Token': editorToken } }],
    ];

    it('refuses bad namespaces with 400 on read, update, delete and release', async () => {
      for (const [what, seg] of BAD_SEGMENTS) {
        for (const [op, req] of requests(seg, 'x')) await refused(`${op}, namespace ${what}`, req, 400);
      }
    });

    it('refuses bad aliases with 400 on read, update, delete and release', async () => {
      for (const [what, seg] of BAD_SEGMENTS) {
        for (const [op, req] of requests('contentid', seg)) await refused(`${op}, alias ${what}`, req, 400);
      }
    });

    it('refuses empty path parts (/content/alias//x) with 400', async () => {
      for (const [op, req] of requests('', 'x')) await refused(`${op}, empty namespace`, req, 400);
      for (const [op, req] of requests('contentid', '')) await refused(`${op}, empty alias`, req, [400, 404]);
    });

    it('never lets a path reach another content (.. does not walk up)', async () => {
      await refused('read through ..', { method: 'GET', path: cs(`/content/alias/x/../contentid/${key}`), headers: { 'X-Auth-Token': editorToken } }, 404);
      await refused(
        'update through ..',
        {
          method: 'PUT',
          path: cs(`/content/alias/contentid/..%2F${key}?unsafeUpdate=true`),
          headers: { 'X-Auth-Token': editorToken, 'Content-Type': 'application/json' },
          body: validEnvelope,
        },
        400,
      );
      await refused(
        'delete through encoded slash',
        { method: 'DELETE', path: cs(`/content/alias/contentid%2F${key}/x`), headers: { 'X-Auth-Token': editorToken, 'If-Match': etag } },
        400,
      );
    });

    it('refuses bad view names with 400', async () => {
      for (const [what, seg] of BAD_SEGMENTS) {
        await refused(
          `view read, view ${what}`,
          { method: 'GET', path: cs(`/content/view/${seg}/alias/contentid/${key}`), headers: { 'X-Auth-Token': editorToken } },
          400,
        );
      }
    });
  });

  describe('revision segments and atLeastRevision', () => {
    it('answers 4xx for non-numeric, zero, negative and huge revisions', async () => {
      const revs = ['abc', '1.5', '-1', '0', '01', '1e3', '0x1', '+1', '%31%00', '99999999999999999999999', '999999999999999', '9007199254740993', '1%20'];
      for (const rev of revs) {
        for (const suffix of ['', '/metadata', '/history']) {
          await refused(
            `revision ${rev}${suffix}`,
            { method: 'GET', path: `${target()}/${rev}${suffix}`, headers: { 'X-Auth-Token': editorToken } },
            [400, 404],
          );
        }
        await refused(
          `view revision ${rev}`,
          { method: 'GET', path: cs(`/content/view/svcLatest/alias/contentid/${key}/${rev}`), headers: { 'X-Auth-Token': editorToken } },
          [400, 404],
        );
      }
    });

    it('refuses atLeastRevision that is not an integer with 400', async () => {
      for (const v of ['abc', '', '-1', '1.5', '1e3', '0x10', '99999999999999999999', '%00', '1%0d%0aX-Injected:%201']) {
        await refused(`atLeastRevision=${v}`, { method: 'GET', path: `${target()}?atLeastRevision=${v}`, headers: { 'X-Auth-Token': editorToken } }, 400);
        await refused(
          `history atLeastRevision=${v}`,
          { method: 'GET', path: `${target()}/history?atLeastRevision=${v}`, headers: { 'X-Auth-Token': editorToken } },
          400,
        );
      }
    });

    it('injects nothing into Location through kept query parameters', async () => {
      await refused('variant with CRLF', { method: 'GET', path: `${target()}?variant=x%0d%0aX-Injected:%201`, headers: { 'X-Auth-Token': editorToken } }, 404);
      await refused('format with CRLF', { method: 'GET', path: `${target()}?format=json%0d%0aX-Injected:%201`, headers: { 'X-Auth-Token': editorToken } }, 400);
    });
  });

  describe('requests the HTTP parser refuses', () => {
    it('closes the connection on a Content-Length it cannot hold or parse, or a broken request line; nothing stored', async () => {
      const head = (cl: string) =>
        `POST ${cs('/content')} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Auth-Token: ${editorToken}\r\nContent-Type: application/json\r\nContent-Length: ${cl}\r\n\r\n${validEnvelope}`;
      const cases = [
        head('1000000000000'),
        head('-1'),
        head('abc'),
        head('10, 10'),
        `GET ${target()}/ 1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Auth-Token: ${editorToken}\r\n\r\n`,
        `GET ${target()} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Auth-Token: ${editorToken}\r\nX-Bad\r\n\r\n`,
        `DELETE ${target()} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Auth-Token: ${editorToken}\r\nIf-Match: ${etag}\r\nX-A: a\rb\r\n\r\n`,
      ];
      for (const bytes of cases) {
        const before = await stableSnapshot(redis);
        const out = await rawBytes(port, bytes, 1500);
        const what = JSON.stringify(bytes.slice(0, 120));
        // Closed without an answer, no answer at all (uWS waits for a request line it can
        // read), or a clean 4xx: never a success, never a 5xx.
        if (out !== '' && out !== '(timeout)') expect(out, what).to.match(/^HTTP\/1\.1 4\d\d /);
        expect(await snapshot(redis), `${what}: Redis changed`).to.deep.equal(before);
      }
    });

    it('does not echo an unsafe X-Request-Id', async () => {
      for (const rid of ['a b', '<script>', 'x'.repeat(200), '{0}']) {
        const res = await rawRequest(port, { method: 'GET', path: '/nope', headers: { 'X-Request-Id': rid } });
        expect(res.status).to.equal(404);
        expect(res.headers['x-request-id'])
          .to.match(/^[A-Za-z0-9._:-]{1,128}$/)
          .and.not.equal(rid);
        expectCleanHead(res, `X-Request-Id ${rid}`);
      }
    });
  });

  describe('routes and methods', () => {
    it('answers 405 with Allow for a wrong method', async () => {
      const cases: [string, string, string[]][] = [
        ['GET', cs('/content'), ['POST']],
        ['PATCH', cs('/content'), ['POST']],
        ['DELETE', cs('/content'), ['POST']],
        ['GET', cs('/security/token'), ['POST', 'DELETE']],
        ['POST', target(), ['GET', 'PUT', 'DELETE']],
        ['PATCH', target(), ['GET', 'PUT', 'DELETE']],
        ['PUT', `${target()}/1`, ['GET']],
        ['GET', cs(`/content/alias/${held.ns}/${held.alias}/release`), ['DELETE']],
        ['POST', '/health', ['GET']],
      ];
      for (const [method, path, allow] of cases) {
        const res = await refused(`${method} ${path}`, { method, path, headers: { 'X-Auth-Token': editorToken } }, 405);
        expect(res.json.statusCode).to.equal('40500');
        expect((res.headers.allow ?? '').split(/,\s*/).sort(), `${method} ${path}`).to.deep.equal([...allow].sort());
      }
    });

    it('answers 404 (40400) for an unknown route', async () => {
      for (const path of [
        '/nope',
        cs('/nope'),
        cs('/content/alias'),
        cs('/content/alias/contentid'),
        cs(`/content/alias/contentid/${key}/1/2`),
        cs('/content/'),
        '/content-service',
        '/%zz-service/x',
        '/../etc/passwd',
      ]) {
        const res = await refused(`GET ${path}`, { method: 'GET', path, headers: { 'X-Auth-Token': editorToken } }, [400, 404]);
        if (res.status === 404) expect(res.json.statusCode).to.equal('40400');
      }
    });

    it('still answers /health after all of it', async () => {
      const res = await rawRequest(port, { method: 'GET', path: '/health' });
      expect(res.status).to.equal(200);
      expect(res.json.status).to.equal('ok');
      // And content is still readable.
      const read = await rawRequest(port, { method: 'GET', path: target(), headers: { 'X-Auth-Token': editorToken } });
      expect(read.status).to.equal(303);
    });
  });
});
