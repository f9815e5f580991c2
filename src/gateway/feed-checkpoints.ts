import { randomBytes } from 'node:crypto';
import { pack, unpack } from 'msgpackr';
import type { Logger } from '../adapters/log.js';
import type { RedisClient } from '../adapters/redis.js';
import { malformedCursor, type StreamPosition } from '../content/change-events.js';
import { sleep } from '../wait.js';
import { cursorGone, type ResolvedEntry } from './change-source.js';
import { type CheckpointRef, type CursorSeal, PROC_BYTES } from './cursor-seal.js';

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
  }

  constructor(
    private readonly redis: RedisClient,
    private readonly retentionMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Records an offer of the fan-out: `base`, the fan-out's positions before it (used when the
   * process records its first offer), and its entries in the order they are offered. Answers the
   * cursor after each event of each entry, once the record is in Redis (null: none, see below). A write that fails (Redis
   * out of reach) is tried again until it succeeds: nothing of the offer is sent before.
   */
  record(seal: CursorSeal, base: readonly StreamPosition[], entries: readonly ResolvedEntry[]): Promise<string[][] | null> {
    const done = this.writing.then(() => this.write(seal, base, entries));
    this.writing = done.catch(() => undefined);
    return done;
  }

  private async write(seal: CursorSeal, base: readonly StreamPosition[], entries: readonly ResolvedEntry[]): Promise<string[][] | null> {
    this.state ??= base.map((p) => ({ ...p }));
    const state = this.state;
    const now = Date.now();
    const skips = this.skips;
    const full = this.full === null || this.recordsSinceFull >= FULL_EVERY || this.movesSinceFull >= FULL_MOVES || now - this.fullAt >= FULL_EVERY_MS;
    const fields: (string | Buffer)[] = full ? ['b', pack(flatten(state))] : ['f', this.full!];
    // Per event: its partition, its ms (from the move before), seq and sub, as the fan-out's own
    // position moves with it (ChangeFanout.dispatch).
    const moves: number[] = [];
    let ms = 0;
    for (const entry of entries) {
      const n = entry.changes.length;
      for (let i = 0; i < n; i++) {
        moves.push(entry.p, entry.ms - ms, entry.seq, i + 1 === n ? 0 : i + 1);
        ms = entry.ms;
      }
      state[entry.p] = { ms: entry.ms, seq: entry.seq, sub: 0 };
    }
    fields.push('m', pack(moves));
    const cutoff = Math.max(0, now - this.retentionMs);
    // The record's id is chosen here, so that a write whose answer was lost and is tried again
    // cannot leave two copies (a cursor into the second would replay the first's later moves).
    const idMs = Math.max(now, this.last.ms);
    const idSeq = idMs === this.last.ms ? this.last.seq + 1 : 0;
    const id = `${idMs}-${idSeq}`;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.redis.xadd(this.key, 'MINID', '~', String(cutoff), id, ...fields);
        break;
      } catch (e) {
        // Written by the try before, whose answer was lost.
        if (attempt > 0 && /equal or smaller/.test(String(e)) && (await this.written(id).catch(() => false))) break;
        if (attempt === 0) this.log.warn({ err: String(e) }, 'change feed could not record an offer; trying again before it is sent');
        await sleep(Math.min(1000, 50 * 2 ** Math.min(attempt, 5)));
      }
    }
    this.last = { ms: idMs, seq: idSeq };
    this.redis.pexpire(this.key, this.retentionMs).catch(() => undefined);
    if (full && skips === this.skips) {
      this.full = id;
      this.fullAt = now;
      this.recordsSinceFull = 0;
      this.movesSinceFull = 0;
    }
    this.recordsSinceFull++;
    this.movesSinceFull += moves.length / MOVE;
    // An offer was made without a record while this one was written (Redis Cluster: another
    // partition's loop, its subscribers gone): it went to subscribers before this one will, and
    // this record does not hold its moves. Its events get no shared cursors (each subscriber makes
    // its own, as one off the fan-out's position does).
    if (skips !== this.skips) return null;
    const out: string[][] = [];
    let k = 0;
    for (const entry of entries) {
      const cursors = new Array<string>(entry.changes.length);
      for (let i = 0; i < cursors.length; i++) cursors[i] = seal.sealCheckpoint(this.proc, idMs, idSeq, k++);
      out.push(cursors);
    }
    return out;
  }

  private async written(id: string): Promise<boolean> {
    return (await this.redis.xrange(this.key, id, id)).length === 1;
  }

  /**
   * The positions a checkpoint cursor names: from the full record its record chains from, every
   * record's moves in turn, then its own up to its event. 410 when the records are gone (older
   * than the retention, or lost with Redis).
   */
  async positions(ref: CheckpointRef, partitions: number): Promise<StreamPosition[]> {
    const key = checkpointKey(ref.proc);
    const id = `${ref.ms}-${ref.seq}`;
    const target = await this.redis.xrangeBuffer(key, id, id);
    if (target.length !== 1) throw cursorGone();
    const own = fieldsOf(target[0][1]);
    const from = own.f ? own.f.toString() : id;
    // At most the records since a full one (FULL_EVERY), and a few written again after a lost answer.
    const chain = from === id ? target : await this.redis.xrangeBuffer(key, from, id, 'COUNT', FULL_EVERY * 4);
    if (chain[0]?.[0].toString() !== from || chain[chain.length - 1][0].toString() !== id) throw cursorGone();
    const head = fieldsOf(chain[0][1]);
    if (!head.b) throw cursorGone();
    const flat = unpack(head.b) as number[];
    if (flat.length !== partitions * 3) throw malformedCursor();
    const positions: StreamPosition[] = new Array(partitions);
    for (let p = 0; p < partitions; p++) positions[p] = { ms: flat[3 * p], seq: flat[3 * p + 1], sub: flat[3 * p + 2] };
    for (let r = 0; r < chain.length; r++) {
      const moves = unpack(fieldsOf(chain[r][1]).m!) as number[];
      const last = r === chain.length - 1;
      const upTo = last ? (ref.k + 1) * MOVE : moves.length;
      if (last && upTo > moves.length) throw malformedCursor();
      let ms = 0;
      for (let i = 0; i < upTo; i += MOVE) {
        const p = moves[i];
        ms += moves[i + 1];
        if (!(p >= 0 && p < partitions)) throw malformedCursor();
        positions[p] = { ms, seq: moves[i + 2], sub: moves[i + 3] };
      }
    }
    return positions;
  }
}

/** Numbers a move takes in a record: partition, ms (from the move before), seq, sub. */
const MOVE = 4;
/** A record holds every position at least every this many records, moves or ms. */
const FULL_EVERY = 64;
const FULL_MOVES = 20_000;
const FULL_EVERY_MS = 30_000;

const checkpointKey = (proc: Buffer): string => `feedcp:{${proc.toString('hex')}}`;

function flatten(positions: readonly StreamPosition[]): number[] {
  const out = new Array<number>(positions.length * 3);
  for (let i = 0; i < positions.length; i++) {
    out[3 * i] = positions[i].ms;
    out[3 * i + 1] = positions[i].seq;
    out[3 * i + 2] = positions[i].sub;
  }
  return out;
}

function fieldsOf(raw: Buffer[]): { b?: Buffer; f?: Buffer; m?: Buffer } {
  const out: { b?: Buffer; f?: Buffer; m?: Buffer } = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i].toString();
    if (name === 'b' || name === 'f' || name === 'm') out[name] = raw[i + 1];
  }
  return out;
}
