import { expect } from 'chai';
import type { ContentStore } from '../../src/adapters/content-store.js';
import type { Aspects, Snapshot, VersionRecord } from '../../src/content/model.js';
import { Variants } from '../../src/content/variants.js';
import { DELIVERY_VARIANT, DeliveryMaps, mappedUri } from '../../src/gateway/file-service.js';

/**
 * What file delivery keeps of each version (DeliveryMaps, src/gateway/file-service.ts; the
 * twentieth session's review, F1): a version is read and decoded once, however many requests
 * ask, and not at all once its map is kept; what a path maps is what the whole version decided
 * before. The store here is a fake that counts its reads.
 */
describe('file delivery keeps what each version maps (DeliveryMaps)', () => {
  const variants = new Variants({ types: { image: { [DELIVERY_VARIANT]: { aspects: ['svcFiles'] } } } });
  const snap = (cid: string, head: string, rev = 1, type = 'article'): Snapshot =>
    ({ cid, rev, type, head, created: 1, modified: 1, committer: 'u', deleted: false, views: {}, symbolic: {}, meta: {}, aliases: [] }) as Snapshot;
  const files = (entries: Record<string, string>) => ({
    _type: 'svcFiles',
    files: Object.fromEntries(Object.entries(entries).map(([path, uri]) => [path, { fileUri: uri, filePath: path }])),
  });

  /** A store of versions (`cid/key` → record, and the bytes Redis would hold), counting reads. */
  function fakeStore(versions: Record<string, { type?: string; aspects: Aspects; bytes?: number }>) {
    const counts = { sized: 0, read: 0, atOnce: 0, mostAtOnce: 0 };
    const gates: (() => void)[] = [];
    let hold = false;
    const store = {
      async storedVersionSize(cid: string, key: string) {
        counts.sized++;
        const v = versions[`${cid}/${key}`];
        return v ? (v.bytes ?? 100) : 0;
      },
      async version(cid: string, key: string): Promise<VersionRecord | null> {
        counts.read++;
        counts.atOnce++;
        counts.mostAtOnce = Math.max(counts.mostAtOnce, counts.atOnce);
        if (hold) await new Promise<void>((r) => gates.push(r));
        await new Promise((r) => setTimeout(r, 5));
        counts.atOnce--;
        const v = versions[`${cid}/${key}`];
        return v ? { key, type: v.type ?? 'article', aspects: v.aspects, created: 1, creator: 'u', rev: 1 } : null;
      },
    };
    return {
      store: store as unknown as ContentStore,
      counts,
      holdReads: () => (hold = true),
      releaseReads: () => {
        hold = false;
        for (const g of gates.splice(0)) g();
      },
    };
  }

  it('reads a version once for many requests at once and none after; a version not found is not kept', async () => {
    const f = fakeStore({ 'c1/v1': { aspects: { svcFiles: files({ 'a.txt': 'content://c1/o/a.txt' }) } } });
    const maps = new DeliveryMaps({ store: f.store, variants });
    const all = await Promise.all(Array.from({ length: 32 }, () => maps.of(snap('c1', 'v1'), 'v1')));
    expect(f.counts.read).to.equal(1);
    for (const m of all) expect(mappedUri(m!, 'a.txt', false)).to.equal('content://c1/o/a.txt');
    for (let i = 0; i < 10; i++) await maps.of(snap('c1', 'v1', 1 + i), 'v1');
    expect(f.counts.read, 'an article has no delivery variant: a later head changes nothing').to.equal(1);
    expect(await maps.of(snap('c1', 'v1'), 'nope')).to.equal(null);
    expect(await maps.of(snap('c1', 'v1'), 'nope')).to.equal(null);
    expect(f.counts.read).to.equal(3);
    expect(maps.size.reading).to.equal(0);
  });

  it('maps as the version decides: svcFiles less the main image; the main image for renditions only', async () => {
    const f = fakeStore({
      'c1/v1': {
        aspects: {
          svcFiles: files({ 'a.txt': 'content://c1/o/a.txt', 'main.png': 'content://c1/o/main.png', ['__proto__']: 'content://c1/o/p' }),
          svcImage: { filePath: 'main.png', focalPoint: { x: 0.25, y: 0.75 } },
        },
      },
      'c2/v1': { aspects: { svcImage: { filePath: 7 } as never, svcFiles: files({ '7': 'content://c2/o/7' }) } },
    });
    const maps = new DeliveryMaps({ store: f.store, variants });
    const m = (await maps.of(snap('c1', 'v1'), 'v1'))!;
    expect(mappedUri(m, 'a.txt', false)).to.equal('content://c1/o/a.txt');
    expect(mappedUri(m, 'main.png', false)).to.equal(undefined);
    expect(mappedUri(m, 'main.png', true)).to.equal('content://c1/o/main.png');
    expect(mappedUri(m, 'nothing', true)).to.equal(undefined);
    expect(mappedUri(m, 'constructor', false)).to.equal(undefined);
    expect(mappedUri(m, '__proto__', false)).to.equal('content://c1/o/p');
    expect(m.main).to.equal('main.png');
    expect(m.focal).to.deep.equal([0.25, 0.75]);
    const n = (await maps.of(snap('c2', 'v1'), 'v1'))!;
    expect(n.main, 'a filePath that is no string names no main image').to.equal(undefined);
    expect(mappedUri(n, '7', false)).to.equal('content://c2/o/7');
  });

  it('with svcFileDelivery.variant, maps the variant (the main image too), composed again for a later head only', async () => {
    const f = fakeStore({
      'i1/v1': {
        type: 'image',
        aspects: { svcFiles: files({ 'main.png': 'content://i1/o/main.png', 'b.png': 'content://i1/o/b.png' }), svcImage: { filePath: 'main.png' } },
      },
    });
    const maps = new DeliveryMaps({ store: f.store, variants });
    const m = (await maps.of(snap('i1', 'v1', 3, 'image'), 'v1'))!;
    expect(mappedUri(m, 'main.png', false)).to.equal('content://i1/o/main.png');
    expect(mappedUri(m, 'b.png', false)).to.equal('content://i1/o/b.png');
    await maps.of(snap('i1', 'v1', 3, 'image'), 'v1');
    expect(f.counts.read, 'the same head').to.equal(1);
    await maps.of(snap('i1', 'v1', 4, 'image'), 'v1');
    expect(f.counts.read, 'a composer is given the head: a later head composes again').to.equal(2);
    await maps.of(snap('i1', 'v1', 4, 'image'), 'v1');
    expect(f.counts.read).to.equal(2);
  });

  it('reads large versions a few at a time; small ones are not held behind them', async () => {
    const big = { aspects: { svcFiles: files({ 'a.txt': 'content://x/o/a.txt' }) }, bytes: 8 * 2 ** 20 };
    const f = fakeStore({ 'b1/v': big, 'b2/v': big, 'b3/v': big, 'b4/v': big, 'b5/v': big, 's1/v': { aspects: {} } });
    const maps = new DeliveryMaps({ store: f.store, variants });
    f.holdReads();
    const large = ['b1', 'b2', 'b3', 'b4', 'b5'].map((cid) => maps.of(snap(cid, 'v'), 'v'));
    await new Promise((r) => setTimeout(r, 20));
    expect(f.counts.atOnce, 'two large reads under way, three waiting').to.equal(2);
    const small = maps.of(snap('s1', 'v'), 'v');
    await new Promise((r) => setTimeout(r, 20));
    expect(f.counts.atOnce, 'the small one is read at once').to.equal(3);
    f.releaseReads();
    expect(await small).to.not.equal(null);
    for (const m of await Promise.all(large)) expect(mappedUri(m!, 'a.txt', false)).to.equal('content://x/o/a.txt');
    expect(f.counts.mostAtOnce).to.be.at.most(3);
    expect(f.counts.read).to.equal(6);
  });
});
