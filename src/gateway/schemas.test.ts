import { expect } from 'chai';
import fc from 'fast-check';
import { envelopeBySchema, isSafeName, nameSchema, plainEnvelope } from './schemas.js';

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
});
