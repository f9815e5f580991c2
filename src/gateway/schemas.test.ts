import { expect } from 'chai';
import fc from 'fast-check';
import { parseJsonBody } from './http.js';
import { envelopeBySchema, isSafeName, nameSchema, parseEnvelope, plainEnvelope } from './schemas.js';

describe('names in paths (isSafeName, nameSchema)', () => {
  it('the fast check accepts exactly what the schema accepts', () => {
    const schema = nameSchema('name');
    const samples = [
      'a',
      'article',
      'contentid',
      'a.b',
      'a..b',
      '.',
      '..',
      '',
      'x'.repeat(256),
      'x'.repeat(257),
      'a/b',
      'a b',
      '{p}',
      'é',
      'a\u0000',
      '~@_-.',
      '.hidden',
    ];
    for (const s of samples) expect(isSafeName(s), JSON.stringify(s)).to.equal(schema.safeParse(s).success);
  });
});

/** A value's shape with its keys in their order, at every depth (deep equality ignores the order; answers and stored bytes do not). */
const ordered = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(ordered)
    : v !== null && typeof v === 'object'
      ? [Object.getPrototypeOf(v) === Object.prototype, Object.keys(v).map((k) => [k, ordered((v as Record<string, unknown>)[k])])]
      : v;

/** What parsing an envelope gave: the value (keys in order), or the refusal (its message and details). */
function outcome(parse: () => unknown): unknown {
  try {
    return { value: ordered(parse()) };
  } catch (e) {
    const err = e as { message: string; extraInfo?: unknown };
    return { error: err.message, extraInfo: err.extraInfo };
  }
}

