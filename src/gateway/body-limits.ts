import { AppError } from '../errors.js';
import { MAX_BODY_DEPTH } from './schemas.js';

/**
 * What a JSON body may hold (CONTRACT §20 "Limits"), checked at the gateway on every JSON body,
 * before anything is queued, so that such a write never fails later with 500 and a dead letter:
 * - at most MAX_KEYS_PER_OBJECT keys in any one object. msgpackr (src/adapters/codec.ts) used to
 *   write every object as a map16 and throw past 65,535 keys, after the write was queued; the
 *   codec now takes any size (variableMapSize), and this bound keeps what one request can make
 *   the platform store, render and index within what it was built and measured for;
 * - at most MAX_CONTAINERS_PER_BODY objects and arrays and MAX_KEYS_PER_BODY keys in the whole
 *   body (below);
 * - no key `__proto__`: msgpackr reads it back as `__proto_`;
 * - no lone UTF-16 surrogate in a string or key: UTF-8 cannot hold it, it comes back as U+FFFD;
 * - no number beyond a double (`1e309` parses to Infinity): JSON cannot hold it, it comes back as null;
 * - nesting up to MAX_BODY_DEPTH (64) levels (schemas.ts; msgpackr itself overflows the stack at a
 *   few thousand).
 * Arrays and strings have 32-bit sizes in MessagePack: MAX_BODY_BYTES bounds them long before.
 */
export const MAX_KEYS_PER_OBJECT = 65_000;

/**
 * Objects and arrays in one body, at any depth, the body itself included. Each one costs the
 * gateway's single thread far more than a scalar of its bytes (JSON.parse, this check, the codec
 * both ways, the answer): 2,000,000 empty arrays (6 MB) took 6-7.6 s of it before their 201, while
 * every other request of that web process waited. 100,000 holds a long article as a rich-text
 * tree (5,000 paragraphs, each an object with a list of marks, are about 20,000), 65,000 aspects
 * or keys that each hold an object; 100,000 empty objects or arrays cost 0.05-0.2 s of the
 * gateway's thread (SECURITY.md "Bodies and limits").
 */
export const MAX_CONTAINERS_PER_BODY = 100_000;

/**
 * Keys in one body, at any depth. Unique keys cost the gateway's thread more than any other
 * part of a body of their bytes (JSON.parse, the codec both ways, the answer's JSON): 750,000
 * unique keys in 15 objects (9.8 MB, 20 containers) took 3.8-4.5 s of it. 200,000 holds the
 * largest object that can be stored (MAX_KEYS_PER_OBJECT) three times over, and a long article
 * as a rich-text tree (10,000 paragraphs of four keys are 40,000).
 */
export const MAX_KEYS_PER_BODY = 200_000;

/** The 413 of a body with more than `max` objects and arrays; `found` is how many it holds. */
export const tooManyContainers = (found: number, max: number): AppError =>
  new AppError('PAYLOAD_TOO_LARGE', `The body holds ${found} objects and arrays; at most ${max} can be stored in one body`, { containers: found, max });

/**
 * The objects and arrays (every `{` and `[`) and the keys (every `:`) of a JSON text outside its
 * strings, counted on its bytes without parsing it. Exact for valid JSON (a UTF-8 continuation
 * byte is never one of `"`, `\`, `{`, `[`, `:`); for any other text only a count of brackets and
 * colons, and JSON.parse refuses that text anyway.
 */
export function countsIn(buf: Uint8Array): { containers: number; keys: number } {
  let containers = 0;
  let keys = 0;
  let inString = false;
  for (let i = 0, len = buf.length; i < len; i++) {
    const c = buf[i];
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) containers++;
    else if (c === 0x3a) keys++;
  }
  return { containers, keys };
}

/**
 * 413 when the JSON text `buf` holds more than `maxContainers` objects and arrays or more than
 * `maxKeys` keys, before JSON.parse spends the gateway's thread on them: the count of the bytes
 * takes 2-4 ms a MB, JSON.parse of as many containers or unique keys far longer (6 MB of empty
 * arrays: 0.2-1.2 s). A text shorter than 2 bytes a container (`[]`) and 4 bytes a key (`"":0`)
 * cannot hold too many, and is not counted.
 */
export function checkCountsIn(buf: Uint8Array, maxContainers = MAX_CONTAINERS_PER_BODY, maxKeys = MAX_KEYS_PER_BODY): void {
  if (buf.length <= 2 * maxContainers && buf.length <= 4 * maxKeys) return;
  const found = countsIn(buf);
  if (found.containers > maxContainers) throw tooManyContainers(found.containers, maxContainers);
  if (found.keys > maxKeys) {
    throw new AppError('PAYLOAD_TOO_LARGE', `The body holds ${found.keys} keys; at most ${maxKeys} can be stored in one body`, {
      keys: found.keys,
      max: maxKeys,
    });
  }
}

