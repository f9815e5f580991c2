import { pack } from '../../adapters/codec.js';
import { CommitOutcome, type ContentStore } from '../../adapters/content-store.js';
import { AppError } from '../../errors.js';
import { checkFileReferences } from '../../security/file-access.js';
import type { UnclaimedFiles } from '../../security/unclaimed-files.js';
import { canInAnyContext, isAllowed, permissionDenied, type Principal, type SecurityConfig } from '../../content/permissions.js';
import type { ActorContext, Reply } from '../runtime.js';
import { noDraft, type DraftResult, type MainWrites, type Operation, type Outcome, type SubResult, type Writer, type WorkspaceCommand } from './commands.js';
import { aliasExists, aliasName, freedAliases, setAliasOps, splitAlias } from '../../content/aliases.js';
import { contextsOf, etagOf, liveHeadOf, type Aspects, type Draft, type Snapshot } from '../../content/model.js';
import { applyUpdateMode } from '../../content/update-modes.js';
import { metadataOf, refuseOversizedMetadata } from '../../content/metadata.js';
import { recordOf, type SmallValue } from './replays.js';

/**
 * Workspaces: a layer of drafts over main, one draft per content per workspace, invisible to
 * main and to other workspaces until promoted. The spec's draft state table and alias
 * reservation table live here; a promote becomes a normal create or update in main through
 * the content actor (MainWrites), so it is serialised with every other write of the content.
 */

export type { DraftResult, WorkspaceCommand } from './commands.js';

type Cmd = Writer & WorkspaceCommand;

/** The workspace command kinds; their entries are in the content actor's command table. */
export class Workspaces {
  constructor(
    private readonly store: ContentStore,
    private readonly security: SecurityConfig,
    private readonly main: MainWrites,
    private readonly now: () => number,
    private readonly unclaimed: UnclaimedFiles,
  ) {}

  /** No draft, content absent everywhere -> draft (workspace only). Operations stay pending; aliases are reserved at once. */
  async create(cmd: Extract<Cmd, { k: 'wsCreate' }>, ctx: ActorContext): Promise<Outcome> {
    if ((await this.store.head(cmd.cid)) || (await this.store.draft(cmd.cid, cmd.workspace))) throw new AppError('BAD_REQUEST', 'Content already exists');
    if (!canInAnyContext(this.security, cmd.user, 'Create', cmd.type)) throw permissionDenied('Create', cmd.user);
    checkFileReferences(cmd.aspects.svcFiles, undefined, cmd.files);
    // Its pending operations' metadata, as its promote will make it: refused now, not only then.
    refuseOversizedMetadata({}, metadataOf(cmd.ops));
    const { reserved, subResults, ops } = await this.reserve(cmd.cid, cmd.workspace, cmd.ops);
    await this.claimOrRelease(cmd, cmd.aspects, reserved);
    const now = this.now();
    const draft: Draft = {
      workspace: cmd.workspace,
      cid: cmd.cid,
      type: cmd.type,
      aspects: cmd.aspects,
      ops,
      reserved,
      fromCreate: true,
      mode: 'update',
      created: now,
      modified: now,
      creator: cmd.user.userId,
    };
    return this.write(cmd, ctx, draft, { draft, subResults } satisfies DraftResult);
  }

  /**
   * Workspace update: a new draft over main, or the draft replaced. Pending operations are
   * replaced by those sent; the origin ETag and the update mode are kept for the promote;
   * reservations the new operations no longer name are released.
   */
  async update(cmd: Extract<Cmd, { k: 'wsUpdate' }>, ctx: ActorContext): Promise<Outcome> {
    // Content in main decides, also when deleted there since the draft was made (a draft made over
    // it keeps its contexts). It is asked before the draft is looked at, so a caller who may not
    // update it gets the same answer whether or not this workspace holds a draft of it: 403 for
    // live content, and for deleted content the 404 of a key that never existed.
    const original = await this.store.head(cmd.cid);
    this.decideOnOriginal(original, cmd.user, 'Update', () => noContent(cmd.workspace));
    const head = liveHeadOf(original);
    const existing = await this.store.draft(cmd.cid, cmd.workspace);
    if (!head && !existing) throw noContent(cmd.workspace);
    const type = existing?.type ?? head!.type;
    // Content only on the workspace: Create on its type in any context.
    if (!original && !canInAnyContext(this.security, cmd.user, 'Create', type)) throw permissionDenied('Create', cmd.user);

    let base: Aspects;
    if (existing) base = existing.aspects;
    else {
      const v = await this.store.version(cmd.cid, head!.head);
      if (!v) throw new Error(`head version of ${cmd.cid} missing`);
      base = v.aspects;
    }
    const aspects = applyUpdateMode(cmd.mode, base, cmd.aspects);
    checkFileReferences(aspects.svcFiles, base.svcFiles, cmd.files);
    const meta = original?.meta ?? {};
    refuseOversizedMetadata(meta, { ...meta, ...metadataOf(cmd.ops) });
    const { reserved, subResults, ops } = await this.reserve(cmd.cid, cmd.workspace, cmd.ops);
    if (subResults.length) {
      await this.release(cmd.cid, cmd.workspace, freedAliases(reserved, existing?.reserved ?? []));
      const s = subResults[0].status;
      throw new AppError('ALIAS_EXISTS', s.message, s.extraInfo);
    }
    await this.claimOrRelease(cmd, aspects, freedAliases(reserved, existing?.reserved ?? []));
    const now = Math.max(this.now(), existing?.modified ?? 0);
    const draft: Draft = {
      workspace: cmd.workspace,
      cid: cmd.cid,
      type,
      aspects,
      ops,
      reserved,
      fromCreate: existing?.fromCreate ?? false,
      origin: cmd.origin ?? existing?.origin ?? (head ? etagOf(head.cid, head.rev) : undefined),
      mode: cmd.mode,
      created: existing?.created ?? now,
      modified: now,
      creator: cmd.user.userId,
    };
    const out = await this.write(cmd, ctx, draft, { draft, subResults } satisfies DraftResult);
    if (out !== 'lease-lost' && out.reply.ok) await this.release(cmd.cid, cmd.workspace, freedAliases(existing?.reserved ?? [], reserved));
    return out;
  }

