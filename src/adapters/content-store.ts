import { pack, unpack } from './codec.js';
import { partitionOf } from './ids.js';
import { PackWriter } from './pack-writer.js';
import { keys, ACTOR_GROUP, draftSummaryField, packScriptArgs, type RedisClient } from './redis.js';
import { parseIndex, VersionArchive } from './version-archive.js';
import { aliasTarget, aliasValue, isMainNamespace, parseAliasValue, type AliasHolder } from '../content/aliases.js';
import type { ContentEvent, Draft, DraftOrigin, Snapshot, VersionIndexEntry, VersionRecord, ViewEvent } from '../content/model.js';
import { mayNeedAssignToView } from '../content/views.js';

/** What one commit writes; see src/actors/scripts/commit-content-n.lua. */
export interface CommitInput {
  owner: string;
  expectedRev: number;
  snapshot: Snapshot;
  version?: VersionRecord;
  viewEvents: ViewEvent[];
  event: ContentEvent;
  /**
   * The reply recorded for a replay of the command, kept DEDUP_TTL_SECONDS: its few facts, not what
   * this commit writes (src/actors/content/replays.ts); absent or empty for none (a local command
   * is never replayed).
   */
  reply?: Buffer;
  commandId: string;
  /** The command's stream entry, acknowledged by the same script (absent or '' for a local command). */
  entryId?: string;
  /** The workspace whose draft this commit promotes (removed in the same step). */
  promotedFrom?: string;
}

/** What a commit script answers (its reply's first element; src/actors/scripts/commit-*.lua). */
export enum CommitOutcome {
  Committed = 1,
  /** This process no longer owns the partition's lease: nothing was written. */
  LeaseLost = -1,
  /** The head is not at the expected revision: nothing was written. */
  RevisionMoved = -2,
}

/**
 * What a workspace listing and a promote need of a draft, kept beside it (`draftSummaryField`) by
 * every write of the draft, so that neither reads a draft it does not use: its type (who may read
 * a draft of content only on the workspace), the size of the draft it was made from (a summary
 * whose size is not the stored draft's is not that draft's: the draft is read instead), and its
 * origin (`DraftOrigin`: `fromCreate`, `origin` left out for none, `views`), from which a promote
 * that conflicts is answered. A summary written before origins were kept (or kept by a listing,
 * draft-summary-adopt-1.lua) has no `fromCreate`: its promote reads the draft.
 */
interface DraftSummary {
  type: string;
  size: number;
  fromCreate?: boolean;
  origin?: string;
  views?: boolean;
}

/** A draft as a workspace listing sees it: its type, and the content's head (null: not in main, nor ever was). */
export interface ListedDraft {
  type: string;
  original: Snapshot | null;
}

/** Contents (of one partition) or aliases read by one call to Redis where many are read at once: each call is short, however many are asked. */
const BATCH = 256;
/** Keys asked of a catalog per step of its scan. */
const CATALOG_SCAN = 1000;

/** Commits of one partition in one call of the commit script, at most (ContentStore.sendCommits). */
const COMMITS_PER_CALL = 64;
/** Bytes of commit arguments in one call of the commit script, at most, unless one commit is larger. */
const COMMIT_CALL_BYTES = 1024 * 1024;
/** Writes every commit's argument (one at a time: commitArgs does not await). */
const commitArgsWriter = new PackWriter();

/** A commit waiting for its partition's call of the commit script. */
interface QueuedCommit {
  keys: string[];
  args: Buffer;
  resolve: (r: CommitResult) => void;
  reject: (e: unknown) => void;
}

export type CommitResult = { outcome: CommitOutcome.Committed | CommitOutcome.LeaseLost } | { outcome: CommitOutcome.RevisionMoved; rev: number };

/**
 * Reads and writes of content in Redis, in the layout of adapters/redis.ts. The gateway reads
 * through it directly (reads skip the actors); only content actors call `commit`.
 *
 * Old history may live in the version archive instead (issue 25, src/actors/archiver.ts): the
 * reads of past revisions, versions, history and view history below are the one place that
 * finds it there when Redis no longer has it, so every reader gets archived history unchanged,
 * byte for byte.
 */
export class ContentStore {
  /** Commits of this turn of the event loop, by partition, waiting for their call (`commit`). */
  private readonly queuedCommits = new Map<number, QueuedCommit[]>();

  constructor(
    readonly redis: RedisClient,
    readonly partitions: number,
    private readonly eventsMaxLen: number,
    private readonly dedupTtlSeconds: number,
    /** Where archived history is read; without one, a read of archived history answers 503. */
    readonly archive: VersionArchive = new VersionArchive(redis, null),
  ) {}

