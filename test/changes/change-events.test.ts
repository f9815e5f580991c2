import { expect } from 'chai';
import { mayRead } from '../../src/content/visibility.js';
import {
  boundariesOf,
  compareFeedOrder,
  type FeedEntryId,
  boundaryHolds,
  changesOf,
  decodePositions,
  encodePositions,
  cursorLength,
  MAX_CURSOR_LENGTH,
  matchesFilter,
  parseFilter,
  type StreamPosition,
  takeInFeedOrder,
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

  it('cursors: their length does not tell which partitions moved, how far or when', () => {
    const seal = new CursorSeal(randomBytes(32), 64, randomBytes);
    const now = 1_790_000_000_000;
    const lengths = new Set<number>();
    // A feed at rest (each partition last written a second apart), with none, five or every
    // partition resting inside a busy millisecond (a sequence), then one partition (or many)
    // moved by a commit the caller may not read, after a pause of up to 150 days.
    for (const busy of [0, 5, 64]) {
      const rest = Array.from({ length: 64 }, (_, p) => ({ ms: now - p * 1000, seq: p < busy ? 1 + (p % 3) : 0, sub: 0 }));
      for (const step of [0, 1, 1000, 60_000, 20 * 60_000, 38 * 3_600_000, 10 * 86_400_000, 150 * 86_400_000, 390 * 86_400_000]) {
        for (const moved of [[0], [5], [63], Array.from({ length: 32 }, (_, p) => p * 2)]) {
          const pos = rest.map((r, p) => (moved.includes(p) ? { ms: now + step, seq: p % 7, sub: p % 3 } : r));
          const c = seal.encode(pos);
          expect(seal.decode(c)).to.deep.equal(pos);
          lengths.add(c.length);
        }
      }
    }
    expect([...lengths]).to.deep.equal([cursorLength(64)]);
    expect(cursorLength(64)).to.equal(560);
    // Positions a record cannot hold (a partition idle for years, deep in a busy millisecond, far into one commit) still round-trip.
    const far = Array.from({ length: 64 }, (_, p) => ({ ms: now - p * 3_000_000_000, seq: 100_000 + p, sub: 300 }));
    expect(seal.decode(seal.encode(far))).to.deep.equal(far);
    const none = Array.from({ length: 64 }, () => ({ ms: 0, seq: 0, sub: 0 }));
    expect(seal.decode(seal.encode(none))).to.deep.equal(none);
    for (const n of [1, 3, 4]) {
      const some = far.slice(0, n).map((p, i) => (i === 1 ? { ms: 0, seq: 0, sub: 0 } : { ...p, seq: p.seq % 500, sub: p.sub % 16 }));
      expect(decodePositions(Buffer.from(encodePositions(some)), n), `${n} partitions`).to.deep.equal(some);
    }
    // One position, one spelling: bytes past the records, too few, an escape of what a record
    // holds, an escaped sequence without a time; from 251 partitions, a used last half byte.
    const escaping = [
      { ms: now, seq: 100_000, sub: 0 },
      { ms: now - 5, seq: 0, sub: 0 },
      { ms: now - 9, seq: 2, sub: 1 },
    ];
    const plain = Buffer.from(encodePositions(escaping));
    expect(decodePositions(plain, 3)).to.deep.equal(escaping);
    const tailAt = plain.length - 4; // the varints 1, 100000 (3 bytes), 0
    const bad = [
      Buffer.concat([plain, Buffer.from([0])]),
      plain.subarray(0, -1),
      Buffer.concat([plain.subarray(0, tailAt), Buffer.from([1, 5, 0])]),
      Buffer.concat([plain.subarray(0, tailAt), Buffer.from([0, 0x80, 0x80, 0x10, 0])]),
    ];
    for (const b of bad) expect(() => decodePositions(b, 3), b.toString('hex')).to.throw(AppError);
    const odd = Buffer.from(encodePositions(Array.from({ length: 251 }, (_, p) => ({ ms: now - p, seq: 0, sub: 0 }))));
    expect(decodePositions(Buffer.from(odd), 251)[250]).to.deep.equal({ ms: now - 250, seq: 0, sub: 0 });
    odd[odd.length - 1] |= 1;
    expect(() => decodePositions(odd, 251)).to.throw(AppError);
    // PARTITIONS is at most 272 (config/settings.ts): the cursors of more would pass 2,048 characters.
    expect(cursorLength(272)).to.be.at.most(MAX_CURSOR_LENGTH);
    expect(cursorLength(273)).to.be.above(MAX_CURSOR_LENGTH);
    const wide = new CursorSeal(randomBytes(32), 272, randomBytes);
    const at272 = Array.from({ length: 272 }, (_, p) => ({ ms: now - p * 77_777, seq: p % 500, sub: p % 16 }));
    expect(wide.encode(at272)).to.have.length(cursorLength(272));
    expect(wide.decode(wide.encode(at272))).to.deep.equal(at272);
    // Cursors of format 3 (positions padded, before 2026-11-27) that clients hold are still read.
    const v3 = new CursorSeal(Buffer.alloc(32, 7), 4, randomBytes);
    expect(v3.decode('A889xxOCZGqQevdEAdOSOH5u0VRRWECHh58RG5oIBINGHnqcOA_66rNrLvsFZnft_q8PJQY7fA_bHl4h5Q')).to.deep.equal([
      { ms: 0, seq: 0, sub: 0 },
      { ms: 1_790_000_000_000, seq: 0, sub: 0 },
      { ms: 1_790_000_000_500, seq: 3, sub: 1 },
      { ms: 1_789_000_000_000, seq: 0, sub: 2 },
    ]);
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

  it('cursors of a page whose partitions move one at a time, also between cursors (entries the caller may not read), are the positions at each cursor', async () => {
    const seal = new CursorSeal(randomBytes(32), 64, randomBytes);
    // One array, a partition's position replaced at each step, as a page moves them.
    const pos: StreamPosition[] = Array.from({ length: 64 }, (_, p) => ({ ms: 1_790_000_000_000 + p, seq: 0, sub: 0 }));
    const batch = seal.batch();
    const want: StreamPosition[][] = [];
    for (let k = 0; k < 500; k++) {
      const p = (k * 7) % 64;
      pos[p] = { ms: pos[p].ms + 1 + (k % 3), seq: k % 5, sub: k % 2 };
      // Every third step is an entry the caller may not read: its partition moves without a cursor.
      if (k % 3 === 0) continue;
      batch.add(pos);
      want.push(pos.map((x) => ({ ...x })));
    }
    const cursors = await batch.sealed();
    expect(cursors.map((c) => seal.decode(c))).to.deep.equal(want);
  });

  it('the feed order: entries read in parts of any size, across partitions, come out as one sorted list (compareFeedOrder, takeInFeedOrder)', () => {
    // Pages and the fan-out read each partition's stream in parts and place an entry once no
    // partition still being read can bring one before it; whatever the parts, the result must be
    // the entries sorted by (ms, partition, seq), so hidden entries (which change where the parts
    // end) never reorder the others.
    for (let round = 0; round < 200; round++) {
      const P = 1 + Math.floor(Math.random() * 6);
      const streams: FeedEntryId[][] = Array.from({ length: P }, (_, p) => {
        const out: FeedEntryId[] = [];
        let ms = 1000;
        let seq = 0;
        for (let n = Math.floor(Math.random() * 40); n > 0; n--) {
          if (Math.random() < 0.5) {
            ms += Math.floor(Math.random() * 3) + 1;
            seq = 0;
          } else seq++;
          out.push({ p, ms, seq });
        }
        return out;
      });
      const next = streams.map(() => 0);
      const held: FeedEntryId[][] = streams.map(() => []);
      const placed: FeedEntryId[] = [];
      for (let guard = 0; placed.length < streams.flat().length; guard++) {
        expect(guard, 'progress').to.be.lessThan(10_000);
        // Each partition gives a part of any size; one that gave a full part may have more.
        const unread: FeedEntryId[] = [];
        for (let p = 0; p < P; p++) {
          const count = 1 + Math.floor(Math.random() * 5);
          const part = streams[p].slice(next[p], next[p] + count);
          next[p] += part.length;
          held[p].push(...part);
          if (part.length === count && next[p] <= streams[p].length) {
            const last = streams[p][next[p] - 1];
            if (next[p] < streams[p].length || Math.random() < 0.5) unread.push(last);
          }
        }
        placed.push(...takeInFeedOrder(held, unread));
      }
      expect(placed).to.deep.equal(streams.flat().sort(compareFeedOrder));
    }
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
