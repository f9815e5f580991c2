/**
 * Which history leaves Redis for the version archive (issue 25). Pure: the archiver
 * (src/actors/archiver.ts) reads what a content holds in Redis, asks `archivePlan` what to move,
 * and moves it with one fenced script; readers find it again through src/adapters/content-store.ts.
 *
 * The rule, for a content whose head is `head`:
 * - a revision leaves when it is not the head revision and it is older than the cutoff
 *   (ARCHIVE_AFTER_DAYS) or older than the newest `keep` versions (ARCHIVE_KEEP_REVISIONS).
 *   Revision times only grow, so what leaves is always a prefix 1..boundary of the revisions;
 * - a version leaves when the revision that made it leaves, it is not the head's version, and it
 *   is on no view of the head (symbolic views resolve to a version on a view, so they count);
 * - history entries (the version index) and view history entries leave with their revision.
 */
import type { Snapshot } from './model.js';

export interface ArchivePolicy {
  /** Versions kept in Redis whatever their age (the newest ones). */
  keep: number;
  /** Revisions made before this time (epoch ms) may leave. */
  cutoff: number;
}

/** What Redis still holds of a content's history, in order (oldest first). */
export interface HotHistory {
  /** Revisions in Redis: number and time. */
  revisions: { rev: number; modified: number }[];
  /** Versions in Redis: key and the revision that made it. */
  versions: { key: string; rev: number }[];
  /** Revision of each version index entry in Redis, oldest first. */
  indexRevs: number[];
  /** Revision of each view history entry in Redis, oldest first. */
  viewRevs: number[];
  /** Every revision up to this one is archived already (0: none). */
  archivedUpTo: number;
}

export interface ArchivePlan {
  /** Every revision up to this one is archived once the plan is carried out. */
  boundary: number;
  revisions: number[];
  versions: string[];
  /** How many of the oldest version index entries leave. */
  indexEntries: number;
  /** How many of the oldest view history entries leave. */
  viewEntries: number;
}

/** What to move out of Redis now; null when nothing. `archivable` says which version keys the archive can index. */
export function archivePlan(head: Snapshot, hot: HotHistory, policy: ArchivePolicy, archivable: (key: string) => boolean): ArchivePlan | null {
  // The newest `keep` versions stay: the boundary ends before the revision of the keep-th newest.
  const byCount = policy.keep === 0 ? head.rev - 1 : hot.indexRevs.length >= policy.keep ? hot.indexRevs[hot.indexRevs.length - policy.keep] - 1 : 0;
  let byTime = 0;
  for (const r of hot.revisions) if (r.modified < policy.cutoff && r.rev > byTime) byTime = r.rev;
  // Never below what left before: a version that stayed then (it was on a view) may leave now.
  const boundary = Math.min(head.rev - 1, Math.max(byCount, byTime, hot.archivedUpTo));
  const onView = new Set(Object.values(head.views));
  const revisions = hot.revisions.filter((r) => r.rev <= boundary && r.rev !== head.rev).map((r) => r.rev);
  const versions = hot.versions.filter((v) => v.rev <= boundary && v.key !== head.head && !onView.has(v.key) && archivable(v.key)).map((v) => v.key);
  const prefix = (revs: number[]) => {
    let n = 0;
    while (n < revs.length && revs[n] <= boundary) n++;
    return n;
  };
  const plan = { boundary, revisions, versions, indexEntries: prefix(hot.indexRevs), viewEntries: prefix(hot.viewRevs) };
  if (!plan.revisions.length && !plan.versions.length && !plan.indexEntries && !plan.viewEntries) return null;
  return plan;
}
