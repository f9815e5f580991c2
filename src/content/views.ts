import { AppError } from '../errors.js';
import { LATEST_VIEW, type Snapshot } from './model.js';

/**
 * Views: a view maps a name to a version of a content; a symbolic view resolves to whatever
 * its target view resolves to; time state (`svcTimeState.views.<view>`) limits when the
 * content is on a view.
 */

/** Longest chain of symbolic views followed before giving up. */
const MAX_HOPS = 16;

/** A view's entry in one of a snapshot's maps: own keys only, so `constructor` is a view name like any other. */
function own<T>(map: Record<string, T>, view: string): T | undefined {
  return Object.hasOwn(map, view) ? map[view] : undefined;
}

/** The version key a view resolves to (symbolic views followed), or null when not on it. */
export function resolveView(snapshot: Snapshot, view: string): string | null {
  let v = view;
  for (let hops = 0; hops < MAX_HOPS; hops++) {
    const target = own(snapshot.symbolic, v);
    if (target === undefined) return own(snapshot.views, v) ?? null;
    v = target;
  }
  return null;
}

/** Would making `view` follow `target` create a cycle (or point at itself)? */
export function symbolicCycle(snapshot: Snapshot, view: string, target: string): boolean {
  let v: string | undefined = target;
  for (let hops = 0; v !== undefined && hops <= MAX_HOPS; hops++) {
    if (v === view) return true;
    v = own(snapshot.symbolic, v);
  }
  return v !== undefined;
}

/** An operation that puts the content on views (`svcAssignToViews`, `svcAssignToSymbolicViews`): it needs AssignToView. */
export const isViewOp = (op: { _type: string }): boolean => op._type === 'svcAssignToViews' || op._type === 'svcAssignToSymbolicViews';

/**
 * May a write with these operations need AssignToView, whatever the content's metadata? True when
 * one is a view operation, or a metadata operation sets an aspect that decides whether the content
 * is on its views for readers (`svcContentState`, `svcTimeState`: all `viewMembership` in
 * content-actor.ts reads). False means a write of these operations needs AssignToView nowhere, so
 * a draft's summary keeps it and a promote is decided without its operations (workspace.ts).
 */
export function mayNeedAssignToView(ops: readonly unknown[]): boolean {
  return ops.some((o) => {
    const op = o as { _type?: unknown; aspects?: unknown };
    if (typeof op?._type !== 'string') return false;
    if (isViewOp(op as { _type: string })) return true;
    const aspects = op.aspects;
    return (
      op._type === 'svcContentMetadata' &&
      typeof aspects === 'object' &&
      aspects !== null &&
      (Object.hasOwn(aspects, 'svcContentState') || Object.hasOwn(aspects, 'svcTimeState'))
    );
  });
}

/** Every view of a snapshot, symbolic ones included. */
export function viewNames(snapshot: Snapshot): string[] {
  return [...new Set([...Object.keys(snapshot.views), ...Object.keys(snapshot.symbolic)])].sort();
}

/**
 * Most views a content may be on (symbolic ones and svcLatest included). Each view of a version
 * is a field of its search document (`svc_timestate_<view>_drange`, a new field of the
 * collection for each new name) and two date ranges: 10,000 view names in one create cost 5-6 s
 * of Solr CPU and as many new fields; 100 views with millisecond windows 150-200 ms, 50 about
 * 70-110 ms. A newsroom puts a content on tens of views at most.
 */
export const MAX_VIEWS = 50;

/**
 * 400 when a write leaves the content on more than MAX_VIEWS views and on more than it was on
 * before (`before`: the count before the write): content stored on more before the bound can
 * still be written, and taken off views, but not put on more.
 */
export function refuseTooManyViews(before: number, after: Snapshot): void {
  const n = viewNames(after).length;
  if (n > MAX_VIEWS && n > before) {
    throw new AppError('BAD_REQUEST', `The content would be on ${n} views; at most ${MAX_VIEWS} are allowed (each view is a field of its search documents)`, {
      limit: MAX_VIEWS,
      found: n,
    });
  }
}

/**
 * The views of a version that its search document lists: all of them, or when it is on more
 * than MAX_VIEWS (content stored before the bound), those of `preferred` first (the indexed
 * views, on which search visibility depends), then the others in name order, sorted again.
 */
export function indexableViews(views: string[], preferred: readonly string[] = []): string[] {
  if (views.length <= MAX_VIEWS) return views;
  const kept = new Set(preferred.filter((v) => views.includes(v)).slice(0, MAX_VIEWS));
  for (const v of views) {
    if (kept.size >= MAX_VIEWS) break;
    kept.add(v);
  }
  return views.filter((v) => kept.has(v));
}

/** Views on which a version key is (symbolic views followed), ignoring time state. */
export function viewsOfVersion(snapshot: Snapshot, versionKey: string): string[] {
  return viewNames(snapshot).filter((v) => resolveView(snapshot, v) === versionKey);
}

/** The time-state window of a view: `onTime` and `offTime` as epoch ms, each optional. */
export interface TimeWindow {
  on?: number;
  off?: number;
}

export function timeWindow(snapshot: Snapshot, view: string): TimeWindow {
  const views = snapshot.meta.svcTimeState?.views;
  if (!views || typeof views !== 'object' || Array.isArray(views)) return {};
  const entry = own(views as Record<string, unknown>, view);
  if (!entry || typeof entry !== 'object') return {};
  const { onTime, offTime } = entry as { onTime?: unknown; offTime?: unknown };
  const ms = (v: unknown) => (typeof v === 'string' && !Number.isNaN(Date.parse(v)) ? Date.parse(v) : undefined);
  return { on: ms(onTime), off: ms(offTime) };
}

/** Inside the view's time-state window at `now` (onTime inclusive, offTime exclusive)? */
export function inTimeWindow(snapshot: Snapshot, view: string, now: number): boolean {
  const w = timeWindow(snapshot, view);
  return (w.on === undefined || now >= w.on) && (w.off === undefined || now < w.off);
}

/** The version key on a view at `now`: resolved, and inside its time state; null when not on it. */
export function versionOnView(snapshot: Snapshot, view: string, now: number): string | null {
  if (snapshot.deleted) return null;
  const key = resolveView(snapshot, view);
  return key !== null && inTimeWindow(snapshot, view, now) ? key : null;
}

/** Views that only the system assigns. */
export const SYSTEM_VIEWS: readonly string[] = [LATEST_VIEW];
