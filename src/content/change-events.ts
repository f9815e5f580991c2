/**
 * The change feed's domain (CONTRACT §13), pure: what a stored commit event means as feed events,
 * who may receive one, which filters it passes, and the cursor (a position in every partition's
 * event stream) in its opaque, URL-safe form. The gateway reads the streams and the snapshots;
 * every decision is taken here.
 */
import { AppError } from '../errors.js';
import { contextsKey, type Principal } from './permissions.js';
import { type ContentEvent, isoTime, mainAlias, type Snapshot, versionId } from './model.js';
import { inTimeWindow, resolveView, timeWindow, viewNames } from './views.js';

/**
 * The event the time-state schedule appends when an `onTime` or `offTime` passes
 * (src/actors/timestate-schedule.ts). It shares the stream of commit events, so its cursor is a
 * position like any other; readers of that stream that only look at `cid` (indexer, head cache)
 * treat it as one more change of the content.
 */
export interface TimestateStoredEvent {
  kind: 'timestate';
  cid: string;
  /** The revision whose time state passed its boundary. */
  rev: number;
  type: string;
  view: string;
  visible: boolean;
  /** The boundary (epoch ms). */
  ts: number;
  userId: string;
}

/** One entry of `events:{p}`: a commit's event, or a time-state boundary. */
export type StoredEvent = ContentEvent | TimestateStoredEvent;

