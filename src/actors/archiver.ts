import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Settings } from '../../config/settings.js';
import { unpack } from '../adapters/codec.js';
import type { ContentStore } from '../adapters/content-store.js';
import { randomId } from '../adapters/ids.js';
import type { Logger } from '../adapters/log.js';
import { keys, packScriptArgs, type RedisClient } from '../adapters/redis.js';
import {
  type ArchiveSegment,
  decodeSegment,
  encodeSegment,
  missingSegment,
  objectName,
  packIndexEntry,
  parseIndex,
  sha256,
  ulidBytes,
} from '../adapters/version-archive.js';
import { archivePlan, type ArchivePolicy } from '../content/archive.js';
import type { Snapshot, VersionIndexEntry, VersionRecord, ViewEvent } from '../content/model.js';

/** Contents of one partition whose history is moved at the same time. */
const CONCURRENCY = 8;
/** Catalog entries read at once while scanning a partition. */
const SCAN_CHUNK = 500;
/** A segment of fewer versions than this is small: ... */
const SMALL_SEGMENT = 32;
/** ... and a move folds the content's trailing small segments into its own once there are this many. */
const COMPACT_AT = 8;

/** What archive-move-8.lua answers. */
export enum MoveOutcome {
  Moved = 1,
  LeaseLost = -1,
  Changed = -2,
  IndexMoved = -3,
}

/** The object store failed: the rest of the pass waits for the next one (nothing leaves Redis without its copy). */
class StoreFailed extends Error {}

/** Steps a test can fail or stop at (a crash between copying and removing, say). */
export interface ArchiverHooks {
  /** After the segment is in the object store, before it is read back. */
  afterPut?: (cid: string, name: string) => Promise<void> | void;
  /** After it was read back and verified, before Redis lets go of anything. */
  beforeRemove?: (cid: string) => Promise<void> | void;
}

export interface PassStats {
  contents: number;
  moved: number;
  versions: number;
  revisions: number;
  bytes: number;
  /** Moves given up because the content changed meanwhile (tried again next pass). */
  changed: number;
  failed: number;
}

/**
 * The archiver role (issue 25): moves old history of every content out of Redis into the version
 * archive of the file store (src/adapters/version-archive.ts), leaving a small index so that
 * every read finds it again (ContentStore). What moves is decided by src/content/archive.ts.
 *
 * Each partition has one archiver at a time (`arc:{p}:lease`, taken with SET NX and renewed).
 * A move of one content: its history is read in one transaction, the segment is written to the
 * object store under a new name, read back and compared (sha-256), then one script
 * (archive-move-8.lua) checks the lease (the fence) and that the content is still at the revision
 * the move was planned on (a version put on a view meanwhile stays), records the segment in
 * `ar:{p}:<cid>` and removes what it holds from Redis. A process killed at any step leaves either
 * nothing changed in Redis (at worst an object nobody's index names) or the whole move done.
 */
export class Archiver {
  private readonly owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly owned = new Set<number>();
  private running = false;
  private leaseTimer?: NodeJS.Timeout;
  private passTimer?: NodeJS.Timeout;
  private pass?: Promise<PassStats>;

  constructor(
    private readonly redis: RedisClient,
    private readonly store: ContentStore,
    private readonly settings: Settings,
    private readonly log: Logger,
    private readonly clock: () => number = Date.now,
    readonly hooks: ArchiverHooks = {},
  ) {}