  /** Draft delete: only the workspace is affected, no conflict check; its reservations are released. */
  async remove(cmd: Extract<Cmd, { k: 'wsDelete' }>, ctx: ActorContext): Promise<Outcome> {
    // The original decides, also when deleted in main since the draft was made; it is asked before
    // the draft, so a caller without the permission gets the same answer whether or not a draft
    // exists: 403 for live content, the 404 of a key that never existed for deleted content.
    const original = cmd.clear ? null : await this.store.head(cmd.cid);
    this.decideOnOriginal(original, cmd.user, 'Create', () => noDraft(cmd.workspace));
    const draft = await this.store.draft(cmd.cid, cmd.workspace);
    if (!draft) throw noDraft(cmd.workspace);
    if (!cmd.clear && !original && !canInAnyContext(this.security, cmd.user, 'Create', draft.type)) throw permissionDenied('Create', cmd.user);
    const out = await this.write(cmd, ctx, null, { removed: true });
    if (out !== 'lease-lost' && out.reply.ok) {
      await this.release(cmd.cid, cmd.workspace, draft.reserved);
      await this.store.removeFromWorkspace(cmd.workspace, cmd.cid);
    }
    return out;
  }

  /**
   * Promote: a draft that arose from a create becomes a create in main (pending operations
   * run, reserved aliases are assigned); one that arose from an update becomes an update with
   * the stored mode, only while main has not changed since the stored origin (else 409/40900
   * and the draft stays). The main commit removes the draft in the same atomic step.
   */
  async promote(cmd: Extract<Cmd, { k: 'wsPromote' }>, ctx: ActorContext): Promise<Outcome> {
    // Content in main is updated by the promote: a caller who may not update it gets the update's
    // 403 before the draft is looked at (the same answer whether or not a draft exists), and for
    // content deleted in main the 404 of a key that never existed.
    const original = await this.store.head(cmd.cid);
    this.decideOnOriginal(original, cmd.user, 'Update', () => noDraft(cmd.workspace));
    // A draft over main is promoted only while its origin names main's head: one that conflicts
    // (409, the draft stays, so it may be asked again and again) is answered from the origin its
    // summary keeps and main's head, before the draft (of any size) is read and decoded (review
    // s23d). A draft written before origins were kept has none there: the draft decides, as before.
    const kept = await this.store.draftOrigin(cmd.cid, cmd.workspace);
    if (kept === null) throw noDraft(cmd.workspace);
    if (kept && !kept.fromCreate) await this.main.refuseStaleUpdate(cmd, kept.origin, kept.views);
    const draft = await this.store.draft(cmd.cid, cmd.workspace);
    if (!draft) throw noDraft(cmd.workspace);
    const ops = draft.ops as Operation[];
    const out = draft.fromCreate
      ? await this.main.createMain(cmd, ctx, { type: draft.type, aspects: draft.aspects, ops }, 'promote', cmd.workspace)
      : await this.main.updateMain(
          cmd,
          ctx,
          { ifMatch: draft.origin ?? null, unsafe: false, mode: 'replace', aspects: draft.aspects, ops },
          'promote',
          cmd.workspace,
        );
    if (out !== 'lease-lost' && out.reply.ok) await this.store.removeFromWorkspace(cmd.workspace, cmd.cid);
    return out;
  }

  /** A promote whose answer was lost: the main write's reply, and the draft gone from the workspace index (again). */
  async resumePromote(cmd: Extract<Cmd, { k: 'wsPromote' }>, head: Snapshot): Promise<Reply | null> {
    const reply = await this.main.resumeWrite(cmd, head);
    if (reply) await this.store.removeFromWorkspace(cmd.workspace, cmd.cid);
    return reply;
  }

