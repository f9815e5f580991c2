import { rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { FileKey, FileStore } from './file-store.js';

export interface RenditionStoreOptions {
  /** The kind of the platform's file store: renditions live beside its files, in the same medium. */
  kind: FileStore['kind'];
  filesDir: string;
  tmpTtlSeconds: number;
  s3?: { endPoint: string; port?: number; useSSL: boolean; accessKey: string; secretKey: string; bucket: string };
}

/**
 * The store of kept renditions (CONTRACT §17): a file store of its own, never the one the file
 * and delivery services read. On disk a directory `renditions` inside FILES_DIR (the user store
 * reaches only its `tmp` and `content` directories there), on S3 the bucket `<S3_BUCKET>-renditions`.
 * So no file address a user can write, whatever its spelling, names a rendition, and a
 * rendition can only be served through the rendition path, after the source's own checks.
 *
 * On disk each rendition has a directory of its own (its id is the key's host): deleting an
 * evicted rendition removes that directory too once it is empty, so evictions leave nothing.
 */
export async function createRenditionStore(o: RenditionStoreOptions): Promise<FileStore> {
  if (o.kind === 's3' && o.s3) {
    const { S3FileStore } = await import('./file-store-s3.js');
    const store = new S3FileStore({ ...o.s3, bucket: `${o.s3.bucket}-renditions`, tmpTtlSeconds: o.tmpTtlSeconds });
    await store.ready();
    return store;
  }
  const { DiskFileStore } = await import('./file-store-disk.js');
  class DiskRenditionStore extends DiskFileStore {
    override async delete(key: FileKey): Promise<boolean> {
      const deleted = await super.delete(key);
      // Fails (and is left) when the directory still holds a file, or is already gone.
      await rmdir(join(this.dir, key.space, key.host)).catch(() => undefined);
      return deleted;
    }
  }
  const store = new DiskRenditionStore({ dir: join(o.filesDir, 'renditions'), tmpTtlSeconds: o.tmpTtlSeconds });
  await store.ready();
  return store;
}