  partitionOf(cid: string): number {
    return partitionOf(cid, this.partitions);
  }

  /**
   * The content key an alias names, or null. `contentid/<key>` names its key directly. An
   * alias that a workspace draft reserves names its content only on that workspace.
   */
  async resolveAlias(namespace: string, alias: string, workspace?: string): Promise<string | null> {
    if (isMainNamespace(namespace)) return alias;
    return aliasTarget(await this.redis.get(keys.alias(namespace, alias)), workspace);
  }

  /**
   * Who holds an alias: `{cid}` when assigned in main, `{cid, workspace}` when a workspace
   * draft reserves it, null when free.
   */
  async aliasHolder(namespace: string, alias: string): Promise<AliasHolder | null> {
    const v = await this.redis.get(keys.alias(namespace, alias));
    return v === null ? null : parseAliasValue(v);
  }

  /** The current snapshot (deleted content included), or null when the content never existed. */
  async head(cid: string): Promise<Snapshot | null> {
    const buf = await this.redis.hgetBuffer(keys.content(this.partitionOf(cid), cid), 's');
    return buf ? unpack<Snapshot>(buf) : null;
  }

  /**
   * What Redis holds of contents and versions, in bytes, without reading them (HSTRLEN, one round
   * trip for all): the head of each content and the named version (0 where Redis has none; a
   * version moved to the archive is read from there and counted once read).
   */
  async storedSizes(wanted: readonly { cid: string; versionKey: string }[]): Promise<{ head: number; version: number }[]> {
    return Promise.all(
      wanted.map(async ({ cid, versionKey }) => {
        const p = this.partitionOf(cid);
        const [head, version] = await Promise.all([this.redis.hstrlen(keys.content(p, cid), 's'), this.redis.hstrlen(keys.versions(p, cid), versionKey)]);
        return { head, version };
      }),
    );
  }

  /**
   * The bytes Redis holds of one version, without reading it (HSTRLEN): 0 when Redis has none
   * (never stored, or moved to the archive, whose size is not known until read).
   */
  storedVersionSize(cid: string, versionKey: string): Promise<number> {
    return this.redis.hstrlen(keys.versions(this.partitionOf(cid), cid), versionKey);
  }

  /**
   * The current snapshots of some contents (null where a content never existed), in one script
   * call per partition and BATCH contents: `head` for many.
   */
  async heads(cids: readonly string[]): Promise<(Snapshot | null)[]> {
    const out: (Snapshot | null)[] = new Array(cids.length).fill(null);
    await this.eachBatch(cids, async (p, idx) => {
      const found = await this.hgetEach(idx.map((i) => [keys.content(p, cids[i]), 's']));
      idx.forEach((i, k) => {
        out[i] = found[k] ? unpack<Snapshot>(found[k]) : null;
      });
    });
    return out;
  }

  /**
   * Per content whether it exists and is not deleted (`heads` answering a snapshot not deleted),
   * without reading the snapshots: the field `d` the commit keeps beside each, in one script call
   * per partition and BATCH contents (live-heads-n.lua). What it costs does not depend on what the
   * contents hold; reading whole heads for this made one anonymous search in the variant
   * svcIndexing make Redis send 331 MB (SECURITY.md). A head committed by an older build has no
   * `d`: its snapshot is read and decoded, as before.
   */
  async liveContents(cids: readonly string[]): Promise<boolean[]> {
    const out: boolean[] = new Array(cids.length).fill(false);
    await this.eachBatch(cids, async (p, idx) => {
      const found = await this.redis.liveHeadsBuffer(idx.length, ...idx.map((i) => keys.content(p, cids[i])));
      idx.forEach((i, k) => {
        const v = found[k];
        out[i] = Buffer.isBuffer(v) ? !unpack<Snapshot>(v).deleted : v === 1;
      });
    });
    return out;
  }

  /**
   * Per content its current snapshot and, unless it is deleted, the version its head names (from
   * the archive when moved there); null where the content never existed. One script call per
   * partition and BATCH contents (the export's read), a version Redis no longer holds read after.
   */
  async currentVersions(cids: readonly string[]): Promise<({ head: Snapshot; version: VersionRecord | null } | null)[]> {
    const out: ({ head: Snapshot; version: VersionRecord | null } | null)[] = new Array(cids.length).fill(null);
    await this.eachBatch(cids, async (p, idx) => {
      const found = await this.storedForExport(
        p,
        idx.map((i) => cids[i]),
      );
      const wanting: number[] = [];
      idx.forEach((i, k) => {
        const s = found[2 * k];
        if (!s) return;
        const head = unpack<Snapshot>(s);
        const v = head.deleted ? null : found[2 * k + 1];
        out[i] = { head, version: v ? unpack<VersionRecord>(v) : null };
        if (!head.deleted && !v) wanting.push(i);
      });
      const versions = await this.storedVersionsIn(
        p,
        wanting.map((i) => [cids[i], out[i]!.head.head]),
      );
      wanting.forEach((i, k) => {
        out[i]!.version = versions[k] ? unpack<VersionRecord>(versions[k]) : null;
      });
    });
    return out;
  }

