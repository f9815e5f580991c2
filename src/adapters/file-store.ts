/**
 * The file store of the file service (spec "File service", "File parameters"; CONTRACT §8):
 * one interface, two implementations, S3 through `minio` (file-store-s3.ts) and the local disk
 * (file-store-disk.ts), chosen by the settings in `createFileStore`.
 *
 * - Files are immutable. Every upload gets a new, globally unique object id, and the stored
 *   path is `<objectId>/<requested path>`: no upload ever overwrites another. The storage key
 *   of a file is `<space>/<host>/<objectId>/<requested path>`.
 * - Uploads and downloads stream; an upload holds at most a part (S3) or a chunk (disk) in
 *   memory, never the whole file.
 * - An upload whose length reaches `maxBytes` is refused with PAYLOAD_TOO_LARGE (413) while it
 *   streams, and nothing of it stays behind. A half-written upload is never visible.
 * - Keys never escape their space: `fileKeyOf` is the one gate every key passes.
 * - `tmp` files expire after the TTL: an S3 lifecycle rule on `tmp/` where the server has
 *   lifecycle rules, and `sweepExpired` (run by `startSweeper`) on both stores.
 */
import { finished, Transform, type Readable, type TransformCallback } from 'node:stream';
import { fileTypeFromBuffer } from 'file-type';
import { ulid } from 'ulid';
import { AppError } from '../errors.js';

/** The spec's spaces (the scheme of a file URI). */
export const FILE_SPACES = ['tmp', 'content'] as const;
export type FileSpace = (typeof FILE_SPACES)[number];

declare const validated: unique symbol;

/** A key that passed `fileKeyOf`: space, host (owner) and path within the host. */
export interface FileKey {
  readonly space: FileSpace;
  /** The owner part; never contains `/`. */
  readonly host: string;
  /** Path within the host: non-empty `/`-separated segments, none `.` or `..`. */
  readonly path: string;
  readonly [validated]: true;
}

/** What the store knows about a stored file (spec "File info", plus where it is). */
export interface StoredFile {
  /** The stored key: its path is `<objectId>/<requested path>`. Use it for get, stat, delete. */
  key: FileKey;
  /** `<space>/<host>/<objectId>/<requested path>`: the S3 object name. */
  storageKey: string;
  objectId: string;
  length: number;
  /** Epoch ms when the upload started. */
  creationTime: number;
  /** Equal to creationTime: files never change. */
  modifiedTime: number;
  /** Not recorded. */
  accessTime: -1;
  /** Sniffed from the first bytes, else the declared Content-Type, else application/octet-stream. */
  mimeType: string;
  /** The path that was requested on upload. */
  originalPath: string;
  /**
   * The user who uploaded it (CONTRACT §20: a `tmp` file is its uploader's); absent for files
   * stored before uploaders were recorded.
   */
  uploader?: string;
}

export interface PutOptions {
  /** The upload limit: a body of this many bytes or more is refused with PAYLOAD_TOO_LARGE. */
  maxBytes: number;
  /** The user id of the uploader, recorded with the file. */
  uploader: string;
  /** The declared Content-Type; used when the data's type cannot be sniffed. */
  contentType?: string;
  /** The declared length (Content-Length) when known: refused at once when it reaches maxBytes. */
  declaredLength?: number;
  /**
   * Run once the whole body is in, just before the step that makes the file permanent (S3's
   * putObject or completeMultipartUpload, the disk store's renames): when it throws, the upload
   * fails with its error and nothing of it stays. The file service checks the uploader's token
   * and access again here: an upload may last hours (request-auth.ts). `stored` is the key the
   * file will have (with its object id).
   */
  beforeCommit?: (stored: FileKey) => Promise<void>;
}

/** Inclusive byte range, as in an HTTP `Range: bytes=start-end`; `end` defaults to the last byte. */
export interface ByteRange {
  start: number;
  end?: number;
}

export interface FileRead {
  stream: Readable;
  info: StoredFile;
  /** The bytes the stream carries (inclusive); absent when the whole file is read. */
  range?: { start: number; end: number };
}

/**
 * A store of immutable files.
 *
 * @example
 * const store = await createFileStore(settings);
 * await store.ready();
 * const info = await store.put(fileKeyOf('tmp', 'editor', 'img/a.png'), req, { maxBytes: settings.MAX_UPLOAD_BYTES, uploader: 'editor' });
 * const { stream } = await store.get(info.key);
 */
