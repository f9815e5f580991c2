import { pack } from '../../adapters/codec.js';
import { newVersionKey } from '../../adapters/ids.js';
import { CommitOutcome, type ContentStore } from '../../adapters/content-store.js';
import { AppError } from '../../errors.js';
import { checkFileReferences } from '../../security/file-access.js';
import { UnclaimedFiles } from '../../security/unclaimed-files.js';
import { isAllowed, permissionDenied, type Principal, type SecurityConfig } from '../../content/permissions.js';
import { pastDeadline, type ActorContext, type CommandBase, type CommandHandler, type Reply } from '../runtime.js';
import { applyUpdateMode } from '../../content/update-modes.js';
import { isViewOp, refuseTooManyViews, symbolicCycle, timeWindow, viewNames } from '../../content/views.js';
import { metadataOf, refuseOversizedMetadata } from '../../content/metadata.js';
import { dateRangeProblem, invalidSearchDocument } from '../../content/search-document.js';
import { refuseOversizedCategorization } from '../../content/variants.js';
import { indexSchema } from '../../adapters/index-schema.js';
import { mayRead } from '../../content/visibility.js';
import { restoredAspects, versionKeyOf } from '../../content/revisions.js';
import type { LifecycleHook, Via } from './lifecycle-hooks.js';
import { Workspaces } from './workspace.js';
import {
  committed,
  entryOf,
  okReply,
  type CommandOf,
  type CommandTable,
  type ContentCommand,
  type CreateInput,
  type MainWrites,
  type Operation,
  type Outcome,
  type SubResult,
  type UpdateInput,
  type WriteResult,
  type Writer,
} from './commands.js';
import { TAXONOMY_ASPECTS } from '../../content/taxonomy.js';
import { aliasExists, aliasName, freedAliases, refuseTooManyAliasChars, setAliasOps, splitAlias } from '../../content/aliases.js';
import { checkTaxonomyAspects } from './taxonomy-references.js';
import { recordOf, replayOf, writeResultOf, type SmallValue } from './replays.js';
import {
  LATEST_VIEW,
  MAP_KEY_RESERVED,
  contextsOf,
  etagOf,
  ifMatchHolds,
  versionId,
  type Aspects,
  type ContentEvent,
  type Snapshot,
  type VersionRecord,
  type ViewEvent,
} from '../../content/model.js';

export type { ContentCommand, Operation, SubResult, WriteResult, Writer } from './commands.js';

/**
 * The content actor: the one writer of each content. It applies the spec's rules of create,
 * update (optimistic locking, update modes), delete, operations (aliases, views, metadata)
 * and alias release, then commits each change with one Lua script.
 */
export class ContentActor implements CommandHandler<ContentCommand>, MainWrites {
  private readonly workspaces: Workspaces;
  /** Content files a write maps are claimed before its commit (src/security/unclaimed-files.ts). */
  private readonly unclaimed: UnclaimedFiles;

  constructor(
    private readonly store: ContentStore,
    private readonly security: SecurityConfig,
    private readonly hooks: LifecycleHook[] = [],
    private readonly now: () => number = Date.now,
  ) {
    // Claims need no bound of marks (only marking does).
    this.unclaimed = new UnclaimedFiles(store.redis, store.partitions, Number.POSITIVE_INFINITY);
    this.workspaces = new Workspaces(store, security, this, now, this.unclaimed);
  }

