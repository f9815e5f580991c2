import { expect } from 'chai';
import { BodiesHeld } from '../../src/gateway/bodies-held.js';

/**
 * Review s23b: BodiesHeld's sums after any sequence of what requests do with it (Exchange: a
 * chunk taken under its holder, a move when the caller changes — refused moves hold nothing —,
 * a parsed weight taken, everything given back at the end): the process's sum, the anonymous
 * part and each caller's share are always what the requests under way hold, never negative,
 * and zero once all have ended. Keys as the gateway makes them: `address:`, `unchecked address:`,
 * `user:`, `search user:`.
 */
describe('review s23b: BodiesHeld sums stay what the requests under way hold (take, move, give in any order)', () => {
  function random(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const isAnonymous = (k: string) => k.startsWith('address:') || k.startsWith('search ');

  for (const seed of [1, 2, 3])
    it(`seed ${seed}: 10,000 steps of 64 requests`, () => {
      const next = random(seed);
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)];
      const h = new BodiesHeld(1 << 20, 1 << 18, 16);
      const addresses = ['a', 'b', 'c'];
      const users = ['u', 'v'];
      const keyOf = () => {
        const r = next();
        if (r < 0.3) return `address:${pick(addresses)}`;
        if (r < 0.5) return `unchecked address:${pick(addresses)}`;
        if (r < 0.75) return `user:${pick(users)}`;
        return `search user:${pick(users)}`;
      };
      const reqs = Array.from({ length: 64 }, () => ({ holder: keyOf(), holding: 0 }));
      for (let step = 0; step < 10_000; step++) {
        const r = pick(reqs);
        const op = next();
        if (op < 0.55) {
          const n = Math.floor(next() * 40_000);
          if (!h.take(r.holder, n, r.holding)) r.holding += n;
        } else if (op < 0.75) {
          const to = keyOf();
          const refused = h.move(r.holder, to, r.holding);
          if (refused) {
            expect(refused.http).to.be.oneOf([429, 503]);
            r.holding = 0;
          }
          r.holder = to;
        } else {
          h.give(r.holder, r.holding);
          r.holding = 0;
          r.holder = keyOf();
        }
        const sum = reqs.reduce((s, q) => s + q.holding, 0);
        expect(h.total).to.equal(sum);
        for (const k of new Set(reqs.map((q) => q.holder))) expect(h.heldBy(k)).to.equal(reqs.filter((q) => q.holder === k).reduce((s, q) => s + q.holding, 0));
        const anonymous = reqs.filter((q) => isAnonymous(q.holder)).reduce((s, q) => s + q.holding, 0);
        expect((h as unknown as { anonymous: number }).anonymous).to.equal(anonymous);
      }
      for (const q of reqs) h.give(q.holder, q.holding);
      expect(h.total).to.equal(0);
      expect((h as unknown as { anonymous: number }).anonymous).to.equal(0);
    });
});