export interface FileStore {
  readonly kind: 'disk' | 's3';
  /**
   * Run before a stored file is removed, once the store found it: by `delete`, and by
   * `sweepExpired` for each expired `tmp` file. When it throws, the file is kept (`delete` throws,
   * `sweepExpired` fails its pass, tried again next time). The web role sets it
   * (`condemnRenditions`): a source's kept renditions go before the source does (SECURITY.md).
   */
  beforeDelete?: (key: FileKey) => Promise<void>;
  /** Creates what the store needs (directories, bucket, lifecycle rule); idempotent. */
  ready(): Promise<void>;
  /** Does the store answer (for /health)? Never throws. */
  ping(): Promise<boolean>;
  /** Streams `body` into a new file under a new object id; atomic, never overwrites. */
  put(key: FileKey, body: Readable, opts: PutOptions): Promise<StoredFile>;
  /** Opens a stored file (the key of a `StoredFile`); NOT_FOUND when it is not there. */
  get(key: FileKey, range?: ByteRange): Promise<FileRead>;
  /** The file's info, or null when it is not there. */
  stat(key: FileKey): Promise<StoredFile | null>;
  /** Deletes a stored file; false when it was not there. */
  delete(key: FileKey): Promise<boolean>;
  /**
   * Deletes `tmp` files created more than the TTL before `now`, and leftovers of uploads that
   * never finished; returns how many tmp files it deleted.
   */
  sweepExpired(now?: number): Promise<number>;
}

// ---------------------------------------------------------------------------------------------
// Keys

/** S3's limit on an object name, in UTF-8 bytes; kept on disk too so both stores agree. */
export const MAX_STORAGE_KEY_BYTES = 1024;
/** A file name's limit on common filesystems, in UTF-8 bytes. */
export const MAX_SEGMENT_BYTES = 255;

/** C0 and C1 control characters and DEL. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** A lone UTF-16 surrogate (cannot be encoded as UTF-8). */
const LONE_SURROGATE = /\p{Cs}/u;
/** A drive letter (`C:`), an absolute path on Windows. */
const DRIVE = /^[A-Za-z]:$/;
/** Object ids: ULIDs (Crockford base32, 26 characters). */
export const OBJECT_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

const refuse = (reason: string, extra: Record<string, unknown> = {}): AppError =>
  new AppError('BAD_REQUEST', `Invalid file key: ${reason}`, { reason, ...extra });

/** Every form a segment takes when percent-decoded once, twice, ... (`%252e` → `%2e` → `.`). */
function decodings(segment: string): string[] {
  const forms = [segment];
  let cur = segment;
  for (let i = 0; i < 4 && cur.includes('%'); i++) {
    let next: string;
    try {
      next = decodeURIComponent(cur);
    } catch {
      break; // a `%` that is not an escape is a plain character
    }
    if (next === cur) break;
    forms.push(next);
    cur = next;
  }
  return forms;
}

function checkSegment(segment: string, what: 'host' | 'path segment'): void {
  if (segment === '') throw refuse(`empty ${what}`);
  for (const form of decodings(segment)) {
    if (form === '.' || form === '..') throw refuse(`${what} is a relative path step`, { segment });
    if (form.includes('/')) throw refuse(`${what} contains an (encoded) slash`, { segment });
    if (form.includes('\\')) throw refuse(`${what} contains a backslash`, { segment });
    if (form.includes('\0')) throw refuse(`${what} contains NUL`);
    if (CONTROL.test(form)) throw refuse(`${what} contains a control character`);
  }
  if (LONE_SURROGATE.test(segment)) throw refuse(`${what} is not valid Unicode`);
  if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) throw refuse(`${what} longer than ${MAX_SEGMENT_BYTES} bytes`);
}

/**
 * The one gate of file keys: refuses anything that could leave its space or its host on disk
 * or in S3 (BAD_REQUEST): `.` and `..` segments, their percent-encoded forms (`%2e%2e`, also
 * double-encoded), encoded slashes (`%2f`), absolute paths, empty segments, NUL and other
 * control characters, backslashes, a host with `/`, and keys longer than S3 allows.
 * Segments are taken as given: no decoding is applied to the stored key.
 */
