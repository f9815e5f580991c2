import { supportedMimeTypes } from 'file-type';
import { LRUCache } from 'lru-cache';
import { Turns } from '../adapters/turns.js';
import mime from 'mime-types';
import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { RedisClient } from '../adapters/redis.js';
import { fileKeyOf, fileUriOf, keptMediaType, type FileKey, type FileStore, type StoredFile } from '../adapters/file-store.js';
import { parseVersionId, type Aspect, type Snapshot, type VersionRecord } from '../content/model.js';
import { focalOfContent, MIME_OF_FORMAT, type NamedRenditions, resolveFormat } from '../content/renditions.js';
import type { Variants } from '../content/variants.js';
import { AppError } from '../errors.js';
import { fileAccess, fileKeyOfUri, fileReferencesOf, type FileAction, type FileDecision } from '../security/file-access.js';
import { UnclaimedFiles } from '../security/unclaimed-files.js';
import { permissionDenied, type Principal, type SecurityConfig } from '../content/permissions.js';
import type { TokenService } from '../security/token-service.js';
import type { Exchange } from './http.js';
import { authenticateRequest } from './request-auth.js';
import { rangeOf } from './byte-range.js';
import { Reads } from './reads.js';
import { Renditions, renderCaller } from './renditions.js';
import { checkAlias } from './schemas.js';
import { composeVariant } from './variant-reads.js';
import { loadRenditionsConfig } from '../../config/renditions.js';

export const FILE_PREFIX = 'file-service';
export const DELIVERY_PREFIX = 'file-delivery-service';

/** Files never change: clients may keep them (spec Limits). */
const FILE_CACHE_CONTROL = 'private, no-transform, max-age=31536000';
/** An alias may point at another version tomorrow: revalidate (the ETag makes that cheap). */
const ALIAS_CACHE_CONTROL = 'private, no-transform, no-cache';
/** Path of an upload whose path was omitted (under its object id, so still unique). */
const GENERATED_PATH = 'file';
/** The variant that overrides the file mapping of a content (spec "File delivery service"). */
export const DELIVERY_VARIANT = 'svcFileDelivery.variant';

export interface FileServiceDeps {
  settings: Settings;
  files: FileStore;
  store: ContentStore;
  tokens: TokenService;
  security: SecurityConfig;
  variants: Variants;
  clock: () => number;
  baseUrl: () => string;
  /** Renditions (CONTRACT §17) keep their index here. */
  redis: RedisClient;
  /** config/renditions.json; loaded from the repository when not given. */
  renditions?: NamedRenditions;
}

/** The spec's "File info" of a stored file. */
export function fileInfoOf(f: StoredFile) {
  return {
    URI: fileUriOf(f.key),
    length: f.length,
    creationTime: f.creationTime,
    modifiedTime: f.modifiedTime,
    accessTime: f.accessTime,
    mimeType: keptMediaType(f.mimeType) ?? 'application/octet-stream',
    originalPath: f.originalPath,
  };
}

/** Decoded request path segments as a file path; an encoded slash (`%2F`) must not become a separator. */
function joinSegments(segs: string[]): string {
  if (segs.some((s) => s.includes('/')))
    throw new AppError('BAD_REQUEST', 'Invalid file key: a path segment contains an encoded slash', { reason: 'encoded slash' });
  return segs.join('/');
}

/** A key's path as request path segments, each percent-encoded. */
const encodePath = (path: string): string => path.split('/').map(encodeURIComponent).join('/');

/**
 * The file service (spec "File service", CONTRACT §8): uploads into `tmp` or `content`, reads,
 * info and delete, all with a valid token and as `fileAccess` allows (CONTRACT §20: a
 * content's files by its permissions, tmp files for their uploader and sysadmin; another
 * user's tmp file answers as a missing one). Uploads stream from the socket into the store.
 *
 *   POST   file/<space>[/<host>[/<path>]]   201, Location, file info
 *   GET    file/<space>/<host>/<path>       the bytes (Range, ETag)
 *   DELETE file/<space>/<host>/<path>       200, empty
 *   GET    file/info/<space>/<host>/<path>  file info
 */
export class FileService {
  /** The routes, for the OpenAPI document (`:path` may hold `/`). */
  static readonly routes = {
    describe: () => [
      { pattern: 'file/:space', methods: ['POST'] },
      { pattern: 'file/:space/:host', methods: ['POST'] },
      { pattern: 'file/:space/:host/:path', methods: ['POST', 'GET', 'DELETE'] },
      { pattern: 'file/info/:space/:host/:path', methods: ['GET'] },
    ],
  };

