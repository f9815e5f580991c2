/**
 * Revisions (CONTRACT §15): which two versions a compare diffs, and what a restore writes. Pure:
 * the JSON Patch itself is made by a diff the caller hands in (the gateway passes
 * fast-json-patch's `compare`), so this module keeps to the domain's imports.
 */
import { AppError } from '../errors.js';
import { parseVersionId, versionId, type Aspects, type Json, type Snapshot } from './model.js';

/** One RFC 6902 operation, as a diff answers it. */
export interface PatchOperation {
  op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  path: string;
  from?: string;
  value?: Json;
}

/** Makes the RFC 6902 patch that turns `from` into `to`. */
export type JsonDiff = (from: Aspects, to: Aspects) => PatchOperation[];

/**
 * The version key a version id names, when it is a version of content `cid`. A malformed id is
 * refused (400); a well-formed id of another content answers as a missing version (404), so a
 * compare or restore never tells one content's versions through another's alias.
 */
export function versionKeyOf(id: string, cid: string, param: string): string {
  const v = parseVersionId(id);
  if (!v) throw new AppError('BAD_REQUEST', `${param} is not a version id: ${id}`);
  if (v.cid !== cid) throw new AppError('NOT_FOUND', `Version ${id} not found`);
  return v.key;
}

/** The two version keys a compare diffs: `from` and `to`, `to` defaulting to the current version. */
export function compareKeys(head: Snapshot, from: string | null, to: string | null): { from: string; to: string } {
  if (from === null || from === '') throw new AppError('BAD_REQUEST', 'from is required: a version id');
  return { from: versionKeyOf(from, head.cid, 'from'), to: to === null || to === '' ? head.head : versionKeyOf(to, head.cid, 'to') };
}

/** The compare answer: the patch that, applied to the aspects of `from`, gives the aspects of `to`. */
export function compareBody(cid: string, from: { key: string; aspects: Aspects }, to: { key: string; aspects: Aspects }, diff: JsonDiff) {
  return { from: versionId(cid, from.key), to: versionId(cid, to.key), patch: diff(from.aspects, to.aspects) };
}

/**
 * The aspects a restore writes: those of the restored version, every one of them, and nothing
 * else (a replace: aspects the current version added since are dropped). Copied, so the new
 * version shares nothing with the stored one.
 */
export function restoredAspects(restored: Aspects): Aspects {
  return structuredClone(restored);
}
