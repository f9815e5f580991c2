import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { pack, unpack } from 'msgpackr';
import type { Logger } from '../adapters/log.js';
import type { RedisClient } from '../adapters/redis.js';
import { malformedCursor, type StreamPosition } from '../content/change-events.js';
import { sleep } from '../wait.js';
import { cursorGone, type ResolvedEntry } from './change-source.js';
import { type CheckpointRef, type CursorSeal, numbersOf, PROC_BYTES } from './cursor-seal.js';

/**
 * Short cursors for the events the fan-out delivers live (CONTRACT §13: cursors are opaque, at
 * most 2,048 characters). A cursor that holds every partition's position is 560 characters for
 * 64 partitions, and an SSE record carries it twice (`id:` and the event's `cursor`): at 10,000
 * subscribers the web process spent most of its time copying cursors into sockets (bench/RESULTS.md,
 * "The feed at 10,000 subscribers"). Here each offer of the fan-out is recorded once in Redis, in a
 * stream of this process (`feedcp:{<process>}`): the positions each of its events leaves, as moves
 * from the record before. An event's cursor then names the record and the event's place in it
 * (`CursorSeal.sealCheckpoint`: 68 characters, sealed as the long ones are: it tells nothing and
 * cannot be made up), and reading it back replays the records from the last one that holds every
 * position (`positions`).
 *
 * A record is written, and its write answered, before any of its events is sent: a cursor a client
 * holds always names a record that exists (a web process killed after sending leaves its records
 * behind). Records are written one after another, in the order of the offers, so a record's moves
 * follow those of every record before it in the stream, on Redis Cluster too (where each
 * partition has its own read loop). Their ids are chosen by the writer, so a write whose answer
 * was lost and is tried again cannot leave a second copy.
 *
 * The stream keeps what the events themselves are kept for (CHANGES_RETENTION_HOURS: records
 * older are trimmed as it is written, the key expires with its last record); a cursor whose record
 * is gone answers 410 like any cursor older than the events kept. What it costs Redis: about 8 bytes
 * an event delivered live and a full record (every position, about 1 KB) every FULL_EVERY records.
 */
export class FeedCheckpoints {
  /** This process's stream of records, and its name in cursors. */
  private readonly proc = randomBytes(PROC_BYTES);
  private readonly key = checkpointKey(this.proc);
  /** The positions after every record written: where the next one starts. */
  private state: StreamPosition[] | null = null;
  /** The last record that holds every position (its stream id), the records and moves since. */
  private full: string | null = null;
  private recordsSinceFull = 0;
  /** Offers made without a record (skip): a full record written across one is not chained from. */
  private skips = 0;
  private movesSinceFull = 0;
  private fullAt = 0;
  /** The id of the last record written (ids are chosen here, after it). */
  private last = { ms: 0, seq: 0 };
  /** Records are written one after another. */
  private writing: Promise<unknown> = Promise.resolve();
  private stopped = false;
  /** Records read back (they never change): the positions before each and its moves. */
  private readonly read = new LRUCache<string, { before: StreamPosition[]; moves: number[] }>({
    max: 4096,
    maxSize: 32 * 2 ** 20,
    sizeCalculation: (r) => 64 * r.before.length + 8 * r.moves.length + 64,
  });

  constructor(
    private readonly redis: RedisClient,
    private readonly retentionMs: number,
    private readonly log: Logger,
    private readonly giveUpMs = RECORD_GIVE_UP_MS,
  ) {}

  /**
   * An offer made without a record (nobody was subscribed): the positions it leaves are where the
   * next record starts, and that record holds every position (the records in Redis do not have
   * these moves). On Redis Cluster each partition has its own read loop: an offer of one loop
   * moves only its partitions, so the order in which loops come here does not matter.
   */
  skip(entries: readonly ResolvedEntry[]): void {
    if (!this.state || !entries.length) return;
    for (const entry of entries) this.state[entry.p] = { ms: entry.ms, seq: entry.seq, sub: 0 };
    this.full = null;
    this.skips++;
  }

  /** The fan-out (re)started from new positions: the next record holds every position. */
  reset(): void {
    this.state = null;
    this.full = null;
    this.stopped = false;
  }

