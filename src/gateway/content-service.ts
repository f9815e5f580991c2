import { LRUCache } from 'lru-cache';
import { snapshotBytes } from '../adapters/event-reader.js';
import { newCommandId } from '../adapters/ids.js';
import type { ContentCommand } from '../actors/content/content-actor.js';
import { etagOf, parseVersionId, MAIN_NAMESPACE, MAP_KEY_RESERVED, type Aspect, type Snapshot } from '../content/model.js';
import { AppError } from '../errors.js';
import { ContentWrites, explainConflict, writtenEnvelope, type AliasRef } from './content-writes.js';
import { isSysadmin, refuseUnlessAnywhere, type Principal } from '../content/permissions.js';
import { trustedProxies } from '../security/client-address.js';
import {
  STATUS_CREATED,
  STATUS_OK,
  VARY_ACCEPT,
  contentEnvelope,
  formatOf,
  historyBody,
  metadataEnvelope,
  partialCreated,
  serialize,
  type Format,
} from './envelope.js';
import type { Exchange } from './http.js';
import { authenticateRequest, knownCaller } from './request-auth.js';
import { WebhooksService } from './webhooks-service.js';
import { WorkspaceService } from './workspace-service.js';
import { RevisionsService } from './revisions-service.js';
import { BulkService } from './bulk-service.js';
import { OperationsService } from './operations-service.js';
import type { ContentEndpoints, ContentServiceDeps, Needs } from './content-deps.js';
import { Router, type Params } from './router.js';
import { Reads } from './reads.js';
import { variantAspects } from './variant-reads.js';
import { SYSTEM_VIEWS, resolveView, versionOnView } from '../content/views.js';
import { INDEXING_VARIANT } from '../content/variants.js';
import { checkAlias, isSafeName, parseViewBody, requiredIfMatch, typeSchema, updateModeOf } from './schemas.js';
import type { ReindexScope } from '../actors/reindex-session.js';

export const CONTENT_PREFIX = 'content-service';

/**
 * The most a login's body may have (POST security/token; 413 past it, `bodyLimitOf`): its
 * fields are at most 4,096 characters (token-service.ts), 24 KiB escaped each. A login is read
 * without a token, so its body counts under the client address (bodies-held.ts): with
 * MAX_BODY_BYTES (10 MiB), 52 logins that never finish, from 8 addresses, held BODIES_HELD_BYTES
 * and every write of the process answered 503.
 */
export const LOGIN_MAX_BODY_BYTES = 64 * 1024;
const VERSIONED_CACHE_CONTROL = 'private, no-transform, proxy-revalidate, max-age=31536000';
/** A versioned read is kept a year, privately, for the token it was decided for only (a browser shared by two users). */
const VARY_ACCEPT_TOKEN: [string, string] = ['Vary', 'Accept, X-Auth-Token'];

type ReadKind = 'content' | 'metadata' | 'history';

/**
 * The content service over HTTP: tokens, permissions, content create/read/update/delete,
 * aliases, metadata, history and view reads. Writes go to the content's actor through the
 * mailbox; reads go to Redis directly and versioned answers are cached (they never change).
 */
export class ContentService implements ContentEndpoints {
  readonly router = new Router();
  readonly reads: Reads;
  /** Create, update and delete, shared with the bulk import. */
  readonly writes: ContentWrites;
  /**
   * Revisions read: the snapshot, its ETag and its rendered answers; none of them ever changes.
   * Bounded by entries (READ_CACHE_ENTRIES) and by bytes (READ_CACHE_BYTES, entryBytes): a
   * revision's history lists every version before it, so the histories of a long-lived content
   * alone grow with the square of its revisions (1,000 revisions kept 98 MB of answers before).
   */
  private readonly revisions: LRUCache<string, RevisionEntry>;
  /** The largest answer kept (a sixteenth of READ_CACHE_BYTES): one huge answer must not flush the cache. */
  private readonly maxKeptBody: number;