  /** Every command kind, with how it runs and how a retry answers it after a lost answer. */
  private readonly kinds: CommandTable = {
    create: { apply: (cmd, ctx) => this.createMain(cmd, ctx, cmd, cmd.via ?? 'main'), resume: (cmd, head) => this.resumeWrite(cmd, head) },
    update: { apply: (cmd, ctx) => this.updateMain(cmd, ctx, cmd, cmd.via ?? 'main'), resume: (cmd, head) => this.resumeWrite(cmd, head) },
    delete: { apply: (cmd, ctx) => this.delete(cmd, ctx), resume: (cmd, head) => this.resumeDelete(cmd, head) },
    restore: { apply: (cmd, ctx) => this.restore(cmd, ctx), resume: (cmd, head) => this.resumeWrite(cmd, head) },
    releaseAlias: { apply: (cmd, ctx) => this.releaseAlias(cmd, ctx), resume: (cmd) => this.resumeReleaseAlias(cmd) },
    // A view change writes no version: its reply is the revision it made.
    assignView: { apply: (cmd, ctx) => this.assignView(cmd, ctx), resume: async (cmd, head) => okReply(cmd, { cid: cmd.cid, rev: head.rev }) },
    removeFromView: { apply: (cmd, ctx) => this.removeFromView(cmd, ctx), resume: async (cmd, head) => okReply(cmd, { cid: cmd.cid, rev: head.rev }) },
    wsCreate: { apply: (cmd, ctx) => this.workspaces.create(cmd, ctx) },
    wsUpdate: { apply: (cmd, ctx) => this.workspaces.update(cmd, ctx) },
    wsDelete: { apply: (cmd, ctx) => this.workspaces.remove(cmd, ctx) },
    wsPromote: { apply: (cmd, ctx) => this.workspaces.promote(cmd, ctx), resume: (cmd, head) => this.workspaces.resumePromote(cmd, head) },
    wsReleaseAlias: { apply: (cmd, ctx) => this.workspaces.releaseAlias(cmd, ctx) },
  };

  async handle(cmd: ContentCommand, ctx: ActorContext): Promise<Outcome> {
    try {
      const entry = entryOf(this.kinds, cmd.k);
      if (!entry) throw new AppError('BAD_REQUEST', `Unknown command ${(cmd as { k: string }).k}`);
      return await entry.apply(cmd, ctx);
    } catch (e) {
      if (e instanceof AppError) return { reply: { id: cmd.id, ok: false, error: e.toWire() }, committed: false };
      throw e;
    }
  }

  /**
   * A retry of a command whose commit took place but whose answer was lost: the head revision
   * names the command. Its kind's `resume` finishes the idempotent steps that follow such a
   * commit (freeing the global alias keys of a delete or a release, the workspace membership of
   * a promote) and answers the command's reply, rebuilt from the stored revision (a partial
   * create's subResults are not kept; the rebuilt reply has none). The after-hooks do not run
   * again. Null when the head is not the command's: it did not take place.
   */
  async resumeApplied(cmd: ContentCommand): Promise<Reply | null> {
    const entry = entryOf(this.kinds, cmd.k);
    if (!entry?.resume) return null;
    const head = await this.store.head(cmd.cid);
    if (!head || head.cmd !== cmd.id) return null;
    return entry.resume(cmd, head);
  }

  /** A create or update: the version the head names is the reply's. */
  async resumeWrite(cmd: CommandBase, head: Snapshot): Promise<Reply | null> {
    const value = await writeResultOf(this.store, head, []);
    return value && okReply(cmd, value);
  }

  /** The reply a command's recorded reply stands for, read back from what its commit wrote (src/actors/content/replays.ts). */
  replayOf(recorded: Buffer): Promise<Reply | Buffer> {
    return replayOf(this.store, recorded);
  }

  private allow(user: Principal, permission: string, type: string, contexts: string[]): void {
    if (!isAllowed(this.security, user, permission, type, contexts)) throw permissionDenied(permission, user);
  }

