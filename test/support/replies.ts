import type { Redis } from 'ioredis';
import { unpack } from '../../src/adapters/codec.js';
import type { Reply } from '../../src/actors/runtime.js';
import { valueWithin } from './wait.js';

/**
 * The replies on a gateway's reply stream once it holds `n` (within 10 s). Each entry is
 * `i` <command id> `r` <reply>: the id an actor writes beside the reply must be the reply's
 * (the gateway reads it to skip, undecoded, a reply nobody waits for).
 */
export function repliesOn(redis: Redis, stream: string, n: number): Promise<Reply[]> {
  return valueWithin(
    async () => {
      const rows = (await redis.xrangeBuffer(stream, '-', '+')) as [Buffer, Buffer[]][];
      if (rows.length < n) return null;
      return rows.map(([, f]) => {
        const reply = unpack<Reply>(f[3]);
        if (f[0].toString() !== 'i' || f[1].toString() !== reply.id) throw new Error(`a reply entry without its command id: ${f.map(String).join(' ')}`);
        return reply;
      });
    },
    10_000,
    `${n} replies on ${stream}`,
  );
}