  /**
   * The content each alias names in main (null where it is free or only reserved on a workspace):
   * `resolveAlias` without a workspace for many. Aliases have slots of their own: one MGET per
   * BATCH aliases on one server; on Redis Cluster one GET each, sent together.
   */
  async aliasTargets(names: readonly (readonly [namespace: string, alias: string])[]): Promise<(string | null)[]> {
    const out: (string | null)[] = names.map(([ns, alias]) => (isMainNamespace(ns) ? alias : null));
    const asked = names.flatMap(([ns], i) => (isMainNamespace(ns) ? [] : [i]));
    for (let at = 0; at < asked.length; at += BATCH) {
      const idx = asked.slice(at, at + BATCH);
      const aliasKeys = idx.map((i) => keys.alias(names[i][0], names[i][1]));
      const values = this.redis.isCluster ? await Promise.all(aliasKeys.map((k) => this.redis.get(k))) : await this.redis.mget(aliasKeys);
      idx.forEach((i, k) => {
        out[i] = aliasTarget(values[k], undefined);
      });
    }
    return out;
  }

  /**
   * What the export lines of some contents of one partition are made of, in one call to Redis:
   * per content its stored snapshot and the stored version its head names (msgpack), flat
   * (`[s1, v1, s2, v2, ...]`); null where missing. A version is missing also when the content's
   * head was written before the head's version key was kept beside it, or when the archiver moved
   * it: `storedVersionsIn` reads those. `versions: false` reads the snapshots only (each version
   * is then missing). With `budget`, the versions read stop at the first that would take their
   * stored bytes past it (the first is read whatever its size): it and every later one are missing.
   * With `snapshotBudget`, the contents read stop at the first whose snapshot would take the
   * snapshots' stored bytes past it (the first is read whatever its size): the answer is then
   * shorter, two entries for each content read, in order.
   */
  async storedForExport(
    partition: number,
    cids: readonly string[],
    { versions = true, budget, snapshotBudget }: { versions?: boolean; budget?: number; snapshotBudget?: number } = {},
  ): Promise<(Buffer | null)[]> {
    if (!cids.length) return [];
    const keysOf = (key: (p: number, cid: string) => string) => cids.map((cid) => key(partition, cid));
    const bytes = (b: number) => String(Math.max(0, Math.floor(b)));
    const args = [...keysOf(keys.content), ...keysOf(keys.versions), versions ? '1' : '0'];
    if (budget !== undefined || snapshotBudget !== undefined) args.push(budget === undefined ? '' : bytes(budget));
    if (snapshotBudget !== undefined) args.push(bytes(snapshotBudget));
    return this.redis.exportReadBuffer(2 * cids.length, ...args);
  }

  /**
   * Versions of some contents of one partition (`[cid, version key]`) as stored (msgpack), in one
   * call to Redis; one the archiver moved is read from the archive; null where none.
   */
  async storedVersionsIn(partition: number, wanted: [string, string][]): Promise<(Buffer | null)[]> {
    if (!wanted.length) return [];
    const found = await this.hgetEach(wanted.map(([cid, key]) => [keys.versions(partition, cid), key]));
    return Promise.all(found.map(async (buf, i) => buf ?? (await this.archive.version(partition, wanted[i][0], wanted[i][1]))));
  }

  /**
   * `storedVersionsIn` within `budget` bytes of what Redis holds: the first versions, in order, up
   * to the one that would take their total past it (HSTRLEN, read before each value), at least
   * one; fewer than `wanted` when the budget ended the read. One the archiver moved is read from
   * the archive, whatever its size.
   */
  async storedVersionsWithin(partition: number, wanted: readonly (readonly [cid: string, versionKey: string])[], budget: number): Promise<(Buffer | null)[]> {
    if (!wanted.length) return [];
    const found = await this.redis.hgetEachWithinBuffer(
      wanted.length,
      ...wanted.map(([cid]) => keys.versions(partition, cid)),
      String(Math.max(0, Math.floor(budget))),
      '1',
      ...wanted.map(([, key]) => key),
    );
    return Promise.all(found.map(async (buf, i) => buf ?? (await this.archive.version(partition, wanted[i][0], wanted[i][1]))));
  }