  constructor(private readonly d: ContentServiceDeps) {
    this.revisions = new LRUCache<string, RevisionEntry>({
      max: Math.max(1, d.settings.READ_CACHE_ENTRIES),
      maxSize: Math.max(1, d.settings.READ_CACHE_BYTES),
      sizeCalculation: entryBytes,
    });
    this.maxKeptBody = Math.floor(d.settings.READ_CACHE_BYTES / 16);
    this.reads = new Reads(d);
    this.writes = new ContentWrites(d);
    const r = this.router;
    r.on('POST', 'security/token', (x) => this.token(x));
    r.on('DELETE', 'security/token', (x) => this.revokeToken(x));
    r.on('GET', 'security/permission/:user', (x, p) => this.permission(x, p));
    r.on('POST', 'content', (x) => this.create(x));
    r.on('GET', 'content/alias/:ns/:alias', (x, p) => this.redirect(x, p, 'content'));
    r.on('PUT', 'content/alias/:ns/:alias', (x, p) => this.update(x, p));
    r.on('DELETE', 'content/alias/:ns/:alias', (x, p) => this.delete(x, p));
    r.on('GET', 'content/alias/:ns/:alias/metadata', (x, p) => this.redirect(x, p, 'metadata'));
    r.on('GET', 'content/alias/:ns/:alias/history', (x, p) => this.redirect(x, p, 'history'));
    r.on('DELETE', 'content/alias/:ns/:alias/release', (x, p) => this.release(x, p));
    r.on('GET', 'content/alias/:ns/:alias/#rev', (x, p) => this.versioned(x, p, 'content'));
    r.on('GET', 'content/alias/:ns/:alias/#rev/metadata', (x, p) => this.versioned(x, p, 'metadata'));
    r.on('GET', 'content/alias/:ns/:alias/#rev/history', (x, p) => this.versioned(x, p, 'history'));
    r.on('GET', 'content/view/:view/alias/:ns/:alias', (x, p) => this.redirect(x, p, 'content'));
    r.on('GET', 'content/view/:view/alias/:ns/:alias/#rev', (x, p) => this.versioned(x, p, 'content'));
    r.on('PUT', 'view/:view', (x, p) => this.putView(x, p));
    r.on('DELETE', 'view/:view/alias/:ns/:alias', (x, p) => this.removeFromView(x, p));
    r.on('POST', 'index/reindex/full', (x) => this.reindex(x, 'full'));
    r.on('POST', 'index/reindex/contentType/:type', (x, p) => this.reindex(x, 'type', p.type));
    r.on('POST', 'index/reindex', (x) => this.reindex(x, 'aliases'));
    new WorkspaceService(d, this);
    new WebhooksService(d, this);
    new RevisionsService(d, this);
    new BulkService(d, this);
    new OperationsService(d, this);
  }

  // ---- security ----

  private async token(x: Exchange): Promise<void> {
    // Read before the body is awaited: the socket's address is gone once the client is.
    const address = x.clientAddress(trustedProxies(this.d.settings.TRUSTED_PROXIES));
    const res = await this.d.tokens.issue(await x.json(), address);
    x.sendJson(200, res);
  }

  /** Logout (CONTRACT §20): revokes the request's own token on every process; 204, 401 when not valid. */
  private async revokeToken(x: Exchange): Promise<void> {
    await this.authenticate(x);
    await this.d.tokens.revoke(x.header('x-auth-token')!);
    x.send(204, []);
  }

  private async permission(x: Exchange, p: Params): Promise<void> {
    const user = await this.authenticate(x);
    if (p.user !== user.userId) throw new AppError('PERMISSION_DENIED', 'Only your own authorization information can be read');
    x.sendJson(200, this.d.tokens.authorizationInfo(user));
  }

