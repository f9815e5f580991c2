import { hostname } from 'node:os';
import { setImmediate as yieldToIo } from 'node:timers/promises';
import { unpack } from '../adapters/codec.js';
import { keys, connectRedis, INDEXER_GROUP, type RedisClient } from '../adapters/redis.js';
import { autoclaim, ensureGroup, type StreamEntry } from '../adapters/redis-streams.js';
import type { Logger } from '../adapters/log.js';
import type { ContentDocs, SolrEngine } from '../adapters/search-engine.js';
import type { Settings } from '../../config/settings.js';
import type { ContentEvent } from '../content/model.js';
import type { IndexingRules } from './indexing.js';
import { IndexWriter } from './index-writer.js';
import { readGroup, readOrRetry, type ReadRetry } from './stream-reads.js';
import { sleep } from '../wait.js';
import { retryWithBackoff } from '../wait.js';

const BLOCK_MS = 1000;
/**
 * Events one read takes in all, shared by the streams it reads (XREADGROUP's COUNT is per stream).
 * An indexer behind (the engine slower than the commits) read INDEX_BATCH from each of 64 streams,
 * 12,800 events, whose reply and events were decoded in one go: 15-34 ms during which a process
 * that also serves HTTP answered nothing (the p99 of its creates).
 */
const READ_AT_ONCE = 1024;
/** Contents whose documents are made together before the event loop takes its other work (Indexer.index). */
const DOCS_AT_ONCE = 32;
/**
 * Events read by a consumer that died are taken over after this long. Short, because indexing
 * is idempotent (the current documents of a content are sent again): taking over the events of
 * an indexer that is only slow (retrying a Solr outage) costs repeated work, never a wrong
 * index, while a dead indexer's events wait this long to be indexed.
 */
const CLAIM_IDLE_MS = 5000;

/**
 * The indexer: consumes every partition's content event stream in the `indexer` consumer
 * group (many indexer processes share the work) and makes the index hold what IndexingRules
 * says for each content named by a batch of events. It always indexes the content's current
 * state, so order and repeats do not matter. A document the engine refuses is set aside and the
 * rest of the batch indexed (IndexWriter). A search engine outage leaves the events
 * unacknowledged; they are retried with back-off and nothing is lost.
 */
export class Indexer {
  private readonly consumer = `${hostname()}:${process.pid}`;
  private running = true;
  private readonly loops: Promise<void>[] = [];
  private readonly conns: RedisClient[] = [];
  private claimTimer?: NodeJS.Timeout;
  /** Entries this process holds (`<stream>/<id>`) until indexed: never taken over as abandoned. */
  private readonly inFlight = new Set<string>();
  private readonly writer: IndexWriter;

  constructor(
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly rules: IndexingRules,
    engine: SolrEngine,
    private readonly log: Logger,
  ) {
    this.writer = new IndexWriter(engine, redis, settings.PARTITIONS, log);
  }

