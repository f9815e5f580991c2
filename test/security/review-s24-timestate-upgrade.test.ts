import { expect } from 'chai';
import type { ContentStore } from '../../src/adapters/content-store.js';
import type { Logger } from '../../src/adapters/log.js';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { type ScheduleScripts, TIMESTATE_GROUP, TimestateSchedule } from '../../src/actors/timestate-schedule.js';
import type { Snapshot } from '../../src/content/model.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { member, scheduleKeysOf } from '../support/timestate-schedule.js';
import type { Settings } from '../../config/settings.js';

/**
 * Review s24: the time-state schedule of s23d keeps, per content, the list of its boundaries on the
 * schedule (`changes:ts-by:{p}`) and a fair queue of contents (`changes:ts-next:{p}`), and fires a
 * due boundary that no content lists (one an older build scheduled) only while its content has no
 * place in the fair queue. But a content's first revision after the upgrade lists only the
 * boundaries it still has that are after its commit; the boundaries the older build scheduled
 * stay on the schedule unlisted (the script does not know them: no list to replace), and once the
 * content has a place in the queue (any boundary of it ahead, e.g. an offTime next month) they
 * were neither fired nor taken off until that place went:
 * - a boundary that still holds and had passed but not fired when the revision was committed (an
 *   embargo's onTime, the content edited in the second before the tick, or while the owner was
 *   being replaced by the upgrade) lost its `timestate` event until the content's last boundary
 *   fired (CONTRACT §13: within 5 s);
 * - a boundary the revision moved stayed on the schedule for as long, and each such one held a
 *   place among the FIRE_BATCH (200) due boundaries the owner reads a tick in time order: 200 of
 *   them in a partition, and every other unlisted boundary there (of contents without a place)
 *   never fired.
 * And the other way round, while processes of both builds run (a rolling upgrade, the lease going
 * back and forth): an owner of the earlier build fires a boundary this build listed and leaves
 * the list as it was; the content's place in the queue, at that boundary's time, then never
 * moved (firing it again found nothing on the schedule and changed nothing), so it came first in
 * the queue every tick, for good unless the content was written again: 200 of them in a
 * partition, and no content there with a later place fired any listed boundary again.
 * Now a due boundary that its content's list does not name is fired (or dropped, when it no longer
 * holds) as an unlisted one, whether or not the content has a place in the queue; and a listed
 * one found off the schedule leaves its list (fire-timestate-6.lua), its content's place moving on.
 */
