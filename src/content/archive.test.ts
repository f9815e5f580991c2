import { expect } from 'chai';
import { archivePlan, type HotHistory } from './archive.js';
import type { Snapshot } from './model.js';

const DAY = 86_400_000;

/** A content of `n` versions made one a day (day 1..n), one revision each, version `v<i>` made at revision i. */
function content(n: number, views: Record<string, string> = {}): { head: Snapshot; hot: HotHistory } {
  const revs = Array.from({ length: n }, (_, i) => i + 1);
  const head: Snapshot = {
    cid: 'c',
    rev: n,
    type: 'article',
    head: `v${n}`,
    created: DAY,
    modified: n * DAY,
    committer: 'u',
    deleted: false,
    views: { svcLatest: `v${n}`, ...views },
    symbolic: {},
    meta: {},
    aliases: [],
  };
  return {
    head,
    hot: {
      revisions: revs.map((r) => ({ rev: r, modified: r * DAY })),
      versions: revs.map((r) => ({ key: `v${r}`, rev: r })),
      indexRevs: revs,
      viewRevs: revs,
      archivedUpTo: 0,
    },
  };
}

const all = () => true;

describe('archivePlan (issue 25)', () => {
  it('keeps the newest ARCHIVE_KEEP_REVISIONS versions and every revision since the oldest of them', () => {
    const { head, hot } = content(5);
    const plan = archivePlan(head, hot, { keep: 2, cutoff: 0 }, all)!;
    expect(plan).to.deep.equal({ boundary: 3, revisions: [1, 2, 3], versions: ['v1', 'v2', 'v3'], indexEntries: 3, viewEntries: 3 });
  });

  it('moves what is older than the cutoff even among the newest, never the head', () => {
    const { head, hot } = content(5);
    expect(archivePlan(head, hot, { keep: 10, cutoff: 3.5 * DAY }, all)!.versions).to.deep.equal(['v1', 'v2', 'v3']);
    expect(archivePlan(head, hot, { keep: 10, cutoff: 100 * DAY }, all)!.revisions).to.deep.equal([1, 2, 3, 4]);
    expect(archivePlan(head, hot, { keep: 0, cutoff: 0 }, all)!.versions).to.deep.equal(['v1', 'v2', 'v3', 'v4']);
  });

  it('nothing when nothing is old enough or beyond the kept versions', () => {
    const { head, hot } = content(3);
    expect(archivePlan(head, hot, { keep: 3, cutoff: 0 }, all)).to.equal(null);
    expect(archivePlan(head, hot, { keep: 10, cutoff: DAY / 2 }, all)).to.equal(null);
  });

  it('a version on a view stays, as does one the archive cannot index; its revision and history entries leave', () => {
    const { head, hot } = content(5, { svcPublic: 'v2' });
    head.symbolic = { web: 'svcPublic' };
    const plan = archivePlan(head, hot, { keep: 1, cutoff: 0 }, (k) => k !== 'v3')!;
    expect(plan.versions).to.deep.equal(['v1', 'v4']);
    expect(plan.revisions).to.deep.equal([1, 2, 3, 4]);
    expect(plan.indexEntries).to.equal(4);
  });

  it('after an earlier move: only what Redis still holds counts', () => {
    const { head, hot } = content(6);
    // Revisions 1..3 and versions v1..v3 left earlier; v2 stayed (it was on a view then).
    const later: HotHistory = {
      revisions: hot.revisions.slice(3),
      versions: hot.versions.filter((v) => v.rev === 2 || v.rev > 3),
      indexRevs: [4, 5, 6],
      viewRevs: [4, 5, 6],
      archivedUpTo: 3,
    };
    const plan = archivePlan(head, later, { keep: 1, cutoff: 0 }, all)!;
    expect(plan).to.deep.equal({ boundary: 5, revisions: [4, 5], versions: ['v2', 'v4', 'v5'], indexEntries: 2, viewEntries: 2 });
    // Fewer versions in Redis than kept: a version that stayed on a view earlier leaves once off it.
    const rest: HotHistory = {
      revisions: [{ rev: 6, modified: 6 * DAY }],
      versions: [
        { key: 'v2', rev: 2 },
        { key: 'v6', rev: 6 },
      ],
      indexRevs: [6],
      viewRevs: [6],
      archivedUpTo: 5,
    };
    expect(archivePlan(head, rest, { keep: 2, cutoff: 0 }, all)).to.deep.equal({
      boundary: 5,
      revisions: [],
      versions: ['v2'],
      indexEntries: 0,
      viewEntries: 0,
    });
    expect(archivePlan({ ...head, views: { ...head.views, svcPublic: 'v2' } }, rest, { keep: 2, cutoff: 0 }, all)).to.equal(null);
  });
});