export const CHANGE_KINDS = ['create', 'update', 'delete', 'view', 'timestate'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** An event of the feed (CONTRACT §13), without its cursor (the reader adds it). */
export interface ChangeEvent {
  kind: ChangeKind;
  id: string;
  version: string;
  revision: number;
  contentType: string;
  views: string[];
  aliases: string[];
  committer: string;
  time: string;
  view?: string;
  action?: 'set' | 'removed';
  visible?: boolean;
}

/** The snapshots a stored event is read against: at its revision, and the one before (view changes, deletes). */
export interface EventSnapshots {
  at: Snapshot | null;
  before: Snapshot | null;
}

/** Does this stored event need the snapshot of the revision before it? */
export const needsPrevious = (e: StoredEvent): boolean => e.kind === 'views' || e.kind === 'deleted';

const aliasesOf = (s: Snapshot): string[] => [mainAlias(s.cid), ...s.aliases];

/**
 * The feed events of one stored event, in order: none, one, or (a commit that changed several
 * views) one per view changed. A commit of metadata or aliases is an `update` of the same
 * version. `views` and `aliases` are the content's at that revision; a delete carries those it
 * had before it, and its last version.
 */
export function changesOf(e: StoredEvent, snaps: EventSnapshots): ChangeEvent[] {
  const at = snaps.at;
  if (!at) return [];
  const base = {
    id: mainAlias(e.cid),
    version: at.head,
    revision: e.rev,
    contentType: at.type,
    views: viewNames(at),
    aliases: aliasesOf(at),
    committer: at.committer,
    time: isoTime(at.modified),
  };
  const out = kindsOf(e, at, snaps.before, base);
  for (const c of out) c.version = versionId(e.cid, c.version);
  return out;
}

function kindsOf(e: StoredEvent, at: Snapshot, before: Snapshot | null, base: Omit<ChangeEvent, 'kind'>): ChangeEvent[] {
  switch (e.kind) {
    case 'created':
      return [{ kind: 'create', ...base }];
    case 'updated':
    case 'metadata':
    case 'aliases':
      return [{ kind: 'update', ...base }];
    case 'deleted': {
      return [{ kind: 'delete', ...base, views: before ? viewNames(before) : [], aliases: before ? aliasesOf(before) : [mainAlias(e.cid)] }];
    }
    case 'views': {
      const names = [...new Set([...viewNames(at), ...(before ? viewNames(before) : [])])].sort();
      const out: ChangeEvent[] = [];
      for (const view of names) {
        const now = resolveView(at, view);
        const was = before ? resolveView(before, view) : null;
        if (now === was) continue;
        out.push({ kind: 'view', ...base, version: now ?? was ?? at.head, view, action: now !== null ? 'set' : 'removed' });
      }
      return out;
    }
    case 'timestate':
      return [
        { kind: 'timestate', ...base, version: resolveView(at, e.view) ?? at.head, committer: e.userId, time: isoTime(e.ts), view: e.view, visible: e.visible },
      ];
    default:
      // A kind this reader does not know (written by a newer platform): nothing to tell.
      return [];
  }
}

// ---- time state boundaries ----

/** One boundary of a content's time state: when the content appears on (`on`) or leaves (`off`) a view. */
export interface Boundary {
  view: string;
  edge: 'on' | 'off';
  at: number;
}

/**
 * The boundaries of a snapshot's time state still ahead at `after` (its commit time) that change
 * whether the content is on the view: the view must hold a version, and visibility must differ
 * on the two sides of the boundary.
 */
export function boundariesOf(s: Snapshot, after: number): Boundary[] {
  if (s.deleted) return [];
  const views = s.meta.svcTimeState?.views;
  if (!views || typeof views !== 'object' || Array.isArray(views)) return [];
  const out: Boundary[] = [];
  for (const view of Object.keys(views)) {
    if (resolveView(s, view) === null) continue;
    const w = timeWindow(s, view);
    for (const [edge, at] of [
      ['on', w.on],
      ['off', w.off],
    ] as const) {
      if (at === undefined || at <= after) continue;
      if (inTimeWindow(s, view, at) === inTimeWindow(s, view, at - 1)) continue;
      out.push({ view, edge, at });
    }
  }
  return out;
}

/** Is a scheduled boundary still one of the content's, as it is now? (It may have been changed since.) */
export function boundaryHolds(s: Snapshot, b: Boundary): boolean {
  return boundariesOf(s, -Infinity).some((x) => x.view === b.view && x.edge === b.edge && x.at === b.at);
}

/** The stored event a boundary fires as. */
export function timestateEvent(s: Snapshot, b: Boundary): TimestateStoredEvent {
  return { kind: 'timestate', cid: s.cid, rev: s.rev, type: s.type, view: b.view, visible: inTimeWindow(s, b.view, b.at), ts: b.at, userId: 'system' };
}

// ---- filters ----

/** What a subscriber asked for: each list empty means every value. */
export interface ChangeFilter {
  types: string[];
  views: string[];
  kinds: ChangeKind[];
}

/**
 * What decides which events of an entry a caller receives: its user and roles (the read rule)
 * and its filter, in one string. Callers with the same key receive the same events of the same
 * entries, so the feed may choose them once for all of them (the fan-out's groups, pages made
 * ahead); anything left out of it would hand one caller another's events.
 */
export const audienceKey = (principal: Principal, filter: ChangeFilter): string => JSON.stringify([principal.userId, contextsKey(principal), filter]);

const NAME = /^[A-Za-z0-9_~@.:-]{1,200}$/;

/**
 * A filter from request parameters (comma-separated strings, or arrays from a WebSocket message);
 * 400 naming the parameter for an unknown kind or a name that cannot be a type or view name.
 */
export function parseFilter(input: { types?: unknown; views?: unknown; kinds?: unknown }): ChangeFilter {
  const list = (name: string, v: unknown): string[] => {
    if (v === undefined || v === null || v === '') return [];
    const items = typeof v === 'string' ? v.split(',') : Array.isArray(v) ? v : null;
    if (!items || items.length > 100 || !items.every((i) => typeof i === 'string' && NAME.test(i))) {
      throw new AppError('BAD_REQUEST', `Parameter ${name} must be a list of names`, { parameter: name });
    }
    return [...new Set(items as string[])];
  };
  const kinds = list('kinds', input.kinds);
  const unknown = kinds.filter((k) => !(CHANGE_KINDS as readonly string[]).includes(k));
  if (unknown.length) throw new AppError('BAD_REQUEST', `Unknown kind ${unknown[0]}: use ${CHANGE_KINDS.join(', ')}`, { parameter: 'kinds' });
  return { types: list('types', input.types), views: list('views', input.views), kinds: kinds as ChangeKind[] };
}

/** Does an event pass a filter? A view filter matches the content's views and the view an event is about. */
export function matchesFilter(f: ChangeFilter, e: ChangeEvent): boolean {
  if (f.kinds.length && !f.kinds.includes(e.kind)) return false;
  if (f.types.length && !f.types.includes(e.contentType)) return false;
  if (f.views.length && !f.views.some((v) => e.views.includes(v) || e.view === v)) return false;
  return true;
}

// ---- cursor ----

/**
 * A position in one partition's stream: entry `ms-seq`, of whose feed events the first `sub`
 * were delivered (`sub` 0: the whole entry). `ms` 0 and `seq` 0: before the first entry.
 */
export interface StreamPosition {
  ms: number;
  seq: number;
  sub: number;
}

export const START: StreamPosition = { ms: 0, seq: 0, sub: 0 };

/** Compares two stream ids (`ms-seq`). */
export function compareIds(a: { ms: number; seq: number }, b: { ms: number; seq: number }): number {
  return a.ms - b.ms || a.seq - b.seq;
}

/** An entry of a partition's event stream, where the feed orders it. */
export interface FeedEntryId {
  p: number;
  ms: number;
  seq: number;
}

/**
 * The feed's order across partitions: by millisecond, then partition, then the stream's own
 * order. Not by the stream id alone: its `seq` counts every entry of the partition in that
 * millisecond, those of content the caller may not read included, so one hidden commit put the
 * caller's own event after its event of another partition in the same millisecond.
 */
export function compareFeedOrder(a: FeedEntryId, b: FeedEntryId): number {
  return a.ms - b.ms || a.p - b.p || a.seq - b.seq;
}

/**
 * Takes out of `held` (entries read per partition, each list in stream order) those that may be
 * placed now, in the feed's order: an entry of partition p is placed once no partition still
 * being read can bring one before it. `unread` holds, per partition still being read, the last
 * id read there (what comes next there is later). Pages and the fan-out both place entries so,
 * so where reads happen to end (which entries the caller may not read decide) never reorders
 * what a caller receives.
 */
export function takeInFeedOrder<T extends FeedEntryId>(held: T[][], unread: readonly FeedEntryId[]): T[] {
  // The bound of partition p is the first unread position of another partition.
  let first: FeedEntryId | null = null;
  let second: FeedEntryId | null = null;
  for (const u of unread) {
    if (!first || compareFeedOrder(u, first) < 0) {
      second = first;
      first = u;
    } else if (!second || compareFeedOrder(u, second) < 0) second = u;
  }
  const ready: T[] = [];
  for (const h of held) {
    if (!h.length) continue;
    const bound = first && first.p !== h[0].p ? first : second;
    let n = 0;
    while (n < h.length && (bound === null || h[n].ms < bound.ms || (h[n].ms === bound.ms && h[n].p < bound.p))) n++;
    if (n) ready.push(...h.splice(0, n));
  }
  return ready.sort(compareFeedOrder);
}

export function parseStreamId(id: string): { ms: number; seq: number } {
  const dash = id.indexOf('-');
  return { ms: Number(id.slice(0, dash)), seq: Number(id.slice(dash + 1)) };
}

export const streamIdOf = (p: { ms: number; seq: number }): string => `${p.ms}-${p.seq}`;

/** CONTRACT §13: cursors are at most this long. */
export const MAX_CURSOR_LENGTH = 2048;

/** Scratch space of encodePositions (positions are encoded synchronously, so one buffer serves all). */
let scratch = Buffer.alloc(4096);

/** Writes `n` (a safe integer, not negative) as a varint at `at`; answers the next offset. */
function putVarint(buf: Buffer, at: number, n: number): number {
  let v = n;
  let i = at;
  while (v >= 0x80) {
    buf[i++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  buf[i++] = v;
  return i;
}

/**
 * A partition's record (encodePositions): its time below the latest (`rel`, ms), its sequence (9
 * bits) and its sub-event count (4 bits). Six bytes a record (35 bits of time: 397 days) up to 250
 * partitions; from 251, 44 bits (31 bits of time: 24 days), two records in 11 bytes, so that a
 * cursor of 272 partitions still fits in 2,048 characters.
 */
const SEQ_BITS = 9;
const SUB_BITS = 4;
const SEQ_ONE = 2 ** SUB_BITS;
const SEQ_LIMIT = 2 ** SEQ_BITS;
const REL_ONE = 2 ** (SEQ_BITS + SUB_BITS);
const WIDE_UP_TO = 250;
/** The first relative time a record of `partitions` partitions cannot hold. */
const relLimitOf = (partitions: number): number => (partitions <= WIDE_UP_TO ? 2 ** 35 : 2 ** 31);
/** A record with no time but a sequence and sub-event: its position follows, in varints, after the records. */
const ESCAPE = (SEQ_LIMIT - 1) * SEQ_ONE + (SEQ_ONE - 1);
/** Bytes of the records of `partitions` partitions. */
const recordBytes = (partitions: number): number => (partitions <= WIDE_UP_TO ? partitions * 6 : Math.ceil(partitions * 5.5));
/** Does a record hold this position (relative time `rel`, 0: none; `relLimit` from relLimitOf, taken once a cursor)? */
const fits = (relLimit: number, rel: number, seq: number, sub: number): boolean =>
  rel < relLimit && seq < SEQ_LIMIT && sub < SEQ_ONE && (rel > 0 || (seq === 0 && sub === 0));

/**
 * Writes record `i` of `partitions` (relative time `rel`, and `low`: the sequence and sub-event
 * bits) into the records starting at `start`. Six-byte records are written byte by byte in 32-bit
 * arithmetic: `Buffer.writeUIntBE` made a cursor's encoding five times slower, and it is made for
 * every event a page delivers.
 */
function putRecord(buf: Buffer, start: number, partitions: number, i: number, rel: number, low: number): void {
  if (partitions <= WIDE_UP_TO) {
    const at = start + i * 6;
    const hi = Math.floor(rel / 2048); // the top 24 of the 35 bits of time
    const lo = ((rel % 2048) << 13) | low;
    buf[at] = hi >>> 16;
    buf[at + 1] = (hi >>> 8) & 0xff;
    buf[at + 2] = hi & 0xff;
    buf[at + 3] = lo >>> 16;
    buf[at + 4] = (lo >>> 8) & 0xff;
    buf[at + 5] = lo & 0xff;
    return;
  }
  const v = rel * REL_ONE + low;
  const at = start + (i >> 1) * 11;
  if (i % 2 === 0) {
    buf.writeUIntBE(Math.floor(v / 16), at, 5);
    buf[at + 5] = ((v % 16) << 4) | (buf[at + 5] & 0x0f);
  } else {
    buf[at + 5] = (buf[at + 5] & 0xf0) | Math.floor(v / 2 ** 40);
    buf.writeUIntBE(v % 2 ** 40, at + 6, 5);
  }
}

function getRecord(buf: Buffer, start: number, partitions: number, i: number): number {
  if (partitions <= WIDE_UP_TO) return buf.readUIntBE(start + i * 6, 6);
  const at = start + (i >> 1) * 11;
  return i % 2 === 0 ? buf.readUIntBE(at, 5) * 16 + (buf[at + 5] >> 4) : (buf[at + 5] & 0x0f) * 2 ** 40 + buf.readUIntBE(at + 6, 5);
}

/**
 * A position in every partition as bytes, of one length for every position a feed's partitions
 * are at in practice: the partition count (a varint), the latest time among the positions (6
 * bytes), then a record a partition: its time below that latest one plus one (0 for no position), its
 * sequence and its sub-event count. A position that does not fit (a partition idle for more than
 * 397 days behind the latest, 24 from 251 partitions; a millisecond with more than 511 entries in
 * one partition; a page that stopped past the 15th event of one commit) is written
 * as an escape record, its values as varints after the records. So the length of a cursor does
 * not tell which partitions moved, how far or when (CursorSeal in src/gateway/cursor-seal.ts): a
 * commit the caller may not read moves the latest time and its partition's record, never the
 * length. 560 characters sealed for 64 partitions, 1,926 for 256. Written into one scratch
 * buffer, valid until the next call (it is made for every event delivered, without arrays).
 */
export function encodePositions(positions: readonly StreamPosition[]): Buffer {
  const need = 16 + positions.length * 30;
  if (scratch.length < need) scratch = Buffer.alloc(need * 2);
  const buf = scratch;
  let base = 0;
  for (const p of positions) if (p.ms > base) base = p.ms;
  let at = putVarint(buf, 0, positions.length);
  buf.writeUIntBE(base, at, 6);
  at += 6;
  const records = recordBytes(positions.length);
  if (positions.length > WIDE_UP_TO) buf.fill(0, at, at + records);
  let tail = at + records;
  const relLimit = relLimitOf(positions.length);
  for (let i = 0; i < positions.length; i++) {
    const p = positions[i];
    const rel = p.ms === 0 ? 0 : base - p.ms + 1;
    if (fits(relLimit, rel, p.seq, p.sub)) putRecord(buf, at, positions.length, i, rel, p.seq * SEQ_ONE + p.sub);
    else {
      putRecord(buf, at, positions.length, i, 0, ESCAPE);
      tail = putVarint(buf, tail, rel);
      tail = putVarint(buf, tail, p.seq);
      tail = putVarint(buf, tail, p.sub);
    }
  }
  return buf.subarray(0, tail);
}

/** The longest cursor of `partitions` partitions whose positions fit their records (CursorSeal adds 29 bytes, base64url 4 characters for 3). */
export const cursorLength = (partitions: number): number => Math.ceil(((29 + (partitions < 128 ? 1 : 2) + 6 + recordBytes(partitions)) * 4) / 3);

/** 400: not a cursor of this platform. */
export const malformedCursor = (): AppError => new AppError('BAD_REQUEST', 'Malformed cursor', { parameter: 'since' });

/** Reads varints from `buf` at `at`; 400 past its end or past 8 bytes. */
function varintReader(buf: Uint8Array, start: number): { next(): number; at(): number } {
  let at = start;
  return {
    next() {
      let n = 0;
      let mul = 1;
      for (let i = 0; i < 8; i++) {
        if (at >= buf.length) throw malformedCursor();
        const byte = buf[at++];
        n += (byte & 0x7f) * mul;
        if (byte < 0x80) return n;
        mul *= 0x80;
      }
      throw malformedCursor();
    },
    at: () => at,
  };
}

/** The positions of encodePositions' bytes for `partitions` partitions; 400 when they are not (one position, one spelling). */
export function decodePositions(buf: Buffer, partitions: number): StreamPosition[] {
  const head = varintReader(buf, 0);
  if (head.next() !== partitions) throw malformedCursor();
  let at = head.at();
  const records = recordBytes(partitions);
  if (buf.length < at + 6 + records) throw malformedCursor();
  const base = buf.readUIntBE(at, 6);
  at += 6;
  // An odd count of narrow records leaves the last half byte unused: zero.
  if (partitions > WIDE_UP_TO && partitions % 2 === 1 && (buf[at + records - 1] & 0x0f) !== 0) throw malformedCursor();
  const tail = varintReader(buf, at + records);
  const relLimit = relLimitOf(partitions);
  const out: StreamPosition[] = [];
  for (let p = 0; p < partitions; p++) {
    const v = getRecord(buf, at, partitions, p);
    let rel = Math.floor(v / REL_ONE);
    let seq = Math.floor(v / SEQ_ONE) % SEQ_LIMIT;
    let sub = v % SEQ_ONE;
    if (rel === 0 && v !== 0) {
      if (v !== ESCAPE) throw malformedCursor();
      rel = tail.next();
      seq = tail.next();
      sub = tail.next();
      // Escaped only what a record cannot hold.
      if (fits(relLimit, rel, seq, sub) || (rel === 0 && (seq > 0 || sub > 0))) throw malformedCursor();
    }
    if (rel > base) throw malformedCursor();
    out.push({ ms: rel === 0 ? 0 : base - rel + 1, seq, sub });
  }
  if (tail.at() !== buf.length) throw malformedCursor();
  // The latest time is one of the positions'.
  if (base !== 0 && !out.some((p) => p.ms === base)) throw malformedCursor();
  return out;
}

/**
 * The padding of the cursors of format 3 (before 2026-11-27): five bytes a partition, then
 * multiples of the partition count. Their length could change with a commit the caller may not
 * read (a partition with a sequence, idle for 17 minutes to 37 hours), so cursors are no longer
 * written this way; those clients hold are still read (decodePositionsV3).
 */
const paddedLengthV3 = (partitions: number, used: number): number => {
  const base = 12 + partitions * 5;
  return used <= base ? base : base + Math.ceil((used - base) / partitions) * partitions;
};

/** The positions of a format-3 cursor's bytes (varints padded by paddedLengthV3); 400 when they are not. */
export function decodePositionsV3(buf: Buffer, partitions: number): StreamPosition[] {
  const reader = varintReader(buf, 0);
  const varint = reader.next;
  if (varint() !== partitions) throw malformedCursor();
  const base = varint();
  const out: StreamPosition[] = [];
  for (let p = 0; p < partitions; p++) {
    let seq = 0;
    let sub = 0;
    const v = varint();
    const rel = Math.floor(v / 2);
    if (v % 2 === 1) {
      if (rel === 0) throw malformedCursor();
      seq = varint();
      sub = varint();
      if (seq === 0 && sub === 0) throw malformedCursor(); // one position, one spelling
    }
    out.push({ ms: rel === 0 ? 0 : base - rel + 1, seq, sub });
  }
  const at = reader.at();
  if (buf.length !== paddedLengthV3(partitions, at) || buf.subarray(at).some((b) => b !== 0)) throw malformedCursor();
  if (!out.every((p) => Number.isSafeInteger(p.ms) && p.ms >= 0)) throw malformedCursor();
  return out;
}
