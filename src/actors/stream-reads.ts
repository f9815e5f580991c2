import type { RedisClient } from '../adapters/redis.js';
import type { StreamEntry } from '../adapters/redis-streams.js';
import { compareIds, parseStreamId } from '../content/change-events.js';
import { sleep } from '../wait.js';

/** What XREAD and XREADGROUP answer in Buffer form: the entries read, per stream; null when the block timed out. */
export type StreamsRead = [stream: Buffer, entries: StreamEntry[]][] | null;

/** How a reader loop takes a failed blocking read. */
export interface ReadRetry {
  /** Is the loop still running? A read that fails after a stop (its connection closed) is no fault. */
  running(): boolean;
  /** Logs the failure of a running loop. */
  warn(e: unknown): void;
  /** The pause before the loop reads again. */
  retryMs: number;
}

/**
 * One blocking read of a reader loop (the actors' commands, the indexer's events, the
 * re-index topic, a gateway's replies). A failed read (Redis restarting, a failover) answers
 * 'failed' after a warning and a pause, so the loop reads again; once the loop stopped, at once.
 */
export async function readOrRetry(read: () => Promise<unknown>, retry: ReadRetry): Promise<StreamsRead | 'failed'> {
  try {
    return (await read()) as StreamsRead;
  } catch (e) {
    if (!retry.running()) return 'failed';
    retry.warn(e);
    await sleep(retry.retryMs);
    return 'failed';
  }
}

/** XREADGROUP GROUP group consumer COUNT count BLOCK ms STREAMS ...streams ...ids, with Buffer replies. */
export function readGroup(
  conn: RedisClient,
  q: { group: string; consumer: string; count: number; blockMs: number; streams: string[]; ids: string[] },
): Promise<unknown> {
  return conn.xreadgroupBuffer('GROUP', q.group, q.consumer, 'COUNT', q.count, 'BLOCK', q.blockMs, 'STREAMS', ...q.streams, ...q.ids);
}

/**
 * Keeps a stream whose entries are consumed short, without an XTRIM per read: `consumed(id)`
 * trims up to `id` (MINID, so `id` itself stays) once a second has passed or 1,000 entries
 * were consumed since the last trim. Under load a read takes one entry, so trimming after each
 * cost one Redis command per command or reply (issue 23); a partition's command stream or a
 * gateway's reply stream now holds at most a second's or 1,000 consumed entries more. A trimmed
 * entry is never needed again: its command was processed (or its reply handed over) before
 * `consumed` was called.
 */
export class ConsumedTrimmer {
  static readonly TRIM_EVERY_MS = 1000;
  static readonly TRIM_EVERY_ENTRIES = 1000;
  private lastAt = 0;
  private since = 0;

  constructor(
    private readonly redis: Pick<RedisClient, 'xtrim'>,
    private readonly stream: string,
    private readonly now: () => number = Date.now,
    /** The oldest entry that must stay (a pending one), if any: the trim never goes past it. */
    private readonly floor?: () => Promise<string | null>,
  ) {}

  consumed(lastId: string, entries: number): void {
    this.since += entries;
    const t = this.now();
    if (this.since < ConsumedTrimmer.TRIM_EVERY_ENTRIES && t - this.lastAt < ConsumedTrimmer.TRIM_EVERY_MS) return;
    this.lastAt = t;
    this.since = 0;
    if (!this.floor) {
      this.redis.xtrim(this.stream, 'MINID', lastId).catch(() => undefined);
      return;
    }
    this.floor()
      .then((kept) => this.redis.xtrim(this.stream, 'MINID', kept !== null && compareIds(parseStreamId(kept), parseStreamId(lastId)) < 0 ? kept : lastId))
      .catch(() => undefined);
  }
}