  private readonly unclaimed: UnclaimedFiles;

  constructor(private readonly d: FileServiceDeps) {
    this.unclaimed = new UnclaimedFiles(d.redis, d.store.partitions, d.settings.UNCLAIMED_FILES_PER_USER);
  }

  async handle(x: Exchange, segs: string[]): Promise<void> {
    if (segs[0] !== 'file' || segs.length < 2) throw new AppError('NOT_FOUND', 'No such resource');
    if (segs[1] === 'info') {
      x.route = `${FILE_PREFIX}/file/info`;
      if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', `Method ${x.method} not allowed here`, { allow: ['GET'] });
      const user = await this.authenticate(x);
      const key = this.keyOf(segs.slice(2));
      const info = (await this.access(user, key, 'read')) ?? (await this.d.files.stat(key));
      if (!info) throw fileNotFound();
      x.sendJson(200, fileInfoOf(info));
      return;
    }
    x.route = `${FILE_PREFIX}/file`;
    switch (x.method) {
      case 'POST':
        return this.upload(x, segs.slice(1));
      case 'GET':
      case 'HEAD': {
        const user = await this.authenticate(x);
        const key = this.keyOf(segs.slice(1));
        const info = await this.access(user, key, 'read');
        // Kept by the browser for a year, decided for this token: another user's token must not be answered from it.
        return sendFile(x, this.d.files, key, { cacheControl: FILE_CACHE_CONTROL, info: info ?? undefined, headers: [['Vary', 'X-Auth-Token']] });
      }
      case 'DELETE': {
        await x.noBody();
        const user = await this.authenticate(x);
        const key = this.keyOf(segs.slice(1));
        await this.access(user, key, 'update');
        if (!(await this.d.files.delete(key))) throw fileNotFound();
        // Its mark, if it had one, no longer counts for its uploader.
        await this.unclaimed.forget(key);
        x.send(200, []);
        return;
      }
      default:
        throw new AppError('METHOD_NOT_ALLOWED', `Method ${x.method} not allowed here`, { allow: ['GET', 'POST', 'DELETE'] });
    }
  }

  /** The caller as they are once the whole request has arrived (request-auth.ts); 401 otherwise. */
  private authenticate(x: Exchange): Promise<Principal> {
    return authenticateRequest(this.d.tokens, x);
  }

  /**
   * CONTRACT §20 through `fileAccess`: 403 naming the permission when the owning content
   * refuses, 404 as for a missing file when the file is another user's; the stat when the rule
   * looked the file up (null when it did not).
   */
  private async access(user: Principal, key: FileKey, action: FileAction): Promise<StoredFile | null> {
    return (await this.allowed(user, key, action)).file;
  }

  /** `access`, answering the whole decision. */
  private async allowed(user: Principal, key: FileKey, action: FileAction): Promise<Extract<FileDecision, { kind: 'allowed' }>> {
    const decision = await fileAccess(this.d, user, key, action);
    if (decision.kind === 'denied') throw permissionDenied(decision.permission, user);
    if (decision.kind === 'hidden') throw fileNotFound();
    return decision;
  }

  /** The key of a stored file from `<space>/<host>/<path...>`. */
  private keyOf(segs: string[]): FileKey {
    if (segs.length < 3) throw new AppError('NOT_FOUND', 'A file address is <space>/<host>/<path>');
    return fileKeyOf(segs[0], segs[1], joinSegments(segs.slice(2)));
  }

