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
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER = Buffer.from([SEALED]);
const HEADER_V3 = Buffer.from([SEALED_V3]);

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
  sealBytes(plain: Uint8Array): string {
    const nonce = this.random(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(HEADER);
    const body = cipher.update(plain);
    cipher.final();
    return Buffer.concat([HEADER, nonce, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** The positions of a cursor this platform wrote; 400 for anything else. */
  decode(cursor: string): StreamPosition[] {
    if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw malformedCursor();
    const buf = Buffer.from(cursor, 'base64url');
    // base64url ignores bits past the last whole byte: one cursor, one spelling.
    if ((buf[0] !== SEALED && buf[0] !== SEALED_V3) || buf.length < 1 + NONCE_BYTES + TAG_BYTES + 2 || buf.toString('base64url') !== cursor)
      throw malformedCursor();
    const decipher = createDecipheriv('aes-256-gcm', this.key, buf.subarray(1, 1 + NONCE_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(buf[0] === SEALED ? HEADER : HEADER_V3);
    decipher.setAuthTag(buf.subarray(buf.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(buf.subarray(1 + NONCE_BYTES, buf.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw malformedCursor();
    }
    return buf[0] === SEALED ? decodePositions(plain, this.partitions) : decodePositionsV3(plain, this.partitions);
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

/** Positions to seal on the sealing thread: their encoded bytes one after another, and where each ends. */
interface SealJob {
  key: Uint8Array;
  plain: ArrayBuffer;
  ends: Uint32Array;
}

/** The sealing thread's side: the cursors of a chunk, joined by spaces (base64url has none). */
let threadSeal: CursorSeal | null = null;
serveJobs<SealJob, string>(ROLE, (job) => {
  if (!threadSeal?.key.equals(job.key)) threadSeal = new CursorSeal(Buffer.from(job.key), 0);
  return { done: sealAll(threadSeal, new Uint8Array(job.plain), job.ends).join(' ') };
});

function sealAll(seal: CursorSeal, plain: Uint8Array, ends: ArrayLike<number>): string[] {
  const out = new Array<string>(ends.length);
  for (let i = 0, at = 0; i < ends.length; at = ends[i++]) out[i] = seal.sealBytes(plain.subarray(at, ends[i]));
  return out;
}

/** The thread of this process that seals cursors for pages. */
const sealer = new ModuleWorker<SealJob, string>(import.meta.url, ROLE, 'cursor sealing');

/**
 * Events a page hands over in one go go to the sealing thread in chunks of this many, sealed on the
 * other core while the page goes on; what is left at the end of the page is sealed on the event loop.
 */
const CHUNK = 64;
const NOTHING = Buffer.alloc(0);

/**
 * The cursors of one page's events, in the order they are added. A seal (one AES-GCM cipher a
 * cursor, about 4 µs) was a quarter of what a page of 1,000 events cost the event loop; here every
 * full chunk is sealed on the sealing thread while the page reads and filters the next events, and
 * only the last part of the page (and a page smaller than a chunk) is sealed on the event loop. A
 * chunk the thread fails to seal (it stopped) is sealed here instead: a page never goes without.
 */
export class CursorBatch {
  private readonly chunks: Promise<string[]>[] = [];
  /** The positions not yet handed over; allocated by the first add (most long polls add none). */
  private plain = NOTHING;
  private at = 0;
  private ends: number[] = [];

  constructor(private readonly seal: CursorSeal) {}

  /** The cursor of these positions comes next. */
  add(positions: readonly StreamPosition[]): void {
    const bytes = encodePositions(positions);
    if (this.plain.length - this.at < bytes.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.plain.length * 2, this.at + bytes.length, CHUNK * bytes.length));
      this.plain.copy(grown, 0, 0, this.at);
      this.plain = grown;
    }
    this.at += bytes.copy(this.plain, this.at);
    this.ends.push(this.at);
    if (this.ends.length === CHUNK) this.handOver();
  }

  /** Every cursor added, in order. */
  async sealed(): Promise<string[]> {
    const last = sealAll(this.seal, this.plain.subarray(0, this.at), this.ends);
    if (!this.chunks.length) return last;
    const chunks = await Promise.all(this.chunks);
    chunks.push(last);
    return chunks.flat();
  }

  private handOver(): void {
    const plain = this.plain.subarray(0, this.at);
    const ends = Uint32Array.from(this.ends);
    // The thread gets a copy; this one stays for the case it fails.
    const copy = new Uint8Array(plain);
    this.chunks.push(
      sealer.run({ key: this.seal.key, plain: copy.buffer, ends }, [copy.buffer]).then(
        (joined) => joined.split(' '),
        () => sealAll(this.seal, plain, ends),
      ),
    );
    this.plain = NOTHING;
    this.at = 0;
    this.ends = [];
  }
}

/**
 * Starts the sealing thread and has it seal a few hundred cursors, so that the pages after the
 * first do not wait for the thread to load and its code to be compiled (about 40 ms, most of a
 * page of 1,000 events). Called by a feed's first page.
 */
function warmSealingThread(seal: CursorSeal): void {
  const plain = encodePositions(Array.from({ length: seal.partitions }, () => ({ ms: 0, seq: 0, sub: 0 })));
  const n = 256;
  const all = new Uint8Array(plain.length * n);
  for (let i = 0; i < n; i++) all.set(plain, i * plain.length);
  const ends = Uint32Array.from({ length: n }, (_, i) => (i + 1) * plain.length);
  sealer.run({ key: seal.key, plain: all.buffer, ends }, [all.buffer]).catch(() => undefined);
}

/** Stops the sealing thread (tests; a later page starts it again). */
export const stopSealingThread = (): Promise<void> => sealer.close();