  /**
   * 401 unless X-Auth-Token names a valid token, when the headers arrive and again once the
   * whole request has (request-auth.ts): the caller as they are when their body is complete.
   * With `needs`, 403 at each check for a caller without it, the first before the body is read.
   */
  async authenticate(x: Exchange, needs?: Needs): Promise<Principal> {
    if (!needs) return authenticateRequest(this.d.tokens, x);
    const security = this.d.security;
    return authenticateRequest(this.d.tokens, x, (user) =>
      'anyOf' in needs ? refuseUnlessAnywhere(security, user, needs.anyOf) : isSysadmin(user) ? undefined : new AppError('PERMISSION_DENIED', needs.sysadmin),
    );
  }

  // ---- writes ----

  private async create(x: Exchange): Promise<void> {
    if (x.header('if-match') !== undefined) throw new AppError('PRECONDITION_FAILED', 'A create must not carry If-Match');
    const user = await this.authenticate(x, { anyOf: ['Create'] });
    const fmt = formatOf(x.param('format'), x.header('accept')); // refused before anything is written
    const res = await this.writes.create({ user, requestId: x.requestId }, await x.json(user));
    const status = res.subResults.length ? partialCreated(res.subResults) : STATUS_CREATED;
    x.send(
      201,
      [
        ['Content-Type', 'application/json'],
        ['Location', this.versionedUrl(MAIN_NAMESPACE, res.snapshot.cid, res.snapshot.rev, 'content')],
        ['ETag', etagOf(res.snapshot.cid, res.snapshot.rev)],
        VARY_ACCEPT,
      ],
      serialize(writtenEnvelope(this.reads.mayRead(user, res.snapshot), res.snapshot, res.version, status), fmt),
    );
  }

  private async update(x: Exchange, p: Params): Promise<void> {
    const user = await this.authenticate(x, { anyOf: ['Update'] });
    const unsafe = x.query.get('unsafeUpdate') === 'true';
    const ifMatch = x.header('if-match') ?? null;
    this.writes.checkUpdatePreconditions(ifMatch, unsafe);
    if (x.query.has('variant')) throw new AppError('BAD_REQUEST', 'Variants cannot be used when updating');
    const mode = updateModeOf(x.query.get('updateMode'));
    const fmt = formatOf(x.param('format'), x.header('accept')); // refused before anything is written
    const res = await this.writes.update({ user, requestId: x.requestId }, aliasRef(p), { ifMatch, unsafe, mode }, await x.json(user));
    x.send(
      200,
      [['Content-Type', 'application/json'], ['ETag', etagOf(res.snapshot.cid, res.snapshot.rev)], VARY_ACCEPT],
      // What the caller may not read is not answered (writtenEnvelope): a merge of no aspects
      // answered the whole content to a role with Update and no Read.
      serialize(writtenEnvelope(this.reads.mayRead(user, res.snapshot), res.snapshot, res.version, STATUS_OK), fmt),
    );
  }

  private async delete(x: Exchange, p: Params): Promise<void> {
    const user = await this.authenticate(x);
    await this.writes.delete({ user, requestId: x.requestId }, aliasRef(p), x.header('if-match'));
    x.send(204, []);
  }

  /** Alias release: sysadmin only; 204 when released, 200 when there was nothing to release. */
  private async release(x: Exchange, p: Params): Promise<void> {
    const user = await this.authenticate(x);
    if (!isSysadmin(user)) throw new AppError('PERMISSION_DENIED', 'Releasing an alias requires sysadmin in __global__');
    checkAlias(p.ns, p.alias);
    if (p.ns === MAIN_NAMESPACE) {
      const head = await this.d.store.head(p.alias);
      if (head && !head.deleted) throw new AppError('MAIN_ALIAS_IN_USE', 'A main alias cannot be released without first deleting the content');
      x.send(200, []);
      return;
    }
    const holder = await this.d.store.aliasHolder(p.ns, p.alias);
    if (!holder) {
      x.send(200, []);
      return;
    }
    const { cid, workspace } = holder;
    const cmd: ContentCommand =
      workspace === undefined
        ? { k: 'releaseAlias', id: newCommandId(), cid, user, namespace: p.ns, alias: p.alias }
        : { k: 'wsReleaseAlias', id: newCommandId(), cid, user, workspace, namespace: p.ns, alias: p.alias };
    const res = await this.d.mailbox.send<{ released: boolean }, ContentCommand>(cmd).finally(() => this.d.heads.drop(cid));
    x.send(res.released ? 204 : 200, []);
  }

