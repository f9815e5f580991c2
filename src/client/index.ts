/**
 * A typed client of the platform's HTTP API (spec "Endpoints", CONTRACT §2), on fetch. The
 * end-to-end tests use it for every request (test/support/platform.ts), so it stays in step
 * with the server. Answers are returned, never thrown: callers check `status`.
 *
 * @example
 * const c = await new PlatformClient('http://127.0.0.1:8080/content-service').login('editor');
 * const created = await c.create({ system: { contentType: 'article' }, aspects: { body: { title: 'Hi' } } });
 * const read = await c.read(`/content/alias/${created.json.system.id}`);
 */

/** A content envelope (spec "Content envelope"): what create and update send and reads answer. */
export interface ContentEnvelope {
  system?: { contentType?: string; id?: string; version?: string; [k: string]: unknown };
  aspects?: Record<string, { _type?: string; [field: string]: unknown }>;
  operations?: { _type: string; [k: string]: unknown }[];
  [k: string]: unknown;
}

/** The error body of every 4xx/5xx (spec "Error body", CONTRACT §11). */
export interface ErrorBody {
  message: string;
  statusCode: string;
  extraInfo: Record<string, unknown>;
}

/** The token response (spec "Token response"). */
export interface TokenResponse {
  token: string;
  userId: string;
  /** Epoch milliseconds, as a string of digits. */
  expireTime: string;
  renewTime: string;
}

/** File info (spec "File info"). */
export interface FileInfo {
  URI: string;
  length: number;
  creationTime: number;
  modifiedTime: number;
  accessTime: number;
  mimeType: string;
  originalPath?: string;
}

/** The body of POST and PUT /webhooks (CONTRACT §14). */
export interface WebhookBody {
  url: string;
  types?: string[];
  views?: string[];
  kinds?: ('create' | 'update' | 'delete' | 'view' | 'timestate')[];
  description?: string;
}

/** A webhook as the API shows it; `secret` only in the answer to its creation. */
export interface Webhook extends Required<WebhookBody> {
  id: string;
  created: string;
  updated: string;
  secret?: string;
}

/** One row of a webhook's delivery log. */
export interface WebhookDelivery {
  id: string;
  eventId: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  nextAttempt: string | null;
  time: string;
}

/**
 * `<space>/<host>/<path>` of a file, encoded for a URL, from a file service URL (a `Location`,
 * encoded already), a `fileUri` (`content://host/...`) or the part itself; dot segments refused
 * (segmentsPath).
 */
function fileWhere(where: string): string {
  const m = /^([a-z]+):\/\/(.+)$/.exec(where);
  if (m && m[1] !== 'http' && m[1] !== 'https') return segmentsPath(`${m[1]}/${m[2]}`, 'a file address');
  const i = where.indexOf('/file-service/file/');
  if (i < 0) return segmentsPath(where, 'a file address');
  return encodedSegments(
    where
      .slice(i + '/file-service/file/'.length)
      .split('/')
      .map(decodeURIComponent),
    where,
    'a file address',
  );
}

/** The JSON of an answer when the caller names no type: indexable without casts, as JSON.parse gives it. */
// biome-ignore lint/suspicious/noExplicitAny: untyped JSON is the default of an answer; typed callers name T
export type AnyJson = any;

/** An answer: status, headers, the raw text and the parsed JSON (undefined when not JSON). */
export interface Answer<T = AnyJson> {
  status: number;
  headers: Headers;
  text: string;
  json: T;
}

export interface RequestOptions {
  /** A JSON body (sent with Content-Type: application/json). */
  body?: unknown;
  /** Raw bytes or text, sent as they are. */
  raw?: string | Buffer | Uint8Array;
  headers?: Record<string, string>;
  /** The token for this request; null for none; default the client's. */
  token?: string | null;
}

/**
 * A content id or alias (`contentid/<key>`, `<namespace>/<alias>`) as path segments, each
 * encoded; an empty, `.` or `..` segment is refused. Taken into a URL as it was, an id from
 * elsewhere (a user, a feed) such as `../workspace/desk` made `remove` delete a workspace with
 * the client's token: URL parsing resolves dot segments.
 */
