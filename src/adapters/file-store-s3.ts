/**
 * The file store on S3 (MinIO, S3Proxy or any S3-compatible server) through `minio` 8.
 *
 * Object name: `<space>/<host>/<objectId>/<requested path>` (the storage key). The metadata
 * travels with the object: Content-Type is the sniffed type, `x-amz-meta-original-path`
 * (percent-encoded, headers are ASCII) the requested path, `x-amz-meta-creation-time` the
 * upload's start, `x-amz-meta-uploader` (percent-encoded) the user who uploaded it.
 *
 * Uploads do their own multipart upload instead of minio's `putObject`, for three reasons
 * measured with minio 8.0.7: for a stream of unknown size `putObject` picks a part size of
 * maxObjectSize/10000 (about 528 MiB) and so buffers a 100 MB upload whole; it never aborts
 * the multipart upload when the stream fails, leaving an incomplete upload behind; and it
 * attaches no error handler to the source stream (a failing body crashes the process).
 * Here: a body shorter than one part goes in one PUT; a longer one in parts of `partSize`
 * (8 MiB by default) with one part in flight while the next fills, so an upload holds at most
 * two parts; any failure (413 included) aborts the multipart upload before `put` rejects.
 * S3 shows an object only once its PUT or CompleteMultipartUpload succeeded: a half-written
 * upload is never visible.
 */
import * as Minio from 'minio';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError } from '../errors.js';
import {
  checkKey,
  checkPutOptions,
  fileKeyOf,
  meterBody,
  newObjectId,
  resolveRange,
  sniffMimeType,
  SNIFF_BYTES,
  splitStoredKey,
  storageKeyOf,
  storedFile,
  storedKeyOf,
  type ByteRange,
  type FileKey,
  type FileRead,
  type FileStore,
  type FileStoreLog,
  type PutOptions,
  type StoredFile,
} from './file-store.js';

export interface S3FileStoreOptions {
  endPoint: string;
  port?: number;
  useSSL?: boolean;
  accessKey: string;
  secretKey: string;
  bucket: string;
  region?: string;
  tmpTtlSeconds: number;
  /** Multipart part size (at least 5 MiB, S3's minimum); default 8 MiB. */
  partSize?: number;
  log?: FileStoreLog;
}

const MiB = 1024 * 1024;
const MIN_PART = 5 * MiB;
/** S3's limit on parts per upload. */
const MAX_PARTS = 10000;
/** Incomplete multipart uploads older than this are aborted by the sweeper. */
const STALE_UPLOAD_MS = 24 * 3600_000;
const META_ORIGINAL_PATH = 'original-path';
const META_CREATION_TIME = 'creation-time';
const META_UPLOADER = 'uploader';

const isNotFound = (e: unknown): boolean => {
  const code = (e as { code?: string }).code;
  return code === 'NoSuchKey' || code === 'NotFound' || code === 'NoSuchUpload';
};

const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);

/** A server that cannot be reached is UNAVAILABLE (503); other errors go on unchanged. */
function unavailable(e: unknown): unknown {
  const code = (e as { code?: string }).code;
  return code && UNREACHABLE.has(code) ? new AppError('UNAVAILABLE', 'The file store is unavailable', { cause: code }) : e;
}

export class S3FileStore implements FileStore {
  readonly kind = 's3' as const;
  beforeDelete?: (key: FileKey) => Promise<void>;
  readonly client: Minio.Client;
  readonly bucket: string;
  private readonly ttlMs: number;
  private readonly partSize: number;
  private readonly log: FileStoreLog;
  /** Whether the server took the lifecycle rule on `tmp/` (S3Proxy does not: NotImplemented). */
  lifecycleRule: 'set' | 'unsupported' | 'unknown' = 'unknown';

  constructor(opts: S3FileStoreOptions) {
    this.client = new Minio.Client({
      endPoint: opts.endPoint,
      port: opts.port,
      useSSL: opts.useSSL ?? false,
      accessKey: opts.accessKey,
      secretKey: opts.secretKey,
      // A fixed region spares a GetBucketLocation round trip per new bucket.
      region: opts.region ?? 'us-east-1',
    });
    this.bucket = opts.bucket;
    this.ttlMs = opts.tmpTtlSeconds * 1000;
    this.partSize = Math.max(MIN_PART, opts.partSize ?? 8 * MiB);
    this.log = opts.log ?? (() => undefined);
  }

  async ready(): Promise<void> {
    try {
      if (!(await this.client.bucketExists(this.bucket))) {
        await this.client.makeBucket(this.bucket).catch((e: unknown) => {
          // Another process made it first.
          if (!['BucketAlreadyOwnedByYou', 'BucketAlreadyExists'].includes((e as { code?: string }).code ?? '')) throw e;
        });
      }
    } catch (e) {
      throw unavailable(e);
    }
    await this.setLifecycleRule();
  }

