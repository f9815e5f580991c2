import { z } from 'zod';
import { FILE_SPACES } from '../adapters/file-store.js';
import { AUDIT_DEFAULT_LIMIT, AUDIT_MAX_LIMIT } from '../content/audit.js';
import { CHANGE_KINDS } from '../content/change-events.js';
import { MAX_TAXONOMY_DEPTH } from '../content/taxonomy.js';
import { FITS, FORMATS as IMAGE_FORMATS } from '../content/renditions.js';
import { UPDATE_MODES, type UpdateMode } from '../content/update-modes.js';
import { IF_MATCH_FORM } from '../content/model.js';
import { DELIVERY_STATUSES } from '../webhooks/keys.js';
import type { AnswerSchema, RequestSchema } from './api-schemas.js';
import { FEED_LIMIT, FEED_TIMEOUT } from './changes-service.js';
import { FORMATS } from './envelope.js';
import { DELIVERIES_LIMIT } from './webhooks-service.js';
import { aliasSchema, nameSchema, namespaceSchema, typeSchema, viewSchema } from './schemas.js';
import { SEARCH_PARAMETER_ALLOWLIST } from './search-params.js';

/**
 * The documentation of every operation of the gateway, keyed `METHOD /<prefix>/<router pattern>`
 * (the pattern as the router has it: `:name` a segment, `#name` a revision). openapi.ts turns
 * this table and the routers into the OpenAPI document; src/gateway/openapi.test.ts fails when a
 * route has no entry here, or an entry no route. Adding a route = adding its entry here: a
 * summary, who may call it (`auth`), its query and header parameters, its body and every answer
 * it gives. Answers every operation may give (400 for a malformed path, 500, 503; 401 with a
 * token; 413 with a body) are added by openapi.ts.
 */

export type Auth = 'required' | 'optional' | 'none';

export interface ParamDoc {
  schema: z.ZodType;
  description: string;
  required?: boolean;
  /** May be given more than once (`?fq=a&fq=b`). */
  repeated?: boolean;
  /** A path parameter that may hold `/` (the last of its path): `x-multi-segment` in the document. */
  multiSegment?: boolean;
}

/** A body's schema: a named one, a list of one, text, bytes, or any JSON. */
export type MediaSchema = AnswerSchema | { list: AnswerSchema } | 'string' | 'binary' | 'any';
/** An answer body: JSON of a schema, or schemas by media type. */
export type BodyDoc = MediaSchema | { media: Record<string, MediaSchema> };

export interface AnswerDoc {
  description: string;
  body?: BodyDoc;
  /** Response headers the answer carries (all of them, always). */
  headers?: AnswerHeader[];
}

export type AnswerHeader =
  | 'Location'
  | 'ETag'
  | 'Cache-Control'
  | 'Vary'
  | 'Content-Range'
  | 'Accept-Ranges'
  | 'X-Original-Path'
  | 'Retry-After'
  | 'Svc-Response-Origin';

export interface OperationDoc {
  summary: string;
  description?: string;
  auth: Auth;
  path?: Record<string, ParamDoc>;
  query?: Record<string, ParamDoc>;
  headers?: Record<string, ParamDoc>;
  body?: { schema: RequestSchema; required?: boolean } | { mediaType: string; schema: 'binary' | z.ZodType; required?: boolean };
  responses: Record<number, AnswerDoc>;
}

// ---- parameters used by many operations ----

const str = (description: string, extra: Partial<ParamDoc> = {}): ParamDoc => ({ schema: z.string(), description, ...extra });
const int = (min: number, max: number, description: string, extra: Partial<ParamDoc> = {}): ParamDoc => ({
  schema: z.coerce.number().int().min(min).max(max),
  description,
  ...extra,
});
/** An integer parameter with the bounds and default the handler enforces. */
const bounded = (b: { min: number; max: number; default: number }, description: string): ParamDoc => ({
  schema: z.coerce.number().int().min(b.min).max(b.max).default(b.default),
  description: `${description} (default ${b.default})`,
});

/** Path parameters by name, from the schemas that check them. */
export const PATH_PARAMS: Record<string, ParamDoc> = {
  ns: { schema: namespaceSchema, description: 'Alias namespace (`contentid` for main aliases)' },
  alias: { schema: aliasSchema, description: 'Alias within the namespace' },
  rev: { schema: z.coerce.number().int().min(1).max(999_999_999_999_999), description: 'Revision of the content (from a `Location` or history)' },
  view: { schema: viewSchema, description: 'View name, e.g. `svcPublic`' },
  ws: { schema: nameSchema('workspace'), description: 'Workspace name (needs no registration)' },
  type: { schema: typeSchema, description: 'Content type' },
  user: str('User id (your own)'),
  id: str('Id'),
  delivery: str('Delivery id'),
  collection: { schema: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/), description: 'Search collection, e.g. `content`' },
  space: { schema: z.enum(FILE_SPACES), description: 'File space' },
  host: str('File host: for `content`, the content key; omitted on upload, the uploader'),
  path: str('File path; may hold `/` (each segment percent-encoded, never an encoded `/`)', { multiSegment: true }),
  versionId: str('Version id, `c:<content key>:<version key>`'),
  dimension: str('Dimension id'),
  input: str('Completion input; levels separated by `/`', { multiSegment: true }),
  file: str('A console asset: its name with the hash of its content'),
};

