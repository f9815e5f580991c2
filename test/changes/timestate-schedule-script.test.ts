import { expect } from 'chai';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { type ScheduleScripts, TIMESTATE_GROUP } from '../../src/actors/timestate-schedule.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { member, scheduleKeysOf } from '../support/timestate-schedule.js';

/**
 * schedule-timestate-4.lua and fire-timestate-5.lua (review s23d): a revision's boundaries
 * replace those its content had on the schedule, so a content holds at most the boundaries of
 * its current windows there; a boundary that passed and did not fire stays while the revision
 * still has it, one fired is never put back, an older revision read again changes nothing, a
 * delete takes the content's boundaries off, and firing takes the boundary off the content's list.
 */
describe('time-state schedule scripts: a content keeps only its current boundaries on the schedule (review s23d)', function () {
  this.timeout(30_000);
  const P = 3;
  const { schedule, fired, by, next, events } = scheduleKeysOf(P);
  let server: RedisServerHandle;
  let redis: RedisClient;
  /** The scripts as the schedule calls them (src/actors/timestate-schedule.ts). */
  const s = () => redis as unknown as ScheduleScripts;
  const T = 1_000_000;
  /** The script's arguments for one revision of `cid` committed at `cut` with these boundaries, acknowledging `ids`. */
  const revision = (cid: string, rev: number, cut: number, bs: [string, 'on' | 'off', number][], ids: string[] = []) => [
    TIMESTATE_GROUP,
    ids.length,
    ...ids,
    cid,
    rev,
    cut,
    bs.length,
    ...bs.flatMap(([view, edge, at]) => [at, member(cid, view, edge, at)]),
  ];
  /** The schedule script run on one revision (`revision`'s arguments). */
  const scheduleRevision = (...a: Parameters<typeof revision>) => s().scheduleTimestate(schedule, fired, by, next, events, ...revision(...a));
  const scheduled = async () => redis.zrange(schedule, '0', '-1', 'WITHSCORES');
  const listOf = async (cid: string) => {
    const raw = await redis.hget(by, cid);
    return raw ? (JSON.parse(raw) as { r: number; m: string[] }) : null;
  };

  before(async () => {
    server = await startRedisServer({ appendonly: false });
    redis = connectRedis({ REDIS_URL: server.url, REDIS_CLUSTER_NODES: '' } as never);
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('replaces, keeps what passed and did not fire, ignores older revisions, never re-adds a fired one, and clears on delete', async () => {
    const a = 'ka';
    const other = 'kb';
    // Another content's boundary: never touched by a's revisions.
    await scheduleRevision(other, 1, T, [['v', 'on', T + 5000]]);
    expect(
      await scheduleRevision(a, 1, T, [
        ['v', 'on', T + 1000],
        ['v', 'off', T + 2000],
      ]),
    ).to.equal(2);
    // Revision 2 moves both: the first two are taken off.
    expect(
      await scheduleRevision(a, 2, T + 1, [
        ['v', 'on', T + 1010],
        ['v', 'off', T + 2010],
      ]),
    ).to.equal(2);
    expect(await scheduled()).to.deep.equal([
      member(a, 'v', 'on', T + 1010),
      String(T + 1010),
      member(a, 'v', 'off', T + 2010),
      String(T + 2010),
      member(other, 'v', 'on', T + 5000),
      String(T + 5000),
    ]);
    expect(await listOf(a)).to.deep.equal({ r: 2, m: [member(a, 'v', 'on', T + 1010), member(a, 'v', 'off', T + 2010)] });
    // Revision 1 read again (an event taken over after revision 2): nothing changes.
    expect(
      await scheduleRevision(a, 1, T, [
        ['v', 'on', T + 1000],
        ['v', 'off', T + 2000],
      ]),
    ).to.equal(0);
    expect(await scheduled()).to.have.length(6);
    // Revision 3, committed after T + 1010 passed (not fired yet): that one stays, the off moves.
    expect(
      await scheduleRevision(a, 3, T + 1500, [
        ['v', 'on', T + 1010],
        ['v', 'off', T + 3000],
      ]),
    ).to.equal(1);
    expect(await scheduled()).to.deep.equal([
      member(a, 'v', 'on', T + 1010),
      String(T + 1010),
      member(a, 'v', 'off', T + 3000),
      String(T + 3000),
      member(other, 'v', 'on', T + 5000),
      String(T + 5000),
    ]);
    // A boundary that passed before a revision and was not scheduled is not added by it.
    expect(
      await scheduleRevision(a, 4, T + 1500, [
        ['v', 'on', T + 1010],
        ['w', 'on', T + 1200],
        ['v', 'off', T + 3000],
      ]),
    ).to.equal(0);
    // Firing takes it off the content's list; the same revision read again does not bring it back.
    expect(await s().fireTimestate(schedule, fired, `ct:{${P}}:${a}`, events, by, next, member(a, 'v', 'on', T + 1010), '4', '', 1000, a, T + 1500)).to.equal(
      1,
    );
    expect(await listOf(a)).to.deep.equal({ r: 4, m: [member(a, 'v', 'off', T + 3000)] });
    expect(
      await scheduleRevision(a, 4, T + 1500, [
        ['v', 'on', T + 1010],
        ['v', 'off', T + 3000],
      ]),
    ).to.equal(0);
    expect((await scheduled()).filter((_, i) => i % 2 === 0)).to.deep.equal([member(a, 'v', 'off', T + 3000), member(other, 'v', 'on', T + 5000)]);
    // A revision without windows (or a delete) takes the content's boundaries off, and its list.
    expect(await scheduleRevision(a, 5, T + 1600, [])).to.equal(0);
    expect((await scheduled()).filter((_, i) => i % 2 === 0)).to.deep.equal([member(other, 'v', 'on', T + 5000)]);
    expect(await listOf(a)).to.equal(null);
    // The last boundary of a content fired: its list goes too.
    expect(
      await s().fireTimestate(schedule, fired, `ct:{${P}}:${other}`, events, by, next, member(other, 'v', 'on', T + 5000), '1', '', 1000, other, T + 1500),
    ).to.equal(1);
    expect(await redis.exists(by)).to.equal(0);
    expect(await scheduled()).to.deep.equal([]);
  });

  it('acknowledges the events it was given in the same script', async () => {
    await redis.xgroup('CREATE', events, TIMESTATE_GROUP, '0', 'MKSTREAM');
    for (let i = 0; i < 3; i++) await redis.xadd(events, '*', 'e', 'x');
    const read = (await redis.xreadgroup('GROUP', TIMESTATE_GROUP, 'c', 'COUNT', 10, 'STREAMS', events, '>')) as [string, [string, string[]][]][];
    const ids = read[0][1].map(([id]) => id);
    expect(ids).to.have.length(3);
    expect(((await redis.xpending(events, TIMESTATE_GROUP)) as [number])[0]).to.equal(3);
    await scheduleRevision('kc', 1, T, [['v', 'on', T + 1000]], ids);
    expect(((await redis.xpending(events, TIMESTATE_GROUP)) as [number])[0]).to.equal(0);
    expect(await listOf('kc')).to.deep.equal({ r: 1, m: [member('kc', 'v', 'on', T + 1000)] });
  });

  it('takes the revisions of one call in order: a boundary that passed between two of them, on both, stays', async () => {
    const d = 'kd';
    const x = member(d, 'v', 'on', T + 100);
    // Revision 1 (at T) sets onTime T + 100; revision 2 (at T + 200, same window) comes in the same batch.
    const args = [...revision(d, 1, T, [['v', 'on', T + 100]]), ...revision(d, 2, T + 200, [['v', 'on', T + 100]]).slice(2)];
    expect(await s().scheduleTimestate(schedule, fired, by, next, events, ...args)).to.equal(1);
    expect(await redis.zscore(schedule, x)).to.equal(String(T + 100));
    expect(await listOf(d)).to.deep.equal({ r: 2, m: [x] });
  });

  it("keeps each content's place in the fair queue: its earliest boundary, or the tick that left it some due", async () => {
    const e = 'ke';
    const b1 = member(e, 'v', 'on', T + 100);
    const b2 = member(e, 'w', 'on', T + 200);
    const b3 = member(e, 'v', 'off', T + 9000);
    const sched = (rev: number, bs: [string, 'on' | 'off', number][]) => scheduleRevision(e, rev, T, bs);
    const fire = (m: string, tick: number) => s().fireTimestate(schedule, fired, `ct:{${P}}:${e}`, events, by, next, m, '1', '', 1000, e, tick);
    await sched(1, [
      ['v', 'on', T + 100],
      ['w', 'on', T + 200],
      ['v', 'off', T + 9000],
    ]);
    expect(await redis.zscore(next, e)).to.equal(String(T + 100));
    // Fired at the tick T + 500 with T + 200 still due: it waits behind the contents due before that tick.
    expect(await fire(b1, T + 500)).to.equal(1);
    expect(await redis.zscore(next, e)).to.equal(String(T + 500));
    // Nothing due left: its place is its next boundary's time.
    expect(await fire(b2, T + 600)).to.equal(1);
    expect(await redis.zscore(next, e)).to.equal(String(T + 9000));
    // A revision without windows: no place, no list.
    await sched(2, []);
    expect(await redis.zscore(next, e)).to.equal(null);
    expect(await redis.zscore(schedule, b3)).to.equal(null);
    expect(await listOf(e)).to.equal(null);
  });
});
