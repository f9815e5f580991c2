import { randomFillSync } from 'node:crypto';

/**
 * Random bytes from a pooled buffer: one randomFillSync per 4 KiB instead of one system call
 * per id (a synchronous randomBytes per request was ~10% of a versioned read's CPU, and ulid's
 * default source asks for randomness once per character).
 */
const pool = Buffer.alloc(4096);
let offset = pool.length;
function take(n: number): number {
  if (offset + n > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const at = offset;
  offset += n;
  return at;
}

/** A random URL-safe id of `bytes` random bytes (base64url). */
export function randomId(bytes: number): string {
  const at = take(bytes);
  return pool.toString('base64url', at, at + bytes);
}

/** `n` random bytes (a copy), from the pool. */
export function pooledRandomBytes(n: number): Buffer {
  const at = take(n);
  return Buffer.from(pool.subarray(at, at + n));
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CODES = Array.from(CROCKFORD, (c) => c.charCodeAt(0));
/** The 26 character codes of the ULID being made (one at a time: nothing awaits in between). */
const ulidCodes: number[] = new Array(26).fill(0);

/**
 * A ULID (26 Crockford base32 characters: 48 bits of time in ms, 80 random bits) whose random
 * part is drawn anew for every key, from the pooled cryptographic bytes. Not ulid's
 * `monotonicFactory`: within a millisecond it made each key the previous one plus 1, so a
 * caller's own keys named the keys minted just before and after them, those of content it may
 * not read included, and told how many keys others minted in between (SECURITY.md: content and
 * version keys). Keys of one millisecond are therefore in no particular order; nothing sorts them
 * within a millisecond.
 */
function randomUlid(now = Date.now()): string {
  return ulidOf(now, pool, take(10));
}

/**
 * The ULID of time `now` (ms, the low 50 bits: 10 characters) whose random part is the 10 bytes
 * of `rand` at `at`, 5 bits a character, most significant first. Made as one string of
 * character codes: prepending character by character made 46 strings a key, and a bulk create
 * makes two keys (src/adapters/ids.test.ts checks it against that way).
 */
export function ulidOf(now: number, rand: Uint8Array, at: number): string {
  const c = ulidCodes;
  // The time's 50 bits as two halves of 25 (each within a 32-bit integer).
  const hi = Math.floor(now / 0x2000000) % 0x2000000;
  const lo = now % 0x2000000;
  for (let i = 0; i < 5; i++) {
    c[4 - i] = CODES[(hi >>> (5 * i)) & 31];
    c[9 - i] = CODES[(lo >>> (5 * i)) & 31];
  }
  // Each 5 random bytes (40 bits) as 8 characters.
  for (let half = 0; half < 2; half++) {
    const o = at + half * 5;
    const b0 = rand[o];
    const b1 = rand[o + 1];
    const b2 = rand[o + 2];
    const b3 = rand[o + 3];
    const b4 = rand[o + 4];
    const k = 10 + half * 8;
    c[k] = CODES[b0 >> 3];
    c[k + 1] = CODES[((b0 & 7) << 2) | (b1 >> 6)];
    c[k + 2] = CODES[(b1 >> 1) & 31];
    c[k + 3] = CODES[((b1 & 1) << 4) | (b2 >> 4)];
    c[k + 4] = CODES[((b2 & 15) << 1) | (b3 >> 7)];
    c[k + 5] = CODES[(b3 >> 2) & 31];
    c[k + 6] = CODES[((b3 & 3) << 3) | (b4 >> 5)];
    c[k + 7] = CODES[b4 & 31];
  }
  return String.fromCharCode.apply(null, c);
}

/** A new content key: a ULID, URL-safe, without `:` or `/` (CONTRACT §5). */
export const newContentKey = (): string => randomUlid();
/** A new version key: a ULID, in creation order across milliseconds. */
export const newVersionKey = (): string => randomUlid();
/** A command id, recorded by the commit so that a replay is idempotent. */
export const newCommandId = (): string => randomId(12);
/**
 * Request ids, cut 12 characters at a time (9 random bytes, as `randomId(9)`) from one base64url
 * encoding of 3 KiB of random bytes: encoding 9 bytes for each request was 2-3% of a versioned
 * read's CPU. Random, not a counter: a counter would tell a caller how many requests others sent
 * between two of its own.
 */
const REQUEST_ID_CHARS = 12;
let requestIdChars = '';
let requestIdAt = 0;
/** A request id for logs and the X-Request-Id header. */
export function newRequestId(): string {
  if (requestIdAt + REQUEST_ID_CHARS > requestIdChars.length) {
    requestIdChars = randomFillSync(Buffer.allocUnsafe(3072)).toString('base64url');
    requestIdAt = 0;
  }
  const id = requestIdChars.slice(requestIdAt, requestIdAt + REQUEST_ID_CHARS);
  requestIdAt += REQUEST_ID_CHARS;
  return id;
}

/** FNV-1a (32 bit) of a content key, mod the partition count: the content's actor partition. */
export function partitionOf(contentKey: string, partitions: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < contentKey.length; i++) {
    h ^= contentKey.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}
