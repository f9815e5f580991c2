import { AppError } from '../errors.js';
import { MAX_BODY_DEPTH } from './schemas.js';

/**
 * What a JSON body may hold (CONTRACT §20 "Limits"), checked at the gateway on every JSON body,
 * before anything is queued, so that such a write never fails later with 500 and a dead letter:
 * - at most MAX_KEYS_PER_OBJECT keys in any one object. msgpackr (src/adapters/codec.ts) used to
 *   write every object as a map16 and throw past 65,535 keys, after the write was queued; the
 *   codec now takes any size (variableMapSize), and this bound keeps what one request can make
 *   the platform store, render and index within what it was built and measured for;
 * - no key `__proto__`: msgpackr reads it back as `__proto_`;
 * - no lone UTF-16 surrogate in a string or key: UTF-8 cannot hold it, it comes back as U+FFFD;
 * - no number beyond a double (`1e309` parses to Infinity): JSON cannot hold it, it comes back as null;
 * - nesting up to MAX_BODY_DEPTH (64) levels (schemas.ts; msgpackr itself overflows the stack at a
 *   few thousand).
 * Arrays and strings have 32-bit sizes in MessagePack: MAX_BODY_BYTES bounds them long before.
 */
export const MAX_KEYS_PER_OBJECT = 65_000;

/** Where a value sits in the body, kept as a chain and spelled out only for an error. */
interface Where {
  up: Where | null;
  key: string;
}

const spell = (w: Where | null): string => {
  const parts: string[] = [];
  for (let at = w; at; at = at.up) parts.push(at.key);
  const path = parts.reverse().join('.');
  return path.length > 200 ? `${path.slice(0, 200)}...` : path || '(the body)';
};

/** A number JSON.parse made Infinity (`1e309`): stored, it would read back as null. */
const notFinite = (where: Where | null) =>
  new AppError('BAD_REQUEST', `A number at ${spell(where)} is beyond what can be stored (at most about 1.8e308)`, { path: spell(where) });

const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Throws 413 or 400 (naming where) when `body` holds what the platform cannot store as sent. */
export function checkStorable(body: unknown, maxDepth = MAX_BODY_DEPTH): void {
  const stack: [unknown, Where | null, number][] = [[body, null, 1]];
  while (stack.length) {
    const [value, where, depth] = stack.pop()!;
    if (typeof value === 'string') {
      if (!wellFormed(value)) throw new AppError('BAD_REQUEST', `A string at ${spell(where)} holds a lone UTF-16 surrogate`, { path: spell(where) });
      continue;
    }
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw notFinite(where);
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth > maxDepth) throw new AppError('BAD_REQUEST', `Body nested deeper than ${maxDepth} levels`, { path: spell(where) });
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) {
        const item: unknown = value[i];
        if (typeof item === 'string' || (item !== null && typeof item === 'object')) stack.push([item, { up: where, key: String(i) }, depth + 1]);
        else if (typeof item === 'number' && !Number.isFinite(item)) throw notFinite({ up: where, key: String(i) });
      }
      continue;
    }
    const keys = Object.keys(value);
    if (keys.length > MAX_KEYS_PER_OBJECT) {
      throw new AppError('PAYLOAD_TOO_LARGE', `An object at ${spell(where)} has ${keys.length} keys; at most ${MAX_KEYS_PER_OBJECT} can be stored`, {
        path: spell(where),
        keys: keys.length,
        max: MAX_KEYS_PER_OBJECT,
      });
    }
    for (const key of keys) {
      const here = { up: where, key };
      if (key === '__proto__') throw new AppError('BAD_REQUEST', `A key __proto__ at ${spell(where)} cannot be stored`, { path: spell(here) });
      if (!wellFormed(key)) throw new AppError('BAD_REQUEST', `A key at ${spell(where)} holds a lone UTF-16 surrogate`, { path: spell(where) });
      const item = (value as Record<string, unknown>)[key];
      if (typeof item === 'string' || (item !== null && typeof item === 'object')) stack.push([item, here, depth + 1]);
      else if (typeof item === 'number' && !Number.isFinite(item)) throw notFinite(here);
    }
  }
}
