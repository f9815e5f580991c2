import { expect } from 'chai';
import { AppError } from '../errors.js';
import { MAX_CONTAINERS_PER_BODY, MAX_KEYS_PER_BODY, MAX_KEYS_PER_OBJECT, checkStorable, countsIn } from './body-limits.js';
import { parseJsonBody } from './http.js';

/** The unit side of test/gateway/body-limits.test.ts (CONTRACT §20 "Limits"). */
describe('body limits: what a JSON body may hold to be stored as sent', () => {
  /** The AppError `check` throws, or null. */
  const refused = (check: () => unknown): AppError | null => {
    try {
      check();
      return null;
    } catch (e) {
      expect(e).to.be.instanceOf(AppError);
      return e as AppError;
    }
  };
  const refusal = (body: unknown): AppError | null => refused(() => checkStorable(body));
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

  /** `{a: [...]}` holding `n` objects and arrays in all (the body and `a` included), arrays and objects in turn. */
  const containers = (n: number) => ({ a: Array.from({ length: n - 2 }, (_, i) => (i % 2 ? [] : {})) });

  it(`at most ${MAX_CONTAINERS_PER_BODY} objects and arrays in a body, 413 naming how many it holds and the limit`, () => {
    expect(refusal(containers(MAX_CONTAINERS_PER_BODY))).to.equal(null);
    const e = refusal(containers(MAX_CONTAINERS_PER_BODY + 1));
    expect(e?.http).to.equal(413);
    expect(e?.extraInfo).to.deep.equal({ containers: MAX_CONTAINERS_PER_BODY + 1, max: MAX_CONTAINERS_PER_BODY });
    expect(e?.message).to.include(String(MAX_CONTAINERS_PER_BODY));
    // Counted at any depth, the figure is the whole body's even when the walk stops early.
    const deep = { a: Array.from({ length: MAX_CONTAINERS_PER_BODY }, () => [[{ b: [] }]]) };
    expect(refusal(deep)?.extraInfo).to.deep.equal({ containers: 4 * MAX_CONTAINERS_PER_BODY + 2, max: MAX_CONTAINERS_PER_BODY });
    // Scalars are not containers: the documented 1,000,000-element array is one.
    expect(refusal({ a: new Array(1_000_000).fill('x'), b: Array.from({ length: MAX_CONTAINERS_PER_BODY - 3 }, () => 1) })).to.equal(null);
  });

  it('a JSON body is refused on its bytes, before it is parsed; a bulk line holds one container more (its {op, content})', () => {
    const over = Buffer.from(JSON.stringify(containers(MAX_CONTAINERS_PER_BODY + 1)));
    const e = refused(() => parseJsonBody(over));
    expect(e?.http).to.equal(413);
    expect(e?.extraInfo).to.deep.equal({ containers: MAX_CONTAINERS_PER_BODY + 1, max: MAX_CONTAINERS_PER_BODY });
    expect(parseJsonBody(Buffer.from(JSON.stringify(containers(MAX_CONTAINERS_PER_BODY))))).to.have.key('a');
    const line = Buffer.from(JSON.stringify({ op: 'create', content: containers(MAX_CONTAINERS_PER_BODY) }));
    expect(() => parseJsonBody(line)).to.throw(AppError, /objects and arrays/);
    expect(parseJsonBody(line, 65, MAX_CONTAINERS_PER_BODY + 1)).to.have.keys('op', 'content');
    // Brackets in strings and keys are text: `[` `{` escaped or not, a `\"` that does not end the string.
    const text = { '[{': '[{'.repeat(MAX_CONTAINERS_PER_BODY), q: '\\"[{\\', after: [] };
    expect(countsIn(Buffer.from(JSON.stringify(text)))).to.deep.equal({ containers: 2, keys: 3 });
    expect(parseJsonBody(Buffer.from(JSON.stringify(text)))).to.deep.equal(text);
    expect(countsIn(Buffer.from('{"a":[1,{"b":"é[{:"},[]],"c":{}}'))).to.deep.equal({ containers: 5, keys: 3 });
  });

  it('a JSON body holds at most MAX_KEYS_PER_BODY keys, counted on its bytes: unique keys cost the gateway most (750,000 in 15 objects took 3.8-4.5 s)', () => {
    const objects = (n: number, per: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, o) => [`o${o}`, Object.fromEntries(Array.from({ length: per }, (_, k) => [`k${o}_${k}`, 0]))]));
    // 4 objects of 50,000 keys and their 4 keys in the body: 200,004
    const over = Buffer.from(JSON.stringify(objects(4, 50_000)));
    const cpu = process.cpuUsage();
    const e = refused(() => parseJsonBody(over));
    const used = process.cpuUsage(cpu);
    expect(e?.http).to.equal(413);
    expect(e?.extraInfo).to.deep.equal({ keys: 200_004, max: MAX_KEYS_PER_BODY });
    expect((used.user + used.system) / 1000, 'ms of CPU to refuse it').to.be.below(200);
    const within = Buffer.from(JSON.stringify(objects(4, 49_999)));
    expect(Object.keys(parseJsonBody(within) as object)).to.have.length(4);
    // a bulk line holds its request's body and five keys of its own
    const line = Buffer.from(JSON.stringify({ op: 'create', content: objects(4, 49_999) }));
    expect(() => parseJsonBody(line, 65, MAX_CONTAINERS_PER_BODY + 1)).to.throw(AppError, /keys/);
    expect(parseJsonBody(line, 65, MAX_CONTAINERS_PER_BODY + 1, MAX_KEYS_PER_BODY + 5)).to.have.keys('op', 'content');
  });

  it('the check costs no allocation per value: millions of strings and containers in well under a second', () => {
    // Before, each string and container was pushed with a path object and a tuple: 3.3 M strings
    // took 4-4.6 s of CPU, 2 M empty arrays 1.9 s (JSON.parse of the same: 0.3 and 0.2-1.2 s).
    const body = { s: Array.from({ length: 3_000_000 }, () => ''), a: Array.from({ length: 1_000_000 }, () => []) };
    const cpu = process.cpuUsage();
    expect(() => checkStorable(body, 64, Number.POSITIVE_INFINITY)).not.to.throw();
    const used = process.cpuUsage(cpu);
    expect((used.user + used.system) / 1000, 'ms of CPU').to.be.below(1000);
  });
});