/** The objects and arrays of a value (the value itself included), for the figure of a 413. */
function containersOf(body: unknown): number {
  let n = 0;
  const stack: unknown[] = [body];
  while (stack.length) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    n++;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) if (v[i] !== null && typeof v[i] === 'object') stack.push(v[i]);
    } else for (const k of Object.keys(v)) stack.push((v as Record<string, unknown>)[k]);
  }
  return n;
}

/**
 * One check of a body: the keys (or indices) from the body down to the value at hand, kept in
 * one array and spelled out only for an error; the containers seen so far. The walk recurses (at
 * most `maxDepth` + 1 frames: deeper is refused) and allocates nothing per value but each
 * object's list of keys (a tuple and a path object for each string and container took 1.9 s for
 * 2,000,000 empty arrays, 4-4.6 s for 3,300,000 strings).
 */
interface Walk {
  path: (string | number)[];
  containers: number;
  /** Keys and scalars seen (what the value weighs parsed: `parsedWeight`). */
  members: number;
  maxDepth: number;
  maxContainers: number;
  body: unknown;
}

/** The first `n` steps of the walk's path, dotted; `(the body)` for none. */
const spell = (w: Walk, n: number): string => {
  const path = w.path.slice(0, n).join('.');
  return path.length > 200 ? `${path.slice(0, 200)}...` : path || '(the body)';
};

/** A number JSON.parse made Infinity (`1e309`): stored, it would read back as null. */
const notFinite = (at: string) => new AppError('BAD_REQUEST', `A number at ${at} is beyond what can be stored (at most about 1.8e308)`, { path: at });
const loneSurrogate = (what: 'string' | 'key', at: string) => new AppError('BAD_REQUEST', `A ${what} at ${at} holds a lone UTF-16 surrogate`, { path: at });

const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/**
 * A scalar that needs no more checking (a finite number, a well-formed string, a boolean, null),
 * decided without a call of `visit`: most of a large body is scalars. Anything else is visited,
 * which refuses a bad scalar naming where it is.
 */
const storableScalar = (item: unknown): boolean =>
  typeof item === 'number' ? Number.isFinite(item) : typeof item === 'string' ? wellFormed(item) : item === null || typeof item !== 'object';

/** Checks `value`, `steps` keys below the body (its path is `w.path[0..steps)`). */
function visit(w: Walk, value: unknown, steps: number): void {
  if (typeof value === 'string') {
    if (!wellFormed(value)) throw loneSurrogate('string', spell(w, steps));
    return;
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw notFinite(spell(w, steps));
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (steps >= w.maxDepth) throw new AppError('BAD_REQUEST', `Body nested deeper than ${w.maxDepth} levels`, { path: spell(w, steps) });
  if (++w.containers > w.maxContainers) throw tooManyContainers(containersOf(w.body), w.maxContainers);
  if (Array.isArray(value)) {
    w.members += value.length;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (storableScalar(item)) continue;
      w.path[steps] = i;
      visit(w, item, steps + 1);
    }
    return;
  }
  const keys = Object.keys(value);
  if (keys.length > MAX_KEYS_PER_OBJECT) {
    const at = spell(w, steps);
    throw new AppError('PAYLOAD_TOO_LARGE', `An object at ${at} has ${keys.length} keys; at most ${MAX_KEYS_PER_OBJECT} can be stored`, {
      path: at,
      keys: keys.length,
      max: MAX_KEYS_PER_OBJECT,
    });
  }
  w.members += 2 * keys.length;
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k];
    if (key === '__proto__') {
      w.path[steps] = key;
      throw new AppError('BAD_REQUEST', `A key __proto__ at ${spell(w, steps)} cannot be stored`, { path: spell(w, steps + 1) });
    }
    if (!wellFormed(key)) throw loneSurrogate('key', spell(w, steps));
    const item: unknown = (value as Record<string, unknown>)[key];
    if (storableScalar(item)) continue;
    w.path[steps] = key;
    visit(w, item, steps + 1);
  }
}

/**
 * Throws 413 or 400 (naming where) when `body` holds what the platform cannot store as sent. A
 * bulk line passes one more level and one more container (`{op, content}` wraps its request's body).
 */
export function checkStorable(body: unknown, maxDepth = MAX_BODY_DEPTH, maxContainers = MAX_CONTAINERS_PER_BODY): { containers: number; members: number } {
  const w: Walk = { path: [], containers: 0, members: 0, maxDepth, maxContainers, body };
  visit(w, body, 0);
  return { containers: w.containers, members: w.members };
}

/**
 * About what a JSON text of `bytes` holds while the platform handles it (parsed, checked, copied
 * by the schema and packed for the actor), from the counts of `checkStorable`: its bytes and 64
 * an object or array, a key, or an array's item (a key and its value count two). Measured on a
 * bulk import whose lines no actor answered: a line of 99,000 empty objects (297 KB) held about
 * 11 MB, one of an object and 500,000 numbers (1.9 MB) about 44 MB.
 */
export const parsedWeight = (bytes: number, counts: { containers: number; members: number }): number => bytes + 64 * (counts.containers + counts.members);