  /** A create in main: from the content API, or a promote of a draft that arose from a create. */
  async createMain(cmd: Writer, ctx: ActorContext, input: CreateInput, via: Via, promotedFrom?: string): Promise<Outcome> {
    // A content key is new (the gateway made it); the commit's revision check (expected 0)
    // refuses it anyway if it existed, so no read is spent on it here.
    const meta = metadataOf(input.ops);
    const contexts = contextsOf(meta);
    this.allow(cmd.user, 'Create', input.type, contexts);
    if (input.ops.some(isViewOp)) this.allow(cmd.user, 'AssignToView', input.type, contexts);
    // A create starts from no time state and not hidden: setting either (as `viewMembership` reads it) needs AssignToView.
    if (changesViewMembership({}, meta)) this.allow(cmd.user, 'AssignToView', input.type, contexts);
    checkFileReferences(input.aspects.svcFiles, undefined, cmd.files);
    checkIndexBounds(input.aspects);
    await checkTaxonomyAspects(this.store, cmd.cid, input.aspects, (h) => mayRead(this.security, cmd.user, h));
    const hook = { cid: cmd.cid, type: input.type, userId: cmd.user.userId, via, partition: ctx.partition };
    for (const h of this.hooks) await h.beforeCreate?.({ ...hook, aspects: input.aspects });

    const now = this.now();
    const vk = newVersionKey();
    const snapshot: Snapshot = {
      cid: cmd.cid,
      rev: 1,
      type: input.type,
      head: vk,
      created: now,
      modified: now,
      committer: cmd.user.userId,
      deleted: false,
      views: {},
      symbolic: {},
      meta: {},
      aliases: [],
    };
    const version: VersionRecord = { key: vk, type: input.type, aspects: input.aspects, created: now, creator: cmd.user.userId, rev: 1 };
    const viewEvents = applyOperations(snapshot, vk, input.ops, cmd.user.userId, now);
    await this.joinTaxonomy(ctx, cmd.cid, version);
    const { subResults, reserved } = await this.assignAliases(snapshot, input.ops);
    // A create refused at its commit (past its deadline) frees the aliases it took, or the
    // client's retry (a new content key) would find them taken; a promote's were its draft's
    // reservations and stay the content's (its retry takes them again).
    const free = promotedFrom === undefined ? reserved : [];
    const out = await this.commit(cmd, ctx, 0, snapshot, version, viewEvents, subResults, 'created', via, free, promotedFrom);
    if (committed(out)) for (const h of this.hooks) await h.afterCreate?.({ ...hook, snapshot, version });
    return out;
  }

  /** An update in main: from the content API, or a promote of a draft that arose from an update. */
  async updateMain(cmd: Writer, ctx: ActorContext, input: UpdateInput, via: Via, promotedFrom?: string, restoredFrom?: string): Promise<Outcome> {
    const head = await this.existing(cmd.cid, cmd.user);
    const contexts = contextsOf(head.meta);
    this.allow(cmd.user, 'Update', head.type, contexts);
    if (input.ops.some(isViewOp)) this.allow(cmd.user, 'AssignToView', head.type, contexts);
    // Time state and hidden put the content on its views for readers or take it off, as a view
    // change does: changing them needs AssignToView too (the metadata the operations leave, as
    // applyOperations writes it: later aspects replace earlier ones whole).
    if (changesViewMembership(head.meta, { ...head.meta, ...metadataOf(input.ops) })) this.allow(cmd.user, 'AssignToView', head.type, contexts);
    if (!input.unsafe) this.checkIfMatch(head, input.ifMatch);
    const hook = { cid: cmd.cid, type: head.type, userId: cmd.user.userId, via, partition: ctx.partition };
    for (const h of this.hooks) await h.beforeUpdate?.({ ...hook, aspects: input.aspects });
    const current = await this.store.version(cmd.cid, head.head);
    if (!current) throw new Error(`head version ${head.head} of ${cmd.cid} missing`);

    const now = Math.max(this.now(), head.modified);
    const vk = newVersionKey();
    const rev = head.rev + 1;
    const snapshot: Snapshot = {
      ...head,
      rev,
      head: vk,
      modified: now,
      committer: cmd.user.userId,
      views: { ...head.views },
      symbolic: { ...head.symbolic },
      meta: { ...head.meta },
      aliases: [...head.aliases],
    };
    const version: VersionRecord = {
      key: vk,
      type: head.type,
      aspects: applyUpdateMode(input.mode, current.aspects, input.aspects),
      created: now,
      creator: cmd.user.userId,
      rev,
      ...(restoredFrom === undefined ? {} : { restoredFrom }),
    };
    checkFileReferences(version.aspects.svcFiles, current.aspects.svcFiles, cmd.files);
    // Only the aspects this write sets are checked: a merge that leaves them alone passes.
    const written = Object.fromEntries(Object.keys(input.aspects).flatMap((k) => (version.aspects[k] ? [[k, version.aspects[k]]] : [])));
    checkIndexBounds(written);
    await checkTaxonomyAspects(this.store, cmd.cid, written, (h) => mayRead(this.security, cmd.user, h));
    const viewEvents = applyOperations(snapshot, vk, input.ops, cmd.user.userId, now);
    // CONTRACT §20 "Owners": a write that moves the content needs Update where it goes too
    // (no owners: __global__ only), not only where it was.
    if (!sameContexts(contexts, contextsOf(snapshot.meta))) this.allow(cmd.user, 'Update', head.type, contextsOf(snapshot.meta));
    await this.joinTaxonomy(ctx, cmd.cid, version);
    const { subResults, reserved } = await this.assignAliases(snapshot, input.ops);
    if (subResults.length) {
      await this.release(cmd.cid, reserved);
      const s = subResults[0].status;
      throw new AppError('ALIAS_EXISTS', s.message, s.extraInfo);
    }
    const out = await this.commit(cmd, ctx, head.rev, snapshot, version, viewEvents, [], 'updated', via, reserved, promotedFrom);
    if (committed(out)) for (const h of this.hooks) await h.afterUpdate?.({ ...hook, snapshot, version });
    return out;
  }