export function idPath(id: string): string {
  return segmentsPath(id, 'a content id or alias');
}

/**
 * Any path of segments taken from elsewhere (a file's path in a content's `svcFiles`, a file URI),
 * encoded segment by segment; an empty, `.` or `..` segment is refused. A file path of
 * `../../../content-service/audit`, which any writer may put in `svcFiles`, made `deliver` fetch
 * the audit trail with the client's token (the fifteenth session's review).
 */
export function segmentsPath(path: string, what = 'a path'): string {
  return encodedSegments(path.split('/'), path, what);
}

function encodedSegments(segments: string[], path: string, what: string): string {
  if (segments.some((s) => s === '' || s === '.' || s === '..')) throw new Error(`not ${what}: ${JSON.stringify(path)}`);
  return segments.map(encodeURIComponent).join('/');
}

export class PlatformClient {
  /** The gateway's root (`http://host:port`), from the content service base. */
  readonly root: string;

  /** `base` is `{base_url}`, e.g. `http://127.0.0.1:8080/content-service`. */
  constructor(
    readonly base: string,
    public token?: string,
  ) {
    this.root = base.replace(/\/content-service\/?$/, '');
  }

  /** Any request. `path` is relative to the content service unless it is a full URL. Redirects are not followed. */
  async req<T = AnyJson>(method: string, path: string, opts: RequestOptions = {}): Promise<Answer<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    const token = opts.token === null ? undefined : (opts.token ?? this.token);
    if (token) headers['X-Auth-Token'] = token;
    let body: string | Buffer | Uint8Array | undefined = opts.raw;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] ??= 'application/json';
    }
    const url = path.startsWith('http') ? path : `${this.base}${path}`;
    const res = await fetch(url, { method, headers, body: body as BodyInit | undefined, redirect: 'manual' });
    const text = await res.text();
    let json: T;
    try {
      json = (text ? JSON.parse(text) : undefined) as T;
    } catch {
      json = undefined as T;
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  // ---- tokens ----

  /** POST /security/token; keeps the token. Throws when the login fails (a setup step). */
  async login(username: string, password = username): Promise<this> {
    const r = await this.issueToken({ username, password });
    if (r.status !== 200) throw new Error(`login ${username} failed: ${r.status} ${r.text}`);
    this.token = r.json.token;
    return this;
  }

  /** POST /security/token with credentials, a renewal `{username, token}` or an external `{token}`. */
  issueToken(body: { username?: string; password?: string; token?: string }): Promise<Answer<TokenResponse>> {
    return this.req('POST', '/security/token', { body, token: null });
  }

  /** DELETE /security/token: revokes this client's token (204; 401 when it is not valid). */
  revoke(): Promise<Answer> {
    return this.req('DELETE', '/security/token');
  }

  /** GET /security/permission/<user>. */
  permission(userId: string): Promise<Answer> {
    return this.req('GET', `/security/permission/${encodeURIComponent(userId)}`);
  }

  // ---- content ----

  /** GET that follows one 303 redirect, as clients do. */
  async read<T = AnyJson>(path: string, headers: Record<string, string> = {}): Promise<Answer<T>> {
    const first = await this.req<T>('GET', path, { headers });
    if (first.status !== 303) return first;
    return this.req<T>('GET', first.headers.get('location')!, { headers });
  }

  /** POST /content. */
  create<T = AnyJson>(envelope: ContentEnvelope | unknown, headers: Record<string, string> = {}): Promise<Answer<T>> {
    return this.req('POST', '/content', { body: envelope, headers });
  }

  /** The content of an alias (`<ns>/<alias>`, e.g. a content's `system.id`), following the redirect. */
  readContent(id: string, query = ''): Promise<Answer<ContentEnvelope>> {
    return this.read(`/content/alias/${idPath(id)}${query ? `?${query}` : ''}`);
  }

  /** PUT /content/alias/<ns>/<alias> with If-Match (or `unsafeUpdate=true` when etag is null). */
  update(id: string, envelope: ContentEnvelope | unknown, etag: string | null, query = ''): Promise<Answer<ContentEnvelope>> {
    const q = etag === null ? `?unsafeUpdate=true${query ? `&${query}` : ''}` : query ? `?${query}` : '';
    return this.req('PUT', `/content/alias/${idPath(id)}${q}`, { body: envelope, headers: etag === null ? {} : { 'If-Match': etag } });
  }

  /** DELETE /content/alias/<ns>/<alias>. */
  remove(id: string, etag?: string): Promise<Answer> {
    return this.req('DELETE', `/content/alias/${idPath(id)}`, { headers: etag ? { 'If-Match': etag } : {} });
  }

  /**
   * DELETE /content/alias/<ns>/<alias>/release (sysadmin): 204 when released, 200 when there was
   * nothing to release; 409 (40905) for a main alias while its content exists.
   */
  releaseAlias(id: string): Promise<Answer> {
    return this.req('DELETE', `/content/alias/${idPath(id)}/release`);
  }

  /** GET of the versioned resource: the content, metadata or history as it was at revision `rev`. */
  readRevision<T = AnyJson>(id: string, rev: number, kind: 'content' | 'metadata' | 'history' = 'content', query = ''): Promise<Answer<T>> {
    return this.req('GET', `/content/alias/${idPath(id)}/${rev}${kind === 'content' ? '' : `/${kind}`}${query ? `?${query}` : ''}`);
  }

  /** Metadata (`_contentInfo`) or history of an alias, following the redirect. */
  metadata(id: string): Promise<Answer> {
    return this.read(`/content/alias/${idPath(id)}/metadata`);
  }

  history(id: string): Promise<Answer> {
    return this.read(`/content/alias/${idPath(id)}/history`);
  }

  // ---- revisions (CONTRACT §15) ----

  /** GET .../compare: the RFC 6902 patch from version `from` to `to` (default: the current version). */
  compare(
    id: string,
    from: string,
    to?: string,
  ): Promise<Answer<{ from: string; to: string; patch: { op: string; path: string; value?: unknown; from?: string }[] }>> {
    const q = new URLSearchParams({ from, ...(to ? { to } : {}) });
    return this.read(`/content/alias/${idPath(id)}/compare?${q}`);
  }

  /** POST .../restore?version=: a new version with the aspects of `version`, with If-Match. */
  restore(id: string, version: string, etag: string): Promise<Answer<ContentEnvelope>> {
    return this.req('POST', `/content/alias/${idPath(id)}/restore?version=${encodeURIComponent(version)}`, { headers: { 'If-Match': etag } });
  }

  /** GET /operations (sysadmin): partitions and their owners, backlogs, dead letters, re-index sessions, webhook deliveries waiting. */
  operations(): Promise<Answer> {
    return this.req('GET', '/operations');
  }

  /** GET /audit (sysadmin): entries newest first, `next` for the following page. */
  audit(query: { content?: string; user?: string; from?: string; to?: string; limit?: number; cursor?: string } = {}): Promise<Answer> {
    const q = new URLSearchParams(
      Object.entries(query)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, String(v)]),
    );
    return this.req('GET', `/audit${q.size ? `?${q}` : ''}`);
  }

  // ---- views ----

  /** PUT /view/<view> with `{version}` or `{symbolic: {...}}` and If-Match. */
  putView(view: string, body: unknown, etag: string): Promise<Answer> {
    return this.req('PUT', `/view/${encodeURIComponent(view)}`, { body, headers: { 'If-Match': etag } });
  }

  /** DELETE /view/<view>/alias/<ns>/<alias>: the content off the view (204, the new ETag). */
  removeFromView(view: string, id: string): Promise<Answer> {
    return this.req('DELETE', `/view/${encodeURIComponent(view)}/alias/${idPath(id)}`);
  }

  /** A view read, following the redirect. */
  readView(view: string, id: string): Promise<Answer<ContentEnvelope>> {
    return this.read(`/content/view/${encodeURIComponent(view)}/alias/${idPath(id)}`);
  }

  // ---- workspaces ----

  /** POST /content/workspace/<ws> (a new draft). */
  createDraft(ws: string, envelope: ContentEnvelope | unknown): Promise<Answer<ContentEnvelope>> {
    return this.req('POST', `/content/workspace/${encodeURIComponent(ws)}`, { body: envelope });
  }

  /** GET /content/workspace/<ws> (workspace info: the drafts the caller may read). */
  workspace(ws: string): Promise<Answer<{ workspaceId: string; drafts: Record<string, object> }>> {
    return this.req('GET', `/content/workspace/${encodeURIComponent(ws)}`);
  }

  /** DELETE /content/workspace/<ws>: every draft removed (204). */
  clearWorkspace(ws: string): Promise<Answer> {
    return this.req('DELETE', `/content/workspace/${encodeURIComponent(ws)}`);
  }

  /** GET /content/workspace/<ws>/alias/<ns>/<alias>: the draft with its pending operations, or main when there is none. */
  readDraft(ws: string, id: string, query = ''): Promise<Answer<ContentEnvelope>> {
    return this.req('GET', `/content/workspace/${encodeURIComponent(ws)}/alias/${idPath(id)}${query ? `?${query}` : ''}`);
  }

  /**
   * PUT /content/workspace/<ws>/alias/<ns>/<alias>: writes the draft (mode `update` or
   * `replace`). Put the main ETag the draft starts from in the envelope's `origin`: promote
   * refuses (409) when main moved on since.
   */
  updateDraft(ws: string, id: string, envelope: ContentEnvelope | unknown, mode: 'update' | 'replace' = 'update'): Promise<Answer<ContentEnvelope>> {
    const q = mode === 'update' ? '' : `?updateMode=${mode}`;
    return this.req('PUT', `/content/workspace/${encodeURIComponent(ws)}/alias/${idPath(id)}${q}`, { body: envelope });
  }

  /** DELETE /content/workspace/<ws>/alias/<ns>/<alias>: the draft removed, main untouched (204). */
  deleteDraft(ws: string, id: string): Promise<Answer> {
    return this.req('DELETE', `/content/workspace/${encodeURIComponent(ws)}/alias/${idPath(id)}`);
  }

  /** POST .../promote: the draft becomes the new main version (200, new ETag); 409 when main changed since its origin. */
  promote(ws: string, id: string): Promise<Answer<ContentEnvelope>> {
    return this.req('POST', `/content/workspace/${encodeURIComponent(ws)}/alias/${idPath(id)}/promote`);
  }

  // ---- webhooks (CONTRACT §14, sysadmin) ----

  /** POST /webhooks: 201 with the webhook and its secret (shown only in this answer). */
  createWebhook(body: WebhookBody): Promise<Answer<Webhook>> {
    return this.req('POST', '/webhooks', { body });
  }

  /** GET /webhooks: every webhook, without secrets. */
  listWebhooks(): Promise<Answer<{ webhooks: Webhook[] }>> {
    return this.req('GET', '/webhooks');
  }

  /** GET /webhooks/<id>. */
  getWebhook(id: string): Promise<Answer<Webhook>> {
    return this.req('GET', `/webhooks/${encodeURIComponent(id)}`);
  }

  /** PUT /webhooks/<id>: replaces url, filters and description. */
  updateWebhook(id: string, body: WebhookBody): Promise<Answer<Webhook>> {
    return this.req('PUT', `/webhooks/${encodeURIComponent(id)}`, { body });
  }

  /** DELETE /webhooks/<id> (204). */
  deleteWebhook(id: string): Promise<Answer> {
    return this.req('DELETE', `/webhooks/${encodeURIComponent(id)}`);
  }

  /** GET /webhooks/<id>/deliveries: the delivery log, newest first. */
  webhookDeliveries(
    id: string,
    query: { status?: 'pending' | 'delivered' | 'failed'; limit?: number } = {},
  ): Promise<Answer<{ deliveries: WebhookDelivery[] }>> {
    const q = new URLSearchParams(
      Object.entries(query)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, String(v)]),
    );
    return this.req('GET', `/webhooks/${encodeURIComponent(id)}/deliveries${q.size ? `?${q}` : ''}`);
  }

  /** POST /webhooks/<id>/deliveries/<delivery id>/redeliver (202). */
  redeliver(id: string, delivery: string): Promise<Answer> {
    return this.req('POST', `/webhooks/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(delivery)}/redeliver`);
  }

  // ---- files ----

  /** POST {file_url}/file/<space>[/<host>[/<path>]]; the file info, `Location` in the headers. */
  upload(where: string, data: string | Buffer | Uint8Array, contentType = 'application/octet-stream'): Promise<Answer<FileInfo>> {
    return this.req('POST', `${this.root}/file-service/file/${segmentsPath(where, 'a file address')}`, {
      raw: data,
      headers: { 'Content-Type': contentType, Accept: 'application/json' },
    });
  }

  /** GET {file_url}/file/info/<space>/<host>/<path>: the file info (`where` as in a `Location` or a `fileUri` without the scheme). */
  fileInfo(where: string): Promise<Answer<FileInfo>> {
    return this.req('GET', `${this.root}/file-service/file/info/${fileWhere(where)}`);
  }

  /** DELETE {file_url}/file/<space>/<host>/<path> (200). */
  deleteFile(where: string): Promise<Answer> {
    return this.req('DELETE', `${this.root}/file-service/file/${fileWhere(where)}`);
  }

  /** GET of a file (a `Location` from upload, or a delivery URL) as bytes. */
  async download(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: Buffer }> {
    const h: Record<string, string> = { ...headers };
    if (this.token) h['X-Auth-Token'] = this.token;
    const res = await fetch(url, { headers: h });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  }

  /** GET {delivery_url}/version/<version id>/<path> or /alias/<ns>/<alias>/<path>. */
  deliver(by: { version: string } | { alias: string }, path: string, headers: Record<string, string> = {}) {
    const where = 'version' in by ? `version/${segmentsPath(by.version, 'a version id')}` : `alias/${idPath(by.alias)}`;
    return this.download(`${this.root}/file-delivery-service/${where}/${segmentsPath(path, 'a file path')}`, headers);
  }

  // ---- search, taxonomy, operations ----

  /** GET {search_url}/<collection>/select with the engine's parameters plus view, variant, inlineData. */
  search(params: Record<string, string>, collection = 'content'): Promise<Answer> {
    return this.req('GET', `${this.root}/search-service/${encodeURIComponent(collection)}/select?${new URLSearchParams(params)}`);
  }

  /** POST {search_url}/<collection>/select with the parameters as a form body (long queries). */
  searchForm(params: Record<string, string>, collection = 'content'): Promise<Answer> {
    return this.req('POST', `${this.root}/search-service/${encodeURIComponent(collection)}/select`, {
      raw: new URLSearchParams(params).toString(),
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
  }

  /** POST /index/reindex/full (sysadmin), optionally `from=<ISO>&to=<ISO>`. */
  reindexFull(query = ''): Promise<Answer> {
    return this.req('POST', `/index/reindex/full${query ? `?${query}` : ''}`);
  }

  /** POST /index/reindex/contentType/<type> (sysadmin). */
  reindexType(type: string): Promise<Answer> {
    return this.req('POST', `/index/reindex/contentType/${encodeURIComponent(type)}`);
  }

  /** POST /index/reindex?aliases=<main aliases> (sysadmin). */
  reindexAliases(aliases: string[]): Promise<Answer> {
    return this.req('POST', `/index/reindex?${new URLSearchParams({ aliases: aliases.join(',') })}`);
  }

  /** GET {taxonomy_url}/structure[/<id>] and /complete/<dimension>/<input>, with the client's token if it has one (content hierarchy nodes are seen by who may see their content). */
  taxonomyStructure(id?: string, depth?: number): Promise<Answer> {
    const q = depth === undefined ? '' : `?depth=${depth}`;
    return this.req('GET', `${this.root}/taxonomy-service/structure${id === undefined ? '' : `/${encodeURIComponent(id)}`}${q}`);
  }

  taxonomyComplete(dimension: string, input: string): Promise<Answer> {
    return this.req('GET', `${this.root}/taxonomy-service/complete/${encodeURIComponent(dimension)}/${encodeURIComponent(input)}`);
  }

  health(): Promise<Answer<Record<string, string>>> {
    return this.req('GET', `${this.root}/health`, { token: null });
  }

  openApi(): Promise<Answer> {
    return this.req('GET', `${this.root}/openapi.json`, { token: null });
  }

  metrics(): Promise<Answer> {
    return this.req('GET', `${this.root}/metrics`, { token: null });
  }
}