  private async upload(x: Exchange, segs: string[]): Promise<void> {
    const user = await this.authenticate(x);
    const [space, host = user.userId, ...rest] = segs;
    const key = fileKeyOf(space, host, rest.length ? joinSegments(rest) : GENERATED_PATH);
    const first = await this.allowed(user, key, 'upload');
    // An uploader at the bound of marks is refused before the body flows (and again at the mark).
    const marks = this.d.settings.UNCLAIMED_FILE_MARKS;
    if (first.unclaimed && marks) await this.unclaimed.refuseFull(key.host, user.userId);
    const cl = x.header('content-length');
    const declaredLength = cl !== undefined && x.header('transfer-encoding') === undefined && /^\d{1,16}$/.test(cl) ? Number(cl) : undefined;
    let marked: FileKey | undefined;
    const info = await this.d.files
      .put(key, x.bodyStream(), {
        maxBytes: this.d.settings.MAX_UPLOAD_BYTES,
        contentType: x.header('content-type'),
        declaredLength,
        uploader: user.userId,
        // An upload may last hours: the caller as they are once it is complete (request-auth.ts),
        // and what they may do now (the content may have moved to another context meanwhile),
        // decide whether it is kept; a refusal answers as at the start, and nothing is kept. A
        // file of a host no live content holds now is marked before it is visible: it expires
        // unless a write maps it (src/security/unclaimed-files.ts).
        beforeCommit: async (stored) => {
          const now = await this.allowed(await this.d.tokens.required(x.header('x-auth-token')), key, 'upload');
          if (now.unclaimed && marks) {
            await this.unclaimed.mark(stored, this.d.clock(), user.userId);
            marked = stored;
          }
        },
      })
      .catch(async (e: unknown) => {
        // Not stored: its mark no longer counts for the uploader (a crash here leaves it to the sweep).
        if (marked) await this.unclaimed.forget(marked).catch(() => undefined);
        throw e;
      });
    const location = `${this.d.baseUrl()}/${FILE_PREFIX}/file/${info.key.space}/${encodeURIComponent(info.key.host)}/${encodePath(info.key.path)}`;
    x.sendJson(201, fileInfoOf(info), [
      ['Location', location],
      ['X-Original-Path', encodePath(info.originalPath)],
    ]);
  }
}

/**
 * The file delivery service (spec "File delivery service", CONTRACT §8): the files of a content
 * by version or alias, under the paths of its `svcFiles` aspect (or of its
 * `svcFileDelivery.variant` variant). Read permission on the content is needed, except for
 * content on a public view.
 *
 *   GET version/<version id>/<path in content>
 *   GET alias/<namespace>/<alias>/<path in content>
 */
export class FileDeliveryService {
  /** The routes, for the OpenAPI document (`:path` may hold `/`). */
  static readonly routes = {
    describe: () => [
      { pattern: 'version/:versionId/:path', methods: ['GET'] },
      { pattern: 'alias/:ns/:alias/:path', methods: ['GET'] },
    ],
  };

  /** Who may have which version's files: the one read rule (CONTRACT §12). */
  private readonly reads: Reads;
  /** Image renditions of delivered files (CONTRACT §17). */
  readonly renditions: Renditions;
  /** What each version maps, read once per version (not per request). */
  readonly maps: DeliveryMaps;

  constructor(private readonly d: FileServiceDeps) {
    this.reads = new Reads(d);
    this.maps = new DeliveryMaps(d);
    this.renditions = new Renditions({ ...d, renditions: d.renditions ?? loadRenditionsConfig() });
  }

