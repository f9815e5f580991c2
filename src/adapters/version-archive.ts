import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip as gunzipCb, gzip as gzipCb } from 'node:zlib';
import { LRUCache } from 'lru-cache';
import { AppError } from '../errors.js';
import { pack, unpack, unpackAll } from './codec.js';
import { keys, type RedisClient } from './redis.js';
import type { SystemObjects } from './system-objects.js';

const gzip = promisify(gzipCb);
const gunzip = promisify(gunzipCb);

/** Seconds a client is told to wait when a cold read finds the object store down. */
export const ARCHIVE_RETRY_AFTER = 5;

/**
 * One move of a content's history out of Redis (issue 25): the Redis values, byte for byte as
 * Redis held them, so a read from the archive answers exactly what a read from Redis did.
 */
export interface ArchiveSegment {
  cid: string;
  /** `rv:{p}:<cid>` fields: revision → packed snapshot. */
  revisions: [number, Buffer][];
  /** `vr:{p}:<cid>` fields: version key → packed version. */
  versions: [string, Buffer][];
  /** The oldest entries of `vi:{p}:<cid>` (history), in order. */
  index: Buffer[];
  /** The oldest entries of `vh:{p}:<cid>` (view history), in order. */
  views: Buffer[];
}

/**
 * A segment as the index in Redis describes it. The index `ar:{p}:<cid>` is one string: a packed
 * array per segment, appended in order (a string, not a hash: no per-field overhead). About 40
 * bytes a segment plus 16 per version: version keys are ULIDs, kept as their 16 bytes; revisions
 * as one range.
 */
export interface IndexEntry {
  seg: number;
  /** The object's name in the archive area: `<cid>/<seg>.<token>`. */
  token: string;
  /** Revisions lo..hi are in the segment (none when hi < lo). */
  lo: number;
  hi: number;
  indexEntries: number;
  viewEntries: number;
  /** The version keys, 16 bytes each (ulidBytes). */
  keys: Buffer;
  /** Where this entry ends in the index string (bytes). */
  end?: number;
}

/**
 * A segment's object name: `<content key>/<segment>.<token>`. Content keys are ULIDs; any other
 * key is hex-encoded, so a name never holds `..`, a slash or a control character.
 */
export const objectName = (cid: string, seg: number, token: string): string =>
  `${/^[A-Za-z0-9_-]{1,200}$/.test(cid) ? cid : `x${Buffer.from(cid).toString('hex')}`}/${seg}.${token}`;

export function packIndexEntry(e: IndexEntry): Buffer {
  return pack([e.seg, e.token, e.lo, e.hi, e.indexEntries, e.viewEntries, e.keys]);
}

const B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

/** A ULID's 16 bytes; null for any other string (such a version key stays in Redis). */
export function ulidBytes(key: string): Buffer | null {
  if (!ULID.test(key)) return null;
  let n = 0n;
  for (const c of key) n = (n << 5n) | BigInt(B32.indexOf(c));
  const out = Buffer.alloc(16);
  out.writeBigUInt64BE(n >> 64n, 0);
  out.writeBigUInt64BE(n & 0xffffffffffffffffn, 8);
  return out;
}

function hasKey(blob: Buffer, key: Buffer): boolean {
  for (let at = 0; at + 16 <= blob.length; at += 16) if (blob.compare(key, 0, 16, at, at + 16) === 0) return true;
  return false;
}

/** A segment as read back: lookups by revision and version key. */
export interface LoadedSegment {
  revisions: Map<number, Buffer>;
  versions: Map<string, Buffer>;
  index: Buffer[];
  views: Buffer[];
  /** Bytes unpacked (for the cache's size). */
  size: number;
  /** Bytes of the object in the store. */
  stored: number;
}

export async function encodeSegment(s: ArchiveSegment): Promise<Buffer> {
  return gzip(pack(s), { level: 6 });
}

export async function decodeSegment(data: Buffer): Promise<ArchiveSegment> {
  const s = unpack<ArchiveSegment>(await gunzip(data));
  const buf = (b: Uint8Array) => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  return {
    cid: s.cid,
    revisions: s.revisions.map(([r, b]) => [r, buf(b)]),
    versions: s.versions.map(([k, b]) => [k, buf(b)]),
    index: s.index.map(buf),
    views: s.views.map(buf),
  };
}

export const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/**
 * The archive of old versions (issue 25): segments in the file store's `archive` area, found
 * through the index each content keeps in Redis. ContentStore asks it for what Redis no longer
 * holds; a small cache keeps recently read segments (they never change). While the object store
 * cannot be reached a read throws UNAVAILABLE (503 with Retry-After), never a wrong answer.
 */
export class VersionArchive {
  private readonly cache: LRUCache<string, LoadedSegment>;
  private readonly loading = new Map<string, Promise<LoadedSegment | null>>();
  private objectsP?: Promise<SystemObjects>;

  constructor(
    private readonly redis: RedisClient,
    /** The object store, made on first use; null: this process has none (cold reads answer 503). */
    private readonly objects: (() => Promise<SystemObjects>) | null,
    cacheBytes = 32 * 1024 * 1024,
  ) {
    this.cache = new LRUCache({ maxSize: Math.max(1, cacheBytes), sizeCalculation: (s) => Math.max(1, s.size) });
  }

