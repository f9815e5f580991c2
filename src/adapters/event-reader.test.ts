import { expect } from 'chai';
import { pack } from './codec.js';
import { EventReader, snapshotBytes } from './event-reader.js';
import type { ContentEvent, Snapshot } from '../content/model.js';

/**
 * The snapshots the feed and the webhooks keep are bounded by size, not only by count: an editor
 * may give a content thousands of aliases, and a count of 50,000 such snapshots was gigabytes.
 */
describe('EventReader keeps snapshots within a size bound', () => {
  const aliases = Array.from({ length: 1000 }, (_, i) => `ns/${'a'.repeat(200)}-${i}`);
  const snapshot = (cid: string, rev: number): Snapshot => ({
    cid,
    rev,
    type: 'article',
    head: 'v',
    created: 1,
    modified: 1,
    committer: 'editor',
    deleted: false,
    views: { svcLatest: 'v' },
    symbolic: {},
    meta: {},
    aliases,
  });
  const entry = (cid: string, rev: number): Buffer[] => {
    const e: ContentEvent = { kind: 'updated', cid, rev, type: 'article', version: 'v', ts: 1, userId: 'editor' };
    return [Buffer.from('e'), pack(e)];
  };

  it("counts aliases and metadata in a snapshot's size", () => {
    const small = snapshotBytes({ ...snapshot('c', 1), aliases: [] });
    expect(small).to.be.below(2048);
    expect(snapshotBytes(snapshot('c', 1))).to.be.above(400_000);
    expect(snapshotBytes({ ...snapshot('c', 1), aliases: [], meta: { big: { _type: 'x', text: 'x'.repeat(100_000) } } })).to.be.above(200_000);
  });

  it('reads again what the bound pushed out, and keeps what fits', async () => {
    const reads: string[] = [];
    const store = {
      snapshotsOf: async (wanted: readonly (readonly [string, number])[]) =>
        wanted.map(([cid, rev]) => {
          reads.push(`${cid}/${rev}`);
          return snapshot(cid, rev);
        }),
    };
    // Room for about four such snapshots, though the count would allow 50,000.
    const reader = new EventReader({ ...store, snapshotsWithin: () => Promise.reject(new Error('not read within a budget here')) }, 50000, 2 * 2 ** 20);
    for (let rev = 1; rev <= 10; rev++) await reader.readMany([entry('c', rev)]);
    expect(reads).to.have.length(10);
    await reader.readMany([entry('c', 10)]);
    expect(reads, 'the last one read is kept').to.have.length(10);
    await reader.readMany([entry('c', 1)]);
    expect(reads, 'the first one was pushed out by size').to.have.length(11);
  });
});
