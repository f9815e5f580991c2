import { pack, unpack } from './codec.js';
import { partitionOf } from './ids.js';
import { keys, ACTOR_GROUP, type RedisClient } from './redis.js';
import { MAIN_NAMESPACE, type ContentEvent, type Snapshot, type VersionIndexEntry, type VersionRecord, type ViewEvent } from '../actors/content/model.js';

/** What one commit writes; see src/actors/scripts/commit-content-8.lua. */
export interface CommitInput {
  owner: string;
  expectedRev: number;
  snapshot: Snapshot;
  version?: VersionRecord;
  viewEvents: ViewEvent[];
  event: ContentEvent;
  reply: Buffer;
  commandId: string;
  /** The command's stream entry, acknowledged by the same script. */
  entryId?: string;
}

export type CommitResult = { ok: true } | { ok: false; reason: 'lease-lost' } | { ok: false; reason: 'revision-moved'; rev: number };

/**
 * Reads and writes of content in Redis, in the layout of adapters/redis.ts. The gateway reads
 * through it directly (reads skip the actors); only content actors call `commit`.
 */
export class ContentStore {
  constructor(
    readonly redis: RedisClient,
    readonly partitions: number,
    private readonly eventsMaxLen: number,
    private readonly dedupTtlSeconds: number,
  ) {}

  partitionOf(cid: string): number {
    return partitionOf(cid, this.partitions);
  }

  /** The content key an alias names, or null. `contentid/<key>` names its key directly. */
  async resolveAlias(namespace: string, alias: string): Promise<string | null> {
    if (namespace === MAIN_NAMESPACE) return alias;
    return this.redis.get(keys.alias(namespace, alias));
  }

  /** The current snapshot (deleted content included), or null when the content never existed. */
  async head(cid: string): Promise<Snapshot | null> {
    const buf = await this.redis.hgetBuffer(keys.content(this.partitionOf(cid), cid), 's');
    return buf ? unpack<Snapshot>(buf) : null;
  }

  async snapshotAt(cid: string, rev: number): Promise<Snapshot | null> {
    const buf = await this.redis.hgetBuffer(keys.revisions(this.partitionOf(cid), cid), String(rev));
    return buf ? unpack<Snapshot>(buf) : null;
  }

  async version(cid: string, versionKey: string): Promise<VersionRecord | null> {
    const buf = await this.redis.hgetBuffer(keys.versions(this.partitionOf(cid), cid), versionKey);
    return buf ? unpack<VersionRecord>(buf) : null;
  }

  async versionIndex(cid: string): Promise<VersionIndexEntry[]> {
    const list = await this.redis.lrangeBuffer(keys.versionIndex(this.partitionOf(cid), cid), 0, -1);
    return list.map((b) => unpack<VersionIndexEntry>(b));
  }

  async viewHistory(cid: string): Promise<ViewEvent[]> {
    const list = await this.redis.lrangeBuffer(keys.viewHistory(this.partitionOf(cid), cid), 0, -1);
    return list.map((b) => unpack<ViewEvent>(b));
  }

  /** The recorded reply of a command that was already committed, or null. */
  async doneReply(partition: number, commandId: string): Promise<Buffer | null> {
    return this.redis.getBuffer(keys.done(partition, commandId));
  }

  /** One atomic commit: revision check, version, snapshot, history, event, recorded reply, ack. */
  async commit(c: CommitInput): Promise<CommitResult> {
    const p = this.partitionOf(c.snapshot.cid);
    const cid = c.snapshot.cid;
    const v = c.version;
    const res = await this.redis.commitContent(
      keys.lease(p),
      keys.content(p, cid),
      keys.revisions(p, cid),
      keys.versions(p, cid),
      keys.versionIndex(p, cid),
      keys.viewHistory(p, cid),
      keys.events(p),
      keys.done(p, c.commandId),
      c.owner,
      c.expectedRev,
      c.snapshot.rev,
      pack(c.snapshot),
      v ? v.key : '',
      v ? pack(v) : '',
      v ? pack({ key: v.key, rev: v.rev, created: v.created, creator: v.creator } satisfies VersionIndexEntry) : '',
      pack(c.event),
      this.eventsMaxLen,
      c.reply,
      this.dedupTtlSeconds,
      keys.commands(p),
      ACTOR_GROUP,
      c.entryId ?? '',
      ...c.viewEvents.map((e) => pack(e)),
    );
    if (res[0] === 1) return { ok: true };
    if (res[0] === -1) return { ok: false, reason: 'lease-lost' };
    return { ok: false, reason: 'revision-moved', rev: Number(res[1]) };
  }

  /** Claims a global alias for a content; false when another content holds it. */
  async reserveAlias(namespace: string, alias: string, cid: string): Promise<boolean> {
    return (await this.redis.reserveAlias(keys.alias(namespace, alias), cid)) === 1;
  }

  /** Frees a global alias if it still points at the content. */
  async releaseAlias(namespace: string, alias: string, cid: string): Promise<boolean> {
    return (await this.redis.releaseAlias(keys.alias(namespace, alias), cid)) === 1;
  }
}
