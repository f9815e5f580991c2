import type { Aspect, Aspects, Json } from './model.js';

/** The spec's three update modes (query `updateMode`). */
export type UpdateMode = 'update' | 'replace' | 'merge';
export const UPDATE_MODES: readonly UpdateMode[] = ['update', 'replace', 'merge'];

/**
 * The aspects of the new version, from those of the current version and those sent.
 * - `update` (default): aspects present are replaced, absent aspects are kept; an aspect sent
 *   as null is removed.
 * - `replace`: the new version is exactly the update; absent aspects are removed.
 * - `merge`: aspects present are patched: lists keep old elements with new ones appended,
 *   primitive values are overwritten, objects are merged recursively.
 */
export function applyUpdateMode(mode: UpdateMode, current: Aspects, sent: Record<string, Aspect | null>): Aspects {
  const out: Aspects = mode === 'replace' ? {} : { ...current };
  for (const [name, aspect] of Object.entries(sent)) {
    if (aspect === null) {
      delete out[name];
    } else if (mode === 'merge' && out[name] !== undefined) {
      out[name] = mergeValue(out[name] as Json, aspect as Json) as Aspect;
    } else {
      out[name] = aspect;
    }
  }
  return out;
}

function isObject(v: unknown): v is { [k: string]: Json } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The merge of `merge` mode: objects recursively, lists appended, anything else overwritten. */
export function mergeValue(current: Json, patch: Json): Json {
  if (Array.isArray(current) && Array.isArray(patch)) return [...current, ...patch];
  if (isObject(current) && isObject(patch)) {
    const out: { [k: string]: Json } = { ...current };
    for (const [k, v] of Object.entries(patch)) {
      // Own keys only, set as data: a key `__proto__` (JSON.parse makes it an own key) is merged and
      // kept like any other. Through `in` and `=`, it met Object.prototype's accessor: the key was
      // dropped and the merged object's prototype replaced.
      const merged = Object.hasOwn(current, k) ? mergeValue(current[k], v) : v;
      Object.defineProperty(out, k, { value: merged, writable: true, enumerable: true, configurable: true });
    }
    return out;
  }
  return patch;
}
