import { expect } from 'chai';
import { BodiesHeld } from './bodies-held.js';

describe('BodiesHeld: what the request bodies under way hold (SECURITY.md "Bodies and limits")', () => {
  it('refuses a caller past its share with 429 and the process past its bound with 503, taking nothing then', () => {
    const h = new BodiesHeld(100, 40);
    expect(h.take('a', 30, 0)).to.equal(undefined);
    expect(h.take('a', 20, 0)?.http).to.equal(429);
    expect(h.heldBy('a')).to.equal(30);
    expect(h.take('b', 40, 0)).to.equal(undefined);
    expect(h.take('c', 25, 0)).to.equal(undefined);
    expect(h.take('d', 10, 0)?.http).to.equal(503);
    expect(h.total).to.equal(95);
    expect(h.heldBy('d')).to.equal(0);
  });

  it('never refuses a request for what it holds itself: one body larger than both bounds passes while nothing else is held', () => {
    const h = new BodiesHeld(100, 40);
    let mine = 0;
    for (let i = 0; i < 10; i++) {
      expect(h.take('a', 30, mine)).to.equal(undefined);
      mine += 30;
    }
    expect(h.total).to.equal(300);
    // Anything else now waits for it.
    expect(h.take('a', 1, 0)?.http).to.equal(429);
    expect(h.take('b', 1, 0)?.http).to.equal(503);
    h.give('a', mine);
    expect(h.total).to.equal(0);
    expect(h.take('b', 1, 0)).to.equal(undefined);
  });

  it('gives back to zero and forgets the caller', () => {
    const h = new BodiesHeld(100, 40);
    h.take('a', 10, 0);
    h.take('a', 5, 0);
    h.give('a', 10);
    expect(h.heldBy('a')).to.equal(5);
    h.give('a', 5);
    h.give('a', 0);
    expect(h.heldBy('a')).to.equal(0);
    expect(h.total).to.equal(0);
  });
});
