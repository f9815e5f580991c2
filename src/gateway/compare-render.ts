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

/**
 * Values (every MessagePack value: containers, map keys, strings, numbers) of the two versions
 * of a compare above which it is made on the compare thread, whatever their bytes. What a diff,
 * its patch and a decoded version cost follows the values, and an empty object or array is one
 * byte stored: two versions of 99,000 of them (99 KB each) were decoded and diffed on the event
 * loop (eight such compares at once held it 0.8 s), and each kept 6.3 MB of heap decoded in the
 * compare cache (review 21, F1). 100 KB of article text holds about 3,500 values; a pair at this
 * bound costs the loop about what a pair of COMPARE_ON_LOOP_BYTES of such text does. Past it the
 * compare takes a slot of the thread once its versions are read (their values are known then).
 */
export const COMPARE_ON_LOOP_VALUES = 16_384;

/**
 * Heap a decoded version is counted at in the compare service's cache (`decodedBytes`), per value
 * beside its stored bytes: an empty object decoded takes about 64 bytes (measured), a value of
 * article text about 20.
 */
const HEAP_BYTES_PER_VALUE = 64;

/** What a decoded version is counted at in the compare cache: its stored bytes and HEAP_BYTES_PER_VALUE a value. */
export const decodedBytes = (storedBytes: number, values: number): number => storedBytes + HEAP_BYTES_PER_VALUE * values;

/**
 * How many values a stored version (MessagePack) holds, counted on its bytes without decoding
 * it: each value's header is read and the bytes of strings, binaries, extensions and numbers are
 * skipped. Counting stops past `limit` (answering `limit + 1`), so a version of a million values
 * costs no more than one at the bound; bytes that are not MessagePack count as past it.
 */
export function storedValues(b: Uint8Array, limit: number): number {
  let n = 0;
  let at = 0;
  const len = (bytes: number): number => {
    if (at + bytes > b.length) return Number.NaN;
    let v = 0;
    for (let i = 0; i < bytes; i++) v = v * 256 + b[at + i];
    at += bytes;
    return v;
  };
  while (at < b.length) {
    if (++n > limit) return limit + 1;
    const h = b[at++];
    let skip = 0;
    if (h <= 0x7f || h >= 0xe0 || (h >= 0x80 && h <= 0x9f) || h === 0xc0 || h === 0xc2 || h === 0xc3) skip = 0;
    else if (h >= 0xa0 && h <= 0xbf) skip = h & 0x1f;
    else if (h === 0xc4 || h === 0xd9) skip = len(1);
    else if (h === 0xc5 || h === 0xda) skip = len(2);
    else if (h === 0xc6 || h === 0xdb) skip = len(4);
    else if (h === 0xc7) skip = len(1) + 1;
    else if (h === 0xc8) skip = len(2) + 1;
    else if (h === 0xc9) skip = len(4) + 1;
    else if (h === 0xca || h === 0xce || h === 0xd2) skip = 4;
    else if (h === 0xcb || h === 0xcf || h === 0xd3) skip = 8;
    else if (h === 0xcc || h === 0xd0) skip = 1;
    else if (h === 0xcd || h === 0xd1) skip = 2;
    else if (h >= 0xd4 && h <= 0xd8) skip = 1 + 2 ** (h - 0xd4);
    else if (h === 0xdc || h === 0xde) skip = 2;
    else if (h === 0xdd || h === 0xdf) skip = 4;
    else return limit + 1; // 0xc1: never used
    if (Number.isNaN(skip)) return limit + 1;
    at += skip;
  }
  return at === b.length ? n : limit + 1;
}

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

  /** Whether a compare of these versions (their stored bytes and values together) is made on the thread (and so needs a slot). */
  static onThread(from: ComparedSide, to: ComparedSide, storedBytes: number, values = 0): boolean {
    return storedBytes > COMPARE_ON_LOOP_BYTES || values > COMPARE_ON_LOOP_VALUES || !('record' in from && 'record' in to);
  }

  /** The answer; the caller holds a slot when `onThread` says so. */
  async answer(cid: string, from: ComparedSide, to: ComparedSide, storedBytes: number, values = 0): Promise<string> {
    const a = CompareRenderer.onThread(from, to, storedBytes, values) ? await thread.run({ cid, from, to }) : answerOf(cid, from, to);
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