describe('security: boundaries scheduled before the upgrade, of a content with a place in the fair queue (review s24)', function () {
  this.timeout(30_000);
  const P = 0;
  const { schedule, fired, by, next, events } = scheduleKeysOf(P);
  const T = 1_700_000_000_000;
  let server: RedisServerHandle;
  let redis: RedisClient;
  const heads = new Map<string, Snapshot>();
  const iso = (ms: number) => new Date(ms).toISOString();
  const s = () => redis as unknown as ScheduleScripts;

  /** Content `cid` at revision `rev` on view `v` with the window [on, off). */
  async function setHead(cid: string, rev: number, on: number, off: number): Promise<void> {
    heads.set(cid, {
      cid,
      rev,
      type: 'article',
      head: 'vk',
      created: T,
      modified: T,
      committer: 'u',
      deleted: false,
      views: { v: 'vk' },
      symbolic: {},
      meta: { svcTimeState: { _type: 'svcTimeState', views: { v: { onTime: iso(on), offTime: iso(off) } } } },
      aliases: [],
    });
    await redis.hset(`ct:{${P}}:${cid}`, 'rev', String(rev));
  }

  /** What the schedule script of this build is given for a revision of `cid` committed at `cut`. */
  const scheduleRevision = (cid: string, rev: number, cut: number, bs: ['on' | 'off', number][]) =>
    s().scheduleTimestate(
      schedule,
      fired,
      by,
      next,
      events,
      TIMESTATE_GROUP,
      0,
      cid,
      rev,
      cut,
      bs.length,
      ...bs.flatMap(([edge, at]) => [at, member(cid, 'v', edge, at)]),
    );

  function scheduleOf(): TimestateSchedule {
    const store = { head: async (cid: string) => heads.get(cid) ?? null } as unknown as ContentStore;
    const log = { warn: () => undefined, info: () => undefined } as unknown as Logger;
    const settings = { PARTITIONS: 1, EVENTS_MAXLEN: 10_000, CHANGES_RETENTION_HOURS: 24 } as unknown as Settings;
    return new TimestateSchedule(redis, store, settings, log, () => T);
  }
  /** One tick of the owner in partition P at `now` (what `fireDue` runs for each partition). */
  const tick = (ts: TimestateSchedule, now: number) => (ts as unknown as { fireDueIn(p: number, now: number): Promise<number> }).fireDueIn(P, now);
  const timestateEvents = async () => (await redis.xlen(events)) as number;

  before(async () => {
    server = await startRedisServer({ appendonly: false });
    redis = connectRedis({ REDIS_URL: server.url, REDIS_CLUSTER_NODES: '' } as never);
  });
  beforeEach(async () => {
    await redis.flushall();
    heads.clear();
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it("an embargo's onTime scheduled before the upgrade, passed but not fired when the content was edited, still fires", async () => {
    // The older build scheduled a's onTime (T + 1000) and its offTime a month later, without a list.
    const on = T + 1000;
    const off = T + 30 * 86_400_000;
    await redis.zadd(schedule, on, member('a', 'v', 'on', on), off, member('a', 'v', 'off', off));
    // Revision 2, after the upgrade, committed at T + 1500 (the onTime passed, not fired yet), keeps both.
    await setHead('a', 2, on, off);
    await scheduleRevision('a', 2, T + 1500, [
      ['on', on],
      ['off', off],
    ]);
    const ts = scheduleOf();
    let sent = 0;
    for (let now = T + 2000; now <= T + 7000; now += 1000) sent += await tick(ts, now);
    expect(sent, 'timestate events fired within 5 s of the onTime').to.equal(1);
    expect(await timestateEvents()).to.equal(1);
    expect(await redis.zscore(schedule, member('a', 'v', 'on', on)), 'the onTime left the schedule').to.equal(null);
    expect(await redis.zscore(schedule, member('a', 'v', 'off', off)), 'the offTime stays').to.equal(String(off));
  });

  it('a boundary moved after the upgrade leaves the schedule once due, and 200 of them do not starve the others', async () => {
    const off = T + 30 * 86_400_000;
    // 200 contents whose onTime the older build scheduled at T + 100 + i; each moved by revision 2 to T + 10,000 + i.
    for (let i = 0; i < 200; i++) {
      const cid = `c${String(i).padStart(3, '0')}`;
      await redis.zadd(schedule, T + 100 + i, member(cid, 'v', 'on', T + 100 + i), off, member(cid, 'v', 'off', off));
      await setHead(cid, 2, T + 10_000 + i, off);
      await scheduleRevision(cid, 2, T, [
        ['on', T + 10_000 + i],
        ['off', off],
      ]);
    }
    // Another content's onTime at T + 1000, scheduled by the older build, its content never written since.
    await redis.zadd(schedule, T + 1000, member('z', 'v', 'on', T + 1000));
    await setHead('z', 1, T + 1000, off);
    const ts = scheduleOf();
    let sent = 0;
    for (let now = T + 2000; now <= T + 6000; now += 1000) sent += await tick(ts, now);
    expect(sent, "z's onTime fired within 5 s").to.equal(1);
    expect(await redis.zscore(schedule, member('z', 'v', 'on', T + 1000))).to.equal(null);
    const stale = await redis.zrangebyscore(schedule, '-inf', T + 1000);
    expect(stale, 'the moved boundaries left the schedule').to.deep.equal([]);
    // Each content keeps its current boundaries and its place in the queue.
    expect(await redis.hlen(by)).to.equal(200);
    expect(await redis.zcard(next)).to.equal(200);
    expect(await redis.zcard(schedule)).to.equal(400);
  });

  it('a listed boundary that a process of an earlier build fired leaves its list, and 200 of them do not hold the fair queue', async () => {
    const off = T + 30 * 86_400_000;
    // 200 contents listed by this build (onTime T + 100 + i), whose onTime an owner of the earlier
    // build then fired (fire-timestate-4.lua: off the schedule, into the fired set, no list).
    for (let i = 0; i < 200; i++) {
      const cid = `c${String(i).padStart(3, '0')}`;
      const m = member(cid, 'v', 'on', T + 100 + i);
      await setHead(cid, 1, T + 100 + i, off);
      await scheduleRevision(cid, 1, T, [
        ['on', T + 100 + i],
        ['off', off],
      ]);
      await redis.zrem(schedule, m);
      await redis.zadd(fired, T + 100 + i, m);
    }
    // Another content's onTime at T + 1000, listed by this build.
    await setHead('z', 1, T + 1000, off);
    await scheduleRevision('z', 1, T, [['on', T + 1000]]);
    const ts = scheduleOf();
    let sent = 0;
    for (let now = T + 2000; now <= T + 6000; now += 1000) sent += await tick(ts, now);
    expect(sent, "z's onTime fired within 5 s").to.equal(1);
    // Each of the 200 keeps its offTime, listed, its place in the queue at that time.
    expect(await redis.hlen(by)).to.equal(200);
    expect(await redis.zrangebyscore(next, '-inf', T + 6000)).to.deep.equal([]);
    expect(await redis.zcard(next)).to.equal(200);
  });
});
