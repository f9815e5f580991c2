/**
 * The file store on the local disk (CONTRACT §1 "Files": S3 unset, files under FILES_DIR).
 *
 * Layout under `dir`:
 *   <space>/<host>/<objectId>.data   the bytes
 *   <space>/<host>/<objectId>.json   the sidecar: what `stat` answers (the uploader too); its presence is the commit
 *   .incoming/                       uploads in progress (same filesystem, so rename is atomic)
 *
 * The requested path lives in the sidecar only, so no path segment ever becomes a file name:
 * the host is the one user-given name on disk, and `fileKeyOf` has refused every host that is
 * not a plain directory name. A put writes the data to .incoming, fsyncs, renames it into
 * place, then writes the sidecar the same way: a reader sees the whole file or nothing. Delete
 * removes the sidecar first. Data without a sidecar (a crash between the two renames) is
 * invisible, and the sweeper removes it.
 */
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError } from '../errors.js';
import {
  checkKey,
  checkPutOptions,
  fileKeyOf,
  newObjectId,
  resolveRange,
  sniffMimeType,
  splitStoredKey,
  storedFile,
  storedKeyOf,
  meterBody,
  type ByteRange,
  type FileKey,
  type FileRead,
  type FileStore,
  type FileStoreLog,
  type PutOptions,
  type StoredFile,
} from './file-store.js';

export interface DiskFileStoreOptions {
  dir: string;
  tmpTtlSeconds: number;
  log?: FileStoreLog;
}

interface Sidecar {
  /** The stored path, `<objectId>/<requested path>`. */
  path: string;
  length: number;
  creationTime: number;
  mimeType: string;
  originalPath: string;
  /** Absent in sidecars written before uploaders were recorded. */
  uploader?: string;
}

const INCOMING = '.incoming';
/** Leftovers of unfinished uploads older than this are removed by the sweeper. */
const STALE_UPLOAD_MS = 6 * 3600_000;

const isMissing = (e: unknown): boolean => (e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR';

/** fsync of a directory, so renames and unlinks in it survive a crash. */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Writes `data` to `tmp`, fsyncs, and renames it to `target`. */
async function writeFileAtomic(tmp: string, target: string, data: string): Promise<void> {
  const fh = await open(tmp, 'wx', 0o644);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, target);
}

export class DiskFileStore implements FileStore {
  readonly kind = 'disk' as const;
  beforeDelete?: (key: FileKey) => Promise<void>;
  readonly dir: string;
  private readonly incoming: string;
  private readonly ttlMs: number;
  private readonly log: FileStoreLog;

  constructor(opts: DiskFileStoreOptions) {
    this.dir = resolve(opts.dir);
    this.incoming = join(this.dir, INCOMING);
    this.ttlMs = opts.tmpTtlSeconds * 1000;
    this.log = opts.log ?? (() => undefined);
  }

  async ready(): Promise<void> {
    await mkdir(this.incoming, { recursive: true });
    await mkdir(join(this.dir, 'tmp'), { recursive: true });
    await mkdir(join(this.dir, 'content'), { recursive: true });
  }

  async ping(): Promise<boolean> {
    return stat(this.incoming).then(
      (st) => st.isDirectory(),
      () => false,
    );
  }

  private hostDir(key: FileKey): string {
    return join(this.dir, key.space, key.host);
  }

  async put(requested: FileKey, body: Readable, opts: PutOptions): Promise<StoredFile> {
    const key = checkKey(requested);
    checkPutOptions(opts);
    const objectId = newObjectId();
    const stored = storedKeyOf(key, objectId);
    const creationTime = Date.now();
    const tmpData = join(this.incoming, `${objectId}.data`);
    const tmpMeta = join(this.incoming, `${objectId}.json`);
    const dir = this.hostDir(key);
    const data = join(dir, `${objectId}.data`);
    const meta = join(dir, `${objectId}.json`);
    // Opened before the body flows into the meter: a write stream that opens its own file could
    // create it after an early refusal's rm below (a 413 on the first chunk left .incoming files).
    const out = await open(tmpData, 'wx', 0o644);
    const { meter, detach } = meterBody(body, opts);
    let placed = false;
    try {
      // `flush`: fsync before close, so the rename below never publishes unwritten data.
      await pipeline(meter, out.createWriteStream({ flush: true })).finally(detach);
      // Before anything is placed: a refusal leaves only the incoming data, removed below.
      await opts.beforeCommit?.(stored);
      const info = storedFile(stored, objectId, {
        length: meter.bytes,
        creationTime,
        mimeType: await sniffMimeType(meter.head(), opts.contentType),
        originalPath: key.path,
        uploader: opts.uploader,
      });
      await mkdir(dir, { recursive: true });
      await rename(tmpData, data);
      placed = true;
      const sidecar: Sidecar = {
        path: stored.path,
        length: info.length,
        creationTime,
        mimeType: info.mimeType,
        originalPath: info.originalPath,
        uploader: opts.uploader,
      };
      await writeFileAtomic(tmpMeta, meta, JSON.stringify(sidecar));
      await syncDir(dir);
      return info;
    } catch (e) {
      await Promise.all([tmpData, tmpMeta, ...(placed ? [data] : [])].map((f) => rm(f, { force: true })));
      throw e;
    }
  }

