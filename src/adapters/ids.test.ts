import { expect } from 'chai';
import { decodeTime, isValid } from 'ulid';
import { newContentKey, newVersionKey } from './ids.js';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** The random part of a ULID as a number (80 bits). */
const randomOf = (k: string) => [...k.slice(10)].reduce((n, c) => n * 32n + BigInt(ALPHABET.indexOf(c)), 0n);

describe('content and version keys (src/adapters/ids.ts)', () => {
  it('are ULIDs of the time they are minted', () => {
    const before = Date.now();
    const k = newContentKey();
    expect(isValid(k)).to.equal(true);
    expect(decodeTime(k)).to.be.within(before, Date.now());
  });

  it('name no other key: keys minted in one millisecond are not neighbours (SECURITY.md: keys)', () => {
    // Within a millisecond ulid's monotonicFactory made each key the previous one plus 1, so a
    // caller's own key named the keys minted just before and after it, of content it may not read.
    const keys = Array.from({ length: 20000 }, (_, i) => (i % 2 ? newVersionKey() : newContentKey()));
    let sameMs = 0;
    let ascending = 0;
    for (let i = 1; i < keys.length; i++) {
      if (keys[i].slice(0, 10) !== keys[i - 1].slice(0, 10)) continue;
      sameMs++;
      const d = randomOf(keys[i]) - randomOf(keys[i - 1]);
      expect((d < 0n ? -d : d) > 1n << 40n, `${keys[i - 1]} then ${keys[i]}`).to.equal(true);
      if (d > 0n) ascending++;
    }
    expect(sameMs).to.be.greaterThan(1000);
    // In no particular order within a millisecond (monotonic keys were all ascending).
    expect(ascending / sameMs).to.be.within(0.4, 0.6);
    expect(new Set(keys).size).to.equal(keys.length);
  });
});
