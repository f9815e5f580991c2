import { createCipheriv, createDecipheriv } from 'node:crypto';
import { pooledRandomBytes } from '../adapters/ids.js';
import { ModuleWorker, serveJobs } from '../adapters/module-worker.js';
import { decodePositions, decodePositionsV3, encodePositions, MAX_CURSOR_LENGTH, malformedCursor, type StreamPosition } from '../content/change-events.js';

/**
 * The first byte of a cursor: its format. 1 and 2 held the positions in clear (before
 * 2026-11-26); 3 sealed them padded (decodePositionsV3), still read; 4 seals them in records of
 * one length (encodePositions).
 */
const SEALED = 4;
const SEALED_V3 = 3;
/** Bytes that name a process's stream of records (FeedCheckpoints) in its cursors. */
export const PROC_BYTES = 8;

/** What a checkpoint cursor names: a process's stream of records (FeedCheckpoints), a record, an event in it. */
export interface CheckpointRef {
  proc: Buffer;
  ms: number;
  seq: number;
  k: number;
}

/** A checkpoint cursor (FeedCheckpoints): a record of the fan-out's offers and an event in it. */
const CHECKPOINT = 5;
/** A checkpoint cursor's plain bytes: the process's stream (PROC_BYTES), the record's id (ms, seq), the event's place. */
const CHECKPOINT_BYTES = PROC_BYTES + 6 + 4 + 4;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER = Buffer.from([SEALED]);
const HEADER_V3 = Buffer.from([SEALED_V3]);
const HEADER_CHECKPOINT = Buffer.from([CHECKPOINT]);

/**
 * Cursors as clients hold them (CONTRACT §13 "opaque", §20): the positions sealed with
 * AES-256-GCM under the platform's feed key and a random nonce, in base64url. A position moves
 * past every event of a stream, also past those the caller may not read, so in clear it would
 * tell when content the caller may not read changed. Sealed, a cursor tells nothing: two cursors
 * of the same positions differ, its length does not depend on which partitions moved or when
 * (encodePositions writes records of one length), and the caller cannot make one up (a cursor the
 * platform did not write answers 400), so positions it never reached cannot be probed for a 410
 * either. 560 characters for 64 partitions.
 */
export class CursorSeal {
  /** Has a page started the sealing thread (batch)? */
  private warmed = false;

  constructor(
    readonly key: Buffer,
    readonly partitions: number,
    /** Random bytes for the nonces (a pooled source: one is drawn for every event delivered). */
    private readonly random: (n: number) => Buffer = pooledRandomBytes,
  ) {
    if (key.length !== 32) throw new Error('the cursor key must be 32 bytes');
  }

  encode(positions: readonly StreamPosition[]): string {
    return this.sealBytes(encodePositions(positions));
  }