  /**
   * Records an offer of the fan-out: `base`, the fan-out's positions before it (used when the
   * process records its first offer), and its entries in the order they are offered. Answers the
   * cursor after each event of each entry once the record is in Redis, and `skips` as it was then
   * (an offer made without a record since, `skipCount`, makes them unusable: see `write`); null
   * for none. A write that fails (Redis out of reach) is tried again for RECORD_GIVE_UP_MS (`giveUpMs`), never
   * after `stop`: nothing of the offer is sent before. Then the offer goes without them (each
   * subscriber makes its own cursors) and the next record holds every position.
   */
  record(seal: CursorSeal, base: readonly StreamPosition[], entries: readonly ResolvedEntry[]): Promise<Recorded | null> {
    const done = this.writing.then(() => this.write(seal, base, entries));
    this.writing = done.catch(() => undefined);
    return done;
  }

  /** Offers made without a record so far (skip). */
  get skipCount(): number {
    return this.skips;
  }

  /** No write is tried again from now on (the fan-out stops). */
  stop(): void {
    this.stopped = true;
  }

  private async write(seal: CursorSeal, base: readonly StreamPosition[], entries: readonly ResolvedEntry[]): Promise<Recorded | null> {
    this.state ??= base.map((p) => ({ ...p }));
    const state = this.state;
    const now = Date.now();
    const skips = this.skips;
    let own = 0;
    for (const entry of entries) own += Math.max(1, entry.changes.length);
    const full = this.full === null || this.recordsSinceFull >= FULL_EVERY || this.movesSinceFull + own > FULL_MOVES || now - this.fullAt >= FULL_EVERY_MS;
    // A full record holds the positions before its own moves.
    const fields: (string | Buffer)[] = full ? ['b', pack(Array.from(numbersOf(state)))] : ['f', this.full!];
    // Per event: its partition, its ms (from the move before), seq and sub, as the fan-out's own
    // position moves with it (ChangeFanout.dispatch). An entry of no event (one whose snapshot could
    // not be read, or of a kind no event is made of) moves the position all the same: a move of sub
    // PASSED, which no cursor names.
    const moves: number[] = [];
    let ms = 0;
    for (const entry of entries) {
      const n = entry.changes.length;
      if (n === 0) moves.push(entry.p, entry.ms - ms, entry.seq, PASSED);
      for (let i = 0; i < n; i++) moves.push(entry.p, i === 0 ? entry.ms - ms : 0, entry.seq, i + 1 === n ? 0 : i + 1);
      ms = entry.ms;
      state[entry.p] = { ms: entry.ms, seq: entry.seq, sub: 0 };
    }
    fields.push('m', pack(moves));
    const cutoff = Math.max(0, now - this.retentionMs);
    // The record's id is chosen here, so that a write whose answer was lost and is tried again
    // cannot leave two copies (a cursor into the second would replay the first's later moves).
    const idMs = Math.max(now, this.last.ms);
    const idSeq = idMs === this.last.ms ? this.last.seq + 1 : 0;
    const id = `${idMs}-${idSeq}`;
    // Taken whether or not it is written: the next record's id is past it (one written without its answer is never named again).
    this.last = { ms: idMs, seq: idSeq };
    let written = false;
    for (let attempt = 0; !this.stopped && Date.now() - now < this.giveUpMs; attempt++) {
      try {
        await this.redis.xadd(this.key, 'MINID', '~', String(cutoff), id, ...fields);
        written = true;
        break;
      } catch (e) {
        // Written by the try before, whose answer was lost.
        if (attempt > 0 && /equal or smaller/.test(String(e)) && (await this.written(id).catch(() => false))) {
          written = true;
          break;
        }
        if (attempt === 0) this.log.warn({ err: String(e) }, 'change feed could not record an offer; trying again before it is sent');
        await sleep(Math.min(1000, 50 * 2 ** Math.min(attempt, 5)));
      }
    }
    if (!written) {
      // Sent without shared cursors; the records in Redis lack its moves, so the next one is full.
      this.full = null;
      if (!this.stopped) this.log.warn({ ms: this.giveUpMs }, 'change feed could not record an offer; it goes without shared cursors');
      return null;
    }
    this.redis.pexpire(this.key, this.retentionMs).catch(() => undefined);
    if (full && skips === this.skips) {
      this.full = id;
      this.fullAt = now;
      this.recordsSinceFull = 0;
      this.movesSinceFull = 0;
    }
    this.recordsSinceFull++;
    this.movesSinceFull += own;
    // An offer was made without a record while this one was written (Redis Cluster: another
    // partition's loop, its subscribers gone): it went to subscribers before this one will, and
    // this record does not hold its moves. Its events get no shared cursors (each subscriber makes
    // its own, as one off the fan-out's position does).
    if (skips !== this.skips) return null;
    const cursors: string[][] = [];
    let k = 0;
    for (const entry of entries) {
      const list = new Array<string>(entry.changes.length);
      for (let i = 0; i < list.length; i++) list[i] = seal.sealCheckpoint(this.proc, idMs, idSeq, k++);
      cursors.push(list);
    }
    return { cursors, skips };
  }