  // ---- re-indexing ----

  /**
   * Starts a re-indexing session (sysadmin in __global__ only); 200 with a plain-text message
   * naming the session and the count. The earlier form, POST index/reindex without `aliases`,
   * re-indexes everything, or one type with `contentType`.
   */
  private async reindex(x: Exchange, kind: 'full' | 'type' | 'aliases', type?: string): Promise<void> {
    await this.authenticate(x, { sysadmin: 'Re-indexing requires sysadmin in __global__' });
    if (!this.d.reindex) throw new AppError('UNAVAILABLE', 'No search engine is configured', {}, 30);
    const time = (name: string) => {
      const v = x.query.get(name);
      if (v === null || v === '') return undefined;
      const ms = Date.parse(v);
      if (!/^\d{4}-\d\d-\d\d/.test(v) || Number.isNaN(ms)) throw new AppError('BAD_REQUEST', `${name} must be an ISO 8601 date-time`);
      return ms;
    };
    let scope: ReindexScope;
    let what = '';
    if (kind === 'aliases' && x.query.has('aliases')) {
      const names = (x.query.get('aliases') ?? '')
        .split(',')
        .map((a) => a.trim())
        .filter(Boolean);
      if (!names.length || names.length > 10000) throw new AppError('BAD_REQUEST', 'aliases must list 1 to 10000 main aliases');
      const cids: string[] = [];
      for (const a of names) {
        const i = a.indexOf('/');
        if (i < 0) throw new AppError('BAD_REQUEST', `Not an alias: ${a}`);
        const cid = await this.d.store.resolveAlias(a.slice(0, i), a.slice(i + 1));
        if (cid) cids.push(cid);
      }
      scope = { kind: 'contents', cids };
    } else if (kind === 'type' || (kind === 'aliases' && x.query.has('contentType'))) {
      const t = type ?? x.query.get('contentType') ?? '';
      if (!typeSchema.safeParse(t).success) throw new AppError('BAD_REQUEST', 'Invalid content type');
      scope = { kind: 'type', type: t };
      what = ` of type ${t}`;
    } else {
      const from = time('from');
      const to = time('to');
      if (from !== undefined && to !== undefined && from > to) throw new AppError('BAD_REQUEST', 'from is after to');
      scope = { kind: 'full', from, to };
      what =
        from !== undefined || to !== undefined
          ? ` affected ${from !== undefined ? `from ${new Date(from).toISOString()} ` : ''}${to !== undefined ? `up to ${new Date(to).toISOString()}` : 'until now'}`.replace(
              / $/,
              '',
            )
          : '';
    }
    const { session, total } = await this.d.reindex.trigger(scope);
    x.send(200, [['Content-Type', 'text/plain; charset=utf-8']], `Re-indexing session ${session} started: ${total} content${what} queued.`);
  }

  // ---- views ----

  /** PUT view: a version onto a view, or a symbolic view; 200, empty body, the new ETag. */
  private async putView(x: Exchange, p: Params): Promise<void> {
    const user = await this.authenticate(x, { anyOf: ['AssignToView'] });
    const view = this.assignableView(p.view);
    const ifMatch = requiredIfMatch(x.header('if-match'), 'Putting content on a view');
    const body = parseViewBody(await x.json(user));
    let cmd: ContentCommand;
    if (body.version !== undefined) {
      const v = parseVersionId(body.version);
      if (!v) throw new AppError('BAD_REQUEST', `Not a version id: ${body.version}`);
      cmd = { k: 'assignView', id: newCommandId(), cid: v.cid, user, view, ifMatch, versionKey: v.key };
    } else {
      const { alias, targetView } = body.symbolic!;
      const i = alias.indexOf('/');
      const cid = await this.cidOf({ ns: alias.slice(0, i), alias: alias.slice(i + 1) } as Params);
      cmd = { k: 'assignView', id: newCommandId(), cid, user, view, ifMatch, target: this.viewName(targetView.slice(1)) };
    }
    const res = await this.d.mailbox
      .send<{ cid: string; rev: number }, ContentCommand>(cmd)
      .catch(explainConflict)
      .finally(() => this.d.heads.drop(cmd.cid));
    x.send(200, [['ETag', etagOf(res.cid, res.rev)]]);
  }