  async handle(x: Exchange, segs: string[]): Promise<void> {
    const byVersion = segs[0] === 'version' && segs.length >= 3;
    const byAlias = segs[0] === 'alias' && segs.length >= 4;
    if (!byVersion && !byAlias) throw new AppError('NOT_FOUND', 'No such resource');
    x.route = `${DELIVERY_PREFIX}/${segs[0]}`;
    if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', `Method ${x.method} not allowed here`, { allow: ['GET'] });
    // Parameters and their signature are checked before anything of the content is looked at:
    // their answer (400, 403) is the same whatever exists.
    const rendition = this.renditions.request(x.query);
    const principal = await this.d.tokens.caller(x.header('x-auth-token'));
    let head: Snapshot;
    let key: string;
    let path: string;
    if (byVersion) {
      const vid = parseVersionId(segs[1]);
      if (!vid) throw new AppError('NOT_FOUND', `No version ${segs[1]}`);
      head = await this.headOf(vid.cid);
      key = vid.key;
      path = segs.slice(2).join('/');
      this.reads.checkVersionDelivery(principal, head, key);
    } else {
      checkAlias(segs[1], segs[2]);
      const cid = await this.d.store.resolveAlias(segs[1], segs[2]);
      if (!cid) throw new AppError('NOT_FOUND', `Content ${segs[1]}/${segs[2]} not found`);
      head = await this.headOf(cid);
      path = segs.slice(3).join('/');
      // Who may read gets the latest version; anyone else the version on a public view.
      key = this.reads.deliveredVersion(principal, head);
    }
    // What the version maps, kept per version (DeliveryMaps): the version itself is read and
    // decoded once, not on every request.
    const files = await this.maps.of(head, key);
    if (!files) throw new AppError('NOT_FOUND', `No version ${key}`);
    const fileUri = mappedUri(files, path, rendition !== null);
    if (fileUri === undefined) throw new AppError('NOT_FOUND', `The content has no file at ${path}`);
    const fileKey = fileKeyOfUri(fileUri);
    if (!fileKey) throw new AppError('NOT_FOUND', `The content maps ${path} to ${fileUri}, which is not a file address`);
    const cacheControl = this.cacheControlOf(byVersion, x.header('x-auth-token') === undefined, head, key);
    // An answer decided for a token is kept (privately) for that token only: a browser shared by
    // two users must not hand one the other's files from its cache.
    const vary = ['X-Auth-Token'];
    if (rendition) {
      const source = await this.d.files.stat(fileKey);
      if (!source) throw fileNotFound();
      const isMain = files.main !== undefined && files.main === path;
      const params = { ...rendition.params };
      if (!params.focal && isMain) params.focal = files.focal;
      const format = resolveFormat(params.fm, x.header('accept'), source.mimeType.startsWith('image/') ? source.mimeType.slice(6) : undefined);
      const made = await this.renditions.renditionOf(source, params, format, renderCaller(principal, x, this.d.settings));
      await sendFile(x, await this.renditions.store(), made.key, {
        cacheControl,
        info: made,
        contentType: () => MIME_OF_FORMAT[format],
        headers: [['Vary', [...vary, ...(params.fm === 'auto' ? ['Accept'] : [])].join(', ')]],
      });
      return;
    }
    await sendFile(x, this.d.files, fileKey, {
      cacheControl,
      contentType: (info) => deliveryContentType(info.mimeType, path),
      headers: [['Vary', vary.join(', ')]],
    });
  }

  /**
   * A version never changes, an alias may move: versions may be kept, aliases revalidated.
   * With PUBLIC_CACHE_MAX_AGE set, a version read without a token (so one on a public view:
   * `checkVersionDelivery` let it through) may be kept by shared caches too, no longer than its
   * time state keeps it public: a delivery whose `offTime` is near is kept until then at most
   * (and is not `immutable`). Anything read with a token stays private, even content that is
   * public: a shared cache must never hold an answer that was decided for a user.
   */
  private cacheControlOf(byVersion: boolean, tokenless: boolean, head: Snapshot, key: string): string {
    const maxAge = this.d.settings.PUBLIC_CACHE_MAX_AGE;
    if (!byVersion) return ALIAS_CACHE_CONTROL;
    if (maxAge === undefined || !tokenless) return FILE_CACHE_CONTROL;
    const lifetime = this.reads.publicLifetime(head, key, maxAge);
    if (lifetime === maxAge) return `public, max-age=${maxAge}, immutable`;
    return lifetime > 0 ? `public, max-age=${lifetime}` : 'no-store';
  }

  private async headOf(cid: string): Promise<Snapshot> {
    const head = await this.d.store.head(cid);
    if (!head || head.deleted) throw new AppError('NOT_FOUND', 'Content not found');
    return head;
  }
}

/**
 * What file delivery needs of one version: the path → file URI map of its `svcFiles` (and of
 * its `svcFileDelivery.variant`, when its type has one), its main image and that image's focal
 * point. A small fraction of the version (a version of 8 MB of aspects maps a few files).
 */
export interface VersionFiles {
  /** `svcFiles`: path in the content → file URI (later entries win). */
  own: Map<string, string>;
  /** `svcImage.filePath` when it is a string: the main image, delivered as renditions only unless the variant maps it. */
  main: string | undefined;
  /** The focal point of `svcImage` (focalOfContent), for renditions of the main image. */
  focal: [number, number] | undefined;
  /**
   * With a `svcFileDelivery.variant` for the version's type: the `svcFiles` of the variant, the
   * whole mapping, as composed for the head of revision `rev` (a composer is given the head). Null
   * when the type has no such variant.
   */
  variant: { rev: number; files: Map<string, string> } | null;
  /** About what this takes in memory (DeliveryMaps' bound). */
  bytes: number;
}