  /** One field of each of several hashes of one partition (`[key, field]`), in one script call. */
  private hgetEach(pairs: [key: string, field: string][]): Promise<(Buffer | null)[]> {
    return this.redis.hgetEachBuffer(pairs.length, ...pairs.map(([key]) => key), ...pairs.map(([, field]) => field));
  }

  /** The positions of some content keys by partition. */
  private byPartition(cids: readonly string[]): Map<number, number[]> {
    const out = new Map<number, number[]>();
    cids.forEach((cid, i) => {
      const p = this.partitionOf(cid);
      const list = out.get(p);
      if (list) list.push(i);
      else out.set(p, [i]);
    });
    return out;
  }

  /** Runs `read` on the positions of some content keys, at most BATCH of one partition at a time (one script call each), all together. */
  private async eachBatch(cids: readonly string[], read: (partition: number, idx: number[]) => Promise<void>): Promise<void> {
    const jobs: Promise<void>[] = [];
    for (const [p, all] of this.byPartition(cids)) for (let at = 0; at < all.length; at += BATCH) jobs.push(read(p, all.slice(at, at + BATCH)));
    await Promise.all(jobs);
  }

  /** The snapshot of a revision, from Redis or the archive; null when the content never had it. */
  async snapshotAt(cid: string, rev: number): Promise<Snapshot | null> {
    const p = this.partitionOf(cid);
    // The archiver adds the index entry and removes the revision in one step: a miss here is
    // then found by the index read after it.
    const buf = (await this.redis.hgetBuffer(keys.revisions(p, cid), String(rev))) ?? (await this.archive.snapshotAt(p, cid, rev));
    return buf ? unpack<Snapshot>(buf) : null;
  }

  /**
   * Snapshots of some revisions (`[cid, rev]`), in one call to Redis per partition (a script over
   * the partition's keys, which share its hash tag, so this holds on Redis Cluster too); one the
   * archiver moved is read from the archive; null where none.
   */
  async snapshotsOf(wanted: readonly (readonly [cid: string, rev: number])[]): Promise<(Snapshot | null)[]> {
    const out: (Snapshot | null)[] = new Array(wanted.length).fill(null);
    await Promise.all(
      [...this.byPartition(wanted.map(([cid]) => cid))].map(async ([p, idx]) => {
        const found = await this.hgetEach(idx.map((i) => [keys.revisions(p, wanted[i][0]), String(wanted[i][1])]));
        await Promise.all(
          idx.map(async (i, k) => {
            const b = found[k] ?? (await this.archive.snapshotAt(p, wanted[i][0], wanted[i][1]));
            out[i] = b ? unpack<Snapshot>(b) : null;
          }),
        );
      }),
    );
    return out;
  }

  /**
   * Snapshots of some revisions of one partition's contents, in order, up to the first that would
   * take what Redis sends past `budget` bytes (that one and all after it are left out); with
   * `first`, the first is read whatever its size (one the archiver moved is read from the archive).
   * Bounds what a reader that examines entries it may not deliver (a change-feed
   * page) makes Redis send and the process hold, whatever the entries' weight.
   */
  async snapshotsWithin(wanted: readonly (readonly [cid: string, rev: number])[], budget: number, first: boolean): Promise<(Snapshot | null)[]> {
    if (!wanted.length) return [];
    const p = this.partitionOf(wanted[0][0]);
    if (wanted.some(([cid]) => this.partitionOf(cid) !== p)) throw new Error('snapshotsWithin reads one partition');
    const got = await this.redis.hgetEachWithinBuffer(
      wanted.length,
      ...wanted.map(([cid]) => keys.revisions(p, cid)),
      String(Math.max(0, Math.floor(budget))),
      first ? '1' : '0',
      ...wanted.map(([, rev]) => String(rev)),
    );
    return Promise.all(
      got.map(async (b, i) => {
        const buf = b ?? (await this.archive.snapshotAt(p, wanted[i][0], wanted[i][1]));
        return buf ? unpack<Snapshot>(buf) : null;
      }),
    );
  }

  /** A version, from Redis or the archive; null when the content never had it. */
  async version(cid: string, versionKey: string): Promise<VersionRecord | null> {
    return (await this.versionSized(cid, versionKey))?.record ?? null;
  }