  /**
   * Whether the bucket answers. One request at a time: a store that accepts and never answers
   * holds one request, never one more per health check (/health bounds its wait, `within`).
   */
  ping(): Promise<boolean> {
    this.pinging ??= this.client
      .bucketExists(this.bucket)
      .catch(() => false)
      .finally(() => {
        this.pinging = undefined;
      });
    return this.pinging;
  }

  private pinging?: Promise<boolean>;

  /** Expires `tmp/` objects after the TTL rounded up to whole days (S3 counts in days). */
  private async setLifecycleRule(): Promise<void> {
    const days = Math.max(1, Math.ceil(this.ttlMs / 86400_000));
    try {
      await this.client.setBucketLifecycle(this.bucket, {
        Rule: [{ ID: 'expire-tmp', Status: 'Enabled', Filter: { Prefix: 'tmp/' }, Expiration: { Days: days } }],
      });
      this.lifecycleRule = 'set';
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code !== 'NotImplemented' && code !== 'AccessDenied') throw unavailable(e);
      this.lifecycleRule = 'unsupported';
      this.log(`the S3 server refused a lifecycle rule on tmp/ (${code}); tmp files expire through the sweeper only`);
    }
  }

  /** Part size for a limit: parts must be few enough for S3's 10,000 (whole MiB). */
  private partSizeFor(maxBytes: number): number {
    return Math.max(this.partSize, Math.ceil(maxBytes / MAX_PARTS / MiB) * MiB);
  }

  async put(requested: FileKey, body: Readable, opts: PutOptions): Promise<StoredFile> {
    const key = checkKey(requested);
    checkPutOptions(opts);
    const objectId = newObjectId();
    const stored = storedKeyOf(key, objectId);
    const name = storageKeyOf(stored);
    const creationTime = Date.now();
    const partSize = this.partSizeFor(opts.maxBytes);
    const { meter, detach } = meterBody(body, opts);

    let mimeType = '';
    const headers = (): Record<string, string> => ({
      'Content-Type': mimeType,
      [`X-Amz-Meta-${META_ORIGINAL_PATH}`]: encodeURIComponent(key.path),
      [`X-Amz-Meta-${META_CREATION_TIME}`]: String(creationTime),
      [`X-Amz-Meta-${META_UPLOADER}`]: encodeURIComponent(opts.uploader),
    });

    let uploadId: string | undefined;
    const etags: { part: number; etag: string }[] = [];
    let inFlight: Promise<void> | undefined;
    let partNumber = 0;
    const sendPart = (data: Buffer): void => {
      const part = ++partNumber;
      inFlight = this.client
        .uploadPart({ bucketName: this.bucket, objectName: name, uploadID: uploadId!, partNumber: part, headers: {} }, data)
        .then((r) => void etags.push({ part, etag: r.etag }));
      // Handled now, awaited later: a failure must not count as an unhandled rejection meanwhile.
      inFlight.catch(() => undefined);
    };

    // The bytes of the part being filled.
    let chunks: Buffer[] = [];
    let filled = 0;
    const takePart = (): Buffer => {
      const all = Buffer.concat(chunks, filled);
      const part = all.subarray(0, Math.min(partSize, filled));
      const rest = all.subarray(part.length);
      chunks = rest.length ? [rest] : [];
      filled = rest.length;
      return part;
    };

    try {
      await pipeline(meter, async (source: AsyncIterable<Buffer>) => {
        for await (const chunk of source) {
          chunks.push(chunk);
          filled += chunk.length;
          while (filled >= partSize) {
            const part = takePart();
            if (uploadId === undefined) {
              mimeType = await sniffMimeType(part.subarray(0, SNIFF_BYTES), opts.contentType);
              uploadId = await this.client.initiateNewMultipartUpload(this.bucket, name, headers());
            }
            // One part in flight at a time: wait for the previous one before sending this one.
            await inFlight;
            sendPart(part);
          }
        }
      }).finally(detach);
      // Parts sent so far are not an object yet: a refusal here aborts them below.
      await opts.beforeCommit?.(stored);

      if (uploadId === undefined) {
        // Shorter than one part: one PUT with its length.
        const data = takePart();
        mimeType = await sniffMimeType(data.subarray(0, SNIFF_BYTES), opts.contentType);
        await this.client.putObject(this.bucket, name, data, data.length, headers());
      } else {
        await inFlight;
        if (filled > 0) {
          sendPart(takePart());
          await inFlight;
        }
        etags.sort((a, b) => a.part - b.part);
        await this.client.completeMultipartUpload(this.bucket, name, uploadId, etags);
      }
    } catch (e) {
      if (uploadId !== undefined) {
        // A part still being sent could land after the abort; let it settle first.
        await inFlight?.catch(() => undefined);
        await this.client.abortMultipartUpload(this.bucket, name, uploadId).catch((abortErr: unknown) => {
          this.log(`could not abort the multipart upload of ${name} (the sweeper will): ${(abortErr as Error).message}`);
        });
      }
      throw unavailable(e);
    }
    return storedFile(stored, objectId, { length: meter.bytes, creationTime, mimeType, originalPath: key.path, uploader: opts.uploader });
  }

  private async statObject(key: FileKey): Promise<StoredFile | null> {
    const split = splitStoredKey(key);
    if (!split) return null;
    let st: Minio.BucketItemStat;
    try {
      st = await this.client.statObject(this.bucket, storageKeyOf(key));
    } catch (e) {
      if (isNotFound(e)) return null;
      throw unavailable(e);
    }
    const meta = st.metaData as Record<string, string | undefined>;
    const created = Number(meta[META_CREATION_TIME]);
    let originalPath = split.originalPath;
    try {
      originalPath = decodeURIComponent(meta[META_ORIGINAL_PATH] ?? originalPath);
    } catch {
      /* written by someone else: keep the path of the key */
    }
    let uploader: string | undefined;
    try {
      uploader = meta[META_UPLOADER] === undefined ? undefined : decodeURIComponent(meta[META_UPLOADER]);
    } catch {
      /* written by someone else: no uploader, so sysadmin only */
    }
    return storedFile(key, split.objectId, {
      length: st.size,
      creationTime: Number.isFinite(created) && created > 0 ? created : st.lastModified.getTime(),
      mimeType: meta['content-type'] ?? 'application/octet-stream',
      originalPath,
      uploader,
    });
  }

  async stat(key: FileKey): Promise<StoredFile | null> {
    return this.statObject(checkKey(key));
  }

  async get(key: FileKey, range?: ByteRange): Promise<FileRead> {
    const k = checkKey(key);
    const info = await this.statObject(k);
    if (!info) throw new AppError('NOT_FOUND', 'File not found');
    const r = resolveRange(range, info.length);
    try {
      const stream = r
        ? await this.client.getPartialObject(this.bucket, info.storageKey, r.start, r.end - r.start + 1)
        : await this.client.getObject(this.bucket, info.storageKey);
      return { stream, info, range: r };
    } catch (e) {
      if (isNotFound(e)) throw new AppError('NOT_FOUND', 'File not found'); // deleted since the stat
      throw unavailable(e);
    }
  }

  async delete(key: FileKey): Promise<boolean> {
    const k = checkKey(key);
    if (!(await this.statObject(k))) return false;
    await this.beforeDelete?.(k);
    try {
      await this.client.removeObject(this.bucket, storageKeyOf(k));
    } catch (e) {
      if (isNotFound(e)) return false;
      throw unavailable(e);
    }
    return true;
  }

  /**
   * Deletes `tmp/` objects older than the TTL (the lifecycle rule, where the server has one,
   * does the same a day-granular while later) and aborts multipart uploads that were started
   * more than a day ago and never finished.
   */
  async sweepExpired(now = Date.now()): Promise<number> {
    let deleted = 0;
    try {
      const expired: string[] = [];
      for await (const o of this.client.listObjectsV2(this.bucket, 'tmp/', true) as AsyncIterable<Minio.BucketItem>) {
        if (o.name && o.lastModified && o.lastModified.getTime() + this.ttlMs <= now) expired.push(o.name);
      }
      for (const name of expired) {
        const key = this.beforeDelete && tmpKeyOf(name);
        if (key) await this.beforeDelete?.(key);
        await this.client.removeObject(this.bucket, name);
        deleted++;
      }
      for (const prefix of ['tmp/', 'content/']) {
        // Paged by hand: minio's listIncompleteUploads also lists the parts of every upload.
        let keyMarker = '';
        let uploadIdMarker = '';
        for (;;) {
          const page = await this.client.listIncompleteUploadsQuery(this.bucket, prefix, keyMarker, uploadIdMarker, '');
          for (const u of page.uploads) {
            if (new Date(u.initiated).getTime() + STALE_UPLOAD_MS > now) continue;
            await this.client.abortMultipartUpload(this.bucket, u.key, u.uploadId).catch((e: unknown) => {
              if (!isNotFound(e)) throw e;
            });
          }
          if (!page.isTruncated) break;
          keyMarker = page.nextKeyMarker;
          uploadIdMarker = page.nextUploadIdMarker;
        }
      }
    } catch (e) {
      throw unavailable(e);
    }
    if (deleted) this.log(`deleted ${deleted} expired tmp object(s) from bucket ${this.bucket}`);
    return deleted;
  }
}

/** The key of a `tmp/` object name, or null for a name no upload of this store made. */
function tmpKeyOf(name: string): FileKey | null {
  const [, host] = name.split('/', 2);
  try {
    return fileKeyOf('tmp', host, name.slice(`tmp/${host}/`.length));
  } catch {
    return null;
  }
}