  /** DELETE view alias: every version of the content off the view; 204 with the new ETag. */
  private async removeFromView(x: Exchange, p: Params): Promise<void> {
    const user = await this.authenticate(x);
    // A reserved name may still be taken off (a view stored before such names were refused).
    const view = this.assignableView(p.view, false);
    const cid = await this.cidOf(p);
    const res = await this.d.mailbox
      .send<{ cid: string; rev: number }, ContentCommand>({ k: 'removeFromView', id: newCommandId(), cid, user, view })
      .finally(() => this.d.heads.drop(cid));
    x.send(204, [['ETag', etagOf(res.cid, res.rev)]]);
  }

  private assignableView(view: string, assigning = true): string {
    this.viewName(view);
    if (assigning && MAP_KEY_RESERVED.has(view)) throw new AppError('BAD_REQUEST', `View name '${view}' is reserved`);
    if (SYSTEM_VIEWS.includes(view)) throw new AppError('BAD_REQUEST', `View ${view} is maintained by the system`);
    return view;
  }

  // ---- reads ----

  /** Unversioned read: 303 to the versioned resource of the current revision. */
  private async redirect(x: Exchange, p: Params, kind: ReadKind): Promise<void> {
    // Answered from caches without awaiting (knownCaller, knownCid, peek) where they hold it.
    const user = knownCaller(this.d.tokens, x) ?? (await this.authenticate(x));
    const cid = this.writes.knownCid(aliasRef(p)) ?? (await this.cidOf(p));
    const least = x.param('atLeastRevision');
    if (least !== null && !/^\d{1,15}$/.test(least)) throw new AppError('BAD_REQUEST', 'atLeastRevision must be an integer');
    // atLeastRevision bypasses a cached head older than it
    const atLeast = least === null ? 0 : Number(least);
    const head = this.d.heads.peek(cid, atLeast) ?? (await this.d.heads.get(cid, atLeast));
    if (!head || head.deleted) throw new AppError('NOT_FOUND', `Content ${p.ns}/${p.alias} not found`);
    this.reads.checkRead(user, head);
    if (least !== null && head.rev < Number(least)) {
      throw new AppError('VERSION_NOT_FOUND', `Revision ${least} is not available yet (current ${head.rev})`, { revision: head.rev });
    }
    this.variantOf(x, head.type);
    formatOf(x.param('format'), x.header('accept')); // 400 now, not after the redirect
    if (p.view !== undefined && versionOnView(head, this.viewName(p.view), this.d.clock()) === null) {
      throw new AppError('NOT_FOUND', `Content is not on view ${p.view}`);
    }
    const etag = etagOf(cid, head.rev);
    if (kind === 'content' && p.view === undefined && x.header('if-none-match') === etag) {
      // A 304 carries the Cache-Control its 200 would (RFC 9110 §15.4.5): here the redirect's.
      x.send(304, [
        ['ETag', etag],
        ['Cache-Control', 'no-cache'],
      ]);
      return;
    }
    const location = this.versionedUrl(p.ns, p.alias, head.rev, kind, p.view) + this.keptQuery(x);
    x.sendJson(303, { statusCode: 30300, message: 'Symbolic version resolved', location }, [
      ['Location', location],
      ['Cache-Control', 'no-cache'],
    ]);
  }