  /** A version and the bytes of its stored form (for caches bounded by size); null as for version(). */
  async versionSized(cid: string, versionKey: string): Promise<{ record: VersionRecord; bytes: number } | null> {
    const buf = await this.storedVersion(cid, versionKey);
    return buf ? { record: unpack<VersionRecord>(buf), bytes: buf.length } : null;
  }

  /** A version as stored (MessagePack), from Redis or the archive; null when the content never had it. */
  async storedVersion(cid: string, versionKey: string): Promise<Buffer | null> {
    const p = this.partitionOf(cid);
    return (await this.redis.hgetBuffer(keys.versions(p, cid), versionKey)) ?? (await this.archive.version(p, cid, versionKey));
  }

  /**
   * The history entries of revisions up to `upTo` (every one without it), oldest first: the
   * archived ones, then those Redis holds.
   */
  async versionIndex(cid: string, upTo = Number.MAX_SAFE_INTEGER): Promise<VersionIndexEntry[]> {
    return this.historyList<VersionIndexEntry>(cid, keys.versionIndex, 'index', upTo);
  }

  /**
   * The view history entries of revisions up to `upTo` (every one without it), oldest first: the
   * archived ones, then those Redis holds.
   */
  async viewHistory(cid: string, upTo = Number.MAX_SAFE_INTEGER): Promise<ViewEvent[]> {
    return this.historyList<ViewEvent>(cid, keys.viewHistory, 'views', upTo);
  }

  /**
   * A history list's entries of revisions up to `upTo`, read in one transaction with the archive
   * index (one slot), so no move falls between them. Redis first counts the list's entries up to
   * `upTo` (history-count-1.lua) and then sends only those: a read of an early revision took the
   * whole list before, which a reader walking the revisions of a long-lived content paid on every
   * revision. Between the count and the read, commits only append entries of later revisions and
   * the archiver only moves entries off the list's start (into the index read with the entries),
   * so the list's first `count` entries still hold every entry up to `upTo` it has; any past
   * `upTo` among them is dropped here. The archived entries are read whole (their segments hold
   * them together).
   */
  private async historyList<T extends { rev: number }>(
    cid: string,
    key: (p: number, cid: string) => string,
    part: 'index' | 'views',
    upTo: number,
  ): Promise<T[]> {
    const p = this.partitionOf(cid);
    const list = key(p, cid);
    const upToRev = (entries: Buffer[]) => entries.map((b) => unpack<T>(b)).filter((e) => e.rev <= upTo);
    for (let attempt = 0; ; attempt++) {
      const count = await this.redis.historyCount(list, upTo);
      const read = this.redis.multi().getBuffer(keys.archiveIndex(p, cid));
      if (count > 0) read.lrangeBuffer(list, 0, count - 1);
      const res = await read.exec();
      if (!res) throw new Error('history read: transaction aborted');
      for (const [err] of res) if (err) throw err;
      const index = parseIndex(res[0][1] as Buffer | null);
      const hot = count > 0 ? (res[1][1] as Buffer[]) : [];
      if (!index.length) return upToRev(hot);
      // Null: a compaction replaced a segment after this read; the index is read again.
      const archived = await this.archive.lists(cid, index);
      if (archived) return upToRev([...archived[part], ...hot]);
      if (attempt === 2) throw new Error(`history of ${cid}: archived segments missing from the object store`);
    }
  }

  /**
   * One atomic commit: revision check, version, snapshot, history, event, recorded reply, ack.
   * The commits of a partition made in the same turn of the event loop go to Redis in one call of
   * the commit script (`sendCommits`), each still checked and written on its own: a bulk import
   * or an actor's batch of stream commands made a script call per content before, and each call
   * costs the client a command and Redis a script run (a tenth of a bulk line's CPU).
   */
  commit(c: CommitInput): Promise<CommitResult> {
    const p = this.partitionOf(c.snapshot.cid);
    const args = this.commitArgs(c);
    return new Promise((resolve, reject) => {
      let queued = this.queuedCommits.get(p);
      if (!queued) {
        queued = [];
        this.queuedCommits.set(p, queued);
        process.nextTick(() => this.sendCommits(p));
      }
      queued.push({ keys: this.commitKeys(p, c), args, resolve, reject });
    });
  }

  /** The keys of one commit, as commit-content-n.lua takes them. */
  private commitKeys(p: number, c: CommitInput): string[] {
    const cid = c.snapshot.cid;
    return [
      keys.lease(p),
      keys.content(p, cid),
      keys.revisions(p, cid),
      keys.versions(p, cid),
      keys.versionIndex(p, cid),
      keys.viewHistory(p, cid),
      keys.events(p),
      keys.done(p, c.commandId),
      keys.drafts(p, cid),
      keys.commands(p),
      keys.catalog(p),
      keys.catalogOfType(p, c.snapshot.type),
    ];
  }