const format: ParamDoc = {
  schema: z.enum(FORMATS),
  description:
    'Answer format (also `Accept: application/json;pretty=true` or `;allTypes=true`); `json+pretty` answers plain JSON when its indentation would add more than 16 Mi characters',
};
const variant = str('Variant of the content type (config/variants.json); 404 when the content lacks it');
const ifMatch = (required: boolean): ParamDoc => ({
  schema: z.string(),
  description: `The ETag of a read of the content or of its last write, ${IF_MATCH_FORM}`,
  required,
});
const ifNoneMatch: ParamDoc = { schema: z.string(), description: 'An ETag: 304 when it is current' };

// ---- answers used by many operations ----

const err = (description: string): AnswerDoc => ({ description, body: 'ErrorBody' });
const E = {
  400: err('Bad request: the message names the parameter, header or field'),
  403: err('The caller lacks the permission (named in the message)'),
  404: err('Not found'),
  404403: err('Not found (40400), or a revision that never existed (40403)'),
  409: err('Conflict: If-Match names an older revision (40900, extraInfo has the current ETag), or the content was deleted (40904)'),
  412: err('Precondition failed'),
  410: err('Gone: the cursor is older than what is kept'),
  415: err('Unsupported media type'),
  416: { description: 'Range not satisfiable', body: 'ErrorBody', headers: ['Content-Range'] } as AnswerDoc,
  422: err('Unprocessable: the source image is too large'),
  429: { description: 'Too many failed logins from this address or for this user', body: 'ErrorBody', headers: ['Retry-After'] } as AnswerDoc,
};
/** A search past its caller's bound of searches under way at once (src/gateway/search-slots.ts). */
const searchesAtOnce: AnswerDoc = {
  description:
    'The caller (a signed-in user, else the client address: IPv6 its /64, behind `TRUSTED_PROXIES` the forwarded one) has SEARCH_AT_ONCE_PER_CALLER searches under way on this process; the engine was not asked',
  body: 'ErrorBody',
  headers: ['Retry-After'],
};
/** A search whose answer the engine made too large to hold (SEARCH_MAX_ANSWER_BYTES, src/adapters/search-engine.ts). */
const ANSWER_TOO_LARGE = 'The engine’s answer is larger than 64 MiB (SEARCH_MAX_ANSWER_BYTES; 41300): ask for fewer rows, groups or fields';
/** A search past the process's searches at once and waiting (src/gateway/search-slots.ts). */
const searchesWaiting: AnswerDoc = {
  description: 'The process asks the engine SEARCH_AT_ONCE searches and SEARCH_WAITING more wait their turn; the engine was not asked',
  body: 'ErrorBody',
  headers: ['Retry-After'],
};
const envelope = (description: string, headers: AnswerHeader[] = ['ETag', 'Vary']): AnswerDoc => ({ description, body: 'ContentAnswer', headers });
const noContent = (description: string, headers: AnswerHeader[] = []): AnswerDoc => ({ description, headers });
const redirect: AnswerDoc = {
  description: 'See Other: the versioned resource of the current revision',
  body: 'Redirect',
  headers: ['Location', 'Cache-Control'],
};
const notModified = (headers: AnswerHeader[]): AnswerDoc => ({ description: 'Not modified: If-None-Match names the current revision', headers });
const text = (description: string): AnswerDoc => ({ description, body: { media: { 'text/plain': 'string' } } });
const bytes = (description: string, headers: AnswerHeader[]): AnswerDoc => ({ description, body: { media: { '*/*': 'binary' } }, headers });

const readQuery = { variant, format };

/** The change feed's query (CONTRACT §13). */
const feedQuery: Record<string, ParamDoc> = {
  since: { schema: z.string().max(2048), description: 'A cursor (`last` of a page, `cursor` of an event), or `now`; absent: from the oldest event kept' },
  limit: bounded(FEED_LIMIT, 'Events per page'),
  types: str('Content types, comma-separated'),
  views: str('Views, comma-separated'),
  kinds: str(`Kinds, comma-separated: ${CHANGE_KINDS.join(', ')}`),
  feed: { schema: z.enum(['longpoll', 'sse']), description: 'Long poll, or server-sent events (also with `Accept: text/event-stream`)' },
  timeout: bounded(FEED_TIMEOUT, 'Long poll: milliseconds to wait for a matching event'),
};

