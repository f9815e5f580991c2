import { AppError } from '../errors.js';
import type { Aspects } from './model.js';
import { MAX_TERM_CHARS } from './search-document.js';

/**
 * What a content's metadata aspects (set by `svcContentMetadata` operations: spec "unversioned
 * info aspects") may hold. They travel in the content's head, every revision's snapshot and
 * every feed event's resolution, and are decoded wherever one is read: before this bound, one
 * whose metadata held 99,000 empty objects (a 300 KB write by any writer) cost about 20 ms of
 * the event loop at each decode and 6.3 MB while it was held (SECURITY.md, the twenty-first
 * session's review).
 *
 * The platform's own aspects (`svcContentState`, `svcTimeState`, `svcSecurityContext`: a
 * takedown, a schedule, owners) are bounded each on its own, so that they can always be set on
 * content whose other metadata is near or past the bound (such as content stored before it);
 * the other aspects together.
 */
export const MAX_METADATA_VALUES = 10_000;
/** Characters of the other metadata aspects' JSON, together. */
export const MAX_METADATA_CHARS = 256 * 1024;
/** Values of each of the platform's own metadata aspects. */
export const MAX_OWN_ASPECT_VALUES = 1_000;
/** Characters of the JSON of each of the platform's own metadata aspects. */
export const MAX_OWN_ASPECT_CHARS = 64 * 1024;
/** The metadata aspects of the platform (the spec's), bounded each on its own. */
const OWN_ASPECTS = new Set(['svcContentState', 'svcTimeState', 'svcSecurityContext']);

/** The metadata aspects that svcContentMetadata operations set, later ones winning. */
export function metadataOf(ops: readonly { _type: string; aspects?: Aspects }[]): Aspects {
  const meta: Aspects = {};
  for (const op of ops) {
    if (op._type !== 'svcContentMetadata' || !op.aspects) continue;
    for (const [name, aspect] of Object.entries(op.aspects)) meta[name] = { ...aspect, _type: aspect._type ?? name };
  }
  return meta;
}

/** Objects, arrays and scalars of a value, the value itself included (keys are not counted apart). */
function valuesOf(v: unknown): number {
  let n = 0;
  const stack: unknown[] = [v];
  while (stack.length) {
    const x = stack.pop();
    n++;
    if (x === null || typeof x !== 'object') continue;
    if (Array.isArray(x)) for (let i = 0; i < x.length; i++) stack.push(x[i]);
    else for (const k in x) if (Object.hasOwn(x, k)) stack.push((x as Record<string, unknown>)[k]);
  }
  return n;
}

/** Values and JSON characters of the aspects of `meta` that `pick` keeps. */
function measure(meta: Aspects, pick: (name: string) => boolean): { values: number; chars: number } {
  const kept: Aspects = {};
  for (const name of Object.keys(meta)) if (pick(name)) kept[name] = meta[name];
  return { values: valuesOf(kept), chars: JSON.stringify(kept).length };
}

const oversized = (what: string, found: number, limit: number, unit: string): AppError =>
  new AppError('BAD_REQUEST', `${what} would hold ${found} ${unit}; at most ${limit} are allowed`, { path: 'svcContentMetadata', limit, found });

/**
 * 400 when a write's metadata operations, taking the content's metadata from `before` to
 * `after`, leave the other aspects past MAX_METADATA_VALUES values or MAX_METADATA_CHARS
 * characters together, or one of the platform's own aspects past MAX_OWN_ASPECT_VALUES or
 * MAX_OWN_ASPECT_CHARS, and larger than it was: metadata stored past a bound is kept and takes
 * no more there.
 */
export function refuseOversizedMetadata(before: Aspects, after: Aspects): void {
  const other = (name: string) => !OWN_ASPECTS.has(name);
  const was = measure(before, other);
  const now = measure(after, other);
  if (now.values > MAX_METADATA_VALUES && now.values > was.values) throw oversized("The content's metadata aspects", now.values, MAX_METADATA_VALUES, 'values');
  if (now.chars > MAX_METADATA_CHARS && now.chars > was.chars)
    throw oversized("The content's metadata aspects", now.chars, MAX_METADATA_CHARS, 'characters of JSON');
  for (const name of OWN_ASPECTS) {
    if (after[name] === before[name]) continue;
    const one = (n: string) => n === name;
    const a = measure(before, one);
    const b = measure(after, one);
    if (b.values > MAX_OWN_ASPECT_VALUES && b.values > a.values) throw oversized(`Metadata aspect ${name}`, b.values, MAX_OWN_ASPECT_VALUES, 'values');
    if (b.chars > MAX_OWN_ASPECT_CHARS && b.chars > a.chars) throw oversized(`Metadata aspect ${name}`, b.chars, MAX_OWN_ASPECT_CHARS, 'characters of JSON');
  }
  // Each owner is a term the engine keeps whole (svc_security_context_ss, a StrField that facets
  // and pivots take), held to MAX_TERM_CHARS like a content's own svcSolrDocument values: two
  // owners of 30,000 characters fit MAX_OWN_ASPECT_CHARS, and 70 such public articles made one
  // anonymous facet.pivot=lvl_ss,svc_security_context_ss&facet.limit=140 answer 500 after 16 s
  // (review s23c). An owner the content held before stays (content stored before the bound).
  if (after.svcSecurityContext !== before.svcSecurityContext) {
    const had = new Set(ownersOf(before));
    const long = ownersOf(after).find((o) => typeof o === 'string' && o.length > MAX_TERM_CHARS && !had.has(o));
    if (typeof long === 'string')
      throw new AppError(
        'BAD_REQUEST',
        `An owner in svcSecurityContext may hold at most ${MAX_TERM_CHARS} characters (MAX_TERM_CHARS: the search engine keeps it whole, one term), not ${long.length}`,
        { path: 'svcContentMetadata', limit: MAX_TERM_CHARS, found: long.length },
      );
  }
}

const ownersOf = (meta: Aspects): unknown[] => {
  const owners = meta.svcSecurityContext?.owners;
  return Array.isArray(owners) ? owners : [];
};
