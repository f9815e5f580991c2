import { expect } from 'chai';
import { mayRead } from '../../src/content/visibility.js';
import {
  boundariesOf,
  boundaryHolds,
  changesOf,
  decodePositions,
  encodePositions,
  MAX_CURSOR_LENGTH,
  matchesFilter,
  parseFilter,
  type StreamPosition,
  timestateEvent,
} from '../../src/content/change-events.js';
import type { ContentEvent, Snapshot } from '../../src/content/model.js';
import { CursorSeal, stopSealingThread } from '../../src/gateway/cursor-seal.js';
import { randomBytes } from 'node:crypto';
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

  it('cursors: sealed, round trip, URL-safe, at most 2,048 characters for 64 partitions; anything else 400', () => {
    const key = randomBytes(32);
    const seal = new CursorSeal(key, 64, randomBytes);
    const positions: StreamPosition[] = Array.from({ length: 64 }, (_, p) =>
      p % 5 ? { ms: 1_790_000_000_000 + p * 997, seq: p * 3, sub: p % 3 } : { ms: 0, seq: 0, sub: 0 },
    );
    const c = seal.encode(positions);
    expect(c).to.match(/^[A-Za-z0-9_-]+$/);
    expect(c.length).to.be.at.most(MAX_CURSOR_LENGTH);
    expect(seal.decode(c)).to.deep.equal(positions);
    // the same positions twice: two cursors (a random nonce), each read back
    const again = seal.encode(positions);
    expect(again).to.not.equal(c);
    expect(seal.decode(again)).to.deep.equal(positions);
    // nothing of the positions in clear: no time, no partition count
    const bytes = Buffer.from(c, 'base64url');
    const plain = Buffer.from(encodePositions(positions));
    for (let at = 0; at + 4 <= plain.length; at++) expect(bytes.includes(plain.subarray(at, at + 4)), `bytes ${at}..${at + 4} in clear`).to.equal(false);

    const bad = [
      '',
      'now!',
      c.slice(0, -3),
      `${c}AA`,
      'A'.repeat(3000),
      // another spelling of the same bytes (bits past the last byte)
      c.slice(0, -1) + String.fromCharCode(c.charCodeAt(c.length - 1) ^ 1),
      // sealed under another key
      new CursorSeal(randomBytes(32), 64, randomBytes).encode(positions),
      // the formats in clear of before 2026-11-26: version 1 and version 2
      'AQjl38GijDQAAAABAQLmBwAAAAAAsBcAAJUfAQIAAADfLgEA',
      Buffer.from([2, 1, 5, 2]).toString('base64url'),
    ];
    // every byte of a good cursor changed, one at a time
    for (let at = 0; at < bytes.length; at++) {
      const b = Buffer.from(bytes);
      b[at] ^= 0x20;
      bad.push(b.toString('base64url'));
    }
    for (const x of bad) {
      expect(() => seal.decode(x), x.slice(0, 20))
        .to.throw(AppError)
        .with.property('statusCode', '40000');
    }
    // a cursor of another partition count
    expect(() => new CursorSeal(key, 8, randomBytes).decode(c)).to.throw(AppError);
  });

  it('cursors: their length does not tell which partitions moved, or how far', () => {
    const seal = new CursorSeal(randomBytes(32), 64, randomBytes);
    const now = 1_790_000_000_000;
    // a feed at rest, then one where one partition (or many) moved by a second, a minute, a day
    const rest = Array.from({ length: 64 }, (_, p) => ({ ms: now - p * 1000, seq: 0, sub: 0 }));
    const lengths = new Set<number>();
    for (const step of [0, 1, 1000, 60_000, 86_400_000, 90 * 86_400_000]) {
      for (const moved of [[0], [5], [63], Array.from({ length: 32 }, (_, p) => p * 2)]) {
        const pos = rest.map((r, p) => (moved.includes(p) ? { ms: now + step, seq: p % 7, sub: 0 } : r));
        const c = seal.encode(pos);
        expect(seal.decode(c)).to.deep.equal(pos);
        lengths.add(c.length);
      }
    }
    expect([...lengths]).to.have.length(1);
    // a cursor of 64 partitions stays short enough to go with every event
    expect([...lengths][0]).to.be.below(500);
    // positions the padding cannot hold (every partition idle for years, deep in a busy millisecond) still round-trip
    const far = Array.from({ length: 64 }, (_, p) => ({ ms: now - p * 3_000_000_000, seq: 100_000 + p, sub: 300 }));
    expect(seal.decode(seal.encode(far))).to.deep.equal(far);
    // bytes in clear: nothing past the padding, nothing but zeros in it
    const plain = Buffer.from(encodePositions(rest));
    expect(decodePositions(plain, 64)).to.deep.equal(rest);
    for (const b of [Buffer.concat([plain, Buffer.from([0])]), Buffer.concat([plain.subarray(0, -1), Buffer.from([1])])])
      expect(() => decodePositions(b, 64)).to.throw(AppError);
  });

  it('cursors of a page: sealed in chunks on the sealing thread and here, in order; a thread that stops leaves none unsealed', async () => {
    const seal = new CursorSeal(randomBytes(32), 64, randomBytes);
    const at = (k: number): StreamPosition[] => Array.from({ length: 64 }, (_, p) => ({ ms: 1_790_000_000_000 + k * 10 + p, seq: k % 4, sub: 0 }));
    for (const n of [0, 1, 63, 64, 65, 200]) {
      const batch = seal.batch();
      for (let k = 0; k < n; k++) batch.add(at(k));
      const cursors = await batch.sealed();
      expect(cursors, `${n} events`).to.have.length(n);
      expect(
        cursors.map((c) => seal.decode(c)),
        `${n} events`,
      ).to.deep.equal(Array.from({ length: n }, (_, k) => at(k)));
    }
    // The thread stops while it holds chunks: they are sealed here instead; the next page starts it again.
    const held = seal.batch();
    for (let k = 0; k < 300; k++) held.add(at(k));
    await stopSealingThread();
    const cursors = await held.sealed();
    expect(cursors.map((c) => seal.decode(c))).to.deep.equal(Array.from({ length: 300 }, (_, k) => at(k)));
    const next = seal.batch();
    for (let k = 0; k < 130; k++) next.add(at(k));
    expect((await next.sealed()).map((c) => seal.decode(c)[0])).to.deep.equal(Array.from({ length: 130 }, (_, k) => at(k)[0]));
    await stopSealingThread();
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
