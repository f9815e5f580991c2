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
 *
 * A program that runs the platform in its own process passes its hooks to `startPlatform`
 * (src/main.ts); the audit trail of every main write is built in and always on (src/actors/audit-trail.ts).
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
