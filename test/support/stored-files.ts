import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type * as Minio from 'minio';
import type { FileStore } from '../../src/adapters/file-store.js';
import type { S3FileStore } from '../../src/adapters/file-store-s3.js';

/** Every object a platform's file store holds under `<space>/<host>/` (the disk store's incoming directory is not under it). */
export async function storedUnder(files: FileStore, filesDir: string, space: string, host: string): Promise<string[]> {
  if (files.kind === 'disk') {
    try {
      return readdirSync(join(filesDir, space, host));
    } catch {
      return [];
    }
  }
  const s3 = files as S3FileStore;
  const out: string[] = [];
  for await (const o of s3.client.listObjectsV2(s3.bucket, `${space}/${host}/`, true) as AsyncIterable<Minio.BucketItem>) if (o.name) out.push(o.name);
  return out;
}
