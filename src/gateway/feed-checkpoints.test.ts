import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createLogger } from '../adapters/log.js';
import { connectRedis, type RedisClient } from '../adapters/redis.js';
import type { StreamPosition } from '../content/change-events.js';
import { startRedisServer, type RedisServerHandle } from '../dev/redis-server.js';
import type { AppError } from '../errors.js';
import type { ResolvedEntry } from './change-source.js';
import { CursorSeal } from './cursor-seal.js';
import { FeedCheckpoints } from './feed-checkpoints.js';

const P = 8;
const entry = (p: number, ms: number, seq: number, changes: number): ResolvedEntry =>
  ({ p, ms, seq, changes: Array.from({ length: changes }, () => ({})), at: null }) as unknown as ResolvedEntry;

/** What the fan-out's own position is after each event of `offers`, from `base` (as ChangeFanout.dispatch moves it). */
function expected(base: StreamPosition[], offers: ResolvedEntry[][]): StreamPosition[][] {
  const pos = base.map((p) => ({ ...p }));
  const out: StreamPosition[][] = [];
  for (const offer of offers)
    for (const e of offer) {
      for (let i = 0; i < e.changes.length; i++) {
        pos[e.p] = { ms: e.ms, seq: e.seq, sub: i + 1 === e.changes.length ? 0 : i + 1 };
        out.push(pos.map((x) => ({ ...x })));
      }
      // An entry of no event moves the position all the same.
      pos[e.p] = { ms: e.ms, seq: e.seq, sub: 0 };
    }
  return out;
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    return (e as AppError).http;
  }
}