export function fileKeyOf(space: string, host: string, path: string): FileKey {
  if (!(FILE_SPACES as readonly string[]).includes(space)) throw refuse('space must be tmp or content', { space });
  if (typeof host !== 'string' || typeof path !== 'string') throw refuse('host and path must be strings');
  if (host.includes('/')) throw refuse('host contains a slash');
  if (DRIVE.test(host)) throw refuse('host is a drive letter');
  checkSegment(host, 'host');
  if (path === '') throw refuse('empty path');
  if (path.startsWith('/') || path.startsWith('\\')) throw refuse('absolute path');
  const segments = path.split('/');
  if (DRIVE.test(segments[0])) throw refuse('absolute path');
  for (const segment of segments) checkSegment(segment, 'path segment');
  const key = { space: space as FileSpace, host, path } as FileKey;
  if (Buffer.byteLength(storageKeyOf(key)) > MAX_STORAGE_KEY_BYTES) throw refuse(`key longer than ${MAX_STORAGE_KEY_BYTES} bytes`);
  return Object.freeze(key);
}

/** Re-checks a key handed to a store (a cast object never gets through). */
export function checkKey(key: FileKey): FileKey {
  if (!key || typeof key !== 'object') throw refuse('not a key');
  return fileKeyOf(key.space, key.host, key.path);
}

/** `<space>/<host>/<path>`: the S3 object name and the key's place on disk. */
export function storageKeyOf(key: Pick<FileKey, 'space' | 'host' | 'path'>): string {
  return `${key.space}/${key.host}/${key.path}`;
}

/** The file URI of a key, `<space>://<host>/<path>` (spec "File info": URI). */
export function fileUriOf(key: FileKey): string {
  return `${key.space}://${key.host}/${key.path}`;
}

/** A new, globally unique object id (a ULID: time-ordered, 80 random bits). */
export const newObjectId = (): string => ulid();

/**
 * Splits a stored key into its object id and the requested path, or null when its path does
 * not have the shape of a stored key (`<objectId>/<path>`): such a key names no file.
 */
export function splitStoredKey(key: FileKey): { objectId: string; originalPath: string } | null {
  const slash = key.path.indexOf('/');
  if (slash < 0) return null;
  const objectId = key.path.slice(0, slash);
  return OBJECT_ID.test(objectId) ? { objectId, originalPath: key.path.slice(slash + 1) } : null;
}

/** The stored key of a new upload of `key` under `objectId`. */
export function storedKeyOf(key: FileKey, objectId: string): FileKey {
  return fileKeyOf(key.space, key.host, `${objectId}/${key.path}`);
}

export function storedFile(
  key: FileKey,
  objectId: string,
  f: { length: number; creationTime: number; mimeType: string; originalPath: string; uploader?: string },
): StoredFile {
  return {
    key,
    storageKey: storageKeyOf(key),
    objectId,
    length: f.length,
    creationTime: f.creationTime,
    modifiedTime: f.creationTime,
    accessTime: -1,
    mimeType: f.mimeType,
    originalPath: f.originalPath,
    ...(typeof f.uploader === 'string' ? { uploader: f.uploader } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Uploads

/** How many leading bytes the type sniffer sees. */
export const SNIFF_BYTES = 64 * 1024;

export const tooLarge = (maxBytes: number): AppError => new AppError('PAYLOAD_TOO_LARGE', `The upload must be smaller than ${maxBytes} bytes`, { maxBytes });

/** Refuses bad options, and a declared length that already reaches the limit, before any byte is read. */
export function checkPutOptions(opts: PutOptions): void {
  if (!Number.isSafeInteger(opts.maxBytes) || opts.maxBytes < 1) throw new TypeError('maxBytes must be a positive integer');
  if (typeof opts.uploader !== 'string' || opts.uploader === '') throw new TypeError('uploader must be a user id');
  if (opts.declaredLength !== undefined && opts.declaredLength >= opts.maxBytes) throw tooLarge(opts.maxBytes);
}

/**
 * A pass-through that counts bytes, fails with PAYLOAD_TOO_LARGE as soon as the count reaches
 * `maxBytes` (before the chunk that reaches it goes on), and keeps the first SNIFF_BYTES.
 */
export class UploadMeter extends Transform {
  bytes = 0;
  private readonly headChunks: Buffer[] = [];
  private headBytes = 0;

  constructor(private readonly opts: PutOptions) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes >= this.opts.maxBytes) {
      done(tooLarge(this.opts.maxBytes));
      return;
    }
    if (this.headBytes < SNIFF_BYTES) {
      const part = chunk.subarray(0, SNIFF_BYTES - this.headBytes);
      // A copy: the chunk's memory may belong to a larger pooled buffer.
      this.headChunks.push(Buffer.from(part));
      this.headBytes += part.length;
    }
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.opts.declaredLength !== undefined && this.bytes !== this.opts.declaredLength) {
      done(new AppError('BAD_REQUEST', `The body has ${this.bytes} bytes, ${this.opts.declaredLength} were declared`));
      return;
    }
    done();
  }

  /** The first bytes seen (up to SNIFF_BYTES). */
  head(): Buffer {
    return Buffer.concat(this.headChunks, this.headBytes);
  }
}

