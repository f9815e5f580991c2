import { newCommandId, newContentKey } from '../adapters/ids.js';
import type { ContentCommand, WriteResult } from '../actors/content/content-actor.js';
import {
  contextsOf,
  etagOf,
  ifMatchHolds,
  liveHeadOf,
  MAIN_NAMESPACE,
  type Draft,
  type DraftOrigin,
  type Snapshot,
  type VersionRecord,
} from '../content/model.js';
import { isAllowed, type Principal } from '../content/permissions.js';
import type { DraftResult } from '../actors/content/workspace.js';
import { AppError } from '../errors.js';
import type { ContentEndpoints, ContentServiceDeps } from './content-deps.js';
import { writtenDraftEnvelope, writtenEnvelope } from './content-writes.js';
import { STATUS_CREATED, STATUS_OK, VARY_ACCEPT, contentEnvelope, draftEnvelope, formatOf, partialCreated, serialize } from './envelope.js';
import type { Exchange } from './http.js';
import type { Params } from './router.js';
import { checkAlias, nameSchema, parseEnvelope } from './schemas.js';
import { variantAspects } from './variant-reads.js';

const workspaceSchema = nameSchema('workspace');

/**
 * The workspace endpoints of the content service. Drafts are written through the content's
 * actor (like every write); reads go to Redis directly. A workspace needs no registration.
 */
export class WorkspaceService {
  constructor(
    private readonly d: ContentServiceDeps,
    private readonly content: ContentEndpoints,
  ) {
    const r = content.router;
    r.on('POST', 'content/workspace/:ws', (x, p) => this.create(x, p));
    r.on('GET', 'content/workspace/:ws', (x, p) => this.info(x, p));
    r.on('DELETE', 'content/workspace/:ws', (x, p) => this.clear(x, p));
    r.on('GET', 'content/workspace/:ws/alias/:ns/:alias', (x, p) => this.read(x, p));
    r.on('PUT', 'content/workspace/:ws/alias/:ns/:alias', (x, p) => this.update(x, p));
    r.on('DELETE', 'content/workspace/:ws/alias/:ns/:alias', (x, p) => this.remove(x, p));
    r.on('POST', 'content/workspace/:ws/alias/:ns/:alias/promote', (x, p) => this.promote(x, p));
  }

  private workspace(p: Params): string {
    const r = workspaceSchema.safeParse(p.ws);
    if (!r.success) throw new AppError('BAD_REQUEST', `Invalid workspace name: ${r.error.issues[0].message}`);
    return p.ws;
  }

  /** The content an alias names as seen from the workspace (its reservations included). */
  private async cidOf(p: Params, ws: string): Promise<string> {
    checkAlias(p.ns, p.alias);
    const cid = await this.d.store.resolveAlias(p.ns, p.alias, ws);
    if (!cid) throw new AppError('NOT_FOUND', `Content ${p.ns}/${p.alias} not found`);
    return cid;
  }

  /** POST workspace: a draft of new content; operations pending, aliases reserved. 201. */
  private async create(x: Exchange, p: Params): Promise<void> {
    const user = await this.content.authenticate(x, { anyOf: ['Create'] });
    const ws = this.workspace(p);
    const fmt = formatOf(x.param('format'), x.header('accept')); // refused before anything is written
    const env = parseEnvelope(await x.json(user));
    if (!env.contentType) throw new AppError('BAD_REQUEST', 'system.contentType is required on create');
    const aspects = Object.fromEntries(Object.entries(env.aspects).filter(([, a]) => a !== null)) as Record<string, NonNullable<(typeof env.aspects)[string]>>;
    const files = await this.content.readableFiles(user, aspects.svcFiles);
    const res = await this.d.mailbox.send<DraftResult, ContentCommand>({
      k: 'wsCreate',
      id: newCommandId(),
      cid: newContentKey(),
      user,
      files,
      workspace: ws,
      type: env.contentType,
      aspects,
      ops: env.operations,
    });
    const status = res.subResults.length ? partialCreated(res.subResults) : STATUS_CREATED;
    const mayRead = this.content.reads.mayReadDraft(user, res.draft, null);
    x.send(201, [['Content-Type', 'application/json'], VARY_ACCEPT], serialize(writtenDraftEnvelope(mayRead, res.draft, null, status), fmt));
  }