  /**
   * MainWrites.refuseStaleUpdate: the checks `updateMain` makes before it reads the head version,
   * in its order, as far as they do not depend on the operations: those that do (AssignToView) are
   * known to pass when `views` is false or the writer has AssignToView; otherwise it returns.
   */
  async refuseStaleUpdate(cmd: Writer, ifMatch: string | null, views: boolean): Promise<void> {
    const head = await this.existing(cmd.cid, cmd.user);
    const contexts = contextsOf(head.meta);
    this.allow(cmd.user, 'Update', head.type, contexts);
    if (views && !isAllowed(this.security, cmd.user, 'AssignToView', head.type, contexts)) return;
    this.checkIfMatch(head, ifMatch);
  }

  /**
   * Restore (CONTRACT §15): a new version whose aspects are those of an earlier version of the
   * same content, written as an update in `replace` mode with If-Match (Update permission, the
   * file and taxonomy checks, hooks, one commit, its event and audit entry with `via: restore`).
   * The version records which version it restored. A version the content never had: 404.
   */
  private async restore(cmd: CommandOf<'restore'>, ctx: ActorContext): Promise<Outcome> {
    const head = await this.existing(cmd.cid, cmd.user);
    // Update permission before the version id is even read: a caller who may not write learns
    // nothing of the content's versions (nor which content key its alias names).
    this.allow(cmd.user, 'Update', head.type, contextsOf(head.meta));
    const key = versionKeyOf(cmd.version, cmd.cid, 'version');
    // A stale If-Match is answered from the head, before the version (of any size) is read and decoded.
    this.checkIfMatch(head, cmd.ifMatch);
    const restored = await this.store.version(cmd.cid, key);
    if (!restored) throw new AppError('NOT_FOUND', `Version ${cmd.version} not found`);
    const input: UpdateInput = { ifMatch: cmd.ifMatch, unsafe: false, mode: 'replace', aspects: restoredAspects(restored.aspects), ops: [] };
    return this.updateMain(cmd, ctx, input, 'restore', undefined, key);
  }

  private async delete(cmd: CommandOf<'delete'>, ctx: ActorContext): Promise<Outcome> {
    const head = await this.store.head(cmd.cid);
    if (!head || head.deleted) throw new AppError('NOT_FOUND', `Content ${cmd.cid} not found`);
    this.allow(cmd.user, 'Delete', head.type, contextsOf(head.meta));
    this.checkIfMatch(head, cmd.ifMatch);
    const hook = { cid: cmd.cid, type: head.type, userId: cmd.user.userId, via: cmd.via ?? ('main' as const), partition: ctx.partition };
    for (const h of this.hooks) await h.beforeDelete?.(hook);
    const now = Math.max(this.now(), head.modified);
    const snapshot: Snapshot = { ...head, rev: head.rev + 1, modified: now, committer: cmd.user.userId, deleted: true, views: {}, symbolic: {}, aliases: [] };
    const value = { cid: cmd.cid, rev: snapshot.rev };
    const out = await this.commitRaw(cmd, ctx, head.rev, snapshot, undefined, [], value, 'deleted', cmd.via);
    if (committed(out)) {
      await this.release(cmd.cid, freedAliases(head.aliases, snapshot.aliases));
      for (const h of this.hooks) await h.afterDelete?.({ ...hook, snapshot });
    }
    return out;
  }

