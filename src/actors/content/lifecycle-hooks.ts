import { keys, type RedisClient } from '../../adapters/redis.js';
import { pack } from '../../adapters/codec.js';
import type { Aspect, Aspects, Snapshot, VersionRecord, WriteVia } from '../../content/model.js';

/** Where a main write comes from: the content API, a promote of a workspace draft, a bulk import line, a restore. */
export type Via = WriteVia;

export interface HookContext {
  cid: string;
  type: string;
  userId: string;
  via: Via;
  partition: number;
}

/**
 * Lifecycle hooks run around the writes of main content: create, update, delete, and the
 * promote of a workspace draft (which is a create or an update). They never run on any
 * other workspace operation (spec: Events 7). A `before*` hook may refuse the write by
 * throwing an AppError; nothing is committed then. `after*` hooks run once the commit is
 * done; a failure there does not undo the write.
 */
export interface LifecycleHook {
  readonly name: string;
  beforeCreate?(ctx: HookContext & { aspects: Aspects }): Promise<void> | void;
  afterCreate?(ctx: HookContext & { snapshot: Snapshot; version: VersionRecord }): Promise<void> | void;
  beforeUpdate?(ctx: HookContext & { aspects: Record<string, Aspect | null> }): Promise<void> | void;
  afterUpdate?(ctx: HookContext & { snapshot: Snapshot; version: VersionRecord }): Promise<void> | void;
  beforeDelete?(ctx: HookContext): Promise<void> | void;
  afterDelete?(ctx: HookContext & { snapshot: Snapshot }): Promise<void> | void;
}

/** One audit entry (msgpack, field `a` of the `audit:{p}` stream). */
export interface AuditEntry {
  action: 'create' | 'update' | 'delete';
  cid: string;
  type: string;
  userId: string;
  via: Via;
  rev: number;
  version?: string;
  ts: number;
}

/**
 * Built-in hook: an audit trail of every main write in the partition's `audit:{p}` stream
 * (bounded), naming who did what, to which revision, and whether it came from a promote.
 */
export class AuditTrailHook implements LifecycleHook {
  readonly name = 'audit-trail';
  constructor(
    private readonly redis: RedisClient,
    private readonly maxLen = 1000000,
  ) {}

  private async write(e: AuditEntry, partition: number): Promise<void> {
    await this.redis.xadd(keys.audit(partition), 'MAXLEN', '~', this.maxLen, '*', 'a', pack(e));
  }

  afterCreate(c: HookContext & { snapshot: Snapshot; version: VersionRecord }) {
    return this.write(
      { action: 'create', cid: c.cid, type: c.type, userId: c.userId, via: c.via, rev: c.snapshot.rev, version: c.version.key, ts: c.snapshot.modified },
      c.partition,
    );
  }

  afterUpdate(c: HookContext & { snapshot: Snapshot; version: VersionRecord }) {
    return this.write(
      { action: 'update', cid: c.cid, type: c.type, userId: c.userId, via: c.via, rev: c.snapshot.rev, version: c.version.key, ts: c.snapshot.modified },
      c.partition,
    );
  }

  afterDelete(c: HookContext & { snapshot: Snapshot }) {
    return this.write({ action: 'delete', cid: c.cid, type: c.type, userId: c.userId, via: c.via, rev: c.snapshot.rev, ts: c.snapshot.modified }, c.partition);
  }
}
