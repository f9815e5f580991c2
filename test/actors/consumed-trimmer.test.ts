import { expect } from 'chai';
import { Redis } from 'ioredis';
import { ConsumedTrimmer } from '../../src/actors/stream-reads.js';
import { compareIds, parseStreamId } from '../../src/content/change-events.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The command and reply streams are trimmed behind their reader at most every second or 1,000
 * entries (issue 23: an XTRIM per command cost one Redis command in 26), and never past what
 * was consumed.
 */
describe('ConsumedTrimmer: consumed stream entries are trimmed in batches, never unconsumed ones', () => {
  let redis: Redis;
  const stream = `trim-test:${process.pid}:${Date.now()}`;
  before(() => {
    redis = new Redis(process.env.REDIS_URL!);
  });
  after(async () => {
    await redis.del(stream);
    redis.disconnect();
  });

  const add = async (n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push((await redis.xadd(stream, '*', 'm', String(i)))!);
    return ids;
  };
  /** Lets the fire-and-forget XTRIM reach Redis before the next read. */
  const settled = () => redis.ping();

  it('trims on the first consume, then waits for a second or 1,000 entries, and keeps the last consumed entry and everything after it', async () => {
    let now = 1_000_000;
    const trimmer = new ConsumedTrimmer(redis, stream, () => now);
    const ids = await add(10);
    trimmer.consumed(ids[2], 3);
    await settled();
    expect(await redis.xlen(stream), 'the first consume trims below its last entry').to.equal(8);

    now += 999;
    trimmer.consumed(ids[5], 3);
    await settled();
    expect(await redis.xlen(stream), '999 ms and 3 entries later: no trim').to.equal(8);

    now += 1;
    trimmer.consumed(ids[6], 1);
    await settled();
    expect(await redis.xlen(stream), 'a second after the last trim: trimmed below the last consumed').to.equal(4);
    expect((await redis.xrange(stream, '-', '+'))[0][0]).to.equal(ids[6]);

    const more = await add(1000);
    trimmer.consumed(more[998], 999);
    await settled();
    expect(await redis.xlen(stream), '999 entries within a second: no trim').to.equal(1004);
    trimmer.consumed(more[999], 1);
    await settled();
    expect(await redis.xlen(stream), 'the 1,000th entry: trimmed, the last consumed kept').to.equal(1);
    expect((await redis.xrange(stream, '-', '+'))[0][0]).to.equal(more[999]);
  });

  it('never trims past its floor (a pending entry), and trims to the last consumed when the floor is above it or absent', async () => {
    await redis.del(stream);
    const ids = await add(6);
    let floor: string | null = ids[1];
    let now = 5_000_000;
    const trimmer = new ConsumedTrimmer(
      redis,
      stream,
      () => now,
      async () => floor,
    );
    trimmer.consumed(ids[4], 5);
    await sleep(50);
    expect((await redis.xrange(stream, '-', '+'))[0][0], 'kept from the pending entry on').to.equal(ids[1]);
    floor = null;
    now += 1000;
    trimmer.consumed(ids[5], 1);
    await sleep(50);
    expect((await redis.xrange(stream, '-', '+'))[0][0], 'nothing pending: to the last consumed').to.equal(ids[5]);
  });

  it('orders stream ids by time, then sequence (the floor compares with it)', () => {
    const compareStreamIds = (a: string, b: string) => compareIds(parseStreamId(a), parseStreamId(b));
    expect(compareStreamIds('1700000000000-2', '1700000000000-10')).to.be.below(0);
    expect(compareStreamIds('1700000000001-0', '1700000000000-10')).to.be.above(0);
    expect(compareStreamIds('5-5', '5-5')).to.equal(0);
  });
});
