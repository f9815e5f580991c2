import { expect } from 'chai';
import fc from 'fast-check';
import { PRETTY_MAX_ADDED_CHARS, prettyAdds, serialize } from './envelope.js';

describe('envelope: json+pretty within a bound (review s23)', () => {
  it('prettyAdds counts exactly what the indentation adds, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
        expect(prettyAdds(v, 0, Number.POSITIVE_INFINITY)).to.equal(JSON.stringify(v, null, 2).length - JSON.stringify(v).length);
      }),
      { numRuns: 500 },
    );
  });

  it('a value the indentation would grow past PRETTY_MAX_ADDED_CHARS is answered plain; smaller ones pretty', () => {
    let deep: unknown = new Array(200_000).fill(0);
    for (let i = 0; i < 50; i++) deep = { a: deep };
    // 200,000 zeros at depth 51: about 103 characters of indentation each, 20 MB added.
    expect(serialize(deep, 'json+pretty')).to.equal(JSON.stringify(deep));
    const small = { a: { b: [1, 2, { c: 'x' }] } };
    expect(serialize(small, 'json+pretty')).to.equal(JSON.stringify(small, null, 2));
    expect(PRETTY_MAX_ADDED_CHARS).to.equal(16 * 1024 * 1024);
  });
});
