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

/** Every view of a snapshot, symbolic ones included. */
export function viewNames(snapshot: Snapshot): string[] {
  return [...new Set([...Object.keys(snapshot.views), ...Object.keys(snapshot.symbolic)])].sort();
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