  /** The commit's one argument of commit-content-n.lua (packScriptArgs's map), its blobs packed in place. */
  private commitArgs(c: CommitInput): Buffer {
    const v = c.version;
    const w = commitArgsWriter
      .begin()
      .str('owner', c.owner)
      .num('expectedRev', c.expectedRev)
      .num('rev', c.snapshot.rev)
      .packed('snapshot', c.snapshot)
      .str('head', c.snapshot.head)
      .bool('deleted', c.snapshot.deleted === true);
    if (v) {
      w.str('versionKey', v.key)
        .packed('version', v)
        .packed('versionIndexEntry', {
          key: v.key,
          rev: v.rev,
          created: v.created,
          creator: v.creator,
          ...(v.restoredFrom === undefined ? {} : { restoredFrom: v.restoredFrom }),
        } satisfies VersionIndexEntry);
    }
    return w
      .packed('event', c.event)
      .num('eventsMaxLen', this.eventsMaxLen)
      .blob('reply', c.reply?.length ? c.reply : undefined)
      .num('dedupTtl', this.dedupTtlSeconds)
      .num('ts', c.snapshot.modified)
      .str('group', ACTOR_GROUP)
      .str('entryId', c.entryId || undefined)
      .str('promotedFrom', c.promotedFrom || undefined)
      .str('promotedSummary', c.promotedFrom ? draftSummaryField(c.promotedFrom) : undefined)
      .packedList('viewEvents', c.viewEvents)
      .end();
  }

  /**
   * Sends the commits of a partition queued this turn: at most COMMITS_PER_CALL commits and
   * COMMIT_CALL_BYTES of arguments a call (one larger commit goes alone), so that one call never
   * holds Redis much longer than a single commit would.
   */
  private sendCommits(p: number): void {
    const queued = this.queuedCommits.get(p) ?? [];
    this.queuedCommits.delete(p);
    for (let at = 0; at < queued.length; ) {
      let end = at + 1;
      let bytes = queued[at].args.length;
      while (end < queued.length && end - at < COMMITS_PER_CALL && bytes + queued[end].args.length <= COMMIT_CALL_BYTES) bytes += queued[end++].args.length;
      const call = queued.slice(at, end);
      at = end;
      const keysOfCall = call.flatMap((q) => q.keys);
      this.redis.commitContent(keysOfCall.length, ...keysOfCall, ...call.map((q) => q.args)).then(
        (out) => {
          for (let i = 0; i < call.length; i++) {
            const outcome = Number(out[2 * i]) as CommitOutcome;
            call[i].resolve(outcome === CommitOutcome.RevisionMoved ? { outcome, rev: Number(out[2 * i + 1]) } : { outcome });
          }
        },
        (e: unknown) => {
          for (const q of call) q.reject(e);
        },
      );
    }
  }

  /**
   * Claims a global alias for a content: assigned in main, or reserved for a workspace draft.
   * False when another content holds it.
   */
  async reserveAlias(namespace: string, alias: string, cid: string, workspace = ''): Promise<boolean> {
    return (await this.redis.reserveAlias(keys.alias(namespace, alias), cid, workspace)) === 1;
  }

  /** Frees a global alias if it still points at the content (or is still its workspace reservation). */
  async releaseAlias(namespace: string, alias: string, cid: string, workspace = ''): Promise<boolean> {
    return (await this.redis.releaseAlias(keys.alias(namespace, alias), aliasValue(cid, workspace))) === 1;
  }

  // ---- catalog (re-indexing) ----

  /**
   * Every content key of a partition's catalog (every content that was ever committed, deleted
   * ones included), or of its catalogs of some types: distinct, in content-key order. The order
   * is a function of the keys returned alone: a scan's own order (ZSCAN, SSCAN) follows the hash
   * table, whose size every other key of the partition decides. A content in the catalog all
   * along is returned; one added or removed meanwhile may or may not be.
   */
  async catalogKeys(partition: number, types?: readonly string[]): Promise<string[]> {
    const found = new Set<string>();
    for (const type of types ?? [undefined]) {
      let cursor = '0';
      do {
        if (type === undefined) {
          const [next, flat] = await this.redis.zscan(keys.catalog(partition), cursor, 'COUNT', CATALOG_SCAN);
          for (let i = 0; i < flat.length; i += 2) found.add(flat[i]);
          cursor = next;
        } else {
          const [next, cids] = await this.redis.sscan(keys.catalogOfType(partition, type), cursor, 'COUNT', CATALOG_SCAN);
          for (const cid of cids) found.add(cid);
          cursor = next;
        }
      } while (cursor !== '0');
    }
    return [...found].sort();
  }