  private async written(id: string): Promise<boolean> {
    return (await this.redis.xrange(this.key, id, id)).length === 1;
  }

  /**
   * The positions a checkpoint cursor names: from the full record its record chains from, every
   * record's moves in turn, then its own up to its event. 410 when the records are gone (older
   * than the retention, or lost with Redis). A record read once is kept (`read`): a cursor read
   * again costs its own record's moves only.
   */
  async positions(ref: CheckpointRef, partitions: number): Promise<StreamPosition[]> {
    const key = checkpointKey(ref.proc);
    const id = `${ref.ms}-${ref.seq}`;
    const cacheKey = `${key}/${id}`;
    let record = this.read.get(cacheKey);
    if (!record) {
      const target = await this.redis.xrangeBuffer(key, id, id);
      if (target.length !== 1) throw cursorGone();
      const own = fieldsOf(target[0][1]);
      const from = own.f ? own.f.toString() : id;
      // At most the records since a full one (FULL_EVERY; ids chosen by the writer: no record twice).
      const chain = from === id ? target : await this.redis.xrangeBuffer(key, from, id, 'COUNT', FULL_EVERY * 4);
      if (chain[0]?.[0].toString() !== from || chain[chain.length - 1][0].toString() !== id) throw cursorGone();
      const head = fieldsOf(chain[0][1]);
      if (!head.b) throw cursorGone();
      const flat = unpack(head.b) as number[];
      if (flat.length !== partitions * 3) throw malformedCursor();
      const before: StreamPosition[] = new Array(partitions);
      for (let p = 0; p < partitions; p++) before[p] = { ms: flat[3 * p], seq: flat[3 * p + 1], sub: flat[3 * p + 2] };
      for (let r = 0; r < chain.length - 1; r++) replay(before, unpack(fieldsOf(chain[r][1]).m!) as number[], Number.POSITIVE_INFINITY);
      record = { before, moves: unpack(own.m!) as number[] };
      this.read.set(cacheKey, record);
    }
    const positions = record.before.slice();
    if (!replay(positions, record.moves, ref.k)) throw malformedCursor();
    return positions;
  }
}

/** What `record` answers: each entry's events' cursors, and the offers made without a record until then. */
export interface Recorded {
  cursors: string[][];
  skips: number;
}

/**
 * Applies a record's moves to `positions` up to and with its `k`th event (all of them for
 * Infinity); false when it has no such event or a move names no partition.
 */
function replay(positions: StreamPosition[], moves: readonly number[], k: number): boolean {
  let events = 0;
  let ms = 0;
  for (let i = 0; i < moves.length; i += MOVE) {
    const p = moves[i];
    ms += moves[i + 1];
    if (!(p >= 0 && p < positions.length)) return false;
    const sub = moves[i + 3];
    positions[p] = { ms, seq: moves[i + 2], sub: sub === PASSED ? 0 : sub };
    if (sub !== PASSED && events++ === k) return true;
  }
  return k === Number.POSITIVE_INFINITY;
}

/** The sub of a move past an entry of no event. */
const PASSED = -1;

/** Numbers a move takes in a record: partition, ms (from the move before), seq, sub. */
const MOVE = 4;
/** A record holds every position at least every this many records, moves or ms. */
const FULL_EVERY = 64;
const FULL_MOVES = 4096;
const FULL_EVERY_MS = 30_000;
/** How long a record's write is tried again before its offer goes without shared cursors. */
const RECORD_GIVE_UP_MS = 5000;

const checkpointKey = (proc: Buffer): string => `feedcp:{${proc.toString('hex')}}`;

function fieldsOf(raw: Buffer[]): { b?: Buffer; f?: Buffer; m?: Buffer } {
  const out: { b?: Buffer; f?: Buffer; m?: Buffer } = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i].toString();
    if (name === 'b' || name === 'f' || name === 'm') out[name] = raw[i + 1];
  }
  return out;
}
