import { LRUCache } from 'lru-cache';
import type { Settings } from '../../config/settings.js';
import { unpack } from '../adapters/codec.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { Logger } from '../adapters/log.js';
import { snapshotBytes } from '../adapters/event-reader.js';
import { keys, connectRedis, type RedisClient } from '../adapters/redis.js';
import type { ContentEvent, Snapshot } from '../content/model.js';
import { sleep } from '../wait.js';

/** How long a head may be served without news of a change (a safety net behind the events). */
const TTL_MS = 5000;
const READ_COUNT = 1000;
/**
 * The pause of the event tail after a read that did not fill a batch. A change made through
 * another gateway is seen up to this much later (the budget is 1 s); in exchange a busy
 * gateway's tail wakes once per pause rather than once per commit: single-client create p50
 * 568-570 us with a tail woken by every commit, 439-456 us with this pause.
 */
const FOLLOW_IDLE_MS = 10;

/**
 * The heads of contents, kept in process for reads. A head changes with every commit; every
 * commit appends its event, and this cache tails every partition's event stream and drops the
 * heads it names, so a change made through any gateway is seen within the event latency.
 * Writes answered through this gateway drop their head at once. `atLeastRevision` skips a
 * cached head older than the revision asked for. Bounded by entries and by bytes
 * (`READ_CACHE_BYTES`, each head counted by `snapshotBytes`): a head's metadata aspects may weigh
 * megabytes decoded, and a head past its TTL stays held until it is evicted. A heavy head is
 * kept like any other (not decoding it again on each read is what the cache is for). Bounded by entries alone (50,000), the heads of 40
 * contents whose metadata held 99,000 empty objects each, read once by a reader, kept 242 MiB
 * (review 21, F2).
 */
export class HeadCache {
  private readonly heads: LRUCache<string, { snap: Snapshot | null }>;
  /** Per content, the invalidation count when it was last dropped (guards in-flight loads). */
  private readonly dropped = new LRUCache<string, number>({ max: 100000 });
  private epoch = 0;
  private running = false;
  /** True once the tail knows where each stream is: only then may heads be kept. */
  private ready = false;
  private conn?: RedisClient;
  private loop?: Promise<void>;

  constructor(
    private readonly store: ContentStore,
    private readonly settings: Settings,
    private readonly log: Logger,
    max = settings.READ_CACHE_ENTRIES,
  ) {
    // Its own budget of READ_CACHE_BYTES; 0 (the versioned-read cache off) leaves it at the default 64 MiB.
    const bytes = settings.READ_CACHE_BYTES > 0 ? settings.READ_CACHE_BYTES : 64 * 1024 * 1024;
    this.heads = new LRUCache({
      max: Math.max(1, max),
      ttl: TTL_MS,
      maxSize: bytes,
      sizeCalculation: (e) => (e.snap ? snapshotBytes(e.snap) : 64),
    });
  }

  /** Tails the event streams; on Redis Cluster (no multi-slot reads) the cache stays off. */
  start(): void {
    if (this.settings.REDIS_CLUSTER_NODES || this.settings.READ_CACHE_ENTRIES === 0) return;
    this.running = true;
    this.conn = connectRedis(this.settings, { blocking: true, name: 'head-cache', log: this.log });
    this.loop = this.tail(this.conn);
  }

  async stop(): Promise<void> {
    this.running = false;
    this.ready = false;
    this.conn?.disconnect();
    await this.loop;
  }

  /** The head of a content (null when it never existed), at least at revision `atLeast`. */
  async get(cid: string, atLeast = 0): Promise<Snapshot | null> {
    const hit = this.peek(cid, atLeast);
    if (hit !== undefined) return hit;
    const started = this.epoch;
    const snap = await this.store.head(cid);
    // Kept unless the head was dropped while it loaded (a drop sets a later epoch). A drop before
    // the load has an epoch of at most `started`: with `<` the content changed last would never be
    // kept until another content changed, and every read of it went to Redis.
    if (this.ready && (this.dropped.get(cid) ?? -1) <= started) this.heads.set(cid, { snap });
    return snap;
  }

  /** `get` answered from the cache at once (no promise); undefined when it must read Redis. */
  peek(cid: string, atLeast = 0): Snapshot | null | undefined {
    if (!this.ready) return undefined;
    const hit = this.heads.get(cid);
    return hit && (atLeast === 0 || (hit.snap !== null && hit.snap.rev >= atLeast)) ? hit.snap : undefined;
  }

  /** Forgets a head (a write of this gateway, or an event of any). */
  drop(cid: string): void {
    this.epoch++;
    this.dropped.set(cid, this.epoch);
    this.heads.delete(cid);
  }

  private async tail(conn: RedisClient): Promise<void> {
    const streams = Array.from({ length: this.settings.PARTITIONS }, (_, p) => keys.events(p));
    // Each stream's own last id ('$' would be taken anew at every read and skip events).
    const last = await Promise.all(streams.map(async (k) => (await this.store.redis.xrevrange(k, '+', '-', 'COUNT', 1))[0]?.[0] ?? '0-0'));
    this.ready = this.running;
    while (this.running) {
      try {
        const res = (await conn.xreadBuffer('COUNT', READ_COUNT, 'BLOCK', 2000, 'STREAMS', ...streams, ...last)) as [Buffer, [Buffer, Buffer[]][]][] | null;
        for (const [stream, entries] of res ?? []) {
          const i = streams.indexOf(stream.toString());
          for (const [id, fields] of entries) {
            last[i] = id.toString();
            try {
              this.drop(unpack<ContentEvent>(fields[1]).cid);
            } catch {
              // an unreadable event names no content
            }
          }
        }
        // Caught up: the next read waits a little and takes what came meanwhile in one answer,
        // instead of one wake-up (and one blocking read over every stream in Redis) per commit.
        if (res && !res.some(([, entries]) => entries.length >= READ_COUNT)) await sleep(FOLLOW_IDLE_MS);
      } catch (e) {
        if (!this.running) return;
        // Events may have been missed: start over with an empty cache.
        this.ready = false;
        this.heads.clear();
        this.log.warn({ err: String(e) }, 'head cache lost the event stream; cleared');
        await sleep(500);
        this.ready = this.running;
      }
    }
  }
}