/**
 * The file URI a delivery of `path` serves, or undefined (404). With a `svcFileDelivery.variant`
 * for the type, its `svcFiles` is the whole mapping; without, the version's `svcFiles` less the
 * main image (`svcImage.filePath`). A rendition may be made of the main image either way
 * (CONTRACT §17): it is delivered as renditions only, never as the raw file.
 */
export function mappedUri(files: VersionFiles, path: string, forRendition: boolean): string | undefined {
  const mapped = files.variant ? files.variant.files.get(path) : path === files.main ? undefined : files.own.get(path);
  if (mapped !== undefined) return mapped;
  return forRendition && path === files.main ? files.own.get(path) : undefined;
}

/** `svcFiles` (`{files: {<key>: {fileUri, filePath}}}`) as path → file URI (later entries win). */
function filesOf(aspect: Aspect | null | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of fileReferencesOf(aspect)) out.set(r.path, r.fileUri);
  return out;
}

/** About the memory a path → URI map takes: its characters twice (UTF-16 at worst) and a Map entry each. */
const mapBytes = (m: Map<string, string>): number => {
  let n = 64;
  for (const [k, v] of m) n += 2 * (k.length + v.length) + 80;
  return n;
};

/** Bytes (about) of delivery maps one gateway keeps (VersionFiles.bytes). */
const KEPT_MAPS_BYTES = 32 * 2 ** 20;
/** A version Redis holds in this many bytes or more (or one it does not hold: archived, or none) is a large read. */
const LARGE_VERSION_BYTES = 2 ** 20;
/** Large versions read and decoded at once for delivery maps, per gateway; more wait their turn. */
const LARGE_READS_AT_ONCE = 2;

/**
 * What the versions delivered from map (`VersionFiles`), kept per version. A version never
 * changes, so its map is read and decoded once, however many requests ask: before, every
 * delivery request, anonymous ones for a public content included, whatever path it named (one
 * the content does not map: 404), read the whole version from Redis and decoded it (the
 * twentieth session's review: 7.4 MB sent and 35-76 ms of CPU per request for a public
 * content of 8.2 MB of aspects; 32 at once stalled the event loop 1.2 s).
 *
 * - Kept in an LRU bounded by bytes (KEPT_MAPS_BYTES); reads of one version under way are shared.
 * - A version not found is not kept (the request answers 404 as before).
 * - With a `svcFileDelivery.variant`, the variant's map is kept for the head revision it was
 *   composed for: a composer is given the head, so a later head composes again.
 * - A miss on a large version (LARGE_VERSION_BYTES, asked with HSTRLEN first) waits for one of
 *   LARGE_READS_AT_ONCE turns: misses on many large versions at once read them a few at a time,
 *   and requests for small contents are not held behind them.
 */
export class DeliveryMaps {
  private readonly kept = new LRUCache<string, VersionFiles>({ maxSize: KEPT_MAPS_BYTES, sizeCalculation: (f) => f.bytes });
  private readonly reading = new Map<string, Promise<VersionFiles | null>>();
  /** Turns of the large reads (LARGE_READS_AT_ONCE). */
  private readonly largeReads = new Turns(LARGE_READS_AT_ONCE);

  constructor(private readonly d: Pick<FileServiceDeps, 'store' | 'variants'>) {}

  /** The map of version `key` of the content whose current snapshot is `head`; null when the content has no such version. */
  of(head: Snapshot, key: string): Promise<VersionFiles | null> {
    const id = `${head.cid}\u0000${key}`;
    const kept = this.kept.get(id);
    if (kept && (kept.variant === null || kept.variant.rev === head.rev)) return Promise.resolve(kept);
    const readId = `${id}\u0000${head.rev}`;
    let reading = this.reading.get(readId);
    if (!reading) {
      reading = this.read(head, key)
        .then((files) => {
          if (files) this.kept.set(id, files);
          return files;
        })
        .finally(() => this.reading.delete(readId));
      this.reading.set(readId, reading);
    }
    return reading;
  }

  /** Maps kept and reads under way (tests). */
  get size(): { kept: number; bytes: number; reading: number } {
    return { kept: this.kept.size, bytes: this.kept.calculatedSize, reading: this.reading.size };
  }

  private async read(head: Snapshot, key: string): Promise<VersionFiles | null> {
    const stored = await this.d.store.storedVersionSize(head.cid, key);
    const read = async () => {
      const version = await this.d.store.version(head.cid, key);
      return version && (await this.filesOf(head, version));
    };
    return stored === 0 || stored >= LARGE_VERSION_BYTES ? this.largeReads.run(read) : read();
  }

