import { expect } from 'chai';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { loadSettings } from '../../config/settings.js';
import { createLogger } from '../../src/adapters/log.js';
import { pack } from '../../src/adapters/codec.js';
import type { ContentEvent } from '../../src/content/model.js';
import { Client, startTestPlatform } from '../support/platform.js';

type Copy = { auditCopy(events: string, trail: string, group: string, minId: string, ...pairs: string[]): Promise<number> };

/**
 * The audit copy script (src/actors/scripts/audit-copy-2.lua): an event goes into the trail once,
 * under its own stream id, and is acknowledged in the same step; a copy made again (a copier that
 * died after the script ran and before it knew) is seen; an event older than the trail's newest
 * entry (taken over from another copier) is still recorded.
 */
describe('revisions: audit copy script', () => {
  let redis: RedisClient;
  const events = `events:{audit-copy-${Date.now()}}`;
  const trail = `auditlog:{audit-copy-${Date.now()}}`;

  before(async () => {
    redis = connectRedis(loadSettings({ ...process.env }), { name: 'audit-copy-test', log: createLogger('silent') });
    await redis.xgroup('CREATE', events, 'audit', '0', 'MKSTREAM');
  });
  after(async () => {
    await redis.del(events, trail);
    redis.disconnect();
  });

  it('copies once under the event id, acknowledges, sees a second copy, records a late one', async () => {
    const ids: string[] = [];
    for (const e of ['a', 'b', 'c']) ids.push((await redis.xadd(events, '*', 'e', e))!);
    await redis.xreadgroup('GROUP', 'audit', 'me', 'COUNT', 10, 'STREAMS', events, '>');
    const copy = (redis as unknown as Copy).auditCopy.bind(redis);
    // 'b' is not audited: acknowledged only.
    expect(await copy(events, trail, 'audit', '0-0', ids[0], 'A', ids[1], '', ids[2], 'C')).to.equal(2);
    expect((await redis.xrange(trail, '-', '+')).map(([id, f]) => [id, f[1]])).to.deep.equal([
      [ids[0], 'A'],
      [ids[2], 'C'],
    ]);
    expect(((await redis.xpending(events, 'audit')) as [number])[0]).to.equal(0);
    // The same copy again: nothing new.
    expect(await copy(events, trail, 'audit', '0-0', ids[0], 'A', ids[2], 'C')).to.equal(0);
    expect(await redis.xlen(trail)).to.equal(2);
    // 'b' recorded late (older than the newest entry): appended with a new id, its own in src.
    expect(await copy(events, trail, 'audit', '0-0', ids[1], 'B')).to.equal(1);
    const last = (await redis.xrevrange(trail, '+', '-', 'COUNT', 1))[0];
    expect(last[1]).to.deep.equal(['e', 'B', 'src', ids[1]]);
  });

  it('a new owner takes over events an earlier copier read and never copied', async function () {
    this.timeout(30_000);
    // A first platform makes the `audit` groups, then goes.
    const first = await startTestPlatform();
    await first.stop();
    const user = `ghost${Date.now()}`;
    const event: ContentEvent = {
      kind: 'updated',
      cid: `k${Date.now()}`,
      rev: 7,
      type: 'article',
      version: 'v1',
      ts: Date.now(),
      userId: user,
      requestId: 'r-1',
    };
    await redis.xadd('events:{0}', '*', 'e', pack(event));
    // A copier that read it and died before copying: the event is pending on its consumer.
    await redis.xreadgroup('GROUP', 'audit', 'dead-copier', 'COUNT', 100000, 'STREAMS', 'events:{0}', '>');
    const p = await startTestPlatform();
    try {
      const sysadmin = await new Client(p.base).login('sysadmin');
      let entries: { user: string; revision: number; via: string; requestId: string }[] = [];
      for (let i = 0; i < 100 && !entries.length; i++) {
        entries = (await sysadmin.req('GET', `/audit?user=${user}`)).json.entries;
        if (!entries.length) await new Promise((r) => setTimeout(r, 100));
      }
      expect(entries.map((e) => [e.user, e.revision, e.via, e.requestId])).to.deep.equal([[user, 7, 'main', 'r-1']]);
      const pending = (await redis.xpending('events:{0}', 'audit', '-', '+', 10, 'dead-copier')) as unknown[];
      expect(pending).to.deep.equal([]);
    } finally {
      await p.stop();
    }
  });
});
