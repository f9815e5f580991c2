import { expect } from 'chai';
import { mayRead } from '../../src/content/visibility.js';
import {
  boundariesOf,
  boundaryHolds,
  changesOf,
  decodeCursor,
  encodeCursor,
  MAX_CURSOR_LENGTH,
  matchesFilter,
  parseFilter,
  type StreamPosition,
  timestateEvent,
} from '../../src/content/change-events.js';
import type { ContentEvent, Snapshot } from '../../src/content/model.js';
import { AppError } from '../../src/errors.js';

const snap = (over: Partial<Snapshot> = {}): Snapshot => ({
  cid: 'K',
  rev: 1,
  type: 'article',
  head: 'v1',
  created: 1000,
  modified: 1000,
  committer: 'editor',
  deleted: false,
  views: { svcLatest: 'v1' },
  symbolic: {},
  meta: {},
  aliases: [],
  ...over,
});
const ev = (kind: ContentEvent['kind'], rev: number): ContentEvent => ({ kind, cid: 'K', rev, type: 'article', ts: 1000, userId: 'editor' });

/** The pure part of the change feed (src/content/change-events.ts): events, filters, cursors, time-state boundaries. */
describe('change feed domain (CONTRACT §13)', () => {
  it('maps stored events to feed events: create, update (metadata and aliases too), delete with the last version, view set and removed', () => {
    const s1 = snap({ aliases: ['news/a'] });
    expect(changesOf(ev('created', 1), { at: s1, before: null })).to.deep.equal([
      {
        kind: 'create',
        id: 'contentid/K',
        version: 'c:K:v1',
        revision: 1,
        contentType: 'article',
        views: ['svcLatest'],
        aliases: ['contentid/K', 'news/a'],
        committer: 'editor',
        time: new Date(1000).toISOString(),
      },
    ]);
    expect(changesOf(ev('metadata', 2), { at: snap({ rev: 2 }), before: null }).map((e) => e.kind)).to.deep.equal(['update']);
    const s2 = snap({ rev: 2, views: { svcLatest: 'v1', svcPublic: 'v1', old: 'v0' } });
    const s3 = snap({ rev: 3, views: { svcLatest: 'v1', a: 'v1', b: 'v1' } });
    expect(changesOf(ev('views', 3), { at: s3, before: s2 }).map((e) => [e.view, e.action, e.version])).to.deep.equal([
      ['a', 'set', 'c:K:v1'],
      ['b', 'set', 'c:K:v1'],
      ['old', 'removed', 'c:K:v0'],
      ['svcPublic', 'removed', 'c:K:v1'],
    ]);
    const del = changesOf(ev('deleted', 4), { at: snap({ rev: 4, deleted: true, views: {}, aliases: [] }), before: s2 });
    expect(del.map((e) => [e.kind, e.version, e.views.join(',')])).to.deep.equal([['delete', 'c:K:v1', 'old,svcLatest,svcPublic']]);
    expect(changesOf(ev('created', 1), { at: null, before: null })).to.deep.equal([]);
    expect(changesOf({ ...ev('created', 1), kind: 'unknown' as 'created' }, { at: s1, before: null })).to.deep.equal([]);
  });

  it('decides who receives an event from the type and contexts at that revision', () => {
    const security = { roles: { editor: { '*': ['Read'] }, photo: { image: ['Read'] } } };
    const sports = { userId: 'sportseditor', contexts: { sports: ['editor'] } };
    const inSports = snap({ meta: { svcSecurityContext: { owners: ['sports'] } } });
    expect(mayRead(security, sports, inSports)).to.equal(true);
    expect(mayRead(security, sports, snap())).to.equal(false);
    expect(mayRead(security, { userId: 'p', contexts: { __global__: ['photo'] } }, snap())).to.equal(false);
    expect(mayRead(security, { userId: 'p', contexts: { __global__: ['photo'] } }, snap({ type: 'image' }))).to.equal(true);
  });

  it('filters by kind, type and view; refuses unknown kinds and bad names with 400', () => {
    const [e] = changesOf(ev('created', 1), { at: snap(), before: null });
    expect(matchesFilter(parseFilter({ kinds: 'create,update' }), e)).to.equal(true);
    expect(matchesFilter(parseFilter({ kinds: ['delete'] }), e)).to.equal(false);
    expect(matchesFilter(parseFilter({ types: 'gallery' }), e)).to.equal(false);
    expect(matchesFilter(parseFilter({ views: 'svcLatest' }), e)).to.equal(true);
    expect(matchesFilter(parseFilter({ views: 'svcPublic' }), e)).to.equal(false);
    for (const bad of [{ kinds: 'created' }, { types: 'a b' }, { views: [1] }, { types: {} }]) {
      expect(() => parseFilter(bad), JSON.stringify(bad))
        .to.throw(AppError)
        .with.property('statusCode', '40000');
    }
  });

  it('cursors: round trip, URL-safe, at most 2,048 characters for 64 partitions; anything else 400', () => {
    const positions: StreamPosition[] = Array.from({ length: 64 }, (_, p) =>
      p % 5 ? { ms: 1_790_000_000_000 + p * 997, seq: p * 3, sub: p % 3 } : { ms: 0, seq: 0, sub: 0 },
    );
    const c = encodeCursor(positions);
    expect(c).to.match(/^[A-Za-z0-9_-]+$/);
    expect(c.length).to.be.at.most(MAX_CURSOR_LENGTH);
    expect(decodeCursor(c, 64)).to.deep.equal(positions);
    // a cursor of 64 partitions stays short (it is written into every event): partitions at the
    // first event of a millisecond within 8 s of the latest take two bytes each, and one that
    // has been idle for a day costs only its own
    const busy = Array.from({ length: 64 }, (_, p) => ({ ms: 1_790_000_000_000 + p * 127, seq: 0, sub: 0 }));
    expect(encodeCursor(busy).length).to.be.below(190);
    busy[7].ms -= 86_400_000;
    expect(encodeCursor(busy).length).to.be.below(195);
    expect(decodeCursor(encodeCursor(busy), 64)).to.deep.equal(busy);
    // version 3 (unknown), and version 2 spelling a position of sequence and sub-event 0 the long way
    const longWay = Buffer.from([2, 1, 5, 3, 0, 0]).toString('base64url');
    for (const bad of ['', 'now!', c.slice(0, -3), `${c}AA`, 'A'.repeat(3000), c.replace(/^../, 'Aw'), longWay]) {
      expect(() => decodeCursor(bad, 64), bad.slice(0, 20))
        .to.throw(AppError)
        .with.property('statusCode', '40000');
    }
    expect(() => decodeCursor(c, 8)).to.throw(AppError);
  });

  it('cursors of version 1 (written before 2026-11-25) are still read', () => {
    // encodeCursor of version 1 for these positions (a client may hold one across an upgrade)
    const v1 = 'AQjl38GijDQAAAABAQLmBwAAAAAAsBcAAJUfAQIAAADfLgEA';
    const positions = Array.from({ length: 8 }, (_, p) =>
      p % 3 ? { ms: 1_790_000_000_000 + p * 997, seq: p % 2, sub: p % 4 === 1 ? 2 : 0 } : { ms: 0, seq: 0, sub: 0 },
    );
    expect(decodeCursor(v1, 8)).to.deep.equal(positions);
    expect(decodeCursor(encodeCursor(positions), 8)).to.deep.equal(positions);
    expect(encodeCursor(positions).length).to.be.below(v1.length);
  });

  it('time-state boundaries: those ahead that change visibility; a changed one no longer holds', () => {
    const on = 5000;
    const off = 9000;
    const s = snap({
      views: { svcLatest: 'v1', svcPublic: 'v1' },
      meta: {
        svcTimeState: {
          views: { svcPublic: { onTime: new Date(on).toISOString(), offTime: new Date(off).toISOString() }, nope: { onTime: new Date(on).toISOString() } },
        },
      },
    });
    const bs = boundariesOf(s, 1000);
    expect(bs).to.deep.equal([
      { view: 'svcPublic', edge: 'on', at: on },
      { view: 'svcPublic', edge: 'off', at: off },
    ]);
    expect(boundariesOf(s, 6000).map((b) => b.edge)).to.deep.equal(['off']);
    expect(boundariesOf({ ...s, deleted: true }, 0)).to.deep.equal([]);
    expect(timestateEvent(s, bs[0])).to.include({ kind: 'timestate', view: 'svcPublic', visible: true, ts: on });
    expect(timestateEvent(s, bs[1]).visible).to.equal(false);
    expect(boundaryHolds(s, bs[0])).to.equal(true);
    expect(boundaryHolds({ ...s, meta: {} }, bs[0])).to.equal(false);
    const [fired] = changesOf(timestateEvent(s, bs[0]), { at: s, before: null });
    expect(fired).to.include({ kind: 'timestate', view: 'svcPublic', visible: true, version: 'c:K:v1', committer: 'system', time: new Date(on).toISOString() });
  });
});
