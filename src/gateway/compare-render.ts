import jsonPatch from 'fast-json-patch';
import { ModuleWorker, serveJobs } from '../adapters/module-worker.js';
import { unpack } from '../adapters/codec.js';
import type { Aspects, VersionRecord } from '../content/model.js';
import { compareBody, type JsonDiff, type PatchOperation } from '../content/revisions.js';
import { AppError } from '../errors.js';

/** fast-json-patch's diff: linear in the documents (arrays compared index by index), keys escaped per RFC 6901. */
export const aspectsDiff: JsonDiff = (from: Aspects, to: Aspects) => jsonPatch.compare(from, to) as PatchOperation[];

/** Characters of paths a compare's patch may spell (a patch's values are bounded by the versions). */
export const MAX_PATCH_PATH_CHARS = 16 * 2 ** 20;

/**
 * Stored bytes of the two versions of a compare above which it is made on the compare thread,
 * from the stored versions (never decoded on the event loop). Five readers' compares of a 2.4 MB
 * version held the event loop 3.5 s, every API, feed and health check waiting (review 18).
 */
export const COMPARE_ON_LOOP_BYTES = 256 * 1024;

/** A version to compare: decoded (small, kept by the service), or as stored (large). */
export type ComparedSide = { key: string; record: VersionRecord } | { key: string; stored: Buffer };

/** A compare's answer: its JSON, or the length of paths past MAX_PATCH_PATH_CHARS. */
type Answer = { json: string } | { paths: number };

/**
 * The compare answer (CONTRACT §15): the patch that, applied to the aspects of `from`, gives those
 * of `to`, as JSON. The same version on both sides answers an empty patch without a diff. 413 when
 * the patch would spell more than MAX_PATCH_PATH_CHARS of paths: each operation spells its whole
 * path, so deep long keys make a patch far larger than the versions (302 KB versions: over 500 MB
 * of paths, a RangeError and a 500).
 */
function answerOf(cid: string, from: ComparedSide, to: ComparedSide): Answer {
  const aspectsOf = (s: ComparedSide): Aspects => ('record' in s ? s.record : unpack<VersionRecord>(s.stored)).aspects;
  const same = from.key === to.key;
  const compared = compareBody(cid, { key: from.key, aspects: same ? {} : aspectsOf(from) }, { key: to.key, aspects: same ? {} : aspectsOf(to) }, aspectsDiff);
  let paths = 0;
  for (const op of compared.patch) paths += op.path.length;
  return paths > MAX_PATCH_PATH_CHARS ? { paths } : { json: JSON.stringify(compared) };
}

const ROLE = 'compare';
const thread = new ModuleWorker<{ cid: string; from: ComparedSide; to: ComparedSide }, Answer>(import.meta.url, ROLE, 'compare');

serveJobs<{ cid: string; from: ComparedSide; to: ComparedSide }, Answer>(ROLE, (job) => {
  // Buffers arrive as plain Uint8Arrays.
  const side = (s: ComparedSide): ComparedSide =>
    'stored' in s ? { key: s.key, stored: Buffer.from(s.stored.buffer, s.stored.byteOffset, s.stored.byteLength) } : s;
  return { done: answerOf(job.cid, side(job.from), side(job.to)) };
});

/**
 * The compare answer's JSON: on the event loop when both versions are small, on the compare
 * thread otherwise (COMPARE_ON_LOOP_BYTES). A compare of large versions holds a slot (`slot`) from
 * before it reads them to its answer: at most `maxOnThread` per process, 503 past it, so a refused
 * one has read nothing.
 */
export class CompareRenderer {
  private onThread = 0;

  constructor(private readonly maxOnThread: number) {}

  /** Takes a slot for a compare of large versions (503 when none is free); the function returned gives it back, once. */
  slot(): () => void {
    if (this.onThread >= this.maxOnThread)
      throw new AppError('UNAVAILABLE', `${this.maxOnThread} compares of large versions are being made; try again shortly`, {}, 1);
    this.onThread++;
    let held = true;
    return () => {
      if (held) this.onThread--;
      held = false;
    };
  }

  /** Whether a compare of these versions is made on the thread (and so needs a slot). */
  static onThread(from: ComparedSide, to: ComparedSide, storedBytes: number): boolean {
    return storedBytes > COMPARE_ON_LOOP_BYTES || !('record' in from && 'record' in to);
  }

  /** The answer; the caller holds a slot when `onThread` says so. */
  async answer(cid: string, from: ComparedSide, to: ComparedSide, storedBytes: number): Promise<string> {
    const a = CompareRenderer.onThread(from, to, storedBytes) ? await thread.run({ cid, from, to }) : answerOf(cid, from, to);
    if ('json' in a) return a.json;
    throw new AppError(
      'PAYLOAD_TOO_LARGE',
      `The patch between these versions would spell ${a.paths} characters of paths; at most ${MAX_PATCH_PATH_CHARS} are answered`,
      {
        paths: a.paths,
        max: MAX_PATCH_PATH_CHARS,
      },
    );
  }
}
