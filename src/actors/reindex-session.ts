import { hostname } from 'node:os';
import { pack, unpack } from '../adapters/codec.js';
import type { ContentStore } from '../adapters/content-store.js';
import { newContentKey } from '../adapters/ids.js';
import { keys, connectRedis, type RedisClient } from '../adapters/redis.js';
import { ensureGroup } from '../adapters/redis-streams.js';
import type { Logger } from '../adapters/log.js';
import type { SolrEngine } from '../adapters/search-engine.js';
import type { Settings } from '../../config/settings.js';
import type { IndexingRules } from './indexing.js';
import { IndexWriter } from './index-writer.js';
import { readGroup, readOrRetry, type ReadRetry } from './stream-reads.js';
import { retryWithBackoff } from '../wait.js';

export const REINDEXER_GROUP = 'reindexer';
/** Content keys per record on the re-index topic. */
const CHUNK = 250;
const SESSION_TTL_S = 7 * 86400;

/** What a session re-indexes. */
export type ReindexScope = { kind: 'full'; from?: number; to?: number } | { kind: 'type'; type: string } | { kind: 'contents'; cids: string[] };

interface ReindexRecord {
  session: string;
  total: number;
  cids: string[];
}

/**
 * Re-indexing sessions (spec: Re-indexing endpoints, Events 5-6). A trigger finds the content
 * in the partition catalogs and queues it, in records of CHUNK keys, on the re-index topic
 * (`svcReindexEvents`), a secondary stream apart from the content events. Re-index actors
 * (consumer group `reindexer`) index each record and log start, progress and completion.
 */
export class ReindexSessions {
  constructor(
    private readonly redis: RedisClient,
    private readonly store: ContentStore,
    private readonly settings: Settings,
  ) {}

  /** Queues the content of a scope; returns the session id and how many contents were queued. */
  async trigger(scope: ReindexScope): Promise<{ session: string; total: number }> {
    const cids = await this.select(scope);
    const session = newContentKey();
    await this.redis.hset(keys.reindexSession(session), 'total', cids.length, 'done', 0, 'started', Date.now());
    await this.redis.expire(keys.reindexSession(session), SESSION_TTL_S);
    await this.redis.zadd(keys.reindexSessions, Date.now(), session);
    await this.redis.zremrangebyrank(keys.reindexSessions, 0, -21); // the latest 20
    const topic = keys.reindexQueue(this.settings.REINDEX_TOPIC);
    for (let i = 0; i < cids.length; i += CHUNK) {
      const record: ReindexRecord = { session, total: cids.length, cids: cids.slice(i, i + CHUNK) };
      await this.redis.xadd(topic, '*', 'r', pack(record));
    }
    if (cids.length === 0) await this.redis.xadd(topic, '*', 'r', pack({ session, total: 0, cids: [] } satisfies ReindexRecord));
    return { session, total: cids.length };
  }

  private async select(scope: ReindexScope): Promise<string[]> {
    if (scope.kind === 'contents') return [...new Set(scope.cids)];
    const out: string[] = [];
    for (let p = 0; p < this.settings.PARTITIONS; p++) {
      out.push(
        ...(scope.kind === 'type' ? await this.store.ofType(p, scope.type) : await this.store.changedBetween(p, scope.from ?? -Infinity, scope.to ?? Infinity)),
      );
    }
    return out;
  }
}

/** The re-index actor: consumes the re-index topic and logs each session's progress. */
export class Reindexer {
  private readonly consumer = `${hostname()}:${process.pid}`;
  private running = true;
  private loop?: Promise<void>;
  private readonly conn: RedisClient;
  private readonly lastProgress = new Map<string, number>();
  /** Sets aside what the engine refuses, as the indexer does. */
  private readonly writer: IndexWriter;

  constructor(
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly rules: IndexingRules,
    private readonly engine: SolrEngine,
    private readonly log: Logger,
  ) {
    this.conn = connectRedis(settings, { blocking: true, name: 'reindexer', log: this.log });
    this.writer = new IndexWriter(engine, redis, settings.PARTITIONS, log);
  }

  private get topic(): string {
    return keys.reindexQueue(this.settings.REINDEX_TOPIC);
  }

  async start(): Promise<void> {
    await ensureGroup(this.redis, this.topic, REINDEXER_GROUP);
    this.loop = this.run();
    this.log.info({ topic: this.topic }, 're-indexer started');
  }

  async stop(): Promise<void> {
    this.running = false;
    this.conn.disconnect();
    await this.loop;
  }

  private async run(): Promise<void> {
    // First what this consumer read before a restart and never acknowledged, then new records.
    let cursor = '0';
    const retry: ReadRetry = { running: () => this.running, warn: (e) => this.log.warn({ err: String(e) }, 're-index read failed, retrying'), retryMs: 500 };
    while (this.running) {
      const res = await readOrRetry(
        () => readGroup(this.conn, { group: REINDEXER_GROUP, consumer: this.consumer, count: 4, blockMs: 1000, streams: [this.topic], ids: [cursor] }),
        retry,
      );
      if (res === 'failed') continue;
      const entries = res?.[0]?.[1] ?? [];
      if (cursor === '0' && entries.length === 0) cursor = '>';
      // The records of a read are indexed side by side (the engine takes batches in parallel).
      await Promise.all(entries.map(([id, fields]) => this.process(id.toString(), fields[1])));
      if (cursor !== '>' && entries.length) cursor = entries[entries.length - 1][0].toString();
    }
  }

  private async process(entryId: string, raw: Buffer | undefined): Promise<void> {
    let rec: ReindexRecord | null = null;
    try {
      rec = raw ? unpack<ReindexRecord>(raw) : null;
    } catch {
      rec = null;
    }
    if (!rec) {
      await this.redis.xack(this.topic, REINDEXER_GROUP, entryId);
      return;
    }
    const key = keys.reindexSession(rec.session);
    if ((await this.redis.hsetnx(key, 'logged', 1)) === 1) {
      this.log.info(`Re-indexing session ${rec.session} started with a total of ${rec.total} content queued.`);
    }
    const { session, cids } = rec;
    await retryWithBackoff(
      async () => this.writer.write(await Promise.all(cids.map((cid) => this.rules.docsOf(cid)))),
      () => this.running,
      (e, attempt) => this.log.warn({ err: String(e), session, attempt }, 're-indexing a record failed; retrying'),
    );
    if (!this.running) return;
    const done = await this.redis.hincrby(key, 'done', rec.cids.length);
    await this.redis.xack(this.topic, REINDEXER_GROUP, entryId);
    const started = Number(await this.redis.hget(key, 'started')) || Date.now();
    const seconds = (Date.now() - started) / 1000;
    if (done >= rec.total) {
      if ((await this.redis.hsetnx(key, 'completed', Date.now())) === 1) {
        await this.engine.commit().catch(() => undefined);
        this.log.info(
          `Re-indexing session ${rec.session} complete. Duration: ${Math.round(seconds)} seconds (${Math.round(rec.total / Math.max(seconds, 0.001))} content / second).`,
        );
      }
    } else if (Date.now() - (this.lastProgress.get(rec.session) ?? 0) >= 1000) {
      this.lastProgress.set(rec.session, Date.now());
      this.log.info(`Re-indexing session ${rec.session} progress: ${Math.floor((done / rec.total) * 100)}% (duration: ${Math.round(seconds)} seconds).`);
    }
  }
}