  /** Versioned read: the content as it was at that revision. */
  private async versioned(x: Exchange, p: Params, kind: ReadKind): Promise<void> {
    // Answered from caches without awaiting (knownCaller, knownCid, peek, the revision cache)
    // where they hold it: each await of an async function was a promise and a turn of the loop.
    const user = knownCaller(this.d.tokens, x) ?? (await this.authenticate(x));
    const cid = this.writes.knownCid(aliasRef(p)) ?? (await this.cidOf(p));
    const rev = Number(p.rev);
    const head = this.d.heads.peek(cid, rev) ?? (await this.d.heads.get(cid, rev));
    if (!head || head.deleted) throw new AppError('NOT_FOUND', `Content ${p.ns}/${p.alias} not found`);
    this.reads.checkRead(user, head);
    if (rev > head.rev) throw new AppError('VERSION_NOT_FOUND', `Revision ${rev} does not exist`, { revision: head.rev });
    const variant = this.variantOf(x, head.type);
    const fmt = formatOf(x.param('format'), x.header('accept'));
    const entry = this.revisions.get(`${cid}/${rev}`) ?? (await this.revision(cid, rev));
    const snap = entry.snap;
    if (p.view !== undefined && versionOnView(snap, this.viewName(p.view), this.d.clock()) === null) {
      throw new AppError('NOT_FOUND', `Content is not on view ${p.view}`);
    }
    if (x.header('if-none-match') === entry.etag) {
      // A 304 carries the Cache-Control and Vary of its 200 (RFC 9110 §15.4.5), or a cache
      // revalidating with it would keep the stored answer under the wrong rules.
      x.send(304, entry.headers304);
      return;
    }
    const key = kind === 'content' && p.view === undefined && variant === null && fmt === 'json' ? '' : `${kind}/${p.view ?? ''}/${variant ?? ''}/${fmt}`;
    let body = entry.bodies.get(key);
    if (body === undefined) {
      body = Buffer.from(await this.render(snap, kind, fmt, p.view, variant));
      // The indexing variant looks up taxonomy content, which may appear later: not cached. An
      // answer kept makes its entry larger: the entry is put again so that its size is counted
      // anew (LRUCache recounts no value set over itself), which evicts the least recently read
      // past READ_CACHE_BYTES; an entry larger than the whole bound is not kept.
      if (variant !== INDEXING_VARIANT && body.length <= this.maxKeptBody) {
        entry.bodies.set(key, body);
        this.revisions.delete(`${cid}/${rev}`);
        this.revisions.set(`${cid}/${rev}`, entry);
      }
    }
    x.send(200, entry.headers200, body);
  }

  /** A revision (snapshot and answers), from the cache or Redis; 404/40403 when it never existed. */
  private async revision(cid: string, rev: number): Promise<RevisionEntry> {
    const key = `${cid}/${rev}`;
    let entry = this.revisions.get(key);
    if (!entry) {
      const snap = await this.d.store.snapshotAt(cid, rev);
      if (!snap) throw new AppError('VERSION_NOT_FOUND', `Revision ${rev} does not exist`);
      const etag = etagOf(cid, rev);
      entry = {
        snap,
        etag,
        headers200: [['Content-Type', 'application/json'], ['ETag', etag], ['Cache-Control', VERSIONED_CACHE_CONTROL], VARY_ACCEPT_TOKEN],
        headers304: [['ETag', etag], ['Cache-Control', VERSIONED_CACHE_CONTROL], VARY_ACCEPT_TOKEN],
        bodies: new Map(),
      };
      this.revisions.set(key, entry);
    }
    return entry;
  }

  /** The `variant` of a read: null when none; 404 when the content type does not have it. */
  variantOf(x: Exchange, type: string): string | null {
    const v = x.param('variant');
    if (v === null || v === '') return null;
    if (!this.d.variants.has(type, v)) throw new AppError('NOT_FOUND', `Content is not available in variant ${v}`);
    return v;
  }