/**
 * Pipes `body` into a new UploadMeter. The body's errors, and its end without 'end' (a client
 * that went away), fail the meter. The body itself is never destroyed here: when an upload
 * fails (413 included) the caller still owns it and decides whether to drain it, so that an
 * HTTP server can still answer, or to close it. Call `detach` when the upload settled.
 */
export function meterBody(body: Readable, opts: PutOptions): { meter: UploadMeter; detach(): void } {
  const meter = new UploadMeter(opts);
  const stopWatching = finished(body, { writable: false }, (err) => {
    if (err) meter.destroy(err);
  });
  body.pipe(meter);
  return {
    meter,
    detach() {
      stopWatching();
      body.unpipe(meter);
    },
  };
}

/** A media type as a Content-Type header gives it: `type/subtype`, then any parameters. */
const MEDIA_TYPE = /^([\w!#$&^.+-]+\/[\w!#$&^.+-]+)\s*(;.*)?$/;
const CHARSET = /;\s*charset\s*=\s*"?([\w.:-]+)"?\s*(?:;|$)/i;

/**
 * The declared type of a file as it is kept and served: `type/subtype` and its charset, nothing
 * else; null for anything else. A comma is refused: browsers read a list-valued Content-Type
 * by its last entry, so `text/plain;,text/html` was kept as given, served as text/plain to the
 * platform's attachment rule (isMarkup) and rendered as HTML by the browser.
 */
export function keptMediaType(declared: string | undefined): string | null {
  const d = declared?.trim();
  if (!d || d.includes(',') || CONTROL.test(d)) return null;
  const m = MEDIA_TYPE.exec(d);
  if (!m) return null;
  const charset = m[2] ? CHARSET.exec(m[2])?.[1] : undefined;
  return charset ? `${m[1]}; charset=${charset}` : m[1];
}

/** The data's type from its first bytes, else the declared type, else application/octet-stream. */
export async function sniffMimeType(head: Uint8Array, declared?: string): Promise<string> {
  if (head.length > 0) {
    try {
      const found = await fileTypeFromBuffer(head);
      if (found) return found.mime;
    } catch {
      /* a truncated sample of a container format: fall back to the declared type */
    }
  }
  return keptMediaType(declared) ?? 'application/octet-stream';
}

/** Validates a range against a file's length: the inclusive bounds, or BAD_REQUEST. */
export function resolveRange(range: ByteRange | undefined, length: number): { start: number; end: number } | undefined {
  if (!range) return undefined;
  const { start } = range;
  const end = range.end === undefined ? length - 1 : Math.min(range.end, length - 1);
  if (!Number.isSafeInteger(start) || start < 0 || (range.end !== undefined && (!Number.isSafeInteger(range.end) || range.end < start)) || start >= length) {
    throw new AppError('BAD_REQUEST', 'Range not satisfiable', { start, end: range.end ?? null, length });
  }
  return { start, end };
}

// ---------------------------------------------------------------------------------------------
// Choosing a store, sweeping

export type FileStoreLog = (msg: string) => void;

/**
 * Runs a sweep of expired files (`pass`, answering how many it deleted) every `intervalMs`
 * (default: a tenth of the TTL, between one minute and an hour), one pass at a time; a failing
 * pass is logged and tried again next time. The web role runs two: `tmp` files
 * (`FileStore.sweepExpired`) and files no content claimed (src/security/unclaimed-files.ts).
 */
export function startSweeper(
  name: string,
  pass: () => Promise<number>,
  opts: { ttlSeconds: number; intervalMs?: number; log?: FileStoreLog },
): { stop(): void } {
  const every = opts.intervalMs ?? Math.min(3600_000, Math.max(60_000, (opts.ttlSeconds * 1000) / 10));
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    pass()
      .then((n) => n > 0 && opts.log?.(`${name} deleted ${n} expired file(s)`))
      .catch((e: unknown) => opts.log?.(`${name} failed: ${(e as Error).message}`))
      .finally(() => (running = false));
  }, every);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
