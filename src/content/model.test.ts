import { expect } from 'chai';
import fc from 'fast-check';
import { isoTime } from './model.js';

describe('isoTime', () => {
  it('is toISOString for every time: each day, the edges of the four-digit years, before 1970', () => {
    const edges = [
      0, -1, 1, 86_399_999, 86_400_000, -62_167_219_200_000, -62_167_219_200_001, 253_402_300_799_999, 253_402_300_800_000, 8.64e15, -8.64e15, 1.5,
    ];
    for (const ms of edges) expect(isoTime(ms), String(ms)).to.equal(new Date(ms).toISOString());
    fc.assert(
      fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), (ms) => isoTime(ms) === new Date(ms).toISOString()),
      { numRuns: 20_000 },
    );
    // the same day again and again (the cached day's text), and days in turn
    for (let ms = Date.UTC(2026, 10, 26); ms < Date.UTC(2026, 10, 28); ms += 999_983) expect(isoTime(ms)).to.equal(new Date(ms).toISOString());
  });

  it('throws as toISOString does on what is not a time', () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, 8.64e15 + 1]) expect(() => isoTime(bad)).to.throw(RangeError);
  });
});