  /** A delete whose answer was lost: the aliases the revision before it held are freed (again). */
  private async resumeDelete(cmd: CommandOf<'delete'>, head: Snapshot): Promise<Reply> {
    const before = await this.store.snapshotAt(cmd.cid, head.rev - 1);
    await this.release(cmd.cid, freedAliases(before?.aliases ?? [], head.aliases));
    return okReply(cmd, { cid: cmd.cid, rev: head.rev });
  }

  private async releaseAlias(cmd: CommandOf<'releaseAlias'>, ctx: ActorContext): Promise<Outcome> {
    const full = aliasName(cmd.namespace, cmd.alias);
    const head = await this.store.head(cmd.cid);
    if (!head || head.deleted || !head.aliases.includes(full)) {
      // Nothing holds it in the content: free a dangling global entry, answer "did not exist".
      const freed = await this.store.releaseAlias(cmd.namespace, cmd.alias, cmd.cid);
      return { reply: { id: cmd.id, ok: true, value: { released: freed } }, committed: false };
    }
    const now = Math.max(this.now(), head.modified);
    const snapshot: Snapshot = { ...head, rev: head.rev + 1, modified: now, committer: cmd.user.userId, aliases: head.aliases.filter((a) => a !== full) };
    const out = await this.commitRaw(cmd, ctx, head.rev, snapshot, undefined, [], { released: true }, 'aliases');
    if (out !== 'lease-lost' && out.reply.ok) await this.store.releaseAlias(cmd.namespace, cmd.alias, cmd.cid);
    return out;
  }

  /** A release whose answer was lost: the global alias is freed (again). */
  private async resumeReleaseAlias(cmd: CommandOf<'releaseAlias'>): Promise<Reply> {
    await this.store.releaseAlias(cmd.namespace, cmd.alias, cmd.cid);
    return okReply(cmd, { released: true });
  }

  /**
   * PUT view: puts an existing version of the content on a view, or makes the view symbolic
   * (it follows its target view; the target is unchanged). Cycles are refused.
   */
  private async assignView(cmd: CommandOf<'assignView'>, ctx: ActorContext): Promise<Outcome> {
    const head = await this.existing(cmd.cid, null);
    this.allow(cmd.user, 'AssignToView', head.type, contextsOf(head.meta));
    this.checkIfMatch(head, cmd.ifMatch);
    const now = Math.max(this.now(), head.modified);
    const rev = head.rev + 1;
    const snapshot: Snapshot = { ...head, rev, modified: now, committer: cmd.user.userId, views: { ...head.views }, symbolic: { ...head.symbolic } };
    const before = viewNames(head).length;
    let event: ViewEvent;
    if (cmd.versionKey !== undefined) {
      if (!(await this.store.version(cmd.cid, cmd.versionKey))) {
        throw new AppError('BAD_REQUEST', `Version ${versionId(cmd.cid, cmd.versionKey)} does not exist`);
      }
      snapshot.views[cmd.view] = cmd.versionKey;
      delete snapshot.symbolic[cmd.view];
      event = { view: cmd.view, userId: cmd.user.userId, version: versionId(cmd.cid, cmd.versionKey), rev, ts: now };
    } else {
      const target = cmd.target!;
      if (symbolicCycle(head, cmd.view, target)) throw new AppError('BAD_REQUEST', `View ${cmd.view} cannot follow @${target}: that makes a cycle`);
      snapshot.symbolic[cmd.view] = target;
      delete snapshot.views[cmd.view];
      event = { view: cmd.view, userId: cmd.user.userId, version: `@${target}`, rev, ts: now };
    }
    refuseTooManyViews(before, snapshot);
    return this.commitRaw(cmd, ctx, head.rev, snapshot, undefined, [event], { cid: cmd.cid, rev }, 'views');
  }

  /** DELETE view alias: removes every version of the content from the view. */
  private async removeFromView(cmd: CommandOf<'removeFromView'>, ctx: ActorContext): Promise<Outcome> {
    const head = await this.existing(cmd.cid, null);
    this.allow(cmd.user, 'AssignToView', head.type, contextsOf(head.meta));
    if (!Object.hasOwn(head.views, cmd.view) && !Object.hasOwn(head.symbolic, cmd.view)) {
      return { reply: { id: cmd.id, ok: true, value: { cid: cmd.cid, rev: head.rev } }, committed: false };
    }
    const now = Math.max(this.now(), head.modified);
    const rev = head.rev + 1;
    const views = { ...head.views };
    const symbolic = { ...head.symbolic };
    delete views[cmd.view];
    delete symbolic[cmd.view];
    const snapshot: Snapshot = { ...head, rev, modified: now, committer: cmd.user.userId, views, symbolic };
    return this.commitRaw(cmd, ctx, head.rev, snapshot, undefined, [], { cid: cmd.cid, rev }, 'views');
  }

