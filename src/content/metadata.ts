import { AppError } from '../errors.js';
import type { Aspects } from './model.js';

/**
 * What a content's metadata aspects (set by `svcContentMetadata` operations: spec "unversioned
 * info aspects", such as `svcTimeState` and `svcSecurityContext`) may hold together. They travel
 * in the content's head, every revision's snapshot and every feed event's resolution, and are
 * decoded wherever one is read: before this bound, one whose metadata held 99,000 empty objects
 * (a 300 KB write by any writer) cost about 20 ms of the event loop at each decode and 6.3 MB
 * while it was held (SECURITY.md, the twenty-first session's review).
 */
export const MAX_METADATA_VALUES = 10_000;
/** Characters of the metadata aspects' JSON, together. */
export const MAX_METADATA_CHARS = 256 * 1024;

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

/**
 * 400 when a write's metadata operations leave the content's metadata past MAX_METADATA_VALUES
 * values or MAX_METADATA_CHARS characters and larger than it was (`before`): content stored past
 * the bound keeps its metadata and takes no more.
 */
export function refuseOversizedMetadata(before: Aspects, after: Aspects): void {
  const values = valuesOf(after);
  if (values > MAX_METADATA_VALUES && values > valuesOf(before)) {
    throw new AppError('BAD_REQUEST', `The content's metadata aspects would hold ${values} values; at most ${MAX_METADATA_VALUES} are allowed`, {
      path: 'svcContentMetadata',
      limit: MAX_METADATA_VALUES,
      found: values,
    });
  }
  const chars = JSON.stringify(after).length;
  if (chars > MAX_METADATA_CHARS && chars > JSON.stringify(before).length) {
    throw new AppError('BAD_REQUEST', `The content's metadata aspects would hold ${chars} characters of JSON; at most ${MAX_METADATA_CHARS} are allowed`, {
      path: 'svcContentMetadata',
      limit: MAX_METADATA_CHARS,
      found: chars,
    });
  }
}
