import { expect } from 'chai';
import { decodeTime, encodeTime, isValid } from 'ulid';
import fc from 'fast-check';
import { newContentKey, newVersionKey, ulidOf } from './ids.js';

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

  it('are made as before, character by character (ulidOf)', () => {
    // The way keys were made until the twentieth session, kept as the reference.
    const before = (now: number, rand: Buffer, at: number): string => {
      let time = '';
      for (let i = 0, t = now; i < 10; i++, t = Math.floor(t / 32)) time = ALPHABET[t % 32] + time;
      let out = time;
      for (let half = 0; half < 2; half++) {
        let v = rand.readUIntBE(at + half * 5, 5);
        let chars = '';
        for (let i = 0; i < 8; i++, v = Math.floor(v / 32)) chars = ALPHABET[v % 32] + chars;
        out += chars;
      }
      return out;
    };
    const times = fc.oneof(fc.integer({ min: 0, max: 2 ** 48 - 1 }), fc.constantFrom(0, 1, 31, 32, 2 ** 25 - 1, 2 ** 25, 2 ** 48 - 1, Date.now()));
    fc.assert(
      fc.property(times, fc.uint8Array({ minLength: 10, maxLength: 24 }), fc.nat(14), (now, bytes, shift) => {
        const rand = Buffer.from(bytes);
        const at = Math.min(shift, rand.length - 10);
        expect(ulidOf(now, rand, at)).to.equal(before(now, rand, at));
      }),
      { numRuns: 20_000 },
    );
    expect(ulidOf(2 ** 48 - 1, Buffer.alloc(10, 255), 0)).to.equal('7ZZZZZZZZZZZZZZZZZZZZZZZZZ');
  });

  it('agree with the ulid package on the time and with the 10 bytes read as one 80-bit number, at every 5-bit bound (ulidOf)', () => {
    // An oracle other than the way before: the ulid package's encodeTime and decodeTime, and the
    // bytes as a BigInt; times at the bounds of the two 25-bit halves ulidOf splits them into.
    const bounds = [0, 1, 31, 32, 1023, 1024, 2 ** 25 - 1, 2 ** 25, 2 ** 25 + 1, 2 ** 30, 2 ** 40 - 1, 2 ** 40, 1_700_000_000_000, 2 ** 48 - 1];
    const times = fc.oneof(fc.constantFrom(...bounds), fc.integer({ min: 0, max: 2 ** 48 - 1 }));
    const pool = new Uint8Array(4096);
    fc.assert(
      fc.property(times, fc.uint8Array({ minLength: 10, maxLength: 10 }), fc.constantFrom(0, 1, 4085, 4086), (now, bytes, at) => {
        pool.set(bytes, at);
        const key = ulidOf(now, pool, at);
        expect(isValid(key), key).to.equal(true);
        expect(key.slice(0, 10)).to.equal(encodeTime(now, 10));
        expect(decodeTime(key)).to.equal(now);
        expect(randomOf(key)).to.equal(bytes.reduce((n, b) => n * 256n + BigInt(b), 0n));
      }),
      { numRuns: 5000, seed: 20261128 },
    );
    expect(ulidOf(0, new Uint8Array(10), 0)).to.equal('0'.repeat(26));
  });
});