describe('envelopes without zod (plainEnvelope)', () => {
  const typical = {
    system: { contentType: 'article' },
    aspects: {
      body: { _type: 'body', title: 'Benchmark article', tags: ['a', 'b'] },
      byline: { author: 'Bench Writer', _type: 'byline' },
      untyped: { text: 'x', nested: { _type: 7 } },
      gone: null,
      _type: 'ignored',
    },
  };

  it('answers the envelope of a typical write as the schemas do, keys in the same order', () => {
    const fast = plainEnvelope(JSON.parse(JSON.stringify(typical)));
    expect(fast, 'the typical envelope takes the way without zod').to.not.equal(null);
    expect(ordered(fast)).to.deep.equal(ordered(envelopeBySchema(JSON.parse(JSON.stringify(typical)))));
    expect(Object.keys(fast!.aspects.byline!)).to.deep.equal(['_type', 'author']);
    expect(Object.keys(fast!.aspects.untyped!)).to.deep.equal(['text', 'nested', '_type']);
  });

  it('answers as the schemas do wherever it answers, and leaves them what they refuse or change', () => {
    const names = ['body', 'a', '1', '0', '_type', '__proto__', 'constructor', 'toString', 'a..b', '', 'a/b', 'é', 'x'.repeat(256), 'x'.repeat(257)];
    const name = fc.constantFrom(...names);
    const scalar = fc.oneof(
      fc.constant('null'),
      fc.constant('true'),
      fc.integer().map(String),
      fc.string({ maxLength: 8 }).map((s) => JSON.stringify(s)),
      fc.constantFrom(JSON.stringify('t'.repeat(256)), JSON.stringify('t'.repeat(257)), JSON.stringify('o'.repeat(1025))),
    );
    const json: fc.Memo<string> = fc.memo((n) =>
      n <= 1
        ? scalar
        : fc.oneof(
            scalar,
            fc.array(json(n - 1), { maxLength: 3 }).map((a) => `[${a.join(',')}]`),
            fc.array(fc.tuple(name, json(n - 1)), { maxLength: 4 }).map((kv) => `{${kv.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
          ),
    );
    const object = (entries: fc.Arbitrary<[string, string]>) =>
      fc.array(entries, { maxLength: 5 }).map((kv) => `{${kv.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`);
    const aspect = fc.oneof(fc.constant('null'), json(2), object(fc.tuple(fc.oneof(name, fc.constant('_type')), json(2))));
    const system = fc.oneof(
      json(1),
      object(
        fc.tuple(
          fc.constantFrom('contentType', 'id', 'version', 'other', '__proto__'),
          fc.oneof(scalar, fc.constantFrom('"article"', '"a..b"', '"a/b"', JSON.stringify('x'.repeat(257)))),
        ),
      ),
    );
    const envelope = object(
      fc.oneof(
        fc.tuple(fc.constant('system'), system),
        fc.tuple(fc.constant('aspects'), fc.oneof(json(1), object(fc.tuple(name, aspect)))),
        fc.tuple(fc.constant('origin'), scalar),
        fc.tuple(fc.constantFrom('operations', 'other', '__proto__'), json(2)),
      ),
    );
    let fast = 0;
    fc.assert(
      fc.property(envelope, (text) => {
        // Where the way without zod answers, the schemas answer the same value (so parseEnvelope's
        // bounds, run on either, answer alike); where it does not, parseEnvelope is the schemas'.
        const viaPlain = plainEnvelope(JSON.parse(text));
        if (viaPlain === null) return;
        fast++;
        expect(
          outcome(() => envelopeBySchema(JSON.parse(text))),
          text,
        ).to.deep.equal({ value: ordered(viaPlain) });
      }),
      { numRuns: 20_000 },
    );
    expect(fast, 'envelopes that took the way without zod').to.be.greaterThan(1000);
  });

  it('answers as the schemas do for bodies as the gateway reads them: keys of every kind, values at every bound', () => {
    // Bodies through parseJsonBody, as a request or a bulk line's content (which refuses __proto__,
    // lone surrogates and 1e309 first); keys an object orders first (integer-like), names of
    // Object.prototype's members, astral characters at the bounds of _type and origin.
    const key = fc.oneof(
      fc.constantFrom('system', 'aspects', 'origin', '_type', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf'),
      fc.constantFrom('contentType', 'id', 'version', '0', '1', '01', '-1', '4294967294', '4294967295', '1e3', 'a', 'a.b', 'a..b', '.', '~', '@-_', ''),
      fc.constantFrom('x'.repeat(256), 'x'.repeat(257), 'é', 'a b', 'a\u0000', '😀', 'svcSolrDocument', 'svcFiles'),
      fc.string({ maxLength: 6 }),
    );
    const scalar = fc.oneof(
      fc.constant(null),
      fc.boolean(),
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.constant(-0),
      fc.string({ maxLength: 6 }),
      fc.constantFrom('article', 'a..b', '', 'x'.repeat(256), 'x'.repeat(257), '😀'.repeat(128), '😀'.repeat(129), `${'x'.repeat(255)}😀`),
      fc.constantFrom('x'.repeat(1024), 'x'.repeat(1025), '😀'.repeat(512), '😀'.repeat(513), `${'x'.repeat(1023)}😀`),
    );
    const text = (kv: [string, string][]) => `{${kv.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;
    const json: fc.Memo<string> = fc.memo((n) =>
      n <= 1
        ? scalar.map((v) => JSON.stringify(v))
        : fc.oneof(
            scalar.map((v) => JSON.stringify(v)),
            fc.array(json(n - 1), { maxLength: 3 }).map((a) => `[${a.join(',')}]`),
            fc.array(fc.tuple(key, json(n - 1)), { maxLength: 5 }).map(text),
          ),
    );
    const object = (entry: fc.Arbitrary<[string, string]>) => fc.array(entry, { maxLength: 6 }).map(text);
    const aspect = fc.oneof(json(3), object(fc.tuple(key, json(2))), object(fc.tuple(fc.constant('_type'), json(1))));
    const envelope = object(
      fc.oneof(
        fc.tuple(fc.constant('system'), fc.oneof(json(2), object(fc.tuple(key, json(1))))),
        fc.tuple(fc.constant('aspects'), fc.oneof(json(2), object(fc.tuple(key, aspect)))),
        fc.tuple(fc.constant('origin'), json(1)),
        fc.tuple(key, json(2)),
      ),
    );
    let fast = 0;
    fc.assert(
      fc.property(envelope, (body) => {
        let value: unknown;
        try {
          value = parseJsonBody(Buffer.from(body));
        } catch {
          return;
        }
        const viaPlain = plainEnvelope(value);
        if (viaPlain === null) return;
        fast++;
        // chai's deep equality tells -0 from 0.
        expect(
          outcome(() => envelopeBySchema(parseJsonBody(Buffer.from(body)))),
          body,
        ).to.deep.equal({ value: ordered(viaPlain) });
      }),
      { numRuns: 20_000, seed: 20261128 },
    );
    expect(fast, 'bodies that took the way without zod').to.be.greaterThan(3000);
  });

  it('leaves to the schemas a _type or origin of astral characters past its bound in UTF-16 units, which zod counts in code points', () => {
    // Zod counts a string's length in code points: 129 emoji (258 units) are a _type it takes.
    // The way without zod counts units, so it declines them (never the other way round: a string
    // within the bound in units is within it in code points), and parseEnvelope answers the schemas'.
    for (const env of [
      { system: { contentType: 'article' }, aspects: { a: { _type: '😀'.repeat(129) } } },
      { system: { contentType: 'article' }, aspects: { a: { _type: `${'x'.repeat(255)}😀` } } },
      { system: { contentType: 'article' }, origin: '😀'.repeat(513) },
    ]) {
      expect(plainEnvelope(env), JSON.stringify(env).slice(0, 80)).to.equal(null);
      expect(ordered(parseEnvelope(env))).to.deep.equal(ordered(envelopeBySchema(env)));
    }
    for (const env of [{ aspects: { a: { _type: '😀'.repeat(257) } } }, { origin: '😀'.repeat(1025) }]) {
      expect(plainEnvelope(env)).to.equal(null);
      expect(() => parseEnvelope(env)).to.throw(/too_big|Too big|at most|longer/i);
    }
  });
});
