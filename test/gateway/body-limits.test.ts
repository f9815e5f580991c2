import { expect } from 'chai';
import { Redis } from 'ioredis';
import { bulkImport } from '../../src/client/bulk.js';
import { MAX_CONTAINERS_PER_BODY, MAX_KEYS_PER_BODY } from '../../src/gateway/body-limits.js';
import { Client, article, startTestPlatform } from '../support/platform.js';

/**
 * Bodies the platform cannot store as sent (CONTRACT §20 "Limits", issue 14 finding 13): they
 * answer 400 or 413 with the error body at the gateway, before anything is queued; never 500
 * after the write was queued, nothing stored, no dead letter. Commands go through the streams
 * here (LOCAL_DISPATCH=false), as in a fleet, where such a write used to fail in the actor
 * until it was dead-lettered.
 *
 * What broke storage (found with msgpackr 2, the codec of src/adapters/codec.ts):
 * - more than 65,535 keys in one object: msgpackr wrote every object as a map16 (now it takes
 *   any size; a body is bounded to 65,000 keys per object at the gateway), also when an update
 *   in merge mode, or aspects added by updates, took a stored content past it;
 * - a key `__proto__` (msgpackr reads it back as `__proto_`);
 * - a lone UTF-16 surrogate in a string or key (UTF-8 cannot hold it: it comes back as U+FFFD).
 * Nesting is refused past 64 levels (src/gateway/schemas.ts; msgpackr itself stops at a few
 * thousand); arrays and strings hold anything MAX_BODY_BYTES lets through. A body holds at most
 * MAX_CONTAINERS_PER_BODY (100,000) objects and arrays: 2,000,000 empty arrays (6 MB) took 6-7.6 s
 * of the gateway's single thread before their 201 (found by a hunt).
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const PARTITIONS = 8; // startTestPlatform's

describe('gateway: bodies the platform cannot store answer 400 or 413 before anything is queued (CONTRACT §20 "Limits")', function () {
  this.timeout(120000);
  let p: P;
  let redis: Redis;
  let editor: Client;
  let id: string;
  let etag: string;

  before(async () => {
    p = await startTestPlatform({ LOCAL_DISPATCH: 'false', MAX_BODY_BYTES: String(32 * 1024 * 1024) });
    redis = new Redis(process.env.REDIS_URL!);
    editor = await new Client(p.base).login('editor');
    const r = await editor.create(article('limits target'));
    expect(r.status, r.text).to.equal(201);
    id = r.json.system.id;
    etag = r.headers.get('etag')!;
  });

  after(async () => {
    redis?.disconnect();
    await p?.stop();
  });

  const keys = (n: number, first: Record<string, unknown> = {}) => {
    const o: Record<string, unknown> = { ...first };
    for (let i = Object.keys(o).length; i < n; i++) o[`k${i}`] = i;
    return o;
  };
  const nested = (n: number): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < n; i++) v = { a: v };
    return v;
  };
  const deadLetters = async () => {
    let sum = 0;
    for (let i = 0; i < PARTITIONS; i++) sum += await redis.xlen(`dead:{${i}}`);
    return sum;
  };
  const contents = async () => {
    let count = 0;
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', 'ct:*', 'COUNT', 1000);
      cursor = next;
      count += batch.length;
    } while (cursor !== '0');
    return count;
  };

  /** A create with an alias of its own: read back by that alias, it must not exist. */
  const withAlias = (alias: string, env: Record<string, unknown>) => ({
    ...env,
    operations: [...((env.operations as unknown[]) ?? []), { _type: 'svcSetAlias', namespace: 'limits', alias }],
  });

  const CASES: [string, number[], (alias: string) => Record<string, unknown>][] = [
    ['65,536 keys in one aspect', [413], () => ({ system: { contentType: 'article' }, aspects: { body: keys(65536, { _type: 'body' }) } })],
    ['65,535 keys in one aspect without _type (the platform adds it)', [413], () => ({ system: { contentType: 'article' }, aspects: { body: keys(65535) } })],
    [
      '100,000 keys in an object inside an aspect',
      [413],
      () => ({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: keys(100000) } } }),
    ],
    [
      '65,536 aspects',
      [413],
      () => ({ system: { contentType: 'article' }, aspects: Object.fromEntries(Array.from({ length: 65536 }, (_, i) => [`a${i}`, {}])) }),
    ],
    [
      '65,536 keys in a metadata aspect',
      [413],
      () => ({ system: { contentType: 'article' }, operations: [{ _type: 'svcContentMetadata', aspects: { m: keys(65536) } }] }),
    ],
    ['nesting of 65 levels', [400], () => ({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: nested(62) } } })],
    [
      'a key __proto__',
      [400],
      () => ({ system: { contentType: 'article' }, aspects: { body: JSON.parse('{"_type":"body","x":{"__proto__":{"polluted":true}}}') } }),
    ],
    ['a lone surrogate in a string', [400], () => ({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: 'broken \ud800 text' } } })],
    ['a lone surrogate in a key', [400], () => ({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', 'k\udc00': 1 } } })],
    [
      `more than ${MAX_CONTAINERS_PER_BODY} objects and arrays`,
      [413],
      () => ({
        system: { contentType: 'article' },
        aspects: { body: { _type: 'body', x: Array.from({ length: MAX_CONTAINERS_PER_BODY }, (_, i) => (i % 2 ? [] : {})) } },
      }),
    ],
    [
      // unique keys cost the gateway's thread most: 750,000 in 15 objects took 3.8-4.5 s of it before the 200
      `more than ${MAX_KEYS_PER_BODY} keys (15 objects of 50,000 unique keys)`,
      [413],
      () => ({
        system: { contentType: 'article' },
        aspects: Object.fromEntries(
          Array.from({ length: 15 }, (_, o) => [
            `a${o}`,
            { _type: `a${o}`, ...Object.fromEntries(Array.from({ length: 50_000 }, (_, k) => [`k${o}_${k}`, 0])) },
          ]),
        ),
      }),
    ],
  ];

  for (const [what, statuses, body] of CASES) {
    it(`create: ${what} → ${statuses.join(' or ')}, nothing stored, no dead letter`, async () => {
      const alias = `c${Math.random().toString(36).slice(2)}`;
      const [dead, count] = [await deadLetters(), await contents()];
      const r = await editor.create(withAlias(alias, body(alias)));
      expect(r.status, r.text.slice(0, 300)).to.be.oneOf(statuses);
      expect(r.json).to.have.keys('message', 'statusCode', 'extraInfo');
      expect(r.json.statusCode.slice(0, 3)).to.equal(String(r.status));
      expect(r.text).not.to.match(/\n\s+at |node_modules|\/src\//);
      expect((await editor.read(`/content/alias/limits/${alias}`)).status, 'read back').to.equal(404);
      expect(await contents()).to.equal(count);
      expect(await deadLetters()).to.equal(dead);
    });
  }

  it('update and workspace draft: the same bodies are refused; the content is unchanged', async () => {
    const before = await editor.readContent(id);
    for (const [what, statuses, body] of CASES) {
      const env = body('x');
      const dead = await deadLetters();
      const u = await editor.update(id, env, etag);
      expect(u.status, `update, ${what}: ${u.text.slice(0, 200)}`).to.be.oneOf(statuses);
      const w = await editor.req('PUT', `/content/workspace/limits/alias/${id}`, { body: env });
      expect(w.status, `draft, ${what}: ${w.text.slice(0, 200)}`).to.be.oneOf(statuses);
      expect(await deadLetters(), what).to.equal(dead);
    }
    const after = await editor.readContent(id);
    expect(after.headers.get('etag')).to.equal(etag);
    expect(after.json).to.deep.equal(before.json);
  });

  const rawEnvelope = (alias: string, fields: string) =>
    Buffer.from(
      `{"system":{"contentType":"article"},"operations":[{"_type":"svcSetAlias","namespace":"limits","alias":"${alias}"}],"aspects":{"body":{"_type":"body",${fields}}}}`,
    );
  /** Bodies as bytes on the wire: JSON.stringify can make neither of them. */
  const RAW: [string, string | null, (alias: string) => Buffer][] = [
    [
      'invalid UTF-8 (a raw 0xE9) in a string',
      null,
      (alias) =>
        Buffer.concat([
          Buffer.from(`{"system":{"contentType":"article"},"operations":[{"_type":"svcSetAlias","namespace":"limits","alias":"${alias}"}],`),
          Buffer.from('"aspects":{"body":{"_type":"body","title":"caf'),
          Buffer.from([0xe9]),
          Buffer.from('"}}}'),
        ]),
    ],
    ['a number beyond a double (1e309)', 'aspects.body.big', (alias) => rawEnvelope(alias, '"big":1e309')],
    ['a negative number beyond a double in an array', 'aspects.body.list.1', (alias) => rawEnvelope(alias, '"list":[1,-1e400,2]')],
  ];
  const json = { 'Content-Type': 'application/json' };

  it('invalid UTF-8 and numbers beyond a double → 400 naming where, on create, update and draft; nothing stored, no dead letter', async () => {
    const before = await editor.readContent(id);
    for (const [what, path, body] of RAW) {
      const alias = `r${Math.random().toString(36).slice(2)}`;
      const [dead, count] = [await deadLetters(), await contents()];
      const r = await editor.req('POST', '/content', { raw: body(alias), headers: json });
      expect(r.status, `create, ${what}: ${r.text.slice(0, 300)}`).to.equal(400);
      expect(r.json.statusCode).to.equal('40000');
      if (path) expect(r.json.extraInfo.path, what).to.equal(path);
      else expect(r.json.message, what).to.match(/UTF-8/);
      expect((await editor.read(`/content/alias/limits/${alias}`)).status, `${what}: read back`).to.equal(404);
      expect(await contents(), what).to.equal(count);
      const u = await editor.req('PUT', `/content/alias/${id}`, { raw: body(`u${alias}`), headers: { ...json, 'If-Match': etag } });
      expect(u.status, `update, ${what}: ${u.text.slice(0, 200)}`).to.equal(400);
      const w = await editor.req('PUT', `/content/workspace/limits/alias/${id}`, { raw: body(`w${alias}`), headers: json });
      expect(w.status, `draft, ${what}: ${w.text.slice(0, 200)}`).to.equal(400);
      expect(await deadLetters(), what).to.equal(dead);
    }
    const after = await editor.readContent(id);
    expect(after.headers.get('etag')).to.equal(etag);
    expect(after.json).to.deep.equal(before.json);
    // Control: valid UTF-8 and the largest doubles are stored and read back as sent.
    const ok = await editor.req('POST', '/content', {
      raw: rawEnvelope(`ok${Date.now()}`, '"title":"café","big":1e308,"list":[-1.7976931348623157e308]'),
      headers: json,
    });
    expect(ok.status, ok.text.slice(0, 300)).to.equal(201);
    const back = await editor.readContent(ok.json.system.id);
    expect(back.json.aspects!.body).to.deep.equal({ _type: 'body', title: 'café', big: 1e308, list: [-1.7976931348623157e308] });
  });

  it('the largest bodies that can be stored are stored as sent and read back the same (control)', async () => {
    const stored: [string, Record<string, unknown>][] = [
      ['65,000 keys in one aspect', { _type: 'body', ...keys(64999) }],
      ['nesting of 64 levels', { _type: 'body', x: nested(61) }],
      ['a 1,000,000-element array', { _type: 'body', x: Array.from({ length: 1_000_000 }, (_, i) => i % 7) }],
      // the envelope, system, aspects, the aspect and x are 5 of them
      [`${MAX_CONTAINERS_PER_BODY} objects and arrays`, { _type: 'body', x: Array.from({ length: MAX_CONTAINERS_PER_BODY - 5 }, (_, i) => (i % 2 ? [] : {})) }],
      [
        'an article of 10,000 paragraphs, each an object with a list of marks (40,005 objects and arrays)',
        {
          _type: 'body',
          paragraphs: Array.from({ length: 10000 }, (_, i) => ({ type: 'p', text: `Paragraph ${i}`, marks: [{ type: 'em', from: 0, to: 9 }], meta: {} })),
        },
      ],
      ['surrogate pairs and U+FFFD', { _type: 'body', title: 'emoji \ud83d\ude00 and \ufffd' }],
      // msgpackr took an object with its own `constructor` for a class instance and called a truthy `toJSON` (500 after queueing)
      ['keys constructor and toJSON', { _type: 'body', constructor: 1, toJSON: 'x', deep: [{ constructor: {}, toJSON: { a: 1 } }] }],
    ];
    for (const [what, aspect] of stored) {
      const r = await editor.create({ system: { contentType: 'article' }, aspects: { body: aspect } });
      expect(r.status, `${what}: ${r.text.slice(0, 200)}`).to.equal(201);
      const back = await editor.readContent(r.json.system.id);
      expect(back.status).to.equal(200);
      expect(back.json.aspects!.body, what).to.deep.equal(aspect);
    }
  });

  it('updates that take a stored content past 65,535 keys (merge, added aspects) are stored, not dead-lettered', async () => {
    const half = (from: number) => Object.fromEntries(Array.from({ length: 40000 }, (_, i) => [`k${from + i}`, i]));
    const created = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', ...half(0) } } });
    expect(created.status, created.text.slice(0, 200)).to.equal(201);
    const cid = created.json.system.id;
    const dead = await deadLetters();
    const merged = await editor.update(cid, { aspects: { body: { _type: 'body', ...half(40000) } } }, created.headers.get('etag'), 'updateMode=merge');
    expect(merged.status, merged.text.slice(0, 200)).to.equal(200);
    const aspects = (from: string) => Object.fromEntries(Array.from({ length: 40000 }, (_, i) => [`${from}${i}`, {}]));
    const first = await editor.update(cid, { aspects: aspects('a') }, merged.headers.get('etag'));
    expect(first.status, first.text.slice(0, 200)).to.equal(200);
    const second = await editor.update(cid, { aspects: aspects('b') }, first.headers.get('etag'));
    expect(second.status, second.text.slice(0, 200)).to.equal(200);
    const back = await editor.readContent(cid);
    expect(Object.keys(back.json.aspects!.body)).to.have.length(80001);
    expect(Object.keys(back.json.aspects!).length).to.be.greaterThan(80000);
    expect(await deadLetters()).to.equal(dead);
  });

  it(`the hunt's body, 2,000,000 empty arrays (6 MB), answers 413 naming how many objects and arrays it holds and the limit; a bulk line holds one more (its {op, content})`, async () => {
    const dead = await deadLetters();
    const r = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: Array.from({ length: 2_000_000 }, () => []) } } });
    expect(r.status, r.text.slice(0, 300)).to.equal(413);
    expect(r.json.statusCode).to.equal('41300');
    expect(r.json.extraInfo).to.deep.equal({ containers: 2_000_005, max: MAX_CONTAINERS_PER_BODY });
    expect(r.json.message).to.include('2000005').and.include(String(MAX_CONTAINERS_PER_BODY));
    // A line of a bulk import: the body of its single request one level down.
    const body = (n: number) => ({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: Array.from({ length: n - 5 }, () => []) } } });
    const answers = await bulkImport(editor, [
      { op: 'create', content: body(MAX_CONTAINERS_PER_BODY + 1) },
      { op: 'create', content: body(MAX_CONTAINERS_PER_BODY) },
    ]);
    expect(answers.map((a) => a.status)).to.deep.equal([413, 201]);
    expect(answers[0].error?.extraInfo).to.deep.equal({ containers: MAX_CONTAINERS_PER_BODY + 2, max: MAX_CONTAINERS_PER_BODY + 1 });
    expect((await editor.read(`/content/alias/${answers[1].id}`)).status, 'the line at the limit, read back').to.equal(200);
    expect(await deadLetters()).to.equal(dead);
  });

  it('a body the gateway refuses never reaches a command stream', async () => {
    const lengths = async () => Promise.all(Array.from({ length: PARTITIONS }, (_, i) => redis.xlen(`cmd:{${i}}`)));
    const before = await lengths();
    const r = await editor.create({ system: { contentType: 'article' }, aspects: { body: keys(70000, { _type: 'body' }) } });
    expect(r.status).to.equal(413);
    expect(await lengths()).to.deep.equal(before);
  });
});