  /** GET workspace: `{workspaceId, drafts: {<main alias>: {}}}`. */
  private async info(x: Exchange, p: Params): Promise<void> {
    const user = await this.content.authenticate(x);
    const ws = this.workspace(p);
    const drafts: Record<string, object> = {};
    // In content-key order: a Redis set's own order depends on the size of its hash table, so
    // drafts the caller may not read reordered those it may (the listing told that hidden drafts
    // were added, and roughly how many).
    const members = (await this.d.store.workspaceMembers(ws)).sort();
    // The drafts' summaries, not the drafts: a listing costs in proportion to its answer (40
    // drafts of 8 MB were decoded in full, 4-5 s of this thread, for an answer of 2 KB).
    const found = await this.d.store.workspaceDrafts(ws, members);
    // Only the drafts the caller may read are listed (CONTRACT §20: the listing is the same
    // whether or not drafts the caller may not read are on the workspace).
    members.forEach((cid, i) => {
      const draft = found[i];
      if (draft && this.content.reads.mayReadDraft(user, draft, draft.original)) drafts[`${MAIN_NAMESPACE}/${cid}`] = {};
    });
    x.sendJson(200, { workspaceId: ws, drafts });
  }

  /** DELETE workspace: every draft removed; any logged-in user may. 204. */
  private async clear(x: Exchange, p: Params): Promise<void> {
    const user = await this.content.authenticate(x);
    const ws = this.workspace(p);
    const members = await this.d.store.workspaceMembers(ws);
    await Promise.all(
      members.map((cid) =>
        this.d.mailbox.send<unknown, ContentCommand>({ k: 'wsDelete', id: newCommandId(), cid, user, workspace: ws, clear: true }).catch((e: unknown) => {
          if (!(e instanceof AppError && e.code === 'NOT_FOUND')) throw e;
          return this.d.store.removeFromWorkspace(ws, cid);
        }),
      ),
    );
    x.send(204, []);
  }

  /** GET draft: the draft if it exists, otherwise the latest main version; pending operations included. */
  private async read(x: Exchange, p: Params): Promise<void> {
    const user = await this.content.authenticate(x);
    const ws = this.workspace(p);
    const cid = await this.cidOf(p, ws);
    // Read is decided before the draft is looked up: on the original when the content is (or was)
    // in main, so a caller who may not read it gets the same answer whether or not this workspace
    // holds a draft of it: 403 for live content, and once it is deleted in main the 404 of a key
    // that never existed; on the draft's type when only the draft exists.
    const original = await this.d.store.head(cid);
    if (original?.deleted && !this.content.reads.mayReadDraft(user, null, original)) throw noContent(ws);
    if (original) this.content.reads.checkDraftRead(user, null, original);
    const draft = await this.d.store.draft(cid, ws);
    if (!original && draft) this.content.reads.checkDraftRead(user, draft, null);
    const head = liveHeadOf(original);
    if (!draft && !head) throw noContent(ws);
    const type = draft?.type ?? head!.type;
    const variant = this.content.variantOf(x, type);
    const fmt = formatOf(x.param('format'), x.header('accept'));
    if (draft) {
      let aspects = draft.aspects;
      if (variant !== null) {
        const snapshot = head ?? draftSnapshot(draft);
        const version: VersionRecord = { key: 'draft', type, aspects: draft.aspects, created: draft.modified, creator: draft.creator, rev: snapshot.rev };
        aspects = await variantAspects(this.d, variant, snapshot, version);
      }
      x.send(200, [['Content-Type', 'application/json'], VARY_ACCEPT], serialize(draftEnvelope(draft, head, STATUS_OK, aspects), fmt));
      return;
    }
    let version = await this.d.store.version(cid, head!.head);
    if (!version) throw new AppError('NOT_FOUND', 'Version missing');
    if (variant !== null) {
      version = { ...version, aspects: await variantAspects(this.d, variant, head!, version) };
    }
    x.send(
      200,
      [['Content-Type', 'application/json'], ['ETag', etagOf(cid, head!.rev)], VARY_ACCEPT],
      serialize({ ...contentEnvelope(head!, version), operations: [] }, fmt),
    );
  }

  /** PUT draft: a new draft over main, or the draft replaced; `merge` and conditional headers refused. */
  private async update(x: Exchange, p: Params): Promise<void> {
    // A draft of new content needs Create somewhere, one over main Update (workspace.ts).
    const user = await this.content.authenticate(x, { anyOf: ['Create', 'Update'] });
    const ws = this.workspace(p);
    if (x.header('if-match') !== undefined || x.header('if-none-match') !== undefined) {
      throw new AppError('BAD_REQUEST', 'Workspace updates take no If-Match or If-None-Match; send the origin ETag in the body');
    }
    const m = x.query.get('updateMode') ?? 'update';
    if (m !== 'update' && m !== 'replace') throw new AppError('BAD_REQUEST', `updateMode '${m}' is not allowed on a workspace: use update or replace`);
    if (x.query.has('variant')) throw new AppError('BAD_REQUEST', 'Variants cannot be used when updating');
    const fmt = formatOf(x.param('format'), x.header('accept')); // refused before anything is written
    const env = parseEnvelope(await x.json(user));
    const cid = await this.cidOf(p, ws);
    const files = await this.content.readableFiles(user, env.aspects.svcFiles);
    const res = await this.d.mailbox.send<DraftResult, ContentCommand>({
      k: 'wsUpdate',
      id: newCommandId(),
      cid,
      user,
      files,
      workspace: ws,
      aspects: env.aspects,
      ops: env.operations,
      origin: env.origin,
      mode: m,
    });
    // The draft's aspects (over main: main's) only to a caller who may read it (writtenDraftEnvelope).
    const original = await this.d.store.head(cid);
    const mayRead = this.content.reads.mayReadDraft(user, res.draft, original);
    x.send(200, [['Content-Type', 'application/json'], VARY_ACCEPT], serialize(writtenDraftEnvelope(mayRead, res.draft, liveHeadOf(original), STATUS_OK), fmt));
  }

