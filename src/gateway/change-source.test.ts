import { expect } from 'chai';
import { ContentStore } from '../adapters/content-store.js';
import { connectRedis, keys, type RedisClient } from '../adapters/redis.js';
import { startRedisServer, type RedisServerHandle } from '../dev/redis-server.js';
import { ChangeSource } from './change-source.js';
import type { Reads } from './reads.js';

describe('change source: the streams info every feed request reads (ChangeSource.info)', () => {
  let server: RedisServerHandle;
  let redis: RedisClient;
  let source: ChangeSource;

  before(async () => {
    // A Redis of its own: the case writes to the event streams.
    server = await startRedisServer({ appendonly: false });
    redis = connectRedis({ REDIS_URL: server.url, REDIS_CLUSTER_NODES: '' });
    source = new ChangeSource(redis, new ContentStore(redis, 4, 1000, 60), 4, null as unknown as Reads);
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('callers that come while a read is under way share the next read, which sees what happened before they came', async () => {
    await redis.xadd(keys.events(1), '*', 'e', 'first');
    const calls = async () => Number(/cmdstat_xinfo\|stream:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
    const before = await calls();
    const under = source.info();
    // On the same connection, so Redis runs it after the read under way sent its commands.
    const added = await redis.xadd(keys.events(1), '*', 'e', 'second');
    const later = Array.from({ length: 1000 }, () => source.info());
    expect(new Set(later).size, 'one read for all who came meanwhile').to.equal(1);
    const [first, next] = await Promise.all([under, later[0]]);
    expect(`${first[1].last.ms}-${first[1].last.seq}`).to.not.equal(added);
    expect(`${next[1].last.ms}-${next[1].last.seq}`, 'the shared read began after they came').to.equal(added);
    // Two reads of the 4 streams for 1,001 callers.
    expect((await calls()) - before).to.equal(8);
    // With no read under way, a caller reads at once.
    expect((await source.info())[1].last).to.deep.equal(next[1].last);
  });
});
