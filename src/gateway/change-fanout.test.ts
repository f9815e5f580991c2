import { expect } from 'chai';
import type { Settings } from '../../config/settings.js';
import { createLogger } from '../adapters/log.js';
import type { RedisClient } from '../adapters/redis.js';
import { sleep } from '../wait.js';
import { ChangeFanout } from './change-fanout.js';
import type { ChangeSource, ResolvedEntry } from './change-source.js';

const P = 4;
const settings = { CHANGES_RETENTION_HOURS: 1, CHANGES_STALL_SECONDS: 30, CHANGES_PAGES_PER_USER: 4, CHANGES_PAGES_AT_ONCE: 16 } as Settings;
const source = { partitions: P, cursors: {} } as unknown as ChangeSource;
const entry = (seq: number): ResolvedEntry => ({ p: 0, ms: 1_700_000_000_000, seq, changes: [], at: null }) as unknown as ResolvedEntry;

/** A fan-out with one live subscriber whose offers take `offerMs` of the event loop, and checkpoint writes that take `recordMs` to answer. */
function fanoutWith(offerMs: number, recordMs: number): { offer(entries: ResolvedEntry[]): Promise<number>; offered: number[] } {
  const fanout = new ChangeFanout(source, {} as RedisClient, settings, createLogger('error'));
  fanout.running = true;
  const offered: number[] = [];
  const internals = fanout as unknown as {
    subscribers: Set<unknown>;
    checkpoints: { record: () => Promise<null> };
    offerSafely(entries: ResolvedEntry[]): Promise<number>;
  };
  internals.checkpoints.record = async () => {
    await sleep(recordMs);
    return null;
  };
  internals.subscribers.add({
    canonical: false,
    group: 'g',
    offer: (entries: ResolvedEntry[]) => {
      const until = performance.now() + offerMs;
      while (performance.now() < until);
      offered.push(...entries.map((e) => e.seq));
    },
  });
  return { offer: (entries) => internals.offerSafely(entries), offered };
}

describe('the change feed fan-out paces its reads by what its offers held the event loop (ChangeFanout)', () => {
  it("the wait for an offer's checkpoint write to Redis does not count: a slow write never pauses a subscriber's feed", async () => {
    // Before, the offer's whole duration counted, the write's answer included: on a busy machine
    // that alone passed PACE_FROM_MS (10 ms) and paused the next read by up to 100 ms.
    const f = fanoutWith(0, 200);
    const held = await f.offer([entry(1), entry(2)]);
    expect(f.offered).to.deep.equal([1, 2]);
    expect(held).to.be.below(100);
  });

  it('what the offers held the event loop counts (thousands of subscribers: each offer a write to every one)', async () => {
    const f = fanoutWith(30, 0);
    const held = await f.offer([entry(1)]);
    expect(f.offered).to.deep.equal([1]);
    expect(held).to.be.at.least(30);
  });
});
