import { expect } from 'chai';
import { AppError } from '../errors.js';
import { MAX_KEYS_PER_OBJECT, checkStorable } from './body-limits.js';

/** The unit side of test/gateway/body-limits.test.ts (CONTRACT §20 "Limits"). */
describe('body limits: what a JSON body may hold to be stored as sent', () => {
  const refusal = (body: unknown): AppError | null => {
    try {
      checkStorable(body);
      return null;
    } catch (e) {
      expect(e).to.be.instanceOf(AppError);
      return e as AppError;
    }
  };
  const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));
  const nested = (n: number): unknown => (n === 0 ? 1 : { a: nested(n - 1) });

  it(`at most ${MAX_KEYS_PER_OBJECT} keys per object, anywhere, 413 naming where`, () => {
    expect(refusal({ a: keys(MAX_KEYS_PER_OBJECT) })).to.equal(null);
    const e = refusal({ aspects: { body: { list: [{}, keys(MAX_KEYS_PER_OBJECT + 1)] } } });
    expect(e?.http).to.equal(413);
    expect(e?.extraInfo.path).to.equal('aspects.body.list.1');
  });

  it('nesting up to 64 levels (objects and arrays alike)', () => {
    expect(refusal(nested(64))).to.equal(null);
    expect(refusal(nested(65))?.http).to.equal(400);
    expect(refusal(JSON.parse(`${'['.repeat(65)}${']'.repeat(65)}`))?.http).to.equal(400);
    expect(refusal(JSON.parse(`${'['.repeat(200000)}${']'.repeat(200000)}`))?.http).to.equal(400);
  });

  it('no key __proto__, no lone surrogate in a string or a key', () => {
    expect(refusal(JSON.parse('{"a":[{"__proto__":1}]}'))?.extraInfo.path).to.equal('a.0.__proto__');
    expect(refusal({ a: ['ok', 'x\ud800'] })?.http).to.equal(400);
    expect(refusal({ '\udfff': 1 })?.http).to.equal(400);
    expect(refusal({ a: 'pair \ud83d\ude00', b: '\ufffd', proto: { constructor: 1, prototype: 2 } })).to.equal(null);
  });

  it('no number beyond a double (JSON.parse makes 1e309 Infinity), 400 naming where', () => {
    expect(refusal(JSON.parse('1e309'))?.extraInfo.path).to.equal('(the body)');
    expect(refusal(JSON.parse('{"big":1e309}'))?.extraInfo.path).to.equal('big');
    expect(refusal(JSON.parse('{"a":{"b":[0,1,-1e400]}}'))?.extraInfo.path).to.equal('a.b.2');
    expect(refusal(JSON.parse('[[1e999]]'))?.extraInfo.path).to.equal('0.0');
    expect(refusal({ nan: Number.NaN })?.http).to.equal(400);
    expect(refusal(JSON.parse('{"max":1.7976931348623157e308,"min":-1.7976931348623157e308,"tiny":5e-324,"under":1e-400}'))).to.equal(null);
  });

  it('large arrays and strings pass (MAX_BODY_BYTES bounds them)', () => {
    expect(refusal({ a: new Array(1_000_000).fill(1), s: 'x'.repeat(1 << 20) })).to.equal(null);
  });
});
