import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type * as Minio from 'minio';
import type { FileStore } from './file-store.js';

/**
 * Objects the platform keeps for itself in its file store (S3 or disk), in one area per use
 * (`audit`: the audit trail's segments, `archive`: archived versions). They are outside the file
 * service's spaces: on disk under `<FILES_DIR>/.system/<area>/`, in S3 under `system/<area>/`,
 * while every key the file and delivery services can form passes `fileKeyOf`, whose space is
 * `tmp` or `content` only; the tmp sweeper and the S3 lifecycle rule touch `tmp/` only. So no
 * file-service caller can read, list or delete them, whatever the path. An object is written
 * whole (disk: a temporary file fsynced and renamed; S3: one PUT). Names may contain `/`.
 */
export class SystemObjects {
  constructor(
    private readonly files: FileStore,
    private readonly area: string,
  ) {}

  private get disk(): string | null {
    return this.files.kind === 'disk' ? join((this.files as unknown as { dir: string }).dir, '.system', this.area) : null;
  }

  private get s3(): { client: Minio.Client; bucket: string; prefix: string } {
    const s = this.files as unknown as { client: Minio.Client; bucket: string };
    return { client: s.client, bucket: s.bucket, prefix: `system/${this.area}/` };
  }

  async put(name: string, data: Buffer): Promise<void> {
    const root = this.disk;
    if (root === null) {
      const s3 = this.s3;
      await s3.client.putObject(s3.bucket, s3.prefix + name, data, data.length);
      return;
    }
    const path = join(root, name);
    const dir = dirname(path);
    await mkdir(dir, { recursive: true });
    const tmp = join(dir, `.${path.slice(dir.length + 1)}.${process.pid}.tmp`);
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }

  /** An object's bytes; null when there is none. Any other failure (the store down) throws. */
  async get(name: string): Promise<Buffer | null> {
    const root = this.disk;
    try {
      if (root !== null) return await readFile(join(root, name));
      const s3 = this.s3;
      const chunks: Buffer[] = [];
      for await (const c of await s3.client.getObject(s3.bucket, s3.prefix + name)) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'ENOENT' || code === 'NoSuchKey' || code === 'NotFound') return null;
      throw e;
    }
  }

  /** The names of the objects directly in the area (disk) or anywhere under it (S3), unsorted. */
  async list(): Promise<string[]> {
    const root = this.disk;
    if (root !== null) return readdir(root).catch(() => [] as string[]);
    const s3 = this.s3;
    const names: string[] = [];
    for await (const o of s3.client.listObjectsV2(s3.bucket, s3.prefix, true) as AsyncIterable<Minio.BucketItem>) {
      if (o.name) names.push(o.name.slice(s3.prefix.length));
    }
    return names;
  }

  async delete(name: string): Promise<void> {
    const root = this.disk;
    if (root !== null) await rm(join(root, name), { force: true });
    else await this.s3.client.removeObject(this.s3.bucket, this.s3.prefix + name);
  }
}