  /** The cursor of positions already encoded (encodePositions). */
  sealBytes(plain: Uint8Array, header = HEADER): string {
    const nonce = this.random(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(header);
    const body = cipher.update(plain);
    cipher.final();
    return Buffer.concat([header, nonce, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** The cursor of the `k`th event of a record of FeedCheckpoints (68 characters, whatever the partitions). */
  sealCheckpoint(proc: Buffer, ms: number, seq: number, k: number): string {
    const plain = Buffer.allocUnsafe(CHECKPOINT_BYTES);
    proc.copy(plain, 0, 0, PROC_BYTES);
    plain.writeUIntBE(ms, PROC_BYTES, 6);
    plain.writeUInt32BE(seq, PROC_BYTES + 6);
    plain.writeUInt32BE(k, PROC_BYTES + 10);
    return this.sealBytes(plain, HEADER_CHECKPOINT);
  }

  /** The positions of a cursor this platform wrote with every position in it; 400 for anything else (a checkpoint cursor too: `open`). */
  decode(cursor: string): StreamPosition[] {
    const opened = this.open(cursor);
    if (!Array.isArray(opened)) throw malformedCursor();
    return opened;
  }

  /**
   * What a cursor this platform wrote names: its positions, or for a checkpoint cursor the record
   * they are read from (FeedCheckpoints.positions); 400 for anything else.
   */
  open(cursor: string): StreamPosition[] | CheckpointRef {
    if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw malformedCursor();
    const buf = Buffer.from(cursor, 'base64url');
    const header = buf[0] === SEALED ? HEADER : buf[0] === SEALED_V3 ? HEADER_V3 : buf[0] === CHECKPOINT ? HEADER_CHECKPOINT : null;
    // base64url ignores bits past the last whole byte: one cursor, one spelling.
    if (!header || buf.length < 1 + NONCE_BYTES + TAG_BYTES + 2 || buf.toString('base64url') !== cursor) throw malformedCursor();
    const decipher = createDecipheriv('aes-256-gcm', this.key, buf.subarray(1, 1 + NONCE_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(header);
    decipher.setAuthTag(buf.subarray(buf.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(buf.subarray(1 + NONCE_BYTES, buf.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw malformedCursor();
    }
    if (header === HEADER_CHECKPOINT) {
      if (plain.length !== CHECKPOINT_BYTES) throw malformedCursor();
      return {
        proc: plain.subarray(0, PROC_BYTES),
        ms: plain.readUIntBE(PROC_BYTES, 6),
        seq: plain.readUInt32BE(PROC_BYTES + 6),
        k: plain.readUInt32BE(PROC_BYTES + 10),
      };
    }
    return header === HEADER ? decodePositions(plain, this.partitions) : decodePositionsV3(plain, this.partitions);
  }

  /**
   * The cursors of many events, made as a page goes (CursorBatch). The first starts the sealing
   * thread (warmSealingThread): a process that never serves the feed has none (a thread costs
   * about 30 MB of memory).
   */
  batch(): CursorBatch {
    if (!this.warmed) {
      this.warmed = true;
      warmSealingThread(this);
    }
    return new CursorBatch(this);
  }
}

const ROLE = 'cursor-seal';

/**
 * A chunk of a page's cursors to seal on the sealing thread: the positions where the chunk starts
 * (ms, seq, sub a partition) and what follows (`moves`, see CursorBatch).
 */
interface SealJob {
  key: Uint8Array;
  base: Float64Array;
  moves: Float64Array;
}

/** The sealing thread's side: the cursors of a chunk, joined by spaces (base64url has none). */
let threadSeal: CursorSeal | null = null;
serveJobs<SealJob, string>(ROLE, (job) => {
  if (!threadSeal?.key.equals(job.key)) threadSeal = new CursorSeal(Buffer.from(job.key), 0);
  return { done: replay(threadSeal, job.base, job.moves, job.moves.length).join(' ') };
});

/** What a move record of CursorBatch holds: a partition (or CURSOR) and its position's ms, seq and sub. */
const MOVE = 4;
/** The partition of a move record that stands for "a cursor of the positions as they are now". */
const CURSOR = -1;

/** The cursors of a chunk: from `base`, each move applied in turn, a cursor sealed at each CURSOR. */
function replay(seal: CursorSeal, base: Float64Array, moves: Float64Array, n: number): string[] {
  const positions: StreamPosition[] = new Array(base.length / 3);
  for (let i = 0; i < positions.length; i++) positions[i] = { ms: base[3 * i], seq: base[3 * i + 1], sub: base[3 * i + 2] };
  const out: string[] = [];
  for (let k = 0; k < n; k += MOVE) {
    const p = moves[k];
    if (p === CURSOR) out.push(seal.encode(positions));
    else positions[p] = { ms: moves[k + 1], seq: moves[k + 2], sub: moves[k + 3] };
  }
  return out;
}

/** The sealing thread of this process, which seals the cursors of pages. */
const sealer = new ModuleWorker<SealJob, string>(import.meta.url, ROLE, 'cursor sealing');

/**
 * Events a page hands over in one go go to the sealing thread in chunks of this many, sealed on the
 * other core while the page goes on; what is left at the end of the page is sealed on the event loop.
 */
const CHUNK = 64;

/**
 * The cursors of one page's events, in the order they are added. A seal (one AES-GCM cipher a
 * cursor, about 4 µs) was a quarter of what a page of 1,000 events cost the event loop; here every
 * full chunk is sealed on the sealing thread while the page reads and filters the next events, and
 * only the last part of the page (and a page smaller than a chunk) is sealed on the event loop. A
 * chunk the thread fails to seal (it stopped) is sealed here instead: a page never goes without.
 *
 * The event loop does not encode the positions either (with 64 partitions, a sixth of a warm
 * catch-up's event loop went to encoding them and copying them into the chunk): it notes which
 * partitions moved since the cursor before, found by identity (a page replaces a partition's
 * position, it never changes one in place), and the thread rebuilds and encodes the positions of
 * each cursor from the chunk's first positions and those moves.
 */
export class CursorBatch {
  private readonly chunks: Promise<string[]>[] = [];
  /** The positions of the last cursor added (the objects themselves); null before the first. */
  private state: StreamPosition[] | null = null;
  /** The positions where the current chunk starts (ms, seq, sub a partition). */
  private base: Float64Array | null = null;
  /** The current chunk's records of MOVE numbers: a partition's new position, or CURSOR. */
  private moves = new Float64Array(0);
  private used = 0;
  private cursors = 0;

  constructor(private readonly seal: CursorSeal) {}

  /** The cursor of these positions comes next. */
  add(positions: readonly StreamPosition[]): void {
    if (!this.state || this.state.length !== positions.length) {
      this.state = positions.slice();
      this.base = numbersOf(positions);
    } else {
      const state = this.state;
      for (let i = 0; i < positions.length; i++) {
        const p = positions[i];
        if (p !== state[i]) {
          state[i] = p;
          this.record(i, p.ms, p.seq, p.sub);
        }
      }
    }
    this.record(CURSOR, 0, 0, 0);
    if (++this.cursors === CHUNK) this.handOver();
  }

  /** Every cursor added, in order. */
  async sealed(): Promise<string[]> {
    const last = this.base ? replay(this.seal, this.base, this.moves, this.used) : [];
    if (!this.chunks.length) return last;
    const chunks = await Promise.all(this.chunks);
    chunks.push(last);
    return chunks.flat();
  }

  private record(p: number, ms: number, seq: number, sub: number): void {
    if (this.used + MOVE > this.moves.length) {
      const grown = new Float64Array(Math.max(256 * MOVE, this.moves.length * 2));
      grown.set(this.moves.subarray(0, this.used));
      this.moves = grown;
    }
    const m = this.moves;
    m[this.used] = p;
    m[this.used + 1] = ms;
    m[this.used + 2] = seq;
    m[this.used + 3] = sub;
    this.used += MOVE;
  }

  private handOver(): void {
    const base = this.base!;
    const moves = this.moves.slice(0, this.used);
    // Sent as copies (not handed over): these stay for the case the thread fails.
    this.chunks.push(
      sealer.run({ key: this.seal.key, base, moves }).then(
        (joined) => joined.split(' '),
        () => replay(this.seal, base, moves, moves.length),
      ),
    );
    this.base = numbersOf(this.state!);
    this.used = 0;
    this.cursors = 0;
  }
}

/** Positions as numbers: ms, seq and sub a partition (also how FeedCheckpoints keeps them). */
export function numbersOf(positions: readonly StreamPosition[]): Float64Array {
  const out = new Float64Array(positions.length * 3);
  for (let i = 0; i < positions.length; i++) {
    out[3 * i] = positions[i].ms;
    out[3 * i + 1] = positions[i].seq;
    out[3 * i + 2] = positions[i].sub;
  }
  return out;
}

/**
 * Starts the sealing thread and has it seal a few hundred cursors, so that the pages after the
 * first do not wait for the thread to load and its code to be compiled (about 40 ms, most of a
 * page of 1,000 events). Called by a feed's first page.
 */
function warmSealingThread(seal: CursorSeal): void {
  const base = numbersOf(Array.from({ length: seal.partitions }, () => ({ ms: 0, seq: 0, sub: 0 })));
  const moves = new Float64Array(256 * MOVE);
  for (let i = 0; i < moves.length; i += MOVE) moves[i] = CURSOR;
  sealer.run({ key: seal.key, base, moves }, [base.buffer as ArrayBuffer, moves.buffer as ArrayBuffer]).catch(() => undefined);
}

/** Stops the sealing thread (tests; a later page starts it again). */
export const stopSealingThread = (): Promise<void> => sealer.close();