  /** An explicitly released reservation: gone from the draft's pending operations and free again. */
  async releaseAlias(cmd: Extract<Cmd, { k: 'wsReleaseAlias' }>, ctx: ActorContext): Promise<Outcome> {
    const name = aliasName(cmd.namespace, cmd.alias);
    const draft = await this.store.draft(cmd.cid, cmd.workspace);
    if (!draft?.reserved.includes(name)) {
      const freed = await this.store.releaseAlias(cmd.namespace, cmd.alias, cmd.cid, cmd.workspace);
      return { reply: { id: cmd.id, ok: true, value: { released: freed } }, committed: false };
    }
    const next: Draft = {
      ...draft,
      reserved: draft.reserved.filter((a) => a !== name),
      ops: (draft.ops as Operation[]).filter((o) => !(o._type === 'svcSetAlias' && aliasName(o.namespace, o.alias) === name)),
    };
    const out = await this.write(cmd, ctx, next, { released: true });
    if (out !== 'lease-lost' && out.reply.ok) await this.store.releaseAlias(cmd.namespace, cmd.alias, cmd.cid, cmd.workspace);
    return out;
  }

  /**
   * The content in main decides before a draft is looked at: a caller without `permission` on it
   * gets 403, or for content deleted there the 404 `missing` of a key that never existed, the
   * same whether or not the workspace holds a draft of it.
   */
  private decideOnOriginal(original: Snapshot | null, user: Principal, permission: string, missing: () => AppError): void {
    if (original && !isAllowed(this.security, user, permission, original.type, contextsOf(original.meta))) {
      throw original.deleted ? missing() : permissionDenied(permission, user);
    }
  }

  /**
   * Reserves the aliases of the svcSetAlias operations for the draft. An alias that another
   * content holds, or another workspace's draft of this content (a reservation names one
   * workspace: reserve-alias-1.lua), becomes an ALIAS_EXISTS subResult and its operation is
   * dropped. Aliases the draft already lists as reserved are asked again too: such a reservation
   * may not be the draft's any more (two workspaces both listed one before reservations were
   * exclusive), and one freed meanwhile is taken again.
   */
  private async reserve(cid: string, workspace: string, ops: Operation[]): Promise<{ reserved: string[]; subResults: SubResult[]; ops: Operation[] }> {
    const reserved: string[] = [];
    const subResults: SubResult[] = [];
    const failed = new Set<Operation>();
    for (const { op, name } of setAliasOps(ops)) {
      if (reserved.includes(name)) continue;
      if (await this.store.reserveAlias(op.namespace, op.alias, cid, workspace)) reserved.push(name);
      else {
        failed.add(op);
        subResults.push(aliasExists<Operation>(op, name));
      }
    }
    return { reserved, subResults, ops: ops.filter((o) => !failed.has(o)) };
  }

  /**
   * The last step before a draft is written, every check passed and the aliases reserved: the
   * files the write adds are claimed (src/security/unclaimed-files.ts); when the sweep has taken
   * one, the write is refused (400) and the aliases it newly reserved (`fresh`) are freed.
   */
  private async claimOrRelease(cmd: Cmd, aspects: Aspects, fresh: string[]): Promise<void> {
    try {
      await this.unclaimed.claim(aspects.svcFiles, cmd.files);
    } catch (e) {
      await this.release(cmd.cid, cmd.workspace, fresh);
      throw e;
    }
  }

  private async release(cid: string, workspace: string, aliases: string[]): Promise<void> {
    for (const a of aliases) {
      const [ns, alias] = splitAlias(a);
      await this.store.releaseAlias(ns, alias, cid, workspace);
    }
  }

  /** Commits a draft (or its removal); the workspace index is updated first (idempotent, checked on read). */
  private async write(cmd: Cmd, ctx: ActorContext, draft: Draft | null, value: DraftResult | SmallValue): Promise<Outcome> {
    if (draft) await this.store.addToWorkspace(cmd.workspace, cmd.cid);
    const reply: Reply = { id: cmd.id, ok: true, value };
    // A local command is never replayed: no reply to record, nor to send on.
    const packed = ctx.local ? undefined : pack(reply);
    const outcome = await this.store.commitDraft({
      owner: ctx.owner,
      cid: cmd.cid,
      workspace: cmd.workspace,
      draft,
      reply: ctx.local ? undefined : recordOf(cmd.id, value),
      commandId: cmd.id,
      entryId: ctx.entryId,
    });
    return outcome === CommitOutcome.Committed ? { reply, committed: true, packed } : 'lease-lost';
  }
}

/** 404 for content neither in main nor on the workspace; it names no content key either. */
const noContent = (workspace: string): AppError => new AppError('NOT_FOUND', `No draft of this content in workspace ${workspace}, and none in main`);