  /** Content keys of a partition changed between `from` and `to` (epoch ms, inclusive). */
  async changedBetween(partition: number, from: number, to: number): Promise<string[]> {
    return this.redis.zrangebyscore(keys.catalog(partition), from === -Infinity ? '-inf' : from, to === Infinity ? '+inf' : to);
  }

  /** Content keys of a partition of one type. */
  async ofType(partition: number, type: string): Promise<string[]> {
    return this.redis.smembers(keys.catalogOfType(partition, type));
  }

  /** Content keys of a partition that hold (or once held) a taxonomy aspect (`TAXONOMY_ASPECTS`). */
  async taxonomyMembers(partition: number): Promise<string[]> {
    return this.redis.smembers(keys.taxonomyMembers(partition));
  }

  async addTaxonomyMember(partition: number, cid: string): Promise<void> {
    await this.redis.sadd(keys.taxonomyMembers(partition), cid);
  }

  // ---- workspace drafts ----

  async draft(cid: string, workspace: string): Promise<Draft | null> {
    const buf = await this.redis.hgetBuffer(keys.drafts(this.partitionOf(cid), cid), workspace);
    return buf ? unpack<Draft>(buf) : null;
  }

  /** Writes (draft) or removes (null) a draft, fenced by the lease, recording the reply. */
  async commitDraft(c: {
    owner: string;
    cid: string;
    workspace: string;
    draft: Draft | null;
    /** The reply recorded for a replay, as `CommitInput.reply`; absent or empty: none (a local command). */
    reply?: Buffer;
    commandId: string;
    entryId?: string;
  }): Promise<CommitOutcome.Committed | CommitOutcome.LeaseLost> {
    const p = this.partitionOf(c.cid);
    const draft = c.draft ? pack(c.draft) : undefined;
    const [outcome] = await this.redis.commitDraft(
      keys.lease(p),
      keys.drafts(p, c.cid),
      keys.done(p, c.commandId),
      keys.commands(p),
      packScriptArgs({
        owner: c.owner,
        workspace: c.workspace,
        draft,
        summaryField: draftSummaryField(c.workspace),
        summary: draft && pack(summaryOfDraft(c.draft!, draft.length)),
        reply: c.reply?.length ? c.reply : undefined,
        dedupTtl: this.dedupTtlSeconds,
        group: ACTOR_GROUP,
        entryId: c.entryId || undefined,
      }),
    );
    return outcome as CommitOutcome.Committed | CommitOutcome.LeaseLost;
  }

  /**
   * What a promote needs of a draft before reading it, from its summary alone: null when the
   * workspace holds no draft of the content, undefined when its summary keeps no origin (a draft
   * written before origins were kept; the caller reads the draft). The draft's length and its
   * summary are read together (one key, one slot), so the summary is the stored draft's.
   */
  async draftOrigin(cid: string, workspace: string): Promise<DraftOrigin | null | undefined> {
    const key = keys.drafts(this.partitionOf(cid), cid);
    const res = await this.redis.multi().hstrlen(key, workspace).hgetBuffer(key, draftSummaryField(workspace)).exec();
    if (!res) throw new Error(`reading the draft summary of ${cid} was aborted`);
    const [[lenErr, len], [sumErr, summary]] = res as [[Error | null, number], [Error | null, Buffer | null]];
    if (lenErr || sumErr) throw lenErr ?? sumErr;
    if (!len) return null;
    const kept = summary ? summaryOf(summary) : null;
    if (!kept || kept.size !== len || kept.fromCreate === undefined) return undefined;
    return { fromCreate: kept.fromCreate, origin: kept.origin ?? null, views: kept.views ?? true };
  }

