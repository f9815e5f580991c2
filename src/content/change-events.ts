/**
 * The change feed's domain (CONTRACT §13), pure: what a stored commit event means as feed events,
 * who may receive one, which filters it passes, and the cursor (a position in every partition's
 * event stream) in its opaque, URL-safe form. The gateway reads the streams and the snapshots;
 * every decision is taken here.
 */
import { AppError } from '../errors.js';
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
 * Bytes the positions of `partitions` partitions are padded to: five a partition, enough for
 * every partition at a time within 199 days of the latest (at the first event of its
 * millisecond), or within 17 minutes with a sequence and a sub-event below 128. Positions that
 * need more take a multiple of the partition count more. So the length of a cursor does not tell
 * which partitions moved or when (see CursorSeal in src/gateway/cursor-seal.ts); only on a feed with partitions idle for more
 * than half a year could it change with a commit, by a step of one byte a partition.
 */
const paddedLength = (partitions: number, used: number): number => {
  const base = 12 + partitions * 5;
  return used <= base ? base : base + Math.ceil((used - base) / partitions) * partitions;
};

/**
 * A position in every partition as bytes: the partition count, the latest time among the
 * positions, then per partition one varint: 0 for no position, else twice (its time below that
 * latest one, plus one), plus 1 when the sequence and sub-event count follow as varints (when
 * either is not 0); then zeros up to paddedLength. Written into one scratch buffer, valid until
 * the next call (it is made for every event delivered, without arrays).
 */
export function encodePositions(positions: readonly StreamPosition[]): Buffer {
  // At most 3 varints of 8 bytes a partition, and less than one byte a partition of padding past that.
  const need = 16 + positions.length * 28;
  if (scratch.length < need) scratch = Buffer.alloc(need * 2);
  const buf = scratch;
  // The latest time: most partitions of a busy feed are close to it, and a partition no one
  // wrote to for long costs only its own bytes.
  let base = 0;
  for (const p of positions) if (p.ms > base) base = p.ms;
  let at = putVarint(buf, 0, positions.length);
  at = putVarint(buf, at, base);
  for (const p of positions) {
    if (p.ms === 0) {
      buf[at++] = 0;
      continue;
    }
    const more = p.seq !== 0 || p.sub !== 0;
    at = putVarint(buf, at, (base - p.ms + 1) * 2 + (more ? 1 : 0));
    if (more) {
      at = putVarint(buf, at, p.seq);
      at = putVarint(buf, at, p.sub);
    }
  }
  const end = paddedLength(positions.length, at);
  buf.fill(0, at, end);
  return buf.subarray(0, end);
}

/** 400: not a cursor of this platform. */
export const malformedCursor = (): AppError => new AppError('BAD_REQUEST', 'Malformed cursor', { parameter: 'since' });

/** The positions of encodePositions' bytes for `partitions` partitions; 400 when they are not. */
export function decodePositions(buf: Buffer, partitions: number): StreamPosition[] {
  let at = 0;
  const varint = (): number => {
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
  };
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
  if (buf.length !== paddedLength(partitions, at) || buf.subarray(at).some((b) => b !== 0)) throw malformedCursor();
  if (!out.every((p) => Number.isSafeInteger(p.ms) && p.ms >= 0)) throw malformedCursor();
  return out;
}