  private async render(snap: Snapshot, kind: ReadKind, fmt: Format, view: string | undefined, variant: string | null): Promise<string> {
    const cid = snap.cid;
    // Only the entries up to the revision are read: each revision is its own cache entry, so a
    // reader walking the revisions of a long history read the whole list at each before.
    if (kind === 'metadata') return serialize(metadataEnvelope(snap, await this.d.store.viewHistory(cid, snap.rev)), fmt);
    if (kind === 'history') return serialize(historyBody(snap, await this.d.store.versionIndex(cid, snap.rev)), fmt);
    const vk = view === undefined ? snap.head : resolveView(snap, view);
    if (vk === null) throw new AppError('NOT_FOUND', `Content is not on view ${view}`);
    const version = await this.d.store.version(cid, vk);
    if (!version) throw new AppError('VERSION_NOT_FOUND', `Version ${vk} does not exist`);
    if (variant === null) return serialize(contentEnvelope(snap, version), fmt);
    const aspects = await variantAspects(this.d, variant, snap, version);
    return serialize(contentEnvelope(snap, { ...version, aspects }), fmt);
  }

  /** The URIs of a write's `svcFiles` that the writer may read (CONTRACT §20 "File references"; see ContentWrites). */
  readableFiles(user: Principal, aspect: Aspect | null | undefined): Promise<string[]> {
    return this.writes.readableFiles(user, aspect);
  }

  private viewName(view: string): string {
    if (!isSafeName(view)) throw new AppError('BAD_REQUEST', `Invalid view name '${view}'`);
    return view;
  }

  /** The content key of a path's alias; 404 (40400) when no content has it. */
  private cidOf(p: Params): Promise<string> {
    return this.writes.cidOf(aliasRef(p));
  }

  private versionedUrl(ns: string, alias: string, rev: number, kind: ReadKind, view?: string): string {
    const base = `${this.d.baseUrl()}/${CONTENT_PREFIX}/content`;
    const where = view === undefined ? '' : `/view/${encodeURIComponent(view)}`;
    const suffix = kind === 'content' ? '' : `/${kind}`;
    return `${base}${where}/alias/${encodeURIComponent(ns)}/${encodeURIComponent(alias)}/${rev}${suffix}`;
  }

  /** Query parameters of a read kept in the redirect (variant, format; CONTRACT §12). */
  private keptQuery(x: Exchange): string {
    const kept = new URLSearchParams();
    for (const k of ['variant', 'format']) {
      const v = x.query.get(k);
      if (v !== null) kept.set(k, v);
    }
    const s = kept.toString();
    return s ? `?${s}` : '';
  }
}

/**
 * One revision as versioned reads answer it. `bodies` holds the rendered answers by
 * `kind/view/variant/format` ('' for the plain JSON content), as bytes: uWS would encode a
 * string again on every answer.
 */
interface RevisionEntry {
  snap: Snapshot;
  etag: string;
  headers200: [string, string][];
  headers304: [string, string][];
  bodies: Map<string, Buffer>;
}

/**
 * About what a kept revision takes in memory, for READ_CACHE_BYTES: its answers' bytes (Buffers,
 * outside the JS heap) and their keys, an estimate of its snapshot (snapshotBytes, plus its views),
 * and its ETag and headers. At least 1 (LRUCache refuses 0).
 */
function entryBytes(e: RevisionEntry): number {
  let n = 512 + snapshotBytes(e.snap);
  for (const [k, v] of Object.entries(e.snap.views)) n += 2 * (k.length + v.length) + 64;
  for (const [k, v] of Object.entries(e.snap.symbolic)) n += 2 * (k.length + v.length) + 64;
  for (const [k, b] of e.bodies) n += b.length + 2 * k.length + 64;
  return n;
}

/** The alias a route's `:ns/:alias` parameters name. */
const aliasRef = (p: Params): AliasRef => ({ ns: p.ns, alias: p.alias });