  private async filesOf(head: Snapshot, version: VersionRecord): Promise<VersionFiles> {
    const svcImage = version.aspects.svcImage;
    const main = svcImage?.filePath;
    const own = filesOf(version.aspects.svcFiles);
    let variant: VersionFiles['variant'] = null;
    if (this.d.variants.has(version.type, DELIVERY_VARIANT)) {
      const aspects = await composeVariant(this.d, DELIVERY_VARIANT, head, version);
      variant = { rev: head.rev, files: filesOf(aspects?.svcFiles) };
    }
    const bytes = 256 + mapBytes(own) + (variant ? mapBytes(variant.files) : 0) + 2 * (typeof main === 'string' ? main.length : 0);
    return { own, main: typeof main === 'string' ? main : undefined, focal: focalOfContent(svcImage), variant, bytes };
  }
}

const fileNotFound = () => new AppError('NOT_FOUND', 'File not found');

/**
 * Media types a browser would render as a document (HTML, SVG, XML and its `+xml` kin): served
 * as attachments so that an uploaded page never opens as a page of the platform's origin, even
 * where a browser ignores the sandbox policy (CONTRACT §20 "Served files").
 */
export function isMarkup(contentType: string): boolean {
  const type = contentType.split(';')[0].trim().toLowerCase();
  return type === 'text/html' || type === 'text/xml' || type === 'application/xml' || type === 'text/xsl' || type.endsWith('+xml');
}

/** Types file-type recognises by their data: when the stored type is one, the data has spoken. */
const SNIFFED = new Set<string>(supportedMimeTypes);

/**
 * The Content-Type of a delivered file, from the data and the extension together: a type the
 * data was recognised as wins (a PNG named .jpg is a PNG); otherwise (text, or types the data
 * does not reveal) the extension's type, else the type stored with the file.
 */
export function deliveryContentType(stored: string, path: string): string {
  if (SNIFFED.has(stored)) return stored;
  // A type kept before keptMediaType (a list, parameters) is served as it would be kept now.
  return mime.contentType(path.slice(path.lastIndexOf('/') + 1)) || (keptMediaType(stored) ?? 'application/octet-stream');
}

/**
 * Answers with a stored file: 200 or 206 for `Range: bytes=a-b` (one range; several are
 * answered whole), 304 for a matching If-None-Match, 416 for a range past the end. The ETag is
 * the object id: a file never changes.
 */
export async function sendFile(
  x: Exchange,
  files: FileStore,
  key: FileKey,
  opts: { cacheControl: string; contentType?: (info: StoredFile) => string; info?: StoredFile; headers?: [string, string][] },
): Promise<void> {
  const info = opts.info ?? (await files.stat(key));
  if (!info) throw fileNotFound();
  const etag = `"${info.objectId}"`;
  const headers: [string, string][] = [['ETag', etag], ['Cache-Control', opts.cacheControl], ['Accept-Ranges', 'bytes'], ...(opts.headers ?? [])];
  const inm = x.header('if-none-match');
  if (inm?.split(',').some((t) => t.trim().replace(/^W\//, '') === etag || t.trim() === '*')) {
    x.send(304, headers);
    return;
  }
  const range = rangeOf(x.header('range'), info.length);
  const read = await files.get(key, range ?? undefined);
  // Files come from uploaders and are served from the platform's own origin: nosniff keeps a
  // browser to the type given, the sandbox policy keeps an uploaded HTML or SVG page from
  // running scripts as the platform (stored XSS reaching tokens and the API), and markup is
  // downloaded, never rendered inline. Media ignore both.
  // A type kept before keptMediaType (a list, parameters) is served as it would be kept now.
  const contentType = opts.contentType ? opts.contentType(info) : (keptMediaType(info.mimeType) ?? 'application/octet-stream');
  headers.push(['Content-Type', contentType], ['X-Content-Type-Options', 'nosniff'], ['Content-Security-Policy', 'sandbox']);
  if (isMarkup(contentType)) headers.push(['Content-Disposition', 'attachment']);
  if (range) {
    headers.push(['Content-Range', `bytes ${range.start}-${range.end}/${info.length}`]);
    await x.sendStream(206, headers, read.stream, range.end - range.start + 1);
  } else {
    await x.sendStream(200, headers, read.stream, info.length);
  }
}
