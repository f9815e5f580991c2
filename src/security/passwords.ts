import { Turns } from '../adapters/turns.js';
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { AppError } from '../errors.js';

/**
 * Password hashes in the form `scrypt$N$r$p$saltB64$hashB64` (node:crypto scrypt).
 * Hashing runs on the libuv thread pool (async scrypt), never on the event loop, and at most
 * SCRYPT_CONCURRENCY hashes at once (`scrypt`), so that the pool always has threads for fs and dns.
 */

/** Cost parameters of new hashes: 16 MiB and about 40 ms per hash on this kind of machine. */
export const SCRYPT_DEFAULTS = { N: 16384, r: 8, p: 1, keyLength: 32, saltLength: 16 } as const;

/** Upper bounds on the parameters read from a stored hash, so a bad hash cannot exhaust memory. */
const MAX_N = 1 << 20;
const MAX_R = 32;
const MAX_P = 16;

/**
 * A well-formed hash with the default parameters that matches no password (its digest is all
 * zero bytes). Verifying against it costs the same as verifying a real password, which keeps an
 * unknown username indistinguishable from a wrong password by timing.
 */
export const DUMMY_HASH = `scrypt$${SCRYPT_DEFAULTS.N}$${SCRYPT_DEFAULTS.r}$${SCRYPT_DEFAULTS.p}$${Buffer.alloc(SCRYPT_DEFAULTS.saltLength, 0x5a).toString('base64')}$${Buffer.alloc(SCRYPT_DEFAULTS.keyLength).toString('base64')}`;

const HASH_SHAPE = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

interface ParsedHash {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

/**
 * At most this many scrypt hashes run at once in a process; the others wait their turn, in order.
 * Each holds one of libuv's thread-pool threads (4: UV_THREADPOOL_SIZE is not set) for ~40 ms, and
 * the same pool runs every fs call (the disk file store: every file read and upload) and
 * dns.lookup. Before, logins were not bounded (only failed ones count against the login limit): 10
 * loops of login-then-logout with a reader's own password (73 logins/s) kept all 4 threads busy,
 * and a 2-MB file GET went from 6 ms to 1.2 s (p50) for every user.
 */
export const SCRYPT_CONCURRENCY = 2;

/**
 * Hashes waiting for a turn past which one more is refused (503 with Retry-After) rather than
 * queued: at ~40 ms a hash and SCRYPT_CONCURRENCY at once, the last of them waits about 2 s.
 */
export const SCRYPT_QUEUE_MAX = 100;

/** The hashes' turns: SCRYPT_CONCURRENCY at once, SCRYPT_QUEUE_MAX waiting, first in, first out. */
const turns = new Turns(SCRYPT_CONCURRENCY, SCRYPT_QUEUE_MAX);

/** The scrypt hash, once one of SCRYPT_CONCURRENCY turns is free; 503 while SCRYPT_QUEUE_MAX wait. */
function scrypt(password: string, salt: Buffer, keyLength: number, opts: ScryptOptions): Promise<Buffer> {
  return turns.run(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        scryptCb(password.normalize('NFC'), salt, keyLength, opts, (err, key) => (err ? reject(err) : resolve(key)));
      }),
    () => new AppError('UNAVAILABLE', 'Too many password checks under way: retry shortly', {}, 1),
  );
}

/** Hashes running and waiting, for tests. */
export const scryptLoad = (): { running: number; waiting: number } => turns.load;

/** Parses a stored hash; null when it is not one this module can verify. */
export function parseHash(stored: string): ParsedHash | null {
  const m = HASH_SHAPE.exec(stored);
  if (!m) return null;
  const N = Number(m[1]);
  const r = Number(m[2]);
  const p = Number(m[3]);
  const salt = Buffer.from(m[4], 'base64');
  const hash = Buffer.from(m[5], 'base64');
  // N must be a power of two above 1 (scrypt's own rule).
  if (N < 2 || N > MAX_N || (N & (N - 1)) !== 0) return null;
  if (r < 1 || r > MAX_R || p < 1 || p > MAX_P) return null;
  if (salt.length < 8 || hash.length < 16 || hash.length > 128) return null;
  return { N, r, p, salt, hash };
}

/** True when `stored` has the form this module writes (for config validation). */
export const isPasswordHash = (stored: string): boolean => parseHash(stored) !== null;

const optionsOf = (h: { N: number; r: number; p: number }): ScryptOptions => ({
  N: h.N,
  r: h.r,
  p: h.p,
  // scrypt needs about 128 * N * r bytes; node's default cap is 32 MiB.
  maxmem: 256 * h.N * h.r + 1024 * 1024,
});

/** Hashes a password with a fresh random salt. */
export async function hashPassword(password: string): Promise<string> {
  const { N, r, p, keyLength, saltLength } = SCRYPT_DEFAULTS;
  const salt = randomBytes(saltLength);
  const hash = await scrypt(password, salt, keyLength, optionsOf({ N, r, p }));
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

/**
 * Checks a password against a stored hash in constant time. Pass `undefined` for an unknown
 * user: the password is then checked against DUMMY_HASH, so the answer takes as long as for a
 * wrong password. A malformed stored hash is treated the same way and never matches.
 */
export async function verifyPassword(password: string, stored: string | undefined): Promise<boolean> {
  const parsed = stored === undefined ? null : parseHash(stored);
  const target = parsed ?? (parseHash(DUMMY_HASH) as ParsedHash);
  const actual = await scrypt(password, target.salt, target.hash.length, optionsOf(target));
  const equal = timingSafeEqual(actual, target.hash);
  return equal && parsed !== null;
}