  /** Takes the partitions' leases and runs a pass every ARCHIVE_INTERVAL_SECONDS (the first one interval after start). */
  async start(): Promise<void> {
    this.running = true;
    await this.tryLeases();
    this.leaseTimer = setInterval(() => void this.tryLeases(), Math.max(200, Math.floor(this.settings.LEASE_MS / 3)));
    const every = this.settings.ARCHIVE_INTERVAL_SECONDS * 1000;
    const next = () => {
      this.passTimer = setTimeout(() => {
        void this.runOnce()
          .catch((e: unknown) => this.log.warn({ err: String(e) }, 'archiver: pass failed'))
          .finally(() => this.running && next());
      }, every);
    };
    next();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.leaseTimer);
    clearTimeout(this.passTimer);
    await this.pass?.catch(() => undefined);
    for (const p of this.owned) await this.redis.releaseLease(keys.archiveLease(p), this.owner).catch(() => 0);
    this.owned.clear();
  }

  /** The partitions this process archives now. */
  get partitions(): number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  private async tryLeases(): Promise<void> {
    for (let p = 0; p < this.settings.PARTITIONS; p++) {
      const key = keys.archiveLease(p);
      try {
        if (this.owned.has(p)) {
          if ((await this.redis.renewLease(key, this.owner, this.settings.LEASE_MS)) !== 1) {
            this.owned.delete(p);
            this.log.warn({ partition: p }, 'archiver: lease lost');
          }
        } else if (this.running && (await this.redis.set(key, this.owner, 'PX', this.settings.LEASE_MS, 'NX')) === 'OK') {
          this.owned.add(p);
        }
      } catch (e) {
        this.owned.delete(p);
        this.log.warn({ err: String(e), partition: p }, 'archiver: lease check failed');
      }
    }
  }

  /** One pass over every partition this process holds: moves what the rule says may leave Redis. */
  runOnce(): Promise<PassStats> {
    this.pass ??= this.passAll().finally(() => (this.pass = undefined));
    return this.pass;
  }

  private async passAll(): Promise<PassStats> {
    const oneOff = !this.leaseTimer;
    let renew: NodeJS.Timeout | undefined;
    if (oneOff) {
      // Not started (a one-off run): take the leases now and keep them (renewed) for this pass.
      this.running = true;
      await this.tryLeases();
      renew = setInterval(() => void this.tryLeases(), Math.max(200, Math.floor(this.settings.LEASE_MS / 3)));
    }
    const stats: PassStats = { contents: 0, moved: 0, versions: 0, revisions: 0, bytes: 0, changed: 0, failed: 0 };
    const started = Date.now();
    for (const p of this.partitions) {
      if (!this.running && this.leaseTimer) break;
      try {
        await this.archivePartition(p, stats);
      } catch (e) {
        stats.failed++;
        if (e instanceof StoreFailed) {
          this.log.warn({ err: e.message }, 'archiver: the object store failed; the pass stops, nothing more leaves Redis until the next pass');
          break;
        }
        this.log.warn({ err: String(e), partition: p }, 'archiver: partition pass stopped; the rest waits for the next pass');
      }
    }
    if (oneOff) {
      clearInterval(renew);
      for (const p of this.owned) await this.redis.releaseLease(keys.archiveLease(p), this.owner).catch(() => 0);
      this.owned.clear();
      this.running = false;
    }
    if (stats.moved || stats.failed) this.log.info({ ...stats, ms: Date.now() - started }, 'archiver: pass done');
    return stats;
  }

  private policy(): ArchivePolicy {
    return { keep: this.settings.ARCHIVE_KEEP_REVISIONS, cutoff: this.clock() - this.settings.ARCHIVE_AFTER_DAYS * 86_400_000 };
  }

  /**
   * Every content of the partition with more history in Redis than its head: a cheap look first
   * (how many revisions and versions Redis holds), then the move. An object store failure stops
   * the partition's pass (nothing is removed from Redis without its copy).
   */
  private async archivePartition(p: number, stats: PassStats): Promise<void> {
    await this.redis.hset(keys.archiveStats(p), 'backlog', 0);
    const catalog = keys.catalog(p);
    for (let at = 0; ; at += SCAN_CHUNK) {
      if (!this.owned.has(p)) return;
      const cids = await this.redis.zrange(catalog, String(at), String(at + SCAN_CHUNK - 1));
      if (!cids.length) return;
      const counts = await Promise.all(cids.map((cid) => this.redis.hlen(keys.revisions(p, cid))));
      const todo = cids.filter((_, i) => counts[i] > 1);
      let next = 0;
      let failure: unknown;
      const worker = async () => {
        while (next < todo.length && failure === undefined && this.owned.has(p)) {
          const cid = todo[next++];
          try {
            await this.archiveContent(p, cid, stats);
          } catch (e) {
            failure = e;
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, todo.length) }, worker));
      if (failure !== undefined) throw failure;
      if (cids.length < SCAN_CHUNK) return;
    }
  }

  /** Moves the content's history that may leave Redis now; the outcome says what happened. */
  async archiveContent(p: number, cid: string, stats?: PassStats): Promise<'moved' | 'none' | MoveOutcome> {
    const m = await this.redis
      .multi()
      .hgetBuffer(keys.content(p, cid), 's')
      .hgetallBuffer(keys.revisions(p, cid))
      .hgetallBuffer(keys.versions(p, cid))
      .lrangeBuffer(keys.versionIndex(p, cid), 0, -1)
      .lrangeBuffer(keys.viewHistory(p, cid), 0, -1)
      .getBuffer(keys.archiveIndex(p, cid))
      .exec();
    if (!m) throw new Error('archiver: transaction aborted');
    for (const [err] of m) if (err) throw err;
    const headBuf = m[0][1] as Buffer | null;
    if (!headBuf) return 'none';
    const head = unpack<Snapshot>(headBuf);
    const rv = m[1][1] as Record<string, Buffer>;
    const vr = m[2][1] as Record<string, Buffer>;
    const vi = m[3][1] as Buffer[];
    const vh = m[4][1] as Buffer[];
    const indexBuf = m[5][1] as Buffer | null;
    const index = parseIndex(indexBuf);
    const revisions = Object.entries(rv)
      .map(([r, b]) => ({ rev: Number(r), modified: unpack<Snapshot>(b).modified, buf: b }))
      .sort((a, b) => a.rev - b.rev);
    const versions = Object.entries(vr).map(([key, b]) => ({ key, rev: unpack<VersionRecord>(b).rev, buf: b }));
    const plan = archivePlan(
      head,
      {
        revisions,
        versions,
        indexRevs: vi.map((b) => unpack<VersionIndexEntry>(b).rev),
        viewRevs: vh.map((b) => unpack<ViewEvent>(b).rev),
        archivedUpTo: index.reduce((n, e) => Math.max(n, e.hi), 0),
      },
      this.policy(),
      (k) => ulidBytes(k) !== null,
    );
    if (!plan) return 'none';
    if (stats) stats.contents++;
    await this.redis.hincrby(keys.archiveStats(p), 'backlog', plan.versions.length);

    const moving = new Set(plan.versions);
    const revs = new Set(plan.revisions);
    const segment: ArchiveSegment = {
      cid,
      revisions: revisions.filter((r) => revs.has(r.rev)).map((r) => [r.rev, r.buf]),
      versions: versions.filter((v) => moving.has(v.key)).map((v) => [v.key, v.buf]),
      index: vi.slice(0, plan.indexEntries),
      views: vh.slice(0, plan.viewEntries),
    };
    // Compaction: once a content has COMPACT_AT small segments at the end of its index (one a
    // day, say), this move's segment takes them in, and the index keeps one entry for them all.
    let tail = index.length;
    while (tail > 0 && index[tail - 1].keys.length / 16 < SMALL_SEGMENT) tail--;
    const folded = index.length - tail + 1 >= COMPACT_AT ? index.slice(tail) : [];
    let foldedBytes = 0;
    if (folded.length) {
      const loaded = await Promise.all(folded.map((e) => this.store.archive.segment(cid, e)));
      const parts = [
        ...loaded.map((l, i) => {
          if (!l) throw missingSegment(cid, folded[i]);
          foldedBytes += l.stored;
          return { revisions: [...l.revisions], versions: [...l.versions], index: l.index, views: l.views };
        }),
        segment,
      ];
      segment.revisions = parts.flatMap((x) => x.revisions);
      segment.versions = parts.flatMap((x) => x.versions);
      segment.index = parts.flatMap((x) => x.index);
      segment.views = parts.flatMap((x) => x.views);
    }
    const seg = (index.length ? index[index.length - 1].seg : 0) + 1;
    const token = randomId(6);
    const name = objectName(cid, seg, token);
    const data = await encodeSegment(segment);
    const objects = await this.store.archive.store();
    const stored = <T>(step: Promise<T>) =>
      step.catch((e: unknown) => {
        throw new StoreFailed(`${name}: ${String(e)}`);
      });
    await stored(objects.put(name, data));
    await this.hooks.afterPut?.(cid, name);
    // Verified before anything leaves Redis: the bytes read back are the bytes written, and they decode to the segment.
    const back = await stored(objects.get(name));
    if (!back || sha256(back) !== sha256(data)) throw new Error(`archiver: segment ${name} read back differs from what was written`);
    const check = await decodeSegment(back);
    if (check.versions.length !== segment.versions.length || check.revisions.length !== segment.revisions.length || check.cid !== cid) {
      throw new Error(`archiver: segment ${name} does not decode to what was written`);
    }
    await this.hooks.beforeRemove?.(cid);

    const withRevs = segment.revisions.map(([r]) => r);
    const entry = packIndexEntry({
      seg,
      token,
      lo: withRevs.length ? Math.min(...withRevs) : 1,
      hi: withRevs.length ? Math.max(...withRevs) : 0,
      indexEntries: segment.index.length,
      viewEntries: segment.views.length,
      keys: Buffer.concat([...folded.map((e) => e.keys), ...plan.versions.map((k) => ulidBytes(k)!)]),
    });
    const keep = !folded.length ? (indexBuf?.length ?? 0) : tail === 0 ? 0 : index[tail - 1].end;
    if (keep === undefined) throw new Error(`archiver: index of ${cid} without entry offsets`);
    const outcome = (await this.redis.archiveMove(
      keys.archiveLease(p),
      keys.content(p, cid),
      keys.revisions(p, cid),
      keys.versions(p, cid),
      keys.versionIndex(p, cid),
      keys.viewHistory(p, cid),
      keys.archiveIndex(p, cid),
      keys.archiveStats(p),
      packScriptArgs({
        owner: this.owner,
        headRev: head.rev,
        indexLength: indexBuf?.length ?? 0,
        // The index up to the folded entries stays; the new entry replaces them.
        indexKeep: keep,
        entry,
        folded: folded.length,
        revisions: plan.revisions.map((r) => Buffer.from(String(r))),
        versions: plan.versions.map((k) => Buffer.from(k)),
        indexEntries: plan.indexEntries,
        viewEntries: plan.viewEntries,
        bytes: data.length - foldedBytes,
      }),
    )) as MoveOutcome;
    if (outcome !== MoveOutcome.Moved) {
      // Nobody's index names the object: it goes (a failure here leaves an unnamed object, harmless).
      await objects.delete(name).catch(() => undefined);
      if (outcome === MoveOutcome.LeaseLost) this.owned.delete(p);
      if (stats) stats.changed++;
      return outcome;
    }
    // The folded segments are in the new one: their objects go (a reader holding the old index reads it again).
    for (const e of folded) await objects.delete(objectName(cid, e.seg, e.token)).catch(() => undefined);
    if (stats) {
      stats.moved++;
      stats.versions += plan.versions.length;
      stats.revisions += plan.revisions.length;
      stats.bytes += data.length;
    }
    return 'moved';
  }
}