  /** The object store (for the archiver's writes). */
  store(): Promise<SystemObjects> {
    if (!this.objects) return Promise.reject(new AppError('UNAVAILABLE', 'No version archive in this process', {}, ARCHIVE_RETRY_AFTER));
    this.objectsP ??= this.objects().catch((e: unknown) => {
      this.objectsP = undefined;
      throw e;
    });
    return this.objectsP;
  }

  /** The content's index entries, by segment number; empty when nothing of it is archived. */
  async indexOf(p: number, cid: string): Promise<IndexEntry[]> {
    return parseIndex(await this.redis.getBuffer(keys.archiveIndex(p, cid)));
  }

  async snapshotAt(p: number, cid: string, rev: number): Promise<Buffer | null> {
    return this.find(
      p,
      cid,
      (e) => e.lo <= rev && rev <= e.hi,
      (s) => s.revisions.get(rev) ?? null,
    );
  }

  async version(p: number, cid: string, key: string): Promise<Buffer | null> {
    const k = ulidBytes(key);
    if (!k) return null;
    return this.find(
      p,
      cid,
      (e) => hasKey(e.keys, k),
      (s) => s.versions.get(key) ?? null,
    );
  }

  /**
   * Looks a value up in the segment the index names. A segment gone from the store was replaced
   * by a compaction after the index was read: the index is read again (the new one names the
   * merged segment).
   */
  private async find(p: number, cid: string, has: (e: IndexEntry) => boolean, pick: (s: LoadedSegment) => Buffer | null): Promise<Buffer | null> {
    for (let attempt = 0; ; attempt++) {
      const e = (await this.indexOf(p, cid)).find(has);
      if (!e) return null;
      const s = await this.segment(cid, e);
      if (s) return pick(s);
      if (attempt === 2) throw missingSegment(cid, e);
    }
  }

  /** The archived history and view history entries of the index's segments, oldest first; null when one was replaced meanwhile (read the index again). */
  async lists(cid: string, index: IndexEntry[]): Promise<{ index: Buffer[]; views: Buffer[] } | null> {
    const out = { index: [] as Buffer[], views: [] as Buffer[] };
    const segs = await Promise.all(index.filter((e) => e.indexEntries || e.viewEntries).map((e) => this.segment(cid, e)));
    for (const s of segs) {
      if (!s) return null;
      out.index.push(...s.index);
      out.views.push(...s.views);
    }
    return out;
  }

  /** A segment, from the cache or the object store; null when the store has no such object. */
  async segment(cid: string, e: IndexEntry): Promise<LoadedSegment | null> {
    const name = objectName(cid, e.seg, e.token);
    const hit = this.cache.get(name);
    if (hit) return hit;
    let p: Promise<LoadedSegment | null> | undefined = this.loading.get(name);
    if (!p) {
      p = this.load(name).finally(() => this.loading.delete(name));
      this.loading.set(name, p);
    }
    return p;
  }

  private async load(name: string): Promise<LoadedSegment | null> {
    let data: Buffer | null;
    try {
      data = await (await this.store()).get(name);
    } catch (e) {
      if (e instanceof AppError) throw e;
      throw new AppError('UNAVAILABLE', 'The version archive is unavailable', {}, ARCHIVE_RETRY_AFTER);
    }
    // The index named it, so it was written and verified before Redis let go of its versions;
    // gone now means a compaction replaced it (the caller reads the index again).
    if (data === null) return null;
    const s = await decodeSegment(data);
    let size = 0;
    for (const [, b] of s.revisions) size += b.length;
    for (const [, b] of s.versions) size += b.length;
    for (const b of s.index) size += b.length;
    for (const b of s.views) size += b.length;
    const loaded: LoadedSegment = { revisions: new Map(s.revisions), versions: new Map(s.versions), index: s.index, views: s.views, size, stored: data.length };
    this.cache.set(name, loaded);
    return loaded;
  }
}

export const missingSegment = (cid: string, e: IndexEntry): Error =>
  new Error(`archived segment ${objectName(cid, e.seg, e.token)} is missing from the object store`);

/** The index entries of an `ar:{p}:<cid>` string, by segment number. */
export function parseIndex(index: Buffer | null | undefined): IndexEntry[] {
  if (!index?.length) return [];
  return unpackAll<[number, string, number, number, number, number, Uint8Array]>(index).map(
    ({ value: [seg, token, lo, hi, indexEntries, viewEntries, k], end }) => ({
      seg,
      token,
      lo,
      hi,
      indexEntries,
      viewEntries,
      keys: Buffer.from(k.buffer, k.byteOffset, k.byteLength),
      end,
    }),
  );
}

/** The archive's figures, summed over partitions (for /metrics and the benchmark). */
export async function archiveTotals(
  redis: RedisClient,
  partitions: number,
): Promise<Record<'versions' | 'revisions' | 'segments' | 'bytes' | 'backlog', number>> {
  const rows = await Promise.all(Array.from({ length: partitions }, (_, p) => redis.hgetall(keys.archiveStats(p))));
  const out = { versions: 0, revisions: 0, segments: 0, bytes: 0, backlog: 0 };
  for (const r of rows) for (const k of Object.keys(out) as (keyof typeof out)[]) out[k] += Number(r[k] ?? 0);
  return out;
}