  /** DELETE draft: only the workspace is affected. 204. */
  private async remove(x: Exchange, p: Params): Promise<void> {
    const user = await this.content.authenticate(x);
    const ws = this.workspace(p);
    const cid = await this.cidOf(p, ws);
    await this.d.mailbox.send<unknown, ContentCommand>({ k: 'wsDelete', id: newCommandId(), cid, user, workspace: ws });
    x.send(204, []);
  }

  /** POST promote: 200 with the envelope of the new main version; the draft is removed. */
  private async promote(x: Exchange, p: Params): Promise<void> {
    // A promote writes main: a create (Create) or an update (Update).
    const user = await this.content.authenticate(x, { anyOf: ['Create', 'Update'] });
    const ws = this.workspace(p);
    const fmt = formatOf(x.param('format'), x.header('accept')); // refused before anything is written
    const cid = await this.cidOf(p, ws);
    // Promote writes main as the promoter: the draft's files are checked for the promoter. The
    // draft is looked at here only for a caller who may update the content in main (the actor
    // answers the others 403 before it looks either), so the time of a 403 tells nothing of it.
    const original = await this.d.store.head(cid);
    const mayPromote = original === null || isAllowed(this.d.security, user, 'Update', original.type, contextsOf(original.meta));
    // Nor for a promote the actor refuses from the draft's origin and main's head before it reads
    // the draft (Workspaces.promote): one that conflicts writes nothing, and may be asked again and
    // again, so it must not cost a read and decode of the draft either (review s23d).
    const refused = mayPromote && this.refusedFromOrigin(user, original, await this.d.store.draftOrigin(cid, ws));
    const files = await this.content.readableFiles(user, mayPromote && !refused ? (await this.d.store.draft(cid, ws))?.aspects.svcFiles : undefined);
    const res = await this.d.mailbox
      .send<WriteResult, ContentCommand>({ k: 'wsPromote', id: newCommandId(), cid, user, files, workspace: ws })
      .finally(() => this.d.heads.drop(cid));
    x.send(
      200,
      [['Content-Type', 'application/json'], ['ETag', etagOf(cid, res.snapshot.rev)], VARY_ACCEPT],
      serialize(writtenEnvelope(this.content.reads.mayRead(user, res.snapshot), res.snapshot, res.version, STATUS_OK), fmt),
    );
  }

  /**
   * Does the actor refuse this promote from the draft's summary, before it reads the draft
   * (ContentActor.refuseStaleUpdate, from Workspaces.promote)? No draft (null), or one over main
   * whose summary keeps its origin, when main holds no live content, or its head is not the origin
   * while every check before the If-Match passes whatever the draft's operations are (the caller
   * may update it, checked before: `mayPromote`). A summary without origin (undefined): no.
   */
  private refusedFromOrigin(user: Principal, original: Snapshot | null, kept: DraftOrigin | null | undefined): boolean {
    if (kept === null) return true;
    if (kept === undefined || kept.fromCreate) return false;
    if (original === null || original.deleted) return true;
    if (kept.views && !isAllowed(this.d.security, user, 'AssignToView', original.type, contextsOf(original.meta))) return false;
    return kept.origin === null || !ifMatchHolds(kept.origin, original.cid, original.rev);
  }
}

/** 404 for content neither on the workspace nor in main (or deleted there, to a caller who may not read it); it names no content key. */
const noContent = (ws: string): AppError => new AppError('NOT_FOUND', `No draft of this content in workspace ${ws}, and none in main`);

/** A snapshot for content that exists only on a workspace (for variant composition). */
function draftSnapshot(d: Draft): Snapshot {
  return {
    cid: d.cid,
    rev: 0,
    type: d.type,
    head: 'draft',
    created: d.created,
    modified: d.modified,
    committer: d.creator,
    deleted: false,
    views: {},
    symbolic: {},
    meta: {},
    aliases: [],
  };
}