  async start(): Promise<void> {
    const P = this.settings.PARTITIONS;
    for (let p = 0; p < P; p++) {
      await ensureGroup(this.redis, keys.events(p), INDEXER_GROUP);
    }
    // One blocking reader over all streams; on Redis Cluster one per partition (no cross-slot reads).
    const groups = this.settings.REDIS_CLUSTER_NODES ? Array.from({ length: P }, (_, p) => [p]) : [Array.from({ length: P }, (_, p) => p)];
    for (const parts of groups) {
      const conn = connectRedis(this.settings, { blocking: true, name: 'indexer', log: this.log });
      this.conns.push(conn);
      this.loops.push(this.run(conn, parts));
    }
    this.claimTimer = setInterval(() => void this.claimAbandoned(), CLAIM_IDLE_MS / 2);
    this.claimTimer.unref();
    this.log.info({ consumer: this.consumer }, 'indexer started');
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.claimTimer);
    for (const c of this.conns) c.disconnect();
    await Promise.all(this.loops);
  }

  private async run(conn: RedisClient, partitions: number[]): Promise<void> {
    const streams = partitions.map((p) => keys.events(p));
    const retry: ReadRetry = { running: () => this.running, warn: (e) => this.log.warn({ err: e }, 'event read failed, retrying'), retryMs: 500 };
    const count = Math.max(1, Math.ceil(READ_AT_ONCE / streams.length));
    const query = { group: INDEXER_GROUP, consumer: this.consumer, count, blockMs: BLOCK_MS, streams, ids: streams.map(() => '>') };
    while (this.running) {
      const res = await readOrRetry(() => readGroup(conn, query), retry);
      if (res === 'failed' || !res) continue;
      await this.indexUntilDone(res.map(([stream, entries]) => ({ stream: stream.toString(), entries })));
      // Caught up: the next read waits a little and indexes what came meanwhile as one batch,
      // rather than one read and one update request per commit (searchable budget: 2 s).
      if (res.every(([, entries]) => entries.length < count)) await sleep(this.settings.INDEX_FOLLOW_MS);
    }
  }

  /** Indexes a batch, retrying with back-off while the engine is out, then acknowledges it. */
  private async indexUntilDone(batch: { stream: string; entries: StreamEntry[] }[]): Promise<void> {
    const held = batch.flatMap(({ stream, entries }) => entries.map(([id]) => `${stream}/${id}`));
    for (const k of held) this.inFlight.add(k);
    try {
      await this.indexHeld(batch);
    } finally {
      for (const k of held) this.inFlight.delete(k);
    }
  }

  private async indexHeld(batch: { stream: string; entries: StreamEntry[] }[]): Promise<void> {
    const cids = new Set<string>();
    /** The requests whose changes this batch indexes: gateway → actor → indexer in the logs. */
    const requestIds: string[] = [];
    for (const { entries } of batch) {
      for (const [, fields] of entries) {
        try {
          const event = unpack<ContentEvent>(fields[1]);
          cids.add(event.cid);
          if (event.requestId) requestIds.push(event.requestId);
        } catch {
          // an unreadable event names no content; it is acknowledged with the rest
        }
      }
    }
    await retryWithBackoff(
      async () => {
        await this.index([...cids]);
        this.log.debug({ contents: cids.size, requestIds }, 'indexed');
      },
      () => this.running,
      (e, attempt, wait) =>
        this.log.warn(
          { err: String(e), attempt, retryInMs: wait, contents: cids.size, requestIds: requestIds.slice(0, 20) },
          'indexing failed; events kept for retry',
        ),
    );
    if (!this.running) return;
    await Promise.all(batch.map(({ stream, entries }) => entries.length && this.redis.xack(stream, INDEXER_GROUP, ...entries.map(([id]) => id))));
  }

  /**
   * Sends the current documents of these contents to the engine, in batches. The documents are
   * made DOCS_AT_ONCE contents at a time, with the event loop's other work between: made all at
   * once, the documents of a batch of hundreds of creates held every request of a process that
   * also serves HTTP for tens of milliseconds (its p99).
   */
  async index(cids: string[]): Promise<void> {
    const all: ContentDocs[] = [];
    for (let i = 0; i < cids.length; i += DOCS_AT_ONCE) {
      if (i > 0) await yieldToIo();
      all.push(...(await Promise.all(cids.slice(i, i + DOCS_AT_ONCE).map((cid) => this.rules.docsOf(cid)))));
    }
    for (let i = 0; i < all.length; i += this.settings.INDEX_BATCH) await this.writer.write(all.slice(i, i + this.settings.INDEX_BATCH));
  }

  /** Takes over events that a dead indexer read and never acknowledged. */
  private async claimAbandoned(): Promise<void> {
    for (let p = 0; p < this.settings.PARTITIONS && this.running; p++) {
      try {
        const [, entries] = await autoclaim(this.redis, keys.events(p), INDEXER_GROUP, this.consumer, CLAIM_IDLE_MS, '0-0', this.settings.INDEX_BATCH);
        // Entries this process is still retrying are not abandoned: XAUTOCLAIM hands them over
        // once idle, and indexing them again started one more retry loop every few seconds.
        const live = entries.filter((e) => e?.[1] && !this.inFlight.has(`${keys.events(p)}/${e[0]}`));
        if (live.length) {
          this.log.info({ partition: p, events: live.length }, 'indexer took over abandoned events');
          await this.indexUntilDone([{ stream: keys.events(p), entries: live }]);
        }
      } catch (e) {
        this.log.warn({ err: String(e), partition: p }, 'claiming abandoned events failed');
      }
    }
  }
}
