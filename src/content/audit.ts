/**
 * The audit trail (CONTRACT §15 Audit): what an entry says, in what order entries come, and the
 * cursor of a query. Pure. Entries are the commit events of main writes, copied from the
 * partition's event stream under the same stream id (src/actors/audit-trail.ts), so an entry's
 * position is `<stream id>` in partition `p`; entries are ordered newest first by (stream id,
 * partition), and a cursor names the last entry a page answered.
 */
import { AppError } from '../errors.js';
import { mainAlias, versionId, type ContentEvent, type WriteVia } from './model.js';

/** What an audit entry answers (CONTRACT §15). */
export interface AuditEntryBody {
  time: string;
  user: string;
  action: AuditAction;
  id: string;
  version: string | null;
  revision: number;
  via: WriteVia;
  requestId: string | null;
}

/**
 * The action of an entry, named by what the commit did: `create`, `update` (a new version:
 * an update, a promote of an update, a restore, an alias set by svcSetAlias), `delete`, `view`
 * (a view assignment or removal), `metadata`, `alias` (an alias released). `via` tells how it came.
 */
export type AuditAction = 'create' | 'update' | 'delete' | 'view' | 'metadata' | 'alias';

const ACTIONS: Record<string, AuditAction> = {
  created: 'create',
  updated: 'update',
  deleted: 'delete',
  views: 'view',
  metadata: 'metadata',
  aliases: 'alias',
};

/** Is this stored event a main write the audit records (a time-state boundary is not a write)? */
export const isAudited = (e: { kind: string }): boolean => Object.hasOwn(ACTIONS, e.kind);

/** The entry of a stored commit event; events stored before `via` was recorded came from `main`. */
export function auditEntryOf(e: ContentEvent): AuditEntryBody {
  return {
    time: new Date(e.ts).toISOString(),
    user: e.userId,
    action: ACTIONS[e.kind],
    id: mainAlias(e.cid),
    version: e.version ? versionId(e.cid, e.version) : null,
    revision: e.rev,
    via: e.via ?? 'main',
    requestId: e.requestId ?? null,
  };
}

/** A query of the audit trail (CONTRACT §15): all filters optional, times in epoch ms, inclusive. */
export interface AuditQuery {
  cid?: string;
  user?: string;
  from?: number;
  to?: number;
  limit: number;
  after?: AuditPosition;
}

/** Where an entry is: its stream id (`<ms>-<seq>`) in partition `p`. */
export interface AuditPosition {
  id: string;
  p: number;
}

export const AUDIT_DEFAULT_LIMIT = 100;
export const AUDIT_MAX_LIMIT = 1000;

/** Does an entry pass the query's content and user filters? (Time is the stream range's.) */
export const auditMatches = (q: AuditQuery, e: ContentEvent): boolean =>
  (q.cid === undefined || e.cid === q.cid) && (q.user === undefined || e.userId === q.user);

/** Orders positions newest first: by stream id, then by partition (ids of two partitions can be equal). */
export function comparePositions(a: AuditPosition, b: AuditPosition): number {
  const [am, as] = a.id.split('-').map(Number);
  const [bm, bs] = b.id.split('-').map(Number);
  return bm - am || bs - as || b.p - a.p;
}

/** The opaque cursor of a position: URL-safe. */
export const encodeAuditCursor = (pos: AuditPosition): string => Buffer.from(`${pos.p}:${pos.id}`).toString('base64url');

/**
 * A cursor back to its position; 400 when it is not one this platform made. Stream ids are
 * canonical (no leading zeros) and never `0-0` (Redis gives no entry that id, and XREVRANGE
 * refuses `(0-0` as an exclusive end), so a cursor naming such an id was not made here.
 */
export function decodeAuditCursor(c: string, partitions: number): AuditPosition {
  const m = /^(\d{1,5}):((?:0|[1-9]\d{0,14})-(?:0|[1-9]\d{0,14}))$/.exec(/^[A-Za-z0-9_-]{1,64}$/.test(c) ? Buffer.from(c, 'base64url').toString() : '');
  if (!m || Number(m[1]) >= partitions || m[2] === '0-0')
    throw new AppError('BAD_REQUEST', 'cursor is not a cursor of this audit trail', { parameter: 'cursor' });
  return { p: Number(m[1]), id: m[2] };
}

/** Reads the query parameters of `GET /audit`; 400 naming the parameter that is wrong. */
export function parseAuditQuery(get: (name: string) => string | null, partitions: number): Omit<AuditQuery, 'cid'> & { content?: string } {
  const bad = (parameter: string, message: string) => new AppError('BAD_REQUEST', message, { parameter });
  const time = (name: string): number | undefined => {
    const v = get(name);
    if (v === null || v === '') return undefined;
    const ms = Date.parse(v);
    if (!/^\d{4}-\d\d-\d\d/.test(v) || Number.isNaN(ms)) throw bad(name, `${name} must be an ISO 8601 date-time`);
    return ms;
  };
  const from = time('from');
  const to = time('to');
  if (from !== undefined && to !== undefined && from > to) throw bad('from', 'from is after to');
  const l = get('limit');
  if (l !== null && !/^\d{1,4}$/.test(l)) throw bad('limit', `limit must be an integer from 1 to ${AUDIT_MAX_LIMIT}`);
  const limit = l === null ? AUDIT_DEFAULT_LIMIT : Number(l);
  if (limit < 1 || limit > AUDIT_MAX_LIMIT) throw bad('limit', `limit must be an integer from 1 to ${AUDIT_MAX_LIMIT}`);
  const content = get('content') ?? undefined;
  if (content !== undefined && !/^[^/]+\/.+$/.test(content)) throw bad('content', 'content must be <namespace>/<alias>');
  const user = get('user') || undefined;
  const c = get('cursor');
  // Entries are timed from 1970 on (stream ids are unsigned): a `from` before that bounds nothing;
  // a `to` before it is kept and matches nothing (AuditLog answers an empty page).
  return { content, user, from: from !== undefined && from < 0 ? undefined : from, to, limit, after: c ? decodeAuditCursor(c, partitions) : undefined };
}
