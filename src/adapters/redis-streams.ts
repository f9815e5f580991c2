import type { RedisClient } from './redis.js';

/** One stream entry as the Buffer forms of XREADGROUP and XAUTOCLAIM return it. */
export type StreamEntry = [id: Buffer, fields: Buffer[]];

/**
 * Creates the consumer group (and the stream), reading from the start (`from` '0') or only what
 * comes next ('$'); a group that exists already is left as it is.
 */
export async function ensureGroup(redis: RedisClient, stream: string, group: string, from: '0' | '$' = '0'): Promise<void> {
  try {
    await redis.xgroup('CREATE', stream, group, from, 'MKSTREAM');
  } catch (e) {
    if (!String(e).includes('BUSYGROUP')) throw e;
  }
}

/** ioredis has the Buffer form of XAUTOCLAIM at run time but not in its types (and `callBuffer` loses the command name under auto-pipelining). */
type XAutoClaim = { xautoclaimBuffer(...args: (string | number)[]): Promise<unknown> };

/**
 * XAUTOCLAIM stream group consumer minIdleMs start COUNT count, with Buffer replies: takes over
 * entries pending longer than `minIdleMs`; answers the cursor to continue from ('0-0' at the end)
 * and the entries (a deleted entry comes back without fields).
 */
export async function autoclaim(
  redis: RedisClient,
  stream: string,
  group: string,
  consumer: string,
  minIdleMs: number,
  start: string,
  count: number,
): Promise<[next: Buffer, entries: StreamEntry[]]> {
  return (await (redis as unknown as XAutoClaim).xautoclaimBuffer(stream, group, consumer, minIdleMs, start, 'COUNT', count)) as [Buffer, StreamEntry[]];
}
