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
    private readonly store: Pick<ContentStore, 'snapshotAt'>,
    max: number,
  ) {
    this.snapshots = new LRUCache<string, Snapshot>({ max });
  }

  /** The entry's event and its changes; null for an entry this platform did not write. */
  async read(fields: Buffer[]): Promise<ReadEvent | null> {
    let event: StoredEvent;
    try {
      const i = fields.findIndex((f, n) => n % 2 === 0 && f.toString() === 'e');
      event = unpack<StoredEvent>(fields[i + 1]);
    } catch {
      return null;
    }
    const [at, before] = await Promise.all([this.snapshot(event.cid, event.rev), needsPrevious(event) ? this.snapshot(event.cid, event.rev - 1) : null]);
    return { event, at, changes: changesOf(event, { at, before }) };
  }

  private async snapshot(cid: string, rev: number): Promise<Snapshot | null> {
    if (rev < 1) return null;
    const key = `${cid}/${rev}`;
    const hit = this.snapshots.get(key);
    if (hit) return hit;
    const s = await this.store.snapshotAt(cid, rev);
    if (s) this.snapshots.set(key, s);
    return s;
  }
}
