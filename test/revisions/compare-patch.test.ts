import { expect } from 'chai';
import fc from 'fast-check';
import { applyPatch } from 'rfc6902';
import type { Aspects, Json } from '../../src/content/model.js';
import { compareBody } from '../../src/content/revisions.js';
import { aspectsDiff } from '../../src/gateway/compare-render.js';

/**
 * CONTRACT §15 Compare: the patch the platform makes (fast-json-patch) applied by an independent
 * implementation (rfc6902) to the aspects of `from` gives the aspects of `to`, for random
 * documents with keys holding `/` and `~` (RFC 6901 escapes them) and arrays that grow, shrink
 * and change type.
 */
const key = fc.oneof(fc.constantFrom('a', 'b', 'a/b', '~', '~1', '~0', '/', '', 'x~/y', '0', '-'), fc.string({ maxLength: 6 }));
const value: fc.Arbitrary<Json> = fc.letrec<{ v: Json }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)),
    fc.string({ maxLength: 8 }),
    fc.array(tie('v'), { maxLength: 5 }),
    fc.dictionary(key, tie('v'), { maxKeys: 5 }),
  ),
})).v;
const aspects: fc.Arbitrary<Aspects> = fc.dictionary(key, fc.dictionary(key, value, { maxKeys: 6 }), { maxKeys: 4 }) as fc.Arbitrary<Aspects>;

/** Applies a patch with rfc6902 to a copy; fails the test on any operation it refuses. */
function apply(doc: Aspects, patch: unknown[]): unknown {
  const copy = structuredClone(doc);
  const results = applyPatch(copy, patch as Parameters<typeof applyPatch>[1]);
  for (const r of results) if (r !== null) throw new Error(`rfc6902 refused an operation: ${r.name} ${r.message}`);
  return copy;
}

describe('revisions: compare patches (CONTRACT §15)', () => {
  it('a patch applied by rfc6902 reproduces the target over random documents (keys with / and ~, arrays)', () => {
    fc.assert(
      fc.property(aspects, aspects, (from, to) => {
        const body = compareBody('k', { key: 'v1', aspects: from }, { key: 'v2', aspects: to }, aspectsDiff);
        expect(apply(from, body.patch)).to.deep.equal(to);
      }),
      { numRuns: 2000 },
    );
  });

  it('a target derived from the source (edits, not a fresh document) is reproduced too', () => {
    fc.assert(
      fc.property(aspects, fc.array(fc.tuple(key, key, value), { maxLength: 6 }), (from, edits) => {
        const to = structuredClone(from);
        for (const [a, k, v] of edits) {
          if (!to[a]) to[a] = {};
          const aspect = to[a];
          if (v === null && k in aspect) delete aspect[k];
          else aspect[k] = v;
        }
        expect(apply(from, aspectsDiff(from, to))).to.deep.equal(to);
      }),
      { numRuns: 1000 },
    );
  });

  it('escapes / and ~ in paths per RFC 6901 and names the versions', () => {
    const body = compareBody('k', { key: 'v1', aspects: { 'a/b': { '~x': [1, 2, 3] } } }, { key: 'v2', aspects: { 'a/b': { '~x': [1] } } }, aspectsDiff);
    expect(body.from).to.equal('c:k:v1');
    expect(body.to).to.equal('c:k:v2');
    expect(body.patch.map((o) => o.path).every((p) => p.startsWith('/a~1b/~0x/'))).to.equal(true);
  });

  it('100 KB aspects: the patch reproduces the target (its speed is the compare workload of npm run bench)', () => {
    const doc = (seed: number): Aspects => ({
      body: {
        _type: 'body',
        title: `t${seed}`,
        paragraphs: Array.from({ length: 460 }, (_, i) => ({ i, text: `${'lorem ipsum '.repeat(15)}${(i * seed) % 7}`, 'a/b~c': i % 3 === seed % 3 })),
      },
      meta: { tags: Array.from({ length: 200 }, (_, i) => `tag${(i + seed) % 250}`) },
    });
    const a = doc(1);
    expect(JSON.stringify(a).length).to.be.within(90_000, 130_000);
    for (const seed of [2, 3, 7]) {
      const b = doc(seed);
      const patch = aspectsDiff(a, b);
      expect(patch.length).to.be.greaterThan(0);
      const applied = structuredClone(a) as Json;
      const errors = applyPatch(applied, patch as Parameters<typeof applyPatch>[1]);
      expect(errors.filter(Boolean)).to.deep.equal([]);
      expect(applied).to.deep.equal(b);
    }
  });
});