  private async readSidecar(key: FileKey): Promise<{ sidecar: Sidecar; objectId: string } | null> {
    const split = splitStoredKey(key);
    if (!split) return null;
    let text: string;
    try {
      text = await readFile(join(this.hostDir(key), `${split.objectId}.json`), 'utf8');
    } catch (e) {
      if (isMissing(e)) return null;
      throw e;
    }
    const sidecar = JSON.parse(text) as Sidecar;
    // The object id names the file; the rest of the path must be the one it was stored under.
    return sidecar.path === key.path ? { sidecar, objectId: split.objectId } : null;
  }

  private info(key: FileKey, objectId: string, s: Sidecar): StoredFile {
    return storedFile(key, objectId, s);
  }

  async stat(key: FileKey): Promise<StoredFile | null> {
    const k = checkKey(key);
    const found = await this.readSidecar(k);
    return found ? this.info(k, found.objectId, found.sidecar) : null;
  }

  async get(key: FileKey, range?: ByteRange): Promise<FileRead> {
    const k = checkKey(key);
    const found = await this.readSidecar(k);
    if (!found) throw new AppError('NOT_FOUND', 'File not found');
    const info = this.info(k, found.objectId, found.sidecar);
    const r = resolveRange(range, info.length);
    // Opened before returning: a delete after this point does not cut a read in progress.
    const fh = await open(join(this.hostDir(k), `${found.objectId}.data`), 'r').catch((e: unknown) => {
      throw isMissing(e) ? new AppError('NOT_FOUND', 'File not found') : e;
    });
    // The stream closes the handle when it ends or is destroyed.
    const stream = fh.createReadStream({ start: r?.start, end: r?.end, highWaterMark: 256 * 1024 });
    return { stream, info, range: r };
  }

  async delete(key: FileKey): Promise<boolean> {
    const k = checkKey(key);
    const found = await this.readSidecar(k);
    if (!found) return false;
    await this.beforeDelete?.(k);
    return this.remove(this.hostDir(k), found.objectId);
  }

  /** Removes a file: the sidecar first (it disappears at once), then the data. */
  private async remove(dir: string, objectId: string): Promise<boolean> {
    try {
      await unlink(join(dir, `${objectId}.json`));
    } catch (e) {
      if (isMissing(e)) return false; // someone else deleted it
      throw e;
    }
    await rm(join(dir, `${objectId}.data`), { force: true });
    return true;
  }

  async sweepExpired(now = Date.now()): Promise<number> {
    let deleted = 0;
    for (const space of ['tmp', 'content'] as const) {
      const spaceDir = join(this.dir, space);
      for (const host of await readdir(spaceDir).catch(() => [] as string[])) {
        const dir = join(spaceDir, host);
        const names = await readdir(dir).catch(() => [] as string[]);
        const sidecars = new Set(names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5)));
        for (const name of names) {
          const objectId = name.slice(0, name.lastIndexOf('.'));
          if (name.endsWith('.json') && space === 'tmp') {
            const s = await readFile(join(dir, name), 'utf8').then(
              (t) => JSON.parse(t) as Sidecar,
              () => null,
            );
            if (s && s.creationTime + this.ttlMs <= now) {
              const key = this.beforeDelete && keyOrNull(host, s.path);
              if (key) await this.beforeDelete?.(key);
              if (await this.remove(dir, objectId)) deleted++;
            }
          } else if (name.endsWith('.data') && !sidecars.has(objectId)) {
            // Data without a sidecar: a put that crashed between its two renames (or one that
            // is between them right now, hence the age).
            const st = await stat(join(dir, name)).catch(() => null);
            if (st && st.mtimeMs + STALE_UPLOAD_MS <= now) await rm(join(dir, name), { force: true });
          }
        }
      }
    }
    for (const name of await readdir(this.incoming).catch(() => [] as string[])) {
      const st = await stat(join(this.incoming, name)).catch(() => null);
      if (st && st.mtimeMs + STALE_UPLOAD_MS <= now) await rm(join(this.incoming, name), { force: true });
    }
    if (deleted) this.log(`deleted ${deleted} expired tmp file(s) under ${this.dir}`);
    return deleted;
  }
}

/** The key of a tmp file on disk, or null for one no upload of this store made (nothing can have named it). */
function keyOrNull(host: string, path: string): FileKey | null {
  try {
    return fileKeyOf('tmp', host, path);
  } catch {
    return null;
  }
}
