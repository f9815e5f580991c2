import { LRUCache } from 'lru-cache';
import { type ChangeEvent, changesOf, needsPrevious, type StoredEvent } from '../content/change-events.js';
import type { Snapshot } from '../content/model.js';
import { unpack } from './codec.js';
import type { ContentStore } from './content-store.js';

/** One entry of an event stream read against its snapshots. */
export interface ReadEvent {
  event: StoredEvent;
  /** The snapshot of the event's revision (null when it is gone). */
  at: Snapshot | null;
  /** Its change-feed events (content/change-events.ts). */
  changes: ChangeEvent[];
}

/**
 * Reads the entries of the partitions' event streams against the revision snapshots they name,
 * for the readers that go over the streams (the change feed's source, the webhooks fan-out).
 * Snapshots are kept in memory: a committed revision's snapshot never changes. A missing one is
 * not kept: it may be a read of a replica not yet caught up.
 */
export class EventReader {
  private readonly snapshots: LRUCache<string, Snapshot>;

  constructor(
    private readonly store: Pick<ContentStore, 'snapshotsOf' | 'snapshotsWithin'>,
    max: number,
    /** Bound on the kept snapshots' size (snapshotBytes): a few huge ones must not fill the heap. */
    maxBytes = 128 * 2 ** 20,
  ) {
    this.snapshots = new LRUCache<string, Snapshot>({ max, maxSize: maxBytes, sizeCalculation: snapshotBytes });
  }

  /**
   * Several entries at once: the snapshots not in memory are read in one call per partition.
   * Null for an entry this platform did not write.
   */
  readMany(entries: readonly Buffer[][]): Promise<(ReadEvent | null)[]> {
    return this.read(entries);
  }

  /**
   * The first of several entries of one partition, in order, whose snapshots not in memory make
   * Redis send at most `budget` bytes; with `first`, the first entry is read whatever its
   * snapshots weigh. Entries after the first left out are left out too: the answer is a prefix.
   */
  readWithin(entries: readonly Buffer[][], budget: number, first: boolean): Promise<(ReadEvent | null)[]> {
    return this.read(entries, { budget, first });
  }

  private async read(entries: readonly Buffer[][], within?: { budget: number; first: boolean }): Promise<(ReadEvent | null)[]> {
    const events = entries.map(eventOf);
    // Every snapshot the entries need, from memory or (in one call per partition) from the store.
    const have = new Map<string, Snapshot>();
    const missing = new Map<string, [string, number]>();
    const need = (cid: string, rev: number) => {
      const key = `${cid}/${rev}`;
      if (rev < 1 || have.has(key) || missing.has(key)) return;
      const hit = this.snapshots.get(key);
      if (hit) have.set(key, hit);
      else missing.set(key, [cid, rev]);
    };
    for (const e of events) {
      if (!e) continue;
      need(e.cid, e.rev);
      if (needsPrevious(e)) need(e.cid, e.rev - 1);
    }
    let complete = events.length;
    if (missing.size) {
      const wanted = [...missing.values()];
      let found: (Snapshot | null)[];
      if (within) {
        found = await this.store.snapshotsWithin(wanted, within.budget, within.first);
        if (found.length < wanted.length) {
          // Entries are complete up to the first that needs a snapshot left out.
          const [cid, rev] = wanted[found.length];
          complete = events.findIndex((e) => e !== null && e.cid === cid && (e.rev === rev || (needsPrevious(e) && e.rev - 1 === rev)));
        }
      } else found = await this.store.snapshotsOf(wanted);
      found.forEach((s, i) => {
        const [cid, rev] = wanted[i];
        // A missing one is not kept: it may be a read of a replica not yet caught up.
        if (!s) return;
        have.set(`${cid}/${rev}`, s);
        this.snapshots.set(`${cid}/${rev}`, s);
      });
    }
    const snapshot = (cid: string, rev: number): Snapshot | null => (rev < 1 ? null : (have.get(`${cid}/${rev}`) ?? null));
    return events.slice(0, complete).map((event) => {
      if (!event) return null;
      const at = snapshot(event.cid, event.rev);
      const before = needsPrevious(event) ? snapshot(event.cid, event.rev - 1) : null;
      return { event, at, changes: changesOf(event, { at, before }) };
    });
  }
}

/** The stored event of an entry (field `e`); null when it has none this platform can read. */
function eventOf(fields: Buffer[]): StoredEvent | null {
  try {
    const i = fields.findIndex((f, n) => n % 2 === 0 && f.toString() === 'e');
    return i < 0 ? null : unpack<StoredEvent>(fields[i + 1]);
  } catch {
    return null;
  }
}

/** What a string takes in memory: V8 keeps one of Latin-1 characters at a byte each, any other at two. */
export function heldBytes(s: string): number {
  return (TWO_BYTE.test(s) ? 2 : 1) * s.length;
}

const TWO_BYTE = /[^\u0000-\u00ff]/;

/**
 * About what a decoded snapshot takes in memory: its aliases and metadata aspects are what grow
 * (an editor may give a content thousands of aliases or a large metadata aspect), the rest is
 * small. Strings count two bytes a character; the metadata is counted by what it holds decoded
 * (`decodedBytes`), not by its JSON text. At least 1 (LRUCache refuses 0).
 */
export function snapshotBytes(s: Snapshot): number {
  let n = sizes.get(s);
  if (n !== undefined) return n;
  n = 1024;
  for (const a of s.aliases) n += 2 * a.length + 64;
  n += decodedBytes(s.meta);
  sizes.set(s, n);
  return n;
}

/** What a container or a scalar takes in V8's heap beside its contents, and an element or property slot. */
const CONTAINER_BYTES = 64;
const SCALAR_BYTES = 16;
const SLOT_BYTES = 8;

/**
 * About what a decoded JSON value takes in memory: each object or array 64 bytes and 8 a slot,
 * each scalar 16, strings (property names included) two bytes a character. Counted by its
 * text, an empty object or array (three characters of JSON, one byte of MessagePack) was six
 * bytes, and it takes about 64 decoded: a metadata aspect of 99,000 of them (a 300 KB request)
 * held 6.3 MB in every cache that kept its snapshot while they counted 0.6 MB, and the heads
 * and revisions of such contents read by any reader kept hundreds of MB (review 21, F2).
 */
export function decodedBytes(v: unknown): number {
  if (typeof v === 'string') return SCALAR_BYTES + 2 * v.length;
  if (v === null || typeof v !== 'object') return SCALAR_BYTES;
  let n = CONTAINER_BYTES;
  if (Array.isArray(v)) for (const x of v) n += SLOT_BYTES + decodedBytes(x);
  else for (const k in v) if (Object.hasOwn(v, k)) n += SLOT_BYTES + SCALAR_BYTES + 2 * k.length + decodedBytes((v as Record<string, unknown>)[k]);
  return n;
}

/** Each decoded snapshot's size, counted once: the snapshot cache and the feed's resolved entries both ask. */
const sizes = new WeakMap<Snapshot, number>();