  /**
   * A version with a taxonomy aspect (a definition, of any content type, or a content hierarchy
   * node) makes its content a member of the partition's taxonomy catalog, which the taxonomy
   * service reads. Added before the commit: a member whose commit then fails is harmless, the
   * readers look at the aspects of the head version.
   */
  private async joinTaxonomy(ctx: ActorContext, cid: string, version: VersionRecord): Promise<void> {
    if (TAXONOMY_ASPECTS.some((a) => version.aspects[a])) await this.store.addTaxonomyMember(ctx.partition, cid);
  }

  /**
   * The head of existing content: 404 when it never existed; when it was deleted, 404, or for an
   * update (`updater`) 409/40904 with its last revision to a caller who could update it. Any other
   * caller gets the 404 of a key that never existed: deleted content is told apart from none only
   * to who could update it (a 403 told the sportseditor which keys had been culture content).
   */
  private async existing(cid: string, updater: Principal | null): Promise<Snapshot> {
    const head = await this.store.head(cid);
    const missing = () => new AppError('NOT_FOUND', `Content ${cid} not found`);
    if (!head) throw missing();
    if (head.deleted) {
      if (updater && isAllowed(this.security, updater, 'Update', head.type, contextsOf(head.meta))) {
        throw new AppError('NOT_FOUND_CONFLICT', 'The content no longer exists', { revision: head.rev });
      }
      throw missing();
    }
    return head;
  }

  /** Optimistic locking: If-Match must name the current revision, else 409/40900 with details. */
  private checkIfMatch(head: Snapshot, ifMatch: string | null): void {
    if (ifMatch !== null && ifMatchHolds(ifMatch, head.cid, head.rev)) return;
    throw new AppError('CONTENT_MODIFIED', 'Content was modified', conflictInfo(head));
  }

  /**
   * Claims the aliases of svcSetAlias operations (a global step beside the commit). Failed
   * claims become subResults with ALIAS_EXISTS; `reserved` lists the aliases newly taken.
   */
  private async assignAliases(snapshot: Snapshot, ops: Operation[]): Promise<{ subResults: SubResult[]; reserved: string[] }> {
    const subResults: SubResult[] = [];
    const reserved: string[] = [];
    refuseTooManyAliasChars(
      snapshot.aliases,
      [...new Set(setAliasOps(ops).map(({ name }) => name))].filter((n) => !snapshot.aliases.includes(n)),
    );
    for (const { op, name } of setAliasOps(ops)) {
      if (snapshot.aliases.includes(name)) continue;
      if (await this.store.reserveAlias(op.namespace, op.alias, snapshot.cid)) {
        snapshot.aliases.push(name);
        reserved.push(name);
      } else {
        subResults.push(aliasExists<Operation>(op, name));
      }
    }
    return { subResults, reserved };
  }

  /** Frees global aliases of the content (compensation of a failed write; what a delete or a release frees). */
  private async release(cid: string, aliases: string[]): Promise<void> {
    for (const a of aliases) {
      const [ns, alias] = splitAlias(a);
      await this.store.releaseAlias(ns, alias, cid);
    }
  }

  private async commit(
    cmd: Writer,
    ctx: ActorContext,
    expectedRev: number,
    snapshot: Snapshot,
    version: VersionRecord,
    viewEvents: ViewEvent[],
    subResults: SubResult[],
    kind: ContentEvent['kind'],
    via: Via,
    reserved: string[] = [],
    promotedFrom?: string,
  ): Promise<Outcome> {
    const value: WriteResult = { snapshot, version, subResults };
    // Every check passed: the content files the version maps are claimed before the commit (a
    // crash between the two loses none), and one the unclaimed-files sweep took answers 400.
    const refused = await this.unclaimed.claim(version.aspects.svcFiles, cmd.files).then(
      (): Outcome | null => null,
      (e: unknown): Outcome => {
        if (e instanceof AppError) return { reply: { id: cmd.id, ok: false, error: e.toWire() }, committed: false };
        throw e;
      },
    );
    const out = refused ?? (await this.commitRaw(cmd, ctx, expectedRev, snapshot, version, viewEvents, value, kind, via, promotedFrom));
    if (out !== 'lease-lost' && !out.reply.ok) await this.release(cmd.cid, reserved);
    return out;
  }