  /**
   * The drafts of some contents on a workspace as its listing sees them (null where a content has
   * none there), without reading the drafts: their summaries and the contents' heads, in one
   * script call per partition (and BATCH contents). A draft stored before summaries were kept
   * (or whose summary is not its own) is read once, and its summary kept for the next listing.
   */
  async workspaceDrafts(workspace: string, cids: readonly string[]): Promise<(ListedDraft | null)[]> {
    const field = draftSummaryField(workspace);
    const out: (ListedDraft | null)[] = new Array(cids.length).fill(null);
    await this.eachBatch(cids, async (p, idx) => {
      const keysOf = (key: (p: number, cid: string) => string) => idx.map((i) => key(p, cids[i]));
      const found = await this.redis.draftListBuffer(2 * idx.length, ...keysOf(keys.drafts), ...keysOf(keys.content), workspace, field);
      await Promise.all(
        idx.map(async (i, k) => {
          const size = Number(found[3 * k]);
          if (!size) return;
          const summary = found[3 * k + 1] as Buffer | null;
          const head = found[3 * k + 2] as Buffer | null;
          const kept = summary && summaryOf(summary);
          const type = kept && kept.size === size ? kept.type : await this.adoptDraftSummary(p, cids[i], workspace);
          if (type !== null) out[i] = { type, original: head ? unpack<Snapshot>(head) : null };
        }),
      );
    });
    return out;
  }

  /** The type of a draft without a summary of its own (stored before summaries were kept), read in full; its summary is kept. Null: no draft. */
  private async adoptDraftSummary(p: number, cid: string, workspace: string): Promise<string | null> {
    const key = keys.drafts(p, cid);
    const buf = await this.redis.hgetBuffer(key, workspace);
    if (!buf) return null;
    const draft = unpack<Draft>(buf);
    await this.redis.draftSummaryAdopt(key, workspace, draftSummaryField(workspace), pack(summaryOfDraft(draft, buf.length)), buf.length);
    return draft.type;
  }

  /** The workspace index: content keys that may have a draft there (checked on read). */
  async workspaceMembers(workspace: string): Promise<string[]> {
    return this.redis.smembers(keys.workspace(workspace));
  }

  async addToWorkspace(workspace: string, cid: string): Promise<void> {
    await this.redis.sadd(keys.workspace(workspace), cid);
  }

  async removeFromWorkspace(workspace: string, cid: string): Promise<void> {
    await this.redis.srem(keys.workspace(workspace), cid);
  }

  /**
   * A content's current snapshot and its stored size, read only when Redis holds it within
   * `budget` bytes (HSTRLEN before the read, hget-each-within-n.lua): a larger one is neither sent
   * nor decoded. Null then, and where the content never existed. For a reader whose work must not
   * grow with what content it may not read holds (the parent check of a taxonomy write).
   */
  async headWithin(cid: string, budget: number): Promise<{ head: Snapshot; bytes: number } | null> {
    const buf = await this.fieldWithin(keys.content(this.partitionOf(cid), cid), 's', budget);
    return buf ? { head: unpack<Snapshot>(buf), bytes: buf.length } : null;
  }

  /** A version and its stored size within `budget` bytes, as `headWithin`: null also for one only the archive holds (not read there). */
  async versionWithin(cid: string, versionKey: string, budget: number): Promise<{ record: VersionRecord; bytes: number } | null> {
    const buf = await this.fieldWithin(keys.versions(this.partitionOf(cid), cid), versionKey, budget);
    return buf ? { record: unpack<VersionRecord>(buf), bytes: buf.length } : null;
  }

  /** A hash field, read only when it holds at most `budget` bytes (null otherwise, and when absent). */
  private async fieldWithin(key: string, field: string, budget: number): Promise<Buffer | null> {
    const [buf] = await this.redis.hgetEachWithinBuffer(1, key, String(Math.max(0, Math.floor(budget))), '0', field);
    return buf ?? null;
  }
}

/** The summary of a draft stored in `size` bytes (DraftSummary). */
function summaryOfDraft(d: Draft, size: number): DraftSummary {
  const fromCreate = d.fromCreate === true;
  return {
    type: d.type,
    size,
    fromCreate,
    ...(typeof d.origin === 'string' ? { origin: d.origin } : {}),
    views: mayNeedAssignToView(Array.isArray(d.ops) ? d.ops : []),
  };
}

/** A stored draft summary; null when it is not one (then the draft is read). Its origin only when whole (`fromCreate` a boolean, `origin` a string or absent). */
function summaryOf(buf: Buffer): DraftSummary | null {
  try {
    const s = unpack<Partial<DraftSummary>>(buf);
    if (!s || typeof s.type !== 'string' || typeof s.size !== 'number') return null;
    const whole =
      typeof s.fromCreate === 'boolean' && (s.origin === undefined || s.origin === null || typeof s.origin === 'string') && typeof s.views === 'boolean';
    return whole
      ? { type: s.type, size: s.size, fromCreate: s.fromCreate, ...(typeof s.origin === 'string' ? { origin: s.origin } : {}), views: s.views }
      : { type: s.type, size: s.size };
  } catch {
    return null;
  }
}