describe('short cursors of live events: records of the fan-out offers (FeedCheckpoints)', () => {
  let server: RedisServerHandle;
  let redis: RedisClient;
  const seal = new CursorSeal(randomBytes(32), P);
  const log = createLogger('error');

  before(async () => {
    server = await startRedisServer({ appendonly: false });
    redis = connectRedis({ REDIS_URL: server.url, REDIS_CLUSTER_NODES: '' });
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('each cursor reads back as the positions its event leaves, over records that chain past several full ones, entries of no event among them; its length never changes', async () => {
    const cp = new FeedCheckpoints(redis, 3600_000, log);
    const base: StreamPosition[] = Array.from({ length: P }, (_, p) => ({ ms: 1_700_000_000_000 + p, seq: p, sub: 0 }));
    // 300 offers of 1 to 5 entries of 1 to 3 events, at random partitions, ms and seq: more than
    // FULL_EVERY (64) records, so cursors chain from several full records.
    let ms = 1_700_000_001_000;
    const offers: ResolvedEntry[][] = [];
    for (let o = 0; o < 300; o++)
      offers.push(
        Array.from({ length: 1 + (o % 5) }, (_, i) => {
          ms += (o + i) % 3;
          // Some entries of no event (a snapshot not readable, a kind no event is made of).
          return entry((o * 7 + i * 3) % P, ms, (o + i) % 4, (o + 2 * i) % 4);
        }),
      );
    const cursors = (await Promise.all(offers.map((offer) => cp.record(seal, base, offer)))).flatMap((c) => c!.cursors.flat());
    const want = expected(base, offers);
    expect(cursors).to.have.length(want.length);
    expect(new Set(cursors.map((c) => c.length))).to.deep.equal(new Set([68]));
    const got: StreamPosition[][] = [];
    for (const c of cursors) {
      const ref = seal.open(c);
      expect(Array.isArray(ref), 'a checkpoint cursor').to.equal(false);
      got.push(await cp.positions(ref as Exclude<typeof ref, StreamPosition[]>, P));
    }
    expect(got).to.deep.equal(want);
    // A gateway's other process (another FeedCheckpoints, same key) reads them alike.
    const other = new FeedCheckpoints(redis, 3600_000, log);
    const last = seal.open(cursors[cursors.length - 1]);
    expect(await other.positions(last as Exclude<typeof last, StreamPosition[]>, P)).to.deep.equal(want[want.length - 1]);
    // The long form of the same positions is not mistaken for one (decode reads positions only).
    expect(seal.decode(seal.encode(want[0]))).to.deep.equal(want[0]);
    expect(() => seal.decode(cursors[0])).to.throw();
  });

  it('offers made without a record (nobody subscribed) between records: the cursors after them still read back exactly', async () => {
    const cp = new FeedCheckpoints(redis, 3600_000, log);
    const base: StreamPosition[] = Array.from({ length: P }, () => ({ ms: 1, seq: 0, sub: 0 }));
    const offers = [[entry(1, 10, 0, 1)], [entry(2, 11, 0, 1)], [entry(1, 12, 0, 2)], [entry(3, 13, 0, 1)], [entry(2, 14, 0, 1)], [entry(4, 15, 0, 1)]];
    const first = (await cp.record(seal, base, offers[0]))!.cursors;
    cp.skip(offers[1]);
    // A record asked for, then an offer made without one before the record is written (Redis
    // Cluster: another partition's loop): that offer goes to subscribers first, so the record's
    // cursors hold its moves.
    const writing = cp.record(seal, base, offers[2]);
    cp.skip(offers[3]);
    const [second, third] = (await Promise.all([writing, cp.record(seal, base, offers[4])])).map((r) => r?.cursors);
    // The order the offers went to subscribers.
    const want = expected(base, [offers[0], offers[1], offers[3], offers[2], offers[4]]);
    const read = (c: string) => cp.positions(seal.open(c) as Exclude<ReturnType<CursorSeal['open']>, StreamPosition[]>, P);
    expect(await read(first[0][0])).to.deep.equal(want[0]);
    expect(await read(second![0][1])).to.deep.equal(want[4]);
    expect(await read(third![0][0])).to.deep.equal(want[5]);
    // An offer made without a record while a record is being written: that record's events get no
    // shared cursors (its moves in Redis lack the other offer's, which went out first).
    const xadd = redis.xadd.bind(redis);
    let release: (() => void) | null = null;
    (redis as unknown as { xadd: unknown }).xadd = async (...args: Parameters<typeof xadd>) => {
      await new Promise<void>((go) => (release = go));
      return xadd(...args);
    };
    try {
      const slow = cp.record(seal, base, offers[5]);
      while (!release) await new Promise((r) => setImmediate(r));
      cp.skip([entry(5, 16, 0, 1)]);
      (release as () => void)();
      expect(await slow).to.equal(null);
    } finally {
      (redis as unknown as { xadd: unknown }).xadd = xadd;
    }
    // The next record holds every position, those of both.
    const [[next]] = (await cp.record(seal, base, [entry(6, 17, 0, 1)]))!.cursors;
    const all = expected(base, [offers[0], offers[1], offers[3], offers[2], offers[4], offers[5], [entry(5, 16, 0, 1)], [entry(6, 17, 0, 1)]]);
    expect(await read(next)).to.deep.equal(all[all.length - 1]);
  });

  it('a record whose answer was lost and is written again replays to the same positions', async () => {
    const cp = new FeedCheckpoints(redis, 3600_000, log);
    const base: StreamPosition[] = Array.from({ length: P }, () => ({ ms: 0, seq: 0, sub: 0 }));
    const xadd = redis.xadd.bind(redis);
    let failed = 0;
    // The first write of the second record reaches Redis, and its answer is lost.
    (redis as unknown as { xadd: unknown }).xadd = async (...args: Parameters<typeof xadd>) => {
      const id = await xadd(...args);
      if (++failed === 2) throw new Error('connection lost');
      return id;
    };
    const offers = [[entry(1, 10, 0, 2)], [entry(2, 11, 0, 1), entry(1, 12, 0, 1)], [entry(3, 13, 0, 1)]];
    let cursors: string[];
    try {
      cursors = (await Promise.all(offers.map((o) => cp.record(seal, base, o)))).flatMap((c) => c!.cursors.flat());
    } finally {
      (redis as unknown as { xadd: unknown }).xadd = xadd;
    }
    const got = [];
    for (const c of cursors) got.push(await cp.positions(seal.open(c) as Exclude<ReturnType<CursorSeal['open']>, StreamPosition[]>, P));
    expect(got).to.deep.equal(expected(base, offers));
  });

  it('what reading a cursor back costs: a record is read from Redis once, and a chain holds at most FULL_MOVES moves besides its last record (review 20, F2)', async () => {
    const cp = new FeedCheckpoints(redis, 3600_000, log);
    const base: StreamPosition[] = Array.from({ length: P }, () => ({ ms: 1, seq: 0, sub: 0 }));
    // 3 offers of 1,500 events: the third's record may not chain from the first (4,500 > 4,096).
    const offers = [0, 1, 2].map((o) => Array.from({ length: 1500 }, (_, i) => entry(i % P, 1000 + o * 1500 + i, 0, 1)));
    const recorded = [];
    for (const offer of offers) recorded.push((await cp.record(seal, base, offer))!.cursors.flat());
    const key = (c: string) => `feedcp:{${(seal.open(c) as { proc: Buffer }).proc.toString('hex')}}`;
    const records = await redis.xrange(key(recorded[0][0]), '-', '+');
    expect(records.map(([, f]) => f.includes('b'))).to.deep.equal([true, false, true]);
    // A reader of its own (nothing read yet): the first read of a cursor reads Redis, the next of the same record not.
    const reader = new FeedCheckpoints(redis, 3600_000, log);
    const xrange = redis.xrangeBuffer.bind(redis);
    let reads = 0;
    (redis as unknown as { xrangeBuffer: unknown }).xrangeBuffer = (...args: Parameters<typeof xrange>) => {
      reads++;
      return xrange(...args);
    };
    try {
      const want = expected(base, offers);
      const read = (c: string) => reader.positions(seal.open(c) as Exclude<ReturnType<CursorSeal['open']>, StreamPosition[]>, P);
      expect(await read(recorded[1][1499])).to.deep.equal(want[2999]);
      expect(reads, 'the record and its chain').to.equal(2);
      expect(await read(recorded[1][10])).to.deep.equal(want[1510]);
      expect(await read(recorded[1][1499])).to.deep.equal(want[2999]);
      expect(reads, 'nothing more for the same record').to.equal(2);
    } finally {
      (redis as unknown as { xrangeBuffer: unknown }).xrangeBuffer = xrange;
    }
  });

  it('a record Redis refuses to take: the offer goes without cursors after the give-up time or at stop, and the next record holds every position (review 20, F3)', async () => {
    const cp = new FeedCheckpoints(redis, 3600_000, log, 300);
    const base: StreamPosition[] = Array.from({ length: P }, () => ({ ms: 1, seq: 0, sub: 0 }));
    const xadd = redis.xadd.bind(redis);
    (redis as unknown as { xadd: unknown }).xadd = () => Promise.reject(new Error("NOPERM this user has no permissions to run the 'xadd' command"));
    let refused: Awaited<ReturnType<FeedCheckpoints['record']>>;
    const t0 = Date.now();
    try {
      refused = await cp.record(seal, base, [entry(1, 10, 0, 1)]);
    } finally {
      (redis as unknown as { xadd: unknown }).xadd = xadd;
    }
    expect(refused).to.equal(null);
    expect(Date.now() - t0).to.be.below(5000);
    const [[c]] = (await cp.record(seal, base, [entry(2, 11, 0, 1)]))!.cursors;
    expect(await cp.positions(seal.open(c) as Exclude<ReturnType<CursorSeal['open']>, StreamPosition[]>, P)).to.deep.equal(
      expected(base, [[entry(1, 10, 0, 1)], [entry(2, 11, 0, 1)]])[1],
    );
    // Stopped: a write that fails is not tried again.
    const stopping = new FeedCheckpoints(redis, 3600_000, log, 60_000);
    (redis as unknown as { xadd: unknown }).xadd = () => Promise.reject(new Error('READONLY'));
    try {
      const pending = stopping.record(seal, base, [entry(1, 10, 0, 1)]);
      await new Promise((r) => setTimeout(r, 100));
      stopping.stop();
      const t1 = Date.now();
      expect(await pending).to.equal(null);
      expect(Date.now() - t1).to.be.below(2000);
    } finally {
      (redis as unknown as { xadd: unknown }).xadd = xadd;
    }
  });

  it('a cursor whose record is gone answers 410; one of a record of more partitions, 400; a cursor of another key, 400', async () => {
    const cp = new FeedCheckpoints(redis, 3600_000, log);
    const base: StreamPosition[] = Array.from({ length: P }, () => ({ ms: 5, seq: 0, sub: 0 }));
    const [[c]] = (await cp.record(seal, base, [entry(0, 20, 0, 1)]))!.cursors;
    const ref = seal.open(c) as Exclude<ReturnType<CursorSeal['open']>, StreamPosition[]>;
    expect(await status(cp.positions(ref, P + 1))).to.equal(400);
    await redis.del(`feedcp:{${ref.proc.toString('hex')}}`);
    expect(await status(cp.positions(ref, P))).to.equal(410);
    expect(() => new CursorSeal(randomBytes(32), P).open(c)).to.throw();
  });
});