/** The search parameters: the allowlist of search-params.ts, which checks them. */
const searchQuery: Record<string, ParamDoc> = Object.fromEntries(
  Object.entries(SEARCH_PARAMETER_ALLOWLIST).map(([name, p]) => [
    name,
    {
      schema: z.string(),
      description: p.own
        ? {
            view: 'Only content on this view',
            variant: 'Inline content in this variant',
            inlineData: 'Add `_content`, the envelope, to each document',
            wt: 'Only `json`',
          }[name]!
        : `The engine's \`${name}\` (checked by the allowlist)`,
      repeated: p.repeatable,
    },
  ]),
);

const renditionQuery: Record<string, ParamDoc> = {
  w: int(1, 4096, 'Rendition width'),
  h: int(1, 4096, 'Rendition height'),
  fit: { schema: z.enum(FITS), description: 'How the image fits w × h (default inside)' },
  fm: { schema: z.enum([...IMAGE_FORMATS, 'auto']), description: 'Rendition format; `auto` chooses from Accept' },
  q: int(1, 100, 'Quality'),
  focal: str('Focal point `x,y`, each 0 to 1'),
  rendition: str('A named rendition of config/renditions.json'),
  sig: str('HMAC-SHA256 of the canonical query, base64url (with RENDITION_SIGNING_KEY)'),
};

const fileRead: OperationDoc = {
  summary: 'Read a file',
  auth: 'required',
  headers: { Range: str('One byte range, `bytes=a-b`'), 'If-None-Match': ifNoneMatch },
  responses: {
    200: bytes('The file; Content-Type sniffed from the data', ['ETag', 'Cache-Control', 'Accept-Ranges', 'Vary']),
    206: bytes('The range asked for', ['ETag', 'Cache-Control', 'Content-Range', 'Accept-Ranges', 'Vary']),
    304: notModified(['ETag', 'Cache-Control', 'Vary']),
    403: E[403],
    404: err('No such file, or another user’s tmp file'),
    416: E[416],
  },
};

const delivery = (summary: string, description: string): OperationDoc => ({
  summary,
  description,
  auth: 'optional',
  query: renditionQuery,
  headers: { Range: str('One byte range, `bytes=a-b`'), 'If-None-Match': ifNoneMatch, Accept: str('Chooses the rendition format with `fm=auto`') },
  responses: {
    200: bytes('The file, or its rendition', ['ETag', 'Cache-Control', 'Accept-Ranges', 'Vary']),
    206: bytes('The range asked for', ['ETag', 'Cache-Control', 'Content-Range', 'Accept-Ranges', 'Vary']),
    304: notModified(['ETag', 'Cache-Control', 'Vary']),
    403: err('The caller lacks Read on the content, or a rendition without a valid sig'),
    404: err('No such content, version, path or file, or the main image asked for as a raw file'),
    416: E[416],
    422: E[422],
    429: {
      description:
        'A rendition to be made while the caller (a signed-in user, else the client address: IPv6 its /64, behind `TRUSTED_PROXIES` the forwarded one) has RENDITION_AT_ONCE_PER_CALLER renders in flight on this process; nothing was rendered',
      body: 'ErrorBody',
      headers: ['Retry-After'],
    },
  },
});

const upload = (summary: string): OperationDoc => ({
  summary,
  description: 'The body is the file, raw or chunked. Stored under a new object id: the same path twice gives two files.',
  auth: 'required',
  headers: { 'Content-Type': str('The declared type (the type sniffed from the data wins)') },
  body: { mediaType: '*/*', schema: 'binary', required: true },
  responses: {
    201: { description: 'Stored; Location is the file’s address', body: 'FileInfo', headers: ['Location', 'X-Original-Path'] },
    403: E[403],
    404: err('The host is another user’s'),
    429: {
      description:
        'Into a content host no live content holds: the uploader has UNCLAIMED_FILES_PER_USER such files (of hosts of one partition) that no write has mapped yet; map or delete some',
      body: 'ErrorBody',
      headers: ['Retry-After'],
    },
  },
});

const webhookId = { id: str('Webhook id, `wh_...`') };
const depth = int(0, MAX_TAXONOMY_DEPTH, `Levels of children (default and maximum ${MAX_TAXONOMY_DEPTH})`);