  private async commitRaw(
    cmd: CommandBase & { user: Principal },
    ctx: ActorContext,
    expectedRev: number,
    snapshot: Snapshot,
    version: VersionRecord | undefined,
    viewEvents: ViewEvent[],
    value: WriteResult | SmallValue,
    kind: ContentEvent['kind'],
    via?: Via,
    promotedFrom?: string,
  ): Promise<Outcome> {
    // A stream command's deadline again, at the last moment: lifecycle hooks (and taxonomy or
    // alias steps) may have taken long since the actor started it, and past its deadline (and
    // the grace) its gateway answers 503, which must mean "not applied" (the commit's callers
    // free what they reserved). A local command's gateway waits for this very answer instead.
    const late = ctx.local ? null : pastDeadline(cmd, Date.now(), ctx.partition);
    if (late) return { reply: late, committed: false };
    const reply: Reply = { id: cmd.id, ok: true, value };
    snapshot.cmd = cmd.id;
    const event: ContentEvent = {
      kind,
      cid: snapshot.cid,
      rev: snapshot.rev,
      type: snapshot.type,
      version: version?.key,
      ts: snapshot.modified,
      userId: cmd.user.userId,
      requestId: cmd.requestId,
    };
    // Left out for the content API's own writes: events stay as small as before, and read as `main`.
    if (via !== undefined && via !== 'main') event.via = via;
    // A local command is never replayed: no reply to record, nor to send on.
    const packed = ctx.local ? undefined : pack(reply);
    const res = await this.store.commit({
      owner: ctx.owner,
      expectedRev,
      snapshot,
      version,
      viewEvents,
      event,
      reply: ctx.local ? undefined : recordOf(cmd.id, value),
      commandId: cmd.id,
      entryId: ctx.entryId,
      promotedFrom,
    });
    if (res.outcome === CommitOutcome.Committed) return { reply, committed: true, packed };
    // The script may have run twice: when Redis restarts, ioredis sends the commands whose
    // answers it lost again, and the second run finds the revision moved by the first, or the
    // lease gone meanwhile (it expires while Redis is down). Either way the first run committed
    // when the revision holds this command: that is the answer. Handing a lost lease on instead
    // would run the command again through the stream, where a local commit left no recorded
    // reply, and answer 409 for the write it made (test/faults/redis-aof.fault.ts).
    const atRev = await this.store.snapshotAt(snapshot.cid, snapshot.rev);
    if (atRev?.cmd === cmd.id) return { reply, committed: true };
    if (res.outcome === CommitOutcome.LeaseLost) return 'lease-lost';
    // Only one actor writes a content, so this means another process committed in between.
    const now = await this.store.head(snapshot.cid);
    const err = new AppError('CONCURRENT_CONFLICT', 'Content was updated by another process', now ? conflictInfo(now) : {});
    return { reply: { id: cmd.id, ok: false, error: err.toWire() }, committed: false };
  }
}

/** The extraInfo of a conflict: what the client needs to retry against the server's revision. */
export function conflictInfo(head: Snapshot): Record<string, unknown> {
  return {
    revision: head.rev,
    conflictingVersion: versionId(head.cid, head.head),
    committer: head.committer,
    lastModified: head.modified,
    ETag: etagOf(head.cid, head.rev),
  };
}

/** Do two owner lists name the same contexts (order and repeats aside)? */
function sameContexts(a: string[], b: string[]): boolean {
  const sa = new Set(a);
  const sb = new Set(b);
  return sa.size === sb.size && [...sa].every((c) => sb.has(c));
}

/**
 * What of a content's metadata decides whether it is on its views for readers, besides the views
 * themselves: whether it is hidden (`svcContentState.hidden`), and the time-state window of each
 * view, read as every reader reads it (`timeWindow`: `onTime` and `offTime` as instants; a view
 * without either has no window). The same value means the same readers see the content on the
 * same views at every instant, however the aspects are spelled.
 */
