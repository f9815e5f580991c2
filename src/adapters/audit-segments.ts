import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip as gunzipCb, gzip as gzipCb } from 'node:zlib';
import type * as Minio from 'minio';
import { pack, unpack } from './codec.js';
import type { FileStore } from './file-store.js';

/** One flushed part of the audit trail: entries of every partition with stream ids in [start, end) ms. */
export interface AuditSegment {
  start: number;
  end: number;
  /** [stream id, partition, packed event], ascending by (stream id, partition). */
  entries: [string, number, Buffer][];
}

/** Where segments live: beside the spaces of the file store, never inside one (see AuditSegments). */
const DISK_DIR = '.system/audit';
const S3_PREFIX = 'system/audit/';
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
 * keeps for itself. They are outside the file service's spaces: on disk under `<FILES_DIR>/.system/`,
 * in S3 under `system/`, while every key the file and delivery services can form passes
 * `fileKeyOf`, whose space is `tmp` or `content` only; the tmp sweeper and the S3 lifecycle rule
 * touch `tmp/` only. So no file-service caller can read, list or delete a segment, whatever the path.
 * A segment is written whole (disk: a temporary file fsynced and renamed; S3: one PUT), and
 * written again under the same name when a flush is retried.
 */
export class AuditSegments {
  constructor(private readonly files: FileStore) {}

  private get disk(): string | null {
    return this.files.kind === 'disk' ? join((this.files as unknown as { dir: string }).dir, DISK_DIR) : null;
  }

  private get s3(): { client: Minio.Client; bucket: string } {
    return this.files as unknown as { client: Minio.Client; bucket: string };
  }

  async put(seg: AuditSegment): Promise<void> {
    const name = segmentName(seg.start);
    // Gzipped msgpack: entries of one content and one user repeat most of their bytes.
    const data = await gzip(pack(seg));
    const dir = this.disk;
    if (dir === null) {
      await this.s3.client.putObject(this.s3.bucket, S3_PREFIX + name, data, data.length);
      return;
    }
    await mkdir(dir, { recursive: true });
    const tmp = join(dir, `.${name}.${process.pid}.tmp`);
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, join(dir, name));
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }

  /** A segment by name; null when it is gone (retention took it). */
  async get(name: string): Promise<AuditSegment | null> {
    const dir = this.disk;
    try {
      if (dir !== null) return unpack<AuditSegment>(await gunzip(await readFile(join(dir, name))));
      const chunks: Buffer[] = [];
      for await (const c of await this.s3.client.getObject(this.s3.bucket, S3_PREFIX + name)) chunks.push(c as Buffer);
      return unpack<AuditSegment>(await gunzip(Buffer.concat(chunks)));
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'ENOENT' || code === 'NoSuchKey' || code === 'NotFound') return null;
      throw e;
    }
  }

  /** The names of every segment, oldest first. */
  async list(): Promise<string[]> {
    const dir = this.disk;
    let names: string[];
    if (dir !== null) names = await readdir(dir).catch(() => [] as string[]);
    else {
      names = [];
      for await (const o of this.s3.client.listObjectsV2(this.s3.bucket, S3_PREFIX, true) as AsyncIterable<Minio.BucketItem>) {
        if (o.name) names.push(o.name.slice(S3_PREFIX.length));
      }
    }
    return names.filter((n) => NAME.test(n)).sort();
  }

  async delete(name: string): Promise<void> {
    const dir = this.disk;
    if (dir !== null) await rm(join(dir, name), { force: true });
    else await this.s3.client.removeObject(this.s3.bucket, S3_PREFIX + name);
  }
}