export const OPERATIONS: Record<string, OperationDoc> = {
  // ---- gateway ----
  'GET /health': {
    summary: 'Readiness',
    description: '200 once Redis, the file store and the search engine are usable; 503 naming the failing part.',
    auth: 'none',
    responses: { 200: { description: 'Ready (`status` ok or degraded)', body: 'Health' }, 503: { description: 'Not ready', body: 'Health' } },
  },
  'GET /metrics': { summary: 'Prometheus metrics', auth: 'none', responses: { 200: text('Prometheus text format') } },
  'GET /openapi.json': {
    summary: 'This document',
    auth: 'none',
    responses: { 200: { description: 'The OpenAPI 3.1 document', body: 'any' } },
  },

  // ---- content service: security ----
  'POST /content-service/security/token': {
    summary: 'Log in, renew a token, or exchange an external JWT',
    description: '`{username, password}`, `{username, token}` (renewal), or `{token}` (an external identity provider’s JWT).',
    auth: 'none',
    body: { schema: 'TokenRequest', required: true },
    responses: {
      200: { description: 'A token', body: 'TokenResponse' },
      401: err('Bad credentials or token'),
      // bodyLimitOf in server.ts: a login is read without a token, so its body is bounded small.
      413: err('The body is larger than 64 KiB (LOGIN_MAX_BODY_BYTES; 41300): a field holds at most 4,096 characters'),
      429: {
        description:
          'Too many failed logins from this address or for this user, or the user holds TOKENS_PER_USER_MAX live tokens (Retry-After: until the oldest expires)',
        body: 'ErrorBody',
        headers: ['Retry-After'],
      },
    },
  },
  'DELETE /content-service/security/token': {
    summary: 'Log out: revoke this token',
    auth: 'required',
    responses: { 204: noContent('Revoked') },
  },
  'GET /content-service/security/permission/:user': {
    summary: 'Your roles and permissions',
    auth: 'required',
    responses: { 200: { description: 'Contexts and roles', body: 'AuthorizationInfo' }, 403: E[403] },
  },

  // ---- content ----
  'POST /content-service/content': {
    summary: 'Create content',
    description: 'Operations: `svcSetAlias`, `svcAssignToViews`, `svcAssignToSymbolicViews`, `svcContentMetadata`.',
    auth: 'required',
    query: { format },
    headers: { 'If-Match': { schema: z.string(), description: 'Must be absent (412)' } },
    body: { schema: 'ContentEnvelope', required: true },
    responses: {
      201: envelope('Created (20100), or created with failed operations (20107, subResults)', ['Location', 'ETag', 'Vary']),
      403: E[403],
      409: err('An alias is taken'),
      412: E[412],
    },
  },
  'GET /content-service/content/alias/:ns/:alias': {
    summary: 'Read content (redirects to the current revision)',
    auth: 'required',
    query: { ...readQuery, atLeastRevision: int(1, 999_999_999_999_999, 'Wait for no older revision: 404 (40403) while the current one is older') },
    headers: { 'If-None-Match': ifNoneMatch, Accept: str('Format, as `format`') },
    responses: { 303: redirect, 304: notModified(['ETag', 'Cache-Control']), 403: E[403], 404: E[404403] },
  },
  'PUT /content-service/content/alias/:ns/:alias': {
    summary: 'Update content',
    auth: 'required',
    query: {
      updateMode: { schema: z.enum(UPDATE_MODES as [UpdateMode, ...UpdateMode[]]), description: 'update (default), replace or merge' },
      unsafeUpdate: { schema: z.enum(['true', 'false']), description: '`true`: without If-Match' },
      format,
    },
    headers: { 'If-Match': ifMatch(false) },
    body: { schema: 'ContentEnvelope', required: true },
    responses: { 200: envelope('Updated (20000); ETag is the new revision'), 403: E[403], 404: E[404], 409: E[409] },
  },
  'DELETE /content-service/content/alias/:ns/:alias': {
    summary: 'Delete content',
    auth: 'required',
    headers: { 'If-Match': ifMatch(true) },
    responses: { 204: noContent('Deleted'), 403: E[403], 404: E[404], 409: E[409] },
  },
  'GET /content-service/content/alias/:ns/:alias/metadata': {
    summary: 'Read metadata (redirects to the current revision)',
    auth: 'required',
    query: readQuery,
    responses: { 303: redirect, 403: E[403], 404: E[404403] },
  },
  'GET /content-service/content/alias/:ns/:alias/history': {
    summary: 'Read history (redirects to the current revision)',
    auth: 'required',
    query: readQuery,
    responses: { 303: redirect, 403: E[403], 404: E[404403] },
  },
  'DELETE /content-service/content/alias/:ns/:alias/release': {
    summary: 'Release an alias (sysadmin)',
    auth: 'required',
    responses: {
      200: noContent('There was nothing to release'),
      204: noContent('Released'),
      403: E[403],
      409: err('A main alias while its content exists (40905)'),
    },
  },
  'GET /content-service/content/alias/:ns/:alias/#rev': {
    summary: 'Read content at a revision',
    auth: 'required',
    path: { rev: PATH_PARAMS.rev },
    query: readQuery,
    headers: { 'If-None-Match': ifNoneMatch, Accept: str('Format, as `format`') },
    responses: {
      200: envelope('The content as it was at that revision', ['ETag', 'Cache-Control', 'Vary']),
      304: notModified(['ETag', 'Cache-Control', 'Vary']),
      403: E[403],
      404: E[404403],
    },
  },
  'GET /content-service/content/alias/:ns/:alias/#rev/metadata': {
    summary: 'Read metadata at a revision (`_contentInfo`)',
    auth: 'required',
    query: readQuery,
    headers: { 'If-None-Match': ifNoneMatch },
    responses: {
      200: envelope('Metadata: aliases, views and their history, time state, hidden', ['ETag', 'Cache-Control', 'Vary']),
      304: notModified(['ETag', 'Cache-Control', 'Vary']),
      403: E[403],
      404: E[404403],
    },
  },
  'GET /content-service/content/alias/:ns/:alias/#rev/history': {
    summary: 'Read history at a revision',
    auth: 'required',
    query: { format },
    headers: { 'If-None-Match': ifNoneMatch },
    responses: {
      200: { description: 'Every version with its first revision', body: 'History', headers: ['ETag', 'Cache-Control', 'Vary'] },
      304: notModified(['ETag', 'Cache-Control', 'Vary']),
      403: E[403],
      404: E[404403],
    },
  },
  'GET /content-service/content/view/:view/alias/:ns/:alias': {
    summary: 'Read content on a view (redirects to the current revision)',
    auth: 'required',
    query: readQuery,
    responses: { 303: redirect, 403: E[403], 404: err('Not on the view (or outside its time state), or no such content') },
  },
  'GET /content-service/content/view/:view/alias/:ns/:alias/#rev': {
    summary: 'Read the version on a view at a revision',
    auth: 'required',
    query: readQuery,
    headers: { 'If-None-Match': ifNoneMatch },
    responses: {
      200: envelope('The version on the view', ['ETag', 'Cache-Control', 'Vary']),
      304: notModified(['ETag', 'Cache-Control', 'Vary']),
      403: E[403],
      404: E[404403],
    },
  },

  // ---- revisions (CONTRACT §15) ----
  'GET /content-service/content/alias/:ns/:alias/compare': {
    summary: 'Compare two versions (RFC 6902 patch)',
    auth: 'required',
    query: { from: str('Version id', { required: true }), to: str('Version id (default: the current version)') },
    responses: {
      200: { description: 'The patch from `from` to `to`', body: 'Compare' },
      404: E[404],
      413: err('The patch would spell more than 16 Mi characters of paths (deep, long keys)'),
      429: { description: 'The caller has 2 compares of large versions under way on this process', body: 'ErrorBody', headers: ['Retry-After'] },
    },
  },
  'POST /content-service/content/alias/:ns/:alias/restore': {
    summary: 'Restore a version as a new version',
    auth: 'required',
    query: { version: str('Version id to restore', { required: true }), format },
    headers: { 'If-Match': ifMatch(true) },
    responses: { 200: envelope('Restored (20000)'), 403: E[403], 404: E[404], 409: E[409] },
  },
  // ---- bulk (CONTRACT §16) ----
  'POST /content-service/bulk': {
    summary: 'Bulk import: NDJSON in, NDJSON out, streamed both ways',
    description:
      'One operation a line: `{"op":"create","content":<envelope>}`, `{"op":"update","id":"<ns>/<alias>","ifMatch"?,"mode"?,"content"}` (without `ifMatch`: an unsafe update), `{"op":"delete","id","ifMatch"}`. Each answered, in input order and while the body is still read, with `{"line","status","id","version","etag"}` or `{"line","status","error"}`: the status its single request would get. A malformed line answers 400 and the rest go on; a line longer than MAX_BODY_BYTES and the lines past BULK_MAX_LINES answer 413.',
    auth: 'required',
    body: { mediaType: 'application/x-ndjson', schema: 'binary', required: true },
    responses: {
      200: { description: 'One answer line per input line (blank lines aside)', body: { media: { 'application/x-ndjson': 'string' } } },
      415: E[415],
      429: { description: 'The user runs IMPORT_MAX_PER_USER imports on this process', body: 'ErrorBody', headers: ['Retry-After'] },
    },
  },
  'GET /content-service/export': {
    summary: 'Export every content the token may read (NDJSON)',
    description:
      'One line per content: `{"id","version","aliases","views","metadata","content"}`, `content` the envelope a read answers. Streamed; the order is not defined.',
    auth: 'required',
    query: { types: str('Content types, comma-separated'), views: str('Views, comma-separated: contents with a version on any of them') },
    responses: {
      200: { description: 'One line per content', body: { media: { 'application/x-ndjson': 'string' } } },
      429: { description: 'The user runs EXPORT_MAX_PER_USER exports on this process', body: 'ErrorBody', headers: ['Retry-After'] },
    },
  },

  // ---- operations (CONTRACT §19) ----
  'GET /content-service/operations': {
    summary: 'The operations snapshot of the console (sysadmin)',
    description: 'Partitions and their owners, mailbox and indexer lag, dead letters, actor processes, re-index sessions, webhook deliveries.',
    auth: 'required',
    responses: { 200: { description: 'The snapshot', body: 'Operations' }, 403: E[403] },
  },

  'GET /content-service/audit': {
    summary: 'The audit trail (sysadmin)',
    auth: 'required',
    query: {
      content: str('`<namespace>/<alias>`'),
      user: str('User id'),
      from: { schema: z.iso.datetime(), description: 'ISO 8601' },
      to: { schema: z.iso.datetime(), description: 'ISO 8601' },
      limit: int(1, AUDIT_MAX_LIMIT, `Entries per page (default ${AUDIT_DEFAULT_LIMIT})`),
      cursor: str('`next` of the previous page'),
    },
    responses: { 200: { description: 'Entries, newest first', body: 'Audit' }, 403: E[403] },
  },

  // ---- views ----
  'PUT /content-service/view/:view': {
    summary: 'Put a version on a view, or make a symbolic view',
    auth: 'required',
    headers: { 'If-Match': ifMatch(true) },
    body: { schema: 'ViewBody', required: true },
    responses: { 200: noContent('Done; ETag is the new revision', ['ETag']), 403: E[403], 404: E[404], 409: E[409] },
  },
  'DELETE /content-service/view/:view/alias/:ns/:alias': {
    summary: 'Take content off a view',
    auth: 'required',
    responses: { 204: noContent('Done; ETag is the new revision', ['ETag']), 403: E[403], 404: E[404] },
  },

  // ---- re-indexing ----
  'POST /content-service/index/reindex/full': {
    summary: 'Re-index everything, or what changed in a time window (sysadmin)',
    auth: 'required',
    query: { from: { schema: z.iso.datetime(), description: 'ISO 8601' }, to: { schema: z.iso.datetime(), description: 'ISO 8601' } },
    responses: { 200: text('The session and the count queued'), 403: E[403] },
  },
  'POST /content-service/index/reindex/contentType/:type': {
    summary: 'Re-index one content type (sysadmin)',
    auth: 'required',
    responses: { 200: text('The session and the count queued'), 403: E[403] },
  },
  'POST /content-service/index/reindex': {
    summary: 'Re-index main aliases, a type, or everything (sysadmin)',
    auth: 'required',
    query: { aliases: str('Main aliases, comma-separated'), contentType: str('Content type') },
    responses: { 200: text('The session and the count queued'), 403: E[403] },
  },

  // ---- workspaces ----
  'POST /content-service/content/workspace/:ws': {
    summary: 'Create a draft of new content',
    auth: 'required',
    query: { format },
    body: { schema: 'ContentEnvelope', required: true },
    responses: { 201: envelope('Created (20100 or 20107); operations pending, aliases reserved', ['Vary']), 403: E[403], 409: err('An alias is taken') },
  },
  'GET /content-service/content/workspace/:ws': {
    summary: 'Workspace info: the drafts you may read',
    auth: 'required',
    responses: { 200: { description: 'The drafts', body: 'WorkspaceInfo' } },
  },
  'DELETE /content-service/content/workspace/:ws': {
    summary: 'Clear a workspace',
    auth: 'required',
    responses: { 204: noContent('Every draft removed'), 403: E[403] },
  },
  'GET /content-service/content/workspace/:ws/alias/:ns/:alias': {
    summary: 'Read a draft (or the main version when there is none)',
    auth: 'required',
    query: readQuery,
    responses: { 200: envelope('The draft with its pending operations (or main, with ETag)', ['Vary']), 403: E[403], 404: E[404] },
  },
  'PUT /content-service/content/workspace/:ws/alias/:ns/:alias': {
    summary: 'Write a draft',
    description: 'No If-Match: send `origin` (the main ETag the draft starts from) in the body.',
    auth: 'required',
    query: { updateMode: { schema: z.enum(['update', 'replace']), description: 'update (default) or replace' }, format },
    body: { schema: 'ContentEnvelope', required: true },
    responses: { 200: envelope('The draft', ['Vary']), 403: E[403], 404: E[404], 409: err('An alias is taken') },
  },
  'DELETE /content-service/content/workspace/:ws/alias/:ns/:alias': {
    summary: 'Delete a draft',
    auth: 'required',
    responses: { 204: noContent('Removed'), 403: E[403], 404: E[404] },
  },
  'POST /content-service/content/workspace/:ws/alias/:ns/:alias/promote': {
    summary: 'Promote a draft to main',
    auth: 'required',
    query: { format },
    responses: {
      200: envelope('The new main version (20000); the draft is removed'),
      403: E[403],
      404: E[404],
      409: err('Main changed since the draft’s origin (40900): the draft stays'),
    },
  },

  // ---- webhooks (CONTRACT §14) ----
  'POST /content-service/webhooks': {
    summary: 'Create a webhook (sysadmin)',
    auth: 'required',
    body: { schema: 'WebhookBody', required: true },
    responses: { 201: { description: 'Created, with its secret (shown only now)', body: 'Webhook', headers: ['Location'] }, 403: E[403] },
  },
  'GET /content-service/webhooks': {
    summary: 'List webhooks (sysadmin)',
    auth: 'required',
    responses: { 200: { description: 'Webhooks without secrets', body: 'WebhookList' }, 403: E[403] },
  },
  'GET /content-service/webhooks/:id': {
    summary: 'Read a webhook (sysadmin)',
    auth: 'required',
    path: webhookId,
    responses: { 200: { description: 'The webhook', body: 'Webhook' }, 403: E[403], 404: E[404] },
  },
  'PUT /content-service/webhooks/:id': {
    summary: 'Replace a webhook (sysadmin)',
    auth: 'required',
    path: webhookId,
    body: { schema: 'WebhookBody', required: true },
    responses: { 200: { description: 'The webhook', body: 'Webhook' }, 403: E[403], 404: E[404] },
  },
  'DELETE /content-service/webhooks/:id': {
    summary: 'Delete a webhook (sysadmin)',
    auth: 'required',
    path: webhookId,
    responses: { 204: noContent('Deleted'), 403: E[403], 404: E[404] },
  },
  'GET /content-service/webhooks/:id/deliveries': {
    summary: 'A webhook’s delivery log (sysadmin)',
    auth: 'required',
    path: webhookId,
    query: {
      status: { schema: z.enum(DELIVERY_STATUSES), description: 'Only deliveries in this state' },
      limit: bounded(DELIVERIES_LIMIT, 'At most this many'),
    },
    responses: { 200: { description: 'Deliveries', body: 'Deliveries' }, 403: E[403], 404: E[404] },
  },
  'POST /content-service/webhooks/:id/deliveries/:delivery/redeliver': {
    summary: 'Deliver again (sysadmin)',
    auth: 'required',
    path: webhookId,
    responses: {
      202: { description: 'Queued', body: 'any' },
      403: E[403],
      404: E[404],
    },
  },

  // ---- change feed (CONTRACT §13) ----
  'GET /content-service/changes': {
    summary: 'The change feed: pages, long poll, server-sent events',
    auth: 'required',
    query: feedQuery,
    headers: { 'Last-Event-ID': str('SSE: resume after this cursor'), Accept: str('`text/event-stream` for server-sent events') },
    responses: {
      200: {
        description: 'A page `{changes, last}`; with SSE, records `id: <cursor>`, `event: <kind>`, `data: <event>`',
        body: { media: { 'application/json': 'ChangePage', 'text/event-stream': 'string' } },
      },
      410: E[410],
      429: {
        description:
          'The user holds CHANGES_MAX_STREAMS_PER_USER open streams and waiting long polls on this process, or has CHANGES_PAGES_PER_USER pages being made',
        body: 'ErrorBody',
        headers: ['Retry-After'],
      },
    },
  },
  'GET /content-service/changes/ws': {
    summary: 'The change feed over WebSocket',
    description:
      'Upgrade to WebSocket. First message `{"token", "since"?, "types"?, "views"?, "kinds"?}`, then one event per message. Closes 4401 (token), 4400 (first message), 4410 (cursor past the trim), 4429 (the subscriber did not read, or the user holds CHANGES_MAX_STREAMS_PER_USER open streams), 1013 (the process holds CHANGES_MAX_SUBSCRIBERS).',
    auth: 'none',
    responses: {
      101: { description: 'Switching protocols' },
      404: err('Not a WebSocket upgrade: the feed is only a WebSocket at this address (pages are at /changes)'),
      429: {
        description: 'The client address holds CHANGES_WS_WAITING_PER_ADDRESS WebSockets without their first message',
        body: 'ErrorBody',
        headers: ['Retry-After'],
      },
      503: { description: 'The process holds CHANGES_MAX_SUBSCRIBERS WebSockets without their first message', body: 'ErrorBody', headers: ['Retry-After'] },
    },
  },

  // ---- search ----
  'GET /search-service/:collection/select': {
    summary: 'Search (permission-filtered)',
    description:
      'The engine’s standard parameters from an allowlist; anything else answers 400 naming the parameter, and so does a search past a bound of what it may cost the engine (clauses, wildcards, `fq`, facet values: the `SEARCH_*` settings) or a facet, sort, group or stats on a field without docValues (a full-text field such as `svc_text`). Every search carries `timeAllowed` (the caller’s, at most `SEARCH_TIME_ALLOWED_MS`); one that runs out answers 200 with `responseHeader.partialResults: true`, kept even with `omitHeader`. At most `SEARCH_AT_ONCE_PER_CALLER` searches of one caller are under way at once; past it 429 with `Retry-After`. A web process asks the engine at most `SEARCH_AT_ONCE` searches at once, the next `SEARCH_WAITING` wait their turn, past those 503 with `Retry-After`.',
    auth: 'optional',
    query: searchQuery,
    responses: {
      200: {
        description: 'The engine’s answer: JSON, or with `wt=javabin` the engine’s binary answer passed through',
        body: { media: { 'application/json': 'SearchAnswer', 'application/octet-stream': 'binary' } },
      },
      404: err('No such collection'),
      413: err(ANSWER_TOO_LARGE),
      429: searchesAtOnce,
      503: searchesWaiting,
    },
  },
  'POST /search-service/:collection/select': {
    summary: 'Search with a form body (permission-filtered)',
    auth: 'optional',
    query: searchQuery,
    body: { mediaType: 'application/x-www-form-urlencoded', schema: z.record(z.string(), z.string()) },
    responses: {
      200: {
        description: 'The engine’s answer: JSON, or with `wt=javabin` the engine’s binary answer passed through',
        body: { media: { 'application/json': 'SearchAnswer', 'application/octet-stream': 'binary' } },
      },
      404: err('No such collection'),
      413: err(`The form body is larger than 2 MiB (SEARCH_MAX_BODY_BYTES, what the engine takes; 41300), or: ${ANSWER_TOO_LARGE}`),
      415: E[415],
      429: searchesAtOnce,
      503: searchesWaiting,
    },
  },

  // ---- the web console (CONTRACT §19): static files, no token ----
  'GET /console': {
    summary: 'The web console without its trailing slash',
    auth: 'none',
    responses: { 308: { description: 'Permanent redirect to /console/ (the page’s relative asset addresses need the slash)', headers: ['Location'] } },
  },
  'GET /console/': {
    summary: 'The web console',
    auth: 'none',
    responses: {
      200: { description: 'The console page (no-cache; its assets have hashed names)', body: { media: { 'text/html': 'string' } }, headers: ['Cache-Control'] },
    },
  },
  'GET /console/assets/:file': {
    summary: 'An asset of the web console',
    auth: 'none',
    responses: { 200: bytes('The asset, kept a year (its name changes with its content)', ['Cache-Control']), 404: E[404] },
  },

  // ---- file service ----
  'POST /file-service/file/:space': upload('Upload a file (host: you, path generated)'),
  'POST /file-service/file/:space/:host': upload('Upload a file (path generated)'),
  'POST /file-service/file/:space/:host/:path': upload('Upload a file'),
  'GET /file-service/file/:space/:host/:path': fileRead,
  'DELETE /file-service/file/:space/:host/:path': {
    summary: 'Delete a file',
    auth: 'required',
    responses: { 200: noContent('Deleted'), 403: E[403], 404: err('No such file, or another user’s tmp file') },
  },
  'GET /file-service/file/info/:space/:host/:path': {
    summary: 'File info',
    auth: 'required',
    responses: { 200: { description: 'The file info', body: 'FileInfo' }, 403: E[403], 404: err('No such file, or another user’s tmp file') },
  },

  // ---- file delivery ----
  'GET /file-delivery-service/version/:versionId/:path': delivery(
    'Deliver a file of a version',
    'Read permission on the content, or none for content on a public view. Image renditions with w, h, fit, fm, q, focal or rendition.',
  ),
  'GET /file-delivery-service/alias/:ns/:alias/:path': delivery(
    'Deliver a file of the content an alias names',
    'The latest version for who may read it; otherwise the version on a public view.',
  ),

  // ---- taxonomy ----
  'GET /taxonomy-service/structure': {
    summary: 'Every taxonomy',
    auth: 'optional',
    query: { depth },
    responses: { 200: { description: 'The taxonomies', body: { list: 'TaxonomyNode' } } },
  },
  'GET /taxonomy-service/structure/:id': {
    summary: 'A taxonomy, dimension or entity with its children',
    auth: 'optional',
    path: { id: str('Taxonomy, dimension or entity id; may hold `/`', { multiSegment: true }) },
    query: { depth },
    responses: { 200: { description: 'The node', body: 'TaxonomyNode' }, 404: E[404] },
  },
  'GET /taxonomy-service/complete/:dimension/:input': {
    summary: 'Complete an entity name',
    auth: 'optional',
    responses: {
      200: { description: 'The dimension with the matching entities', body: 'TaxonomyNode' },
      404: E[404],
      429: { ...searchesAtOnce, description: `${searchesAtOnce.description} (a completion that looks in the index is one of its searches)` },
      503: searchesWaiting,
    },
  },
};