function viewMembership(meta: Aspects): string {
  const at = { meta } as Snapshot;
  const views = meta.svcTimeState?.views;
  const windows =
    views && typeof views === 'object' && !Array.isArray(views)
      ? Object.keys(views)
          .sort()
          .flatMap((view) => {
            const w = timeWindow(at, view);
            return w.on === undefined && w.off === undefined ? [] : [[view, w.on ?? null, w.off ?? null]];
          })
      : [];
  return JSON.stringify([meta.svcContentState?.hidden === true, windows]);
}

/** Does a write that takes the metadata from `before` to `after` change which views readers find the content on, and when? */
function changesViewMembership(before: Aspects, after: Aspects): boolean {
  return viewMembership(before) !== viewMembership(after);
}

/**
 * 400 for a view, alias namespace or metadata aspect named `_type` or `__proto__`, as the gateway
 * answers such a request: here for operations replayed from a draft saved before it did, which
 * a promote would otherwise commit.
 */
function refuseReservedNames(ops: Operation[]): void {
  for (const op of ops) {
    const names =
      op._type === 'svcAssignToViews' || op._type === 'svcAssignToSymbolicViews'
        ? op.views
        : op._type === 'svcSetAlias'
          ? [op.namespace]
          : op._type === 'svcContentMetadata'
            ? Object.keys(op.aspects)
            : [];
    for (const name of names) if (MAP_KEY_RESERVED.has(name)) throw new AppError('BAD_REQUEST', `${op._type}: the name ${name} is reserved`);
  }
}

/**
 * Applies the view and metadata operations of a new version to the snapshot: the version goes
 * on svcLatest and on each view named; symbolic views follow their target; metadata aspects
 * replace the stored ones. Returns the view events to record in svcViewInfo.
 */
export function applyOperations(snapshot: Snapshot, versionKey: string, ops: Operation[], userId: string, now: number): ViewEvent[] {
  refuseReservedNames(ops);
  const viewsBefore = viewNames(snapshot).length;
  const vid = versionId(snapshot.cid, versionKey);
  const events: ViewEvent[] = [];
  const assign = (view: string) => {
    snapshot.views[view] = versionKey;
    delete snapshot.symbolic[view];
    events.push({ view, userId, version: vid, rev: snapshot.rev, ts: now });
  };
  assign(LATEST_VIEW);
  const metaBefore = ops.some((op) => op._type === 'svcContentMetadata') ? { ...snapshot.meta } : null;
  for (const op of ops) {
    if (op._type === 'svcAssignToViews') {
      for (const v of op.views) if (v !== LATEST_VIEW) assign(v);
    } else if (op._type === 'svcAssignToSymbolicViews') {
      const target = op.targetView.replace(/^@/, '');
      for (const v of op.views) {
        if (v === LATEST_VIEW) continue;
        if (symbolicCycle(snapshot, v, target)) throw new AppError('BAD_REQUEST', `View ${v} cannot follow @${target}: that makes a cycle`);
        snapshot.symbolic[v] = target;
        delete snapshot.views[v];
        events.push({ view: v, userId, version: `@${target}`, rev: snapshot.rev, ts: now });
      }
    } else if (op._type === 'svcContentMetadata') {
      Object.assign(snapshot.meta, metadataOf([op]));
    }
  }
  refuseTooManyViews(viewsBefore, snapshot);
  if (metaBefore) refuseOversizedMetadata(metaBefore, snapshot.meta);
  return events;
}

/**
 * 400 when aspects a write sets pass a bound of the search documents (the gateway refuses what a
 * request sends; this holds for the version a merge makes and for a promoted draft): more than
 * MAX_DATE_RANGES date ranges in svcSolrDocument, a svcCategorization past MAX_TAG_ENTITIES or
 * MAX_TAG_PATH_CHARS.
 */
function checkIndexBounds(aspects: Aspects): void {
  if (aspects.svcSolrDocument) {
    const problem = dateRangeProblem(aspects.svcSolrDocument, indexSchema());
    if (problem) throw invalidSearchDocument(problem);
  }
  if (aspects.svcCategorization) refuseOversizedCategorization(aspects.svcCategorization);
}
