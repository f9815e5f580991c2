import type { RedisClient } from '../../src/adapters/redis.js';

/** The bytes a Redis of the test's own sent since it started (nothing else reads from it). */
export async function sentByRedis(redis: RedisClient): Promise<number> {
  return Number(/total_net_output_bytes:(\d+)/.exec(await redis.info('stats'))![1]);
}

/**
 * Waits until Redis sends next to nothing (under 20 KB in 200 ms: the indexer and the change
 * feed's fan-out done with what was just written), at most `rounds` of 200 ms, so that the bytes
 * measured next are those of the request measured.
 */
export async function redisSettled(redis: RedisClient, rounds = 100): Promise<void> {
  for (let i = 0, last = await sentByRedis(redis); i < rounds; i++) {
    await new Promise((r) => setTimeout(r, 200));
    const now = await sentByRedis(redis);
    if (now - last < 20_000) return;
    last = now;
  }
}
