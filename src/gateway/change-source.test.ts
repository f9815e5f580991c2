import { expect } from 'chai';
import { ContentStore } from '../adapters/content-store.js';
import { connectRedis, keys, type RedisClient } from '../adapters/redis.js';
import { startRedisServer, type RedisServerHandle } from '../dev/redis-server.js';
import { pack } from '../adapters/codec.js';
import { snapshotBytes } from '../adapters/event-reader.js';
import { type ChangeFilter, START, type StreamPosition } from '../content/change-events.js';
import type { ContentEvent, Snapshot } from '../content/model.js';
import type { AppError } from '../errors.js';
import { PageSlots } from './change-fanout.js';
import { ChangeSource, type Delivered, PAGE_EXAMINE_BYTES, type PageResult, PagesAhead } from './change-source.js';
import type { Reads } from './reads.js';
import type { Principal } from '../content/permissions.js';

describe('change source: the streams info every feed request reads (ChangeSource.info)', () => {
  let server: RedisServerHandle;
  let redis: RedisClient;
  let source: ChangeSource;

  before(async () => {
    // A Redis of its own: the case writes to the event streams.
    server = await startRedisServer({ appendonly: false });
    redis = connectRedis({ REDIS_URL: server.url, REDIS_CLUSTER_NODES: '' });
    source = new ChangeSource(redis, new ContentStore(redis, 4, 1000, 60), 4, null as unknown as Reads);
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('callers that come while a read is under way share the next read, which sees what happened before they came', async () => {
    await redis.xadd(keys.events(1), '*', 'e', 'first');
    const calls = async () => Number(/cmdstat_xinfo\|stream:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
    const before = await calls();
    const under = source.info();
    // On the same connection, so Redis runs it after the read under way sent its commands.
    const added = await redis.xadd(keys.events(1), '*', 'e', 'second');
    const later = Array.from({ length: 1000 }, () => source.info());
    expect(new Set(later).size, 'one read for all who came meanwhile').to.equal(1);
    const [first, next] = await Promise.all([under, later[0]]);
    expect(`${first[1].last.ms}-${first[1].last.seq}`).to.not.equal(added);
    expect(`${next[1].last.ms}-${next[1].last.seq}`, 'the shared read began after they came').to.equal(added);
    // Two reads of the 4 streams for 1,001 callers.
    expect((await calls()) - before).to.equal(8);
    // With no read under way, a caller reads at once.
    expect((await source.info())[1].last).to.deep.equal(next[1].last);
  });
});

describe('pages made ahead (PagesAhead): only for the request they were made for', () => {
  const editor = { userId: 'editor', contexts: { __global__: ['editor'] } };
  const filter = { types: [], views: [], kinds: [] };
  const at = (ms: number) => Array.from({ length: 4 }, (_, p) => ({ ms: ms + p, seq: 0, sub: 0 }));
  const page = (n: number): PageResult => ({ changes: [], positions: at(n), exhausted: false });

  it('answers a page once, to the same user, contexts, filter, limit and positions, within its time', async () => {
    let now = 0;
    const ahead = new PagesAhead(() => now);
    let made = 0;
    const make = () => {
      made++;
      return Promise.resolve(page(made));
    };
    ahead.make(editor, filter, at(1000), 100, make);
    // Anything that decides what a page holds, changed: no page.
    expect(await ahead.take({ userId: 'editor', contexts: { sports: ['editor'] } }, filter, at(1000), 100)).to.equal(null);
    expect(await ahead.take({ userId: 'sportseditor', contexts: editor.contexts }, filter, at(1000), 100)).to.equal(null);
    expect(await ahead.take(editor, { ...filter, types: ['article'] }, at(1000), 100)).to.equal(null);
    expect(await ahead.take(editor, filter, at(1000), 99)).to.equal(null);
    expect(await ahead.take(editor, filter, at(1001), 100)).to.equal(null);
    expect((await ahead.take(editor, filter, at(1000), 100))?.positions).to.deep.equal(at(1));
    expect(await ahead.take(editor, filter, at(1000), 100), 'once').to.equal(null);
    // Past its time, it is made anew by the request.
    ahead.make(editor, filter, at(2000), 100, make);
    now += 3001;
    expect(await ahead.take(editor, filter, at(2000), 100)).to.equal(null);
    // A page that failed is made anew by the request.
    ahead.make(editor, filter, at(3000), 100, () => Promise.reject(new Error('Redis went away')));
    expect(await ahead.take(editor, filter, at(3000), 100)).to.equal(null);
  });

  it('makes at most 4 at once and keeps at most 32', async () => {
    const ahead = new PagesAhead(() => 0);
    const waiting: (() => void)[] = [];
    let started = 0;
    const slow = () => {
      started++;
      return new Promise<PageResult>((resolve) => waiting.push(() => resolve(page(0))));
    };
    for (let i = 0; i < 10; i++) ahead.make(editor, filter, at(i * 10), 100, slow);
    expect(started).to.equal(4);
    for (const w of waiting) w();
    await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 40; i++) {
      ahead.make(editor, filter, at(10000 + i * 10), 100, () => Promise.resolve(page(i)));
      await new Promise((r) => setImmediate(r));
    }
    const kept: number[] = [];
    for (let i = 0; i < 40; i++) if (await ahead.take(editor, filter, at(10000 + i * 10), 100)) kept.push(i);
    expect(kept, 'the 32 made last').to.deep.equal(Array.from({ length: 32 }, (_, i) => i + 8));
  });

  it('drops the pages past their time when it makes another (a page holds what it carries until then)', async () => {
    let now = 0;
    const ahead = new PagesAhead(() => now);
    for (let i = 0; i < 5; i++) {
      ahead.make(editor, filter, at(i * 10), 100, () => Promise.resolve(page(i)));
      await new Promise((r) => setImmediate(r));
    }
    expect(ahead.kept).to.equal(5);
    now += 3001;
    ahead.make(editor, filter, at(100), 100, () => Promise.resolve(page(9)));
    expect(ahead.kept).to.equal(1);
  });
});

describe('resolved entries are counted at the size of the events they hold (security review 14)', () => {
  // 1,000 aliases of 515 characters (content stored before MAX_ALIAS_CHARS), on 50 views: 48 symbolic ones follow svcPublic.
  const aliases = Array.from({ length: 1000 }, (_, i) => `${'n'.repeat(256)}/${'a'.repeat(250)}-${String(i).padStart(5, '0')}`);
  const symbolic = Object.fromEntries(Array.from({ length: 48 }, (_, i) => [`follow${i}`, 'svcPublic']));
  const snap = (rev: number, publicVersion: string): Snapshot => ({
    cid: 'C0000000000000000000000001',
    rev,
    type: 'article',
    head: 'v2',
    created: 1,
    modified: rev,
    committer: 'editor',
    deleted: false,
    views: { svcLatest: 'v2', svcPublic: publicVersion },
    symbolic,
    meta: {},
    aliases,
  });
  const snapshots = new Map<string, Snapshot>([
    ['C0000000000000000000000001/1', snap(1, 'v1')],
    ['C0000000000000000000000001/2', snap(2, 'v2')],
  ]);
  const store = withBudget((cid, rev) => snapshots.get(`${cid}/${rev}`) ?? null);
  const reads = { mayRead: () => true } as unknown as Reads;

  it('49 view events of a content with 515 KB of aliases count at least their JSON', async () => {
    const source = new ChangeSource({} as never, store as never, 1, reads);
    const e: ContentEvent = { kind: 'views', cid: 'C0000000000000000000000001', rev: 2, type: 'article', ts: 2, userId: 'editor' };
    const [entry] = await source.resolve(0, [[Buffer.from('5-0'), [Buffer.from('e'), pack(e)]]]);
    expect(entry.changes).to.have.length(49);

    // Delivered once, as the fan-out delivers to a live subscriber (its JSON kept in `rests`).
    const out: Delivered[] = [];
    const pos: StreamPosition[] = [{ ...START }];
    source.consume(
      entry,
      pos,
      { userId: 'reader', contexts: { __global__: ['reader'] } },
      { types: [], views: [], kinds: [] },
      out,
      Infinity,
      entry.changes.map(() => 'cursor'),
    );
    expect(out).to.have.length(49);
    const held = (entry.rests ?? []).reduce((n, r) => n + r.length, 0);

    const counted = (source as unknown as { resolved: { calculatedSize: number } }).resolved.calculatedSize;
    expect(counted, 'the size the cache counts for the entry').to.be.at.least(held);
  });
});

/** A snapshot of `cid` at `rev` for the pages over streams in memory below. */
const snapshotOf = (cid: string, rev = 1, more: Partial<Snapshot> = {}): Snapshot => ({
  cid,
  rev,
  type: 'article',
  head: `v${rev}`,
  created: 1,
  modified: rev,
  committer: 'editor',
  deleted: false,
  views: { svcLatest: `v${rev}` },
  symbolic: {},
  meta: {},
  aliases: [],
  ...more,
});

/** An entry of a partition's event stream: its id and its stored event. */
const entryOf = (id: string, e: ContentEvent): [Buffer, Buffer[]] => [Buffer.from(id), [Buffer.from('e'), pack(e)]];

/**
 * Event streams of partitions in memory, as a ChangeSource reads them (XRANGE from the start, from
 * an id or after one; the cursor key). `read` counts the entries answered; `onRead` sees each XRANGE.
 */
function memoryStreams(streams: [Buffer, Buffer[]][][], onRead: () => void = () => undefined) {
  const ids = streams.map((s) => s.map(([k]) => k.toString().split('-').map(Number)));
  const state = { read: 0 };
  const redis = {
    set: async () => 'OK',
    getBuffer: async () => Buffer.alloc(32, 1),
    xrangeBuffer: async (key: string, start: string, _end: string, _count: string, n: number) => {
      onRead();
      const p = Number(/\{(\d+)\}/.exec(key)![1]);
      const list = ids[p];
      let lo = 0;
      if (start !== '-') {
        // The first entry after `(id`, or at or after `id`.
        const exclusive = start.startsWith('(');
        const [ms, seq] = (exclusive ? start.slice(1) : start).split('-').map(Number);
        let hi = list.length;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          const d = list[mid][0] - ms || list[mid][1] - seq;
          if (d > 0 || (d === 0 && !exclusive)) hi = mid;
          else lo = mid + 1;
        }
      }
      const got = streams[p].slice(lo, lo + n);
      state.read += got.length;
      return got;
    },
  };
  return { redis, state };
}

/**
 * A store of the snapshots `lookup` answers, as ContentStore reads them: `snapshotsWithin` keeps
 * the byte budget of hget-each-within-n.lua (a snapshot's stored size is its packed size). `read`
 * counts the snapshots read (those a budget left out are not).
 */
function withBudget(lookup: (cid: string, rev: number) => Snapshot | null, read: (n: number) => void = () => undefined) {
  return {
    async snapshotsOf(wanted: [string, number][]): Promise<(Snapshot | null)[]> {
      read(wanted.length);
      return wanted.map(([cid, rev]) => lookup(cid, rev));
    },
    async snapshotsWithin(wanted: [string, number][], budget: number, first: boolean): Promise<(Snapshot | null)[]> {
      const found: (Snapshot | null)[] = [];
      let bytes = 0;
      for (const [i, [cid, rev]] of wanted.entries()) {
        const snapshot = lookup(cid, rev);
        const size = snapshot ? pack(snapshot).length : 0;
        if (bytes + size > budget && !(i === 0 && first)) break;
        bytes += size;
        found.push(snapshot);
      }
      read(found.length);
      return found;
    },
  };
}

const who = (userId: string): Principal => ({ userId, contexts: {} });
const everything = { types: [], views: [], kinds: [] };
const fromStart = (partitions: number) => Array.from({ length: partitions }, () => ({ ...START }));

describe('a catch-up over more entries than the cache holds still finds what it holds (fifteenth session)', () => {
  it('the second of two passes over 60,000 entries reads only the snapshots of the entries past the cache', async function () {
    this.timeout(60_000);
    const N = 60000;
    const cid = (i: number) => `C${String(i).padStart(25, '0')}`;
    const { redis } = memoryStreams([
      Array.from({ length: N }, (_, i) => entryOf(`${i + 1}-0`, { kind: 'created', cid: cid(i), rev: 1, type: 'article', ts: 1, userId: 'editor' })),
    ]);
    let read = 0;
    const store = withBudget(
      (c) => snapshotOf(c),
      (n) => (read += n),
    );
    const source = new ChangeSource(redis as never, store as never, 1, { mayRead: () => true } as unknown as Reads);
    const pass = async () => {
      read = 0;
      for (let pos: StreamPosition = { ...START }; ; ) {
        const start = pos.ms === 0 ? '-' : `(${pos.ms}-${pos.seq}`;
        const got = await source.resolve(0, await redis.xrangeBuffer(keys.events(0), start, '+', 'COUNT', 1000), false);
        if (!got.length) break;
        pos = { ms: got[got.length - 1].ms, seq: 0, sub: 0 };
      }
      return read;
    };
    expect(await pass()).to.equal(N);
    // 50,000 entries fit the cache and 8,192 more are kept apart: the rest are read again.
    // Before, every entry of the second pass was a miss (60,000): each miss pushed out the oldest
    // entry kept, which was the next one read.
    expect(await pass()).to.be.below(2000);
  });
});

describe('a page made from what the page before it read past its end (carry) is the page read afresh', () => {
  it('over 8 partitions, views events of several changes, a caller that may read part, limits 1 to 50', async function () {
    this.timeout(60_000);
    const P = 8;
    // Deterministic pseudo-random entries: ms growing with gaps, ids colliding across partitions.
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const streams = Array.from({ length: P }, () => [] as [Buffer, Buffer[]][]);
    const snaps = new Map<string, Snapshot>();
    const views = (rev: number): Record<string, string> =>
      rev % 2 ? { svcLatest: `v${rev}`, svcPublic: `v${rev}`, a: `v${rev}`, b: `v${rev}` } : { svcLatest: `v${rev}` };
    const revs = new Map<string, number>();
    let ms = 1000;
    for (let i = 0; i < 3000; i++) {
      ms += rnd(3);
      const p = rnd(P);
      const cid = `C${String(p).padStart(2, '0')}${String(rnd(12)).padStart(23, '0')}`;
      const rev = (revs.get(cid) ?? 0) + 1;
      revs.set(cid, rev);
      snaps.set(`${cid}/${rev}`, snapshotOf(cid, rev, { type: rnd(3) ? 'article' : 'memo', modified: ms, views: views(rev) }));
      const s = streams[p];
      const last = s[s.length - 1];
      const lastId = last ? last[0].toString().split('-').map(Number) : [0, 0];
      const id = lastId[0] === ms ? `${ms}-${lastId[1] + 1}` : `${ms}-0`;
      s.push(entryOf(id, { kind: rev === 1 ? 'created' : rnd(2) ? 'views' : 'updated', cid, rev, type: 'article', ts: ms, userId: 'editor' }));
    }
    const { redis } = memoryStreams(streams);
    const store = withBudget((cid, rev) => snaps.get(`${cid}/${rev}`) ?? null);
    // The caller may read articles only.
    const reads = { mayRead: (_: unknown, at: Snapshot) => at.type === 'article' } as unknown as Reads;
    const source = new ChangeSource(redis as never, store as never, P, reads);
    await source.ready();
    const seen = (r: PageResult) => r.changes.map((d) => `${d.event.id}/${d.event.revision}/${d.event.kind}/${d.event.view ?? ''}`);
    for (const limit of [1, 3, 7, 50]) {
      let a = await source.page(who('reader'), everything, fromStart(P), limit);
      let b = a;
      let pages = 0;
      while (!a.exhausted) {
        const fresh = await source.page(who('reader'), everything, a.positions, limit);
        const carried = await source.page(who('reader'), everything, b.positions, limit, undefined, b.carry);
        expect(seen(carried), `limit ${limit}, page ${pages}`).to.deep.equal(seen(fresh));
        // Positions may differ past the last event: a page moves over the entries it may not read
        // that are ready, and a page with more read ahead has more of them ready.
        a = fresh;
        b = carried;
        pages++;
        if (limit === 1 && pages > 400) break;
      }
      expect(pages).to.be.above(limit === 50 ? 20 : 100);
    }
  });
});

describe('a page reads each partition by its rate of commits (roundCounts)', () => {
  it('a page of 1,000 over 16 partitions, one of them with four times the commits of the others, takes at most 4 rounds', async () => {
    const P = 16;
    const streams = Array.from({ length: P }, () => [] as [Buffer, Buffer[]][]);
    for (let ms = 1; ms <= 6000; ms++) {
      // Partition 0 has a commit every millisecond, the others one every 4 (in turn).
      const p = ms % 4 === 0 ? 1 + ((ms / 4) % (P - 1)) : 0;
      streams[p].push(entryOf(`${ms}-0`, { kind: 'updated', cid: `C${String(p).padStart(25, '0')}`, rev: 1, type: 'article', ts: ms, userId: 'editor' }));
    }
    // The reads of a round are asked together, before any answers.
    let rounds = 0;
    let inRound = false;
    const { redis } = memoryStreams(streams, () => {
      if (inRound) return;
      inRound = true;
      rounds++;
      queueMicrotask(() => {
        inRound = false;
      });
    });
    const store = withBudget((cid) => snapshotOf(cid));
    const source = new ChangeSource(redis as never, store as never, P, { mayRead: () => true } as unknown as Reads);
    await source.ready();
    const page = await source.page(who('editor'), everything, fromStart(P), 1000);
    expect(page.changes).to.have.length(1000);
    // Shared evenly, partition 0 held the page back for 43 rounds.
    expect(rounds).to.be.at.most(4);
  });
});

describe('a page whose entries come thousands to a millisecond still reads (roundCounts)', () => {
  it('12,000 entries over two milliseconds of today, none of which the caller may read: a page of 1 ends', async () => {
    // At 1.8e12 ms, the time at which a rate of 6,000 entries a millisecond fills a page of 1 is
    // the frontier itself (a double's step there is 2.4e-4): no partition read, and the page
    // went round without end, never giving the event loop back.
    const T = 1_800_000_000_000;
    const stream: [Buffer, Buffer[]][] = [];
    for (const ms of [T, T + 1])
      for (let seq = 0; seq < 6000; seq++)
        stream.push(entryOf(`${ms}-${seq}`, { kind: 'updated', cid: `C${String(seq).padStart(25, '0')}`, rev: 1, type: 'article', ts: ms, userId: 'editor' }));
    const { redis, state } = memoryStreams([stream]);
    const store = withBudget((cid) => snapshotOf(cid));
    const source = new ChangeSource(redis as never, store as never, 1, { mayRead: () => false } as unknown as Reads);
    await source.ready();
    const page = await source.page(who('reader'), everything, fromStart(1), 1);
    expect(page.changes).to.have.length(0);
    expect(page.exhausted).to.equal(true);
    expect(state.read).to.equal(12000);
  });
});

describe('a page of a caller that may read little reads within its budget', () => {
  it('over 16 partitions and 160,000 entries of which the caller may read one in 500: one page reads about 20,000 entries', async () => {
    const P = 16;
    const streams = Array.from({ length: P }, () => [] as [Buffer, Buffer[]][]);
    for (let ms = 1; ms <= 160000; ms++) {
      // One content in 500 is one the caller may read.
      const cid = `C${String(ms % 500).padStart(25, '0')}`;
      streams[ms % P].push(entryOf(`${ms}-0`, { kind: 'updated', cid, rev: 1, type: 'article', ts: ms, userId: 'editor' }));
    }
    const { redis, state } = memoryStreams(streams);
    const store = withBudget((cid) => snapshotOf(cid));
    const source = new ChangeSource(redis as never, store as never, P, { mayRead: (_: unknown, at: Snapshot) => at.cid.endsWith('0000') } as unknown as Reads);
    await source.ready();
    const page = await source.page(who('reader'), everything, fromStart(P), 1000);
    expect(page.changes.length).to.be.above(20);
    expect(page.exhausted).to.equal(false);
    // Within the budget of entries (20,000) and of bytes (PAGE_EXAMINE_BYTES: about 13,000 entries of this weight).
    expect(state.read).to.be.within(5000, 22000);
  });
});

describe('a page ends once what it examined weighs PAGE_EXAMINE_BYTES (review 15)', () => {
  it('2,000 entries of a content with 50 KB of aliases the caller may not read: one page examines about 16 MiB of them, not all', async () => {
    const aliases = Array.from({ length: 100 }, (_, i) => `${'n'.repeat(250)}/${'a'.repeat(245)}-${String(i).padStart(3, '0')}`);
    const { redis } = memoryStreams([
      Array.from({ length: 2000 }, (_, i) =>
        entryOf(`${i + 1}-0`, { kind: 'updated', cid: 'C0000000000000000000000001', rev: i + 1, type: 'article', ts: i + 1, userId: 'editor' }),
      ),
    ]);
    let examined = 0;
    const store = withBudget(
      (cid, rev) => snapshotOf(cid, rev, { aliases }),
      (n) => (examined += n),
    );
    const source = new ChangeSource(redis as never, store as never, 1, { mayRead: () => false } as unknown as Reads);
    await source.ready();
    const page = await source.page(who('sportseditor'), everything, fromStart(1), 1000);
    expect(page.changes).to.have.length(0);
    expect(page.exhausted).to.equal(false);
    // About 150 KB an entry (its snapshot, its event's JSON): about 110 entries; before, all 2,000.
    expect(examined).to.be.within(50, 300);
    expect(PAGE_EXAMINE_BYTES).to.equal(16 * 2 ** 20);
  });
});

describe('PAGE_EXAMINE_BYTES holds whatever the entries weigh (review 17)', () => {
  /** 4 light entries of other contents, then 1,000 revisions whose snapshots carry 100 KB of metadata. */
  function lightThenHeavy(P: number) {
    const heavy = 'C0000000000000000000000HVY';
    const meta = { big: { _type: 'big', s: 'x'.repeat(100 * 1024) } };
    const stream: [Buffer, Buffer[]][] = [];
    for (let i = 0; i < 4; i++)
      stream.push(entryOf(`${i + 1}-0`, { kind: 'created', cid: `C00000000000000000000000L${i}`, rev: 1, type: 'article', ts: i + 1, userId: 'u' }));
    for (let r = 1; r <= 1000; r++) stream.push(entryOf(`${r + 4}-0`, { kind: 'updated', cid: heavy, rev: r, type: 'article', ts: r + 4, userId: 'u' }));
    const { redis } = memoryStreams(Array.from({ length: P }, (_, p) => (p === 0 ? stream : [])));
    let examined = 0;
    const store = withBudget((cid, rev) => (cid === heavy ? snapshotOf(cid, rev, { meta }) : snapshotOf(cid, rev)));
    const counted = {
      async snapshotsOf(wanted: [string, number][]) {
        const found = await store.snapshotsOf(wanted);
        for (const s of found) if (s) examined += snapshotBytes(s);
        return found;
      },
      async snapshotsWithin(wanted: [string, number][], budget: number, first: boolean) {
        const found = await store.snapshotsWithin(wanted, budget, first);
        for (const s of found) if (s) examined += snapshotBytes(s);
        return found;
      },
    };
    return { redis, store: counted, examined: () => examined };
  }

  for (const P of [1, 64]) {
    it(`light entries first, heavy after, over ${P} partition(s): a page examines at most twice PAGE_EXAMINE_BYTES (before: 49.5 MiB at 1, 196 MiB at 64)`, async () => {
      for (const visible of [false, true]) {
        const { redis, store, examined } = lightThenHeavy(P);
        const source = new ChangeSource(redis as never, store as never, P, { mayRead: () => visible } as unknown as Reads);
        await source.ready();
        const page = await source.page(who('x'), everything, fromStart(P), 1000);
        expect(examined(), `visible ${visible}`).to.be.at.most(2 * PAGE_EXAMINE_BYTES);
        expect(examined(), `visible ${visible}`).to.be.at.least(PAGE_EXAMINE_BYTES / 4);
        expect(page.exhausted).to.equal(false);
        if (visible) expect(page.changes.length).to.be.within(5, 200);
      }
    });
  }

  it('entries each heavier than the budget: every page moves on by one, and all are delivered once, in order', async function () {
    this.timeout(60_000);
    const big = 'x'.repeat(9 * 2 ** 20);
    const cid = 'C0000000000000000000000HVY';
    const { redis } = memoryStreams([
      Array.from({ length: 3 }, (_, i) => entryOf(`${i + 1}-0`, { kind: 'updated', cid, rev: i + 1, type: 'article', ts: i + 1, userId: 'u' })),
    ]);
    const store = withBudget((c, rev) => snapshotOf(c, rev, { meta: { big: { _type: 'big', s: big } } }));
    const source = new ChangeSource(redis as never, store as never, 1, { mayRead: () => true } as unknown as Reads);
    await source.ready();
    const revisions: number[] = [];
    let positions = fromStart(1);
    for (let n = 0; n < 10; n++) {
      const page = await source.page(who('x'), everything, positions, 1000);
      expect(page.changes.length, `page ${n}`).to.be.at.most(1);
      revisions.push(...page.changes.map((d) => d.event.revision as number));
      positions = page.positions;
      if (page.exhausted) break;
    }
    expect(revisions).to.deep.equal([1, 2, 3]);
  });

  it('over 4 partitions of entries of random weight (some 3 MB), pages of 1 to 50 deliver every event once, in the feed order', async function () {
    this.timeout(120_000);
    const P = 4;
    let seed = 11;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const heavyMeta = { big: { _type: 'big', s: 'y'.repeat(3 * 2 ** 20) } };
    const streams = Array.from({ length: P }, () => [] as [Buffer, Buffer[]][]);
    const heavy = new Set<string>();
    const order: string[] = [];
    let ms = 1000;
    const ids: { p: number; ms: number; seq: number; cid: string }[] = [];
    for (let i = 0; i < 400; i++) {
      ms += rnd(3);
      const p = rnd(P);
      const last = streams[p].length ? streams[p][streams[p].length - 1][0].toString().split('-').map(Number) : [0, 0];
      const seq = last[0] === ms ? last[1] + 1 : 0;
      const cid = `C${String(i).padStart(25, '0')}`;
      if (rnd(10) === 0) heavy.add(cid);
      streams[p].push(entryOf(`${ms}-${seq}`, { kind: 'created', cid, rev: 1, type: 'article', ts: ms, userId: 'u' }));
      ids.push({ p, ms, seq, cid });
    }
    ids.sort((a, b) => a.ms - b.ms || a.p - b.p || a.seq - b.seq);
    for (const e of ids) order.push(e.cid);
    const { redis } = memoryStreams(streams);
    const store = withBudget((cid, rev) => snapshotOf(cid, rev, heavy.has(cid) ? { meta: heavyMeta } : {}));
    const source = new ChangeSource(redis as never, store as never, P, { mayRead: () => true } as unknown as Reads);
    await source.ready();
    for (const limit of [1, 7, 50]) {
      const got: string[] = [];
      let positions = fromStart(P);
      for (let n = 0; n < 2000; n++) {
        const page = await source.page(who('x'), everything, positions, limit);
        got.push(...page.changes.map((d) => d.event.id.replace('contentid/', '')));
        positions = page.positions;
        if (page.exhausted) break;
      }
      expect(got, `limit ${limit}`).to.deep.equal(order);
    }
  });
});

describe('PageSlots: change-feed pages made at once, requested and of streams (review 17)', () => {
  const gate = () => {
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    return { open, opened };
  };

  it('a request past the user bound is refused with 429, past the process bound with 503; a stream waits, first come first', async () => {
    const slots = new PageSlots(2, 3);
    const g = gate();
    const order: string[] = [];
    const page = (name: string) => async () => {
      order.push(name);
      await g.opened;
      return name;
    };
    const a1 = slots.run('a', page('a1'));
    const a2 = slots.run('a', page('a2'));
    const refused = await slots.run('a', page('a3')).catch((e: AppError) => e);
    expect((refused as AppError).code).to.equal('TOO_MANY_REQUESTS');
    // Streams of a wait; one of b takes the process's last slot at once.
    const s1 = slots.wait('a', page('s1'));
    const b1 = slots.wait('b', page('b1'));
    const s2 = slots.wait('b', page('b2'));
    await new Promise((r) => setImmediate(r));
    expect(order).to.deep.equal(['a1', 'a2', 'b1']);
    expect(slots.making).to.equal(3);
    const full = await slots.run('c', page('c1')).catch((e: AppError) => e);
    expect((full as AppError).code).to.equal('UNAVAILABLE');
    g.open();
    expect(await Promise.all([a1, a2, s1, b1, s2])).to.deep.equal(['a1', 'a2', 's1', 'b1', 'b2']);
    expect(order).to.deep.equal(['a1', 'a2', 'b1', 's1', 'b2']);
    expect(slots.making).to.equal(0);
  });

  it('a slot given to a waiting stream is its own: a request that comes between is refused, never made beside it past the bound', async () => {
    const slots = new PageSlots(1, 10);
    let release!: () => void;
    const first = slots.run('a', () => new Promise<void>((r) => (release = r)));
    let made = 0;
    let most = 0;
    const counted = async () => {
      made++;
      most = Math.max(most, made);
      await new Promise((r) => setImmediate(r));
      made--;
    };
    const stream = slots.wait('a', counted);
    release();
    await first;
    // The stream holds the slot now, though its page has not started yet.
    const between = await slots.run('a', counted).catch((e: AppError) => e);
    expect((between as AppError).code).to.equal('TOO_MANY_REQUESTS');
    await stream;
    expect(most).to.equal(1);
  });

  it("pages made ahead take a slot of the user's only while the user and the process keep one for a request, and never while a stream waits (spare)", async () => {
    const slots = new PageSlots(3, 6);
    const g = gate();
    const held = () => g.opened.then(() => 'made');
    const a1 = slots.run('a', held);
    const ahead1 = slots.spare('a', held);
    expect(ahead1, 'two of three slots held: one is left for a request').to.not.equal(null);
    expect(slots.spare('a', held), "the last slot of the user is a request's").to.equal(null);
    expect(slots.making).to.equal(2);
    const a2 = slots.run('a', held);
    // Another user: the process's bound (6) keeps a slot for a request too.
    const b1 = slots.run('b', held);
    const b2 = slots.spare('b', held);
    expect(b2).to.not.equal(null);
    expect(slots.spare('c', held), "the process's last slot is a request's").to.equal(null);
    expect(slots.making).to.equal(5);
    g.open();
    expect(await Promise.all([a1, ahead1, a2, b1, b2])).to.deep.equal(['made', 'made', 'made', 'made', 'made']);
    expect(slots.making).to.equal(0);
    // A stream waiting for a slot: nothing is made ahead before it.
    const one = new PageSlots(2, 2);
    const h = gate();
    const x1 = one.run('x', () => h.opened);
    const x2 = one.run('x', () => h.opened);
    const stream = one.wait('y', async () => 'stream');
    expect(one.spare('y', async () => 'ahead')).to.equal(null);
    h.open();
    await Promise.all([x1, x2]);
    expect(await stream).to.equal('stream');
  });

  it('PagesAhead makes nothing, and keeps nothing, for a page the slots decline', async () => {
    const slots = new PageSlots(1, 16);
    const ahead = new PagesAhead(() => 0);
    let asked = 0;
    ahead.make({ userId: 'a', roles: [] } as unknown as Principal, {} as ChangeFilter, [{ ms: 1, seq: 0, sub: 0 }], 10, () =>
      slots.spare('a', async () => {
        asked++;
        return {} as PageResult;
      }),
    );
    expect(asked).to.equal(0);
    expect(ahead.kept).to.equal(0);
    expect(slots.making).to.equal(0);
  });

  it('a page that fails gives its slot back', async () => {
    const slots = new PageSlots(1, 1);
    await slots.wait('a', () => Promise.reject(new Error('Redis went away'))).catch(() => undefined);
    expect(slots.making).to.equal(0);
    expect(await slots.run('a', async () => 'made')).to.equal('made');
  });
});
