import { promisify } from 'node:util';
import { gunzip as gunzipCb, gzip as gzipCb } from 'node:zlib';
import { pack, unpack } from './codec.js';
import type { FileStore } from './file-store.js';
import { SystemObjects } from './system-objects.js';

/** One flushed part of the audit trail: entries of every partition with stream ids in [start, end) ms. */
export interface AuditSegment {
  start: number;
  end: number;
  /** [stream id, partition, packed event], ascending by (stream id, partition). */
  entries: [string, number, Buffer][];
}

const NAME = /^(\d{15})\.seg$/;
const gzip = promisify(gzipCb);
const gunzip = promisify(gunzipCb);

/** A segment's name: its start, zero-padded so names sort by time. */
export const segmentName = (start: number): string => `${String(start).padStart(15, '0')}.seg`;
/** The start of a segment by its name; null for anything else. */
export const segmentStart = (name: string): number | null => {
  const m = NAME.exec(name);
  return m ? Number(m[1]) : null;
};

/**
 * The audit trail's segments in the platform's file store (S3 or disk), as objects the platform
 * keeps for itself (src/adapters/system-objects.ts, area `audit`): no file-service caller can
 * read, list or delete a segment. A segment is written whole, and written again under the same
 * name when a flush is retried.
 */
export class AuditSegments {
  private readonly objects: SystemObjects;

  constructor(files: FileStore) {
    this.objects = new SystemObjects(files, 'audit');
  }

  async put(seg: AuditSegment): Promise<void> {
    // Gzipped msgpack: entries of one content and one user repeat most of their bytes.
    await this.objects.put(segmentName(seg.start), await gzip(pack(seg)));
  }

  /** A segment by name; null when it is gone (retention took it). */
  async get(name: string): Promise<AuditSegment | null> {
    const data = await this.objects.get(name);
    return data === null ? null : unpack<AuditSegment>(await gunzip(data));
  }

  /** The names of every segment, oldest first. */
  async list(): Promise<string[]> {
    return (await this.objects.list()).filter((n) => NAME.test(n)).sort();
  }

  async delete(name: string): Promise<void> {
    await this.objects.delete(name);
  }
}
