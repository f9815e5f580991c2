import { pack, unpack } from './codec.js';
import { partitionOf } from './ids.js';
import { keys, ACTOR_GROUP, type RedisClient } from './redis.js';
import { MAIN_NAMESPACE, type ContentEvent, type Draft, type Snapshot, type VersionIndexEntry, type VersionRecord, type ViewEvent } from '../content/model.js';

/** What one commit writes; see src/actors/scripts/commit-content-12.lua. */
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
  /** The workspace whose draft this commit promotes (removed in the same step). */
  promotedFrom?: string;
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

  /**
   * The content key an alias names, or null. `contentid/<key>` names its key directly. An
   * alias that a workspace draft reserves names its content only on that workspace.
   */
  async resolveAlias(namespace: string, alias: string, workspace?: string): Promise<string | null> {
    if (namespace === MAIN_NAMESPACE) return alias;
    const v = await this.redis.get(keys.alias(namespace, alias));
    if (v === null || v[0] !== '~') return v;
    const bar = v.indexOf('|');
    return workspace !== undefined && v.slice(1, bar) === workspace ? v.slice(bar + 1) : null;
  }

  /**
   * Who holds an alias: `{cid}` when assigned in main, `{cid, workspace}` when a workspace
   * draft reserves it, null when free.
   */
  async aliasHolder(namespace: string, alias: string): Promise<{ cid: string; workspace?: string } | null> {
    const v = await this.redis.get(keys.alias(namespace, alias));
    if (v === null) return null;
    if (v[0] !== '~') return { cid: v };
    const bar = v.indexOf('|');
    return { cid: v.slice(bar + 1), workspace: v.slice(1, bar) };
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
      keys.drafts(p, cid),
      keys.commands(p),
      keys.catalog(p),
      keys.catalogOfType(p, c.snapshot.type),
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
      c.snapshot.modified,
      ACTOR_GROUP,
      c.entryId ?? '',
      c.promotedFrom ?? '',
      ...c.viewEvents.map((e) => pack(e)),
    );
    if (res[0] === 1) return { ok: true };
    if (res[0] === -1) return { ok: false, reason: 'lease-lost' };
    return { ok: false, reason: 'revision-moved', rev: Number(res[1]) };
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
    return (await this.redis.releaseAlias(keys.alias(namespace, alias), workspace ? `~${workspace}|${cid}` : cid)) === 1;
  }

  // ---- catalog (re-indexing) ----

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
    reply: Buffer;
    commandId: string;
    entryId?: string;
  }): Promise<boolean> {
    const p = this.partitionOf(c.cid);
    const res = await this.redis.commitDraft(
      keys.lease(p),
      keys.drafts(p, c.cid),
      keys.done(p, c.commandId),
      keys.commands(p),
      c.owner,
      c.workspace,
      c.draft ? pack(c.draft) : '',
      c.reply,
      this.dedupTtlSeconds,
      ACTOR_GROUP,
      c.entryId ?? '',
    );
    return res[0] === 1;
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
}
