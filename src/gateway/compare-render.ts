import jsonPatch from 'fast-json-patch';
import { ModuleWorker, serveJobs } from '../adapters/module-worker.js';
import { unpack } from '../adapters/codec.js';
import type { Aspects, VersionRecord } from '../content/model.js';
import { compareBody, type JsonDiff, type PatchOperation } from '../content/revisions.js';
import { AppError } from '../errors.js';
import { KeyedCounts } from './keyed-counts.js';

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
 * What the paths of a compare's patch may spell together for it to be made on the event loop:
 * each operation of a patch spells its whole path, so versions of few values under long keys
 * make a patch of megabytes (42 KB versions of 1,838 values under keys of 800 characters: 16 MB
 * of paths, 80-180 ms of the loop each, eight at once a stall of 0.8-1.1 s: the twenty-first
 * session's review). The bench's 100 KB article spells about 150,000.
 */
export const COMPARE_ON_LOOP_PATH_CHARS = 1024 * 1024;

/**
 * What a stored version (MessagePack) holds, counted on its bytes without decoding it: its values,
 * a map's keys included (each value's header is read and the bytes of strings, binaries and
 * numbers are skipped), and
 * the sum of the lengths of every value's path (a map's keys, an array's indices, a `/` a step):
 * a bound of what the paths of a patch against it may spell. Counting stops past either limit
 * (answering one past it), so a version of a million values costs no more than one at the bound;
 * bytes that are not MessagePack the codec writes count as past both.
 */
export function storedShape(b: Uint8Array, valuesLimit: number, pathLimit = Number.POSITIVE_INFINITY): { values: number; pathChars: number } {
  const past = { values: valuesLimit + 1, pathChars: pathLimit + 1 };
  let n = 0;
  let paths = 0;
  let at = 0;
  // The containers being read: items left (pairs of a map), whether the next is a map's key, the
  // length of the container's path, and of the key or index of the item being read.
  const frames: { left: number; map: boolean; keyNext: boolean; base: number; step: number; index: number }[] = [];
  const len = (bytes: number): number => {
    if (at + bytes > b.length) return Number.NaN;
    let v = 0;
    for (let i = 0; i < bytes; i++) v = v * 256 + b[at + i];
    at += bytes;
    return v;
  };
  while (at < b.length) {
    const h = b[at++];
    let skip = 0;
    let items = -1; // a container's items (pairs of a map)
    let map = false;
    let str = -1; // a string's length
    if (h <= 0x7f || h >= 0xe0 || h === 0xc0 || h === 0xc2 || h === 0xc3) skip = 0;
    else if (h >= 0x80 && h <= 0x8f) [items, map] = [h & 0x0f, true];
    else if (h >= 0x90 && h <= 0x9f) items = h & 0x0f;
    else if (h >= 0xa0 && h <= 0xbf) skip = str = h & 0x1f;
    else if (h === 0xd9) skip = str = len(1);
    else if (h === 0xda) skip = str = len(2);
    else if (h === 0xdb) skip = str = len(4);
    else if (h === 0xc4) skip = len(1);
    else if (h === 0xc5) skip = len(2);
    else if (h === 0xc6) skip = len(4);
    else if (h === 0xca || h === 0xce || h === 0xd2) skip = 4;
    else if (h === 0xcb || h === 0xcf || h === 0xd3) skip = 8;
    else if (h === 0xcc || h === 0xd0) skip = 1;
    else if (h === 0xcd || h === 0xd1) skip = 2;
    else if (h === 0xdc) items = len(2);
    else if (h === 0xdd) items = len(4);
    else if (h === 0xde) [items, map] = [len(2), true];
    else if (h === 0xdf) [items, map] = [len(4), true];
    // 0xc1 (never used), and extensions (0xc7-0xc9, 0xd4-0xd8): the platform's codec writes none
    // (src/adapters/codec.ts), and msgpackr decodes some (structured-clone ids and pointers) into a
    // shared graph far larger than their bytes, so a version holding one counts as past the bound.
    else return past;
    if (Number.isNaN(skip) || Number.isNaN(items)) return past;
    at += skip;
    const top = frames[frames.length - 1];
    if (++n > valuesLimit) return past;
    if (top?.map && top.keyNext) {
      // A map's key (a value, as the decoded string it is): the step to its value.
      top.step = 1 + (str >= 0 ? str : 8);
      top.keyNext = false;
      if (items >= 0) return past; // a key that is a container: not what the codec writes
      continue;
    }
    let path = 0;
    if (top) {
      path = top.base + (top.map ? top.step : 1 + String(top.index).length);
      top.index++;
      top.left--;
      if (top.map) top.keyNext = true;
    }
    paths += path;
    if (paths > pathLimit) return past;
    if (items > 0) frames.push({ left: items, map, keyNext: map, base: path, step: 0, index: 0 });
    while (frames.length && frames[frames.length - 1].left === 0 && (!frames[frames.length - 1].map || frames[frames.length - 1].keyNext)) frames.pop();
  }
  return at === b.length && frames.length === 0 ? { values: n, pathChars: paths } : past;
}

/** How many values a stored version holds (`storedShape`), counted up to one past `limit`. */
export const storedValues = (b: Uint8Array, limit: number): number => storedShape(b, limit).values;

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
 * one has read nothing; and at most `maxPerCaller` of one caller, 429 past it, so that one caller
 * (any account with Read) cannot hold every slot and have every other user's compare of large
 * versions answer 503 (review s23d).
 */
export class CompareRenderer {
  private readonly held = new KeyedCounts();

  constructor(
    private readonly maxOnThread: number,
    private readonly maxPerCaller = maxOnThread,
  ) {}

  /** Takes a slot of `caller` for a compare of large versions (429 past its share, 503 when none is free); the function returned gives it back, once. */
  slot(caller = ''): () => void {
    if (this.held.total >= this.maxOnThread)
      throw new AppError('UNAVAILABLE', `${this.maxOnThread} compares of large versions are being made; try again shortly`, {}, 1);
    if (this.held.get(caller) >= this.maxPerCaller)
      throw new AppError('TOO_MANY_REQUESTS', `At most ${this.maxPerCaller} compares of large versions of one caller are made at once`, {}, 1);
    this.held.add(caller);
    let held = true;
    return () => {
      if (held) this.held.remove(caller);
      held = false;
    };
  }

  /** Whether a compare of these versions (their stored bytes and values together) is made on the thread (and so needs a slot). */
  static onThread(from: ComparedSide, to: ComparedSide, storedBytes: number, values = 0, pathChars = 0): boolean {
    return (
      storedBytes > COMPARE_ON_LOOP_BYTES || values > COMPARE_ON_LOOP_VALUES || pathChars > COMPARE_ON_LOOP_PATH_CHARS || !('record' in from && 'record' in to)
    );
  }

  /** The answer; the caller holds a slot when `onThread` says so. */
  async answer(cid: string, from: ComparedSide, to: ComparedSide, storedBytes: number, values = 0, pathChars = 0): Promise<string> {
    const a = CompareRenderer.onThread(from, to, storedBytes, values, pathChars) ? await thread.run({ cid, from, to }) : answerOf(cid, from, to);
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
