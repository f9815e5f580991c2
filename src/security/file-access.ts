/**
 * Who may touch a file, and which files a content may map (CONTRACT §20 "Files in
 * content/<key>/", "Files in tmp/", "File references"). The file service asks `fileAccess` for
 * every read, info, upload and delete; the content writes ask `readableFileUris` (the same
 * rule, for Read) about the URIs their `svcFiles` carries.
 */
import { LRUCache } from 'lru-cache';
import type { FileKey, FileStore, StoredFile } from '../adapters/file-store.js';
import { fileKeyOf, storageKeyOf } from '../adapters/file-store.js';
import { contextsOf, type Aspect, type Snapshot } from '../content/model.js';
import { AppError } from '../errors.js';
import { isAllowed, isSysadmin, type Principal, type SecurityConfig } from '../content/permissions.js';

/** What is done to a file: GET and info read it, DELETE updates it, POST adds one beside it. */
export type FileAction = 'read' | 'update' | 'upload';

/** The permission a content's files need for an action (CONTRACT §20: Read for GET and info, Update for upload and DELETE). */
export const CONTENT_FILE_PERMISSION: Record<FileAction, 'Read' | 'Update'> = { read: 'Read', update: 'Update', upload: 'Update' };

export interface FileAccessDeps {
  security: SecurityConfig;
  /**
   * Heads of contents (a file in `content/<key>/` belongs to content `contentid/<key>` while it
   * exists) and their versions (the files a content maps).
   */
  store: { head(cid: string): Promise<Snapshot | null>; version(cid: string, key: string): Promise<{ aspects: Record<string, Aspect> } | null> };
  files: Pick<FileStore, 'stat'>;
}

/**
 * The answer of `fileAccess`:
 * - `allowed`, with the file's stat when the rule looked it up (null: not looked up); an upload
 *   into a content host no live content holds is `unclaimed` (it expires unless a write maps it:
 *   src/security/unclaimed-files.ts);
 * - `denied`: the owning content's permission refuses (403), decided before the file is looked up;
 * - `hidden`: answer exactly as for a missing file (404), whether or not the file exists, so that
 *   nobody learns of another user's tmp files.
 */
export type FileDecision =
  | { kind: 'allowed'; file: StoredFile | null; unclaimed?: true }
  | { kind: 'denied'; permission: 'Read' | 'Update' }
  | { kind: 'hidden' };

/**
 * May `principal` do `action` on the file `key`? The one rule of CONTRACT §20:
 *
 * - `content/<key>/` while content `contentid/<key>` exists and is not deleted: that content's
 *   permissions (Read to read, Update to upload or delete), checked before any file lookup.
 *   A file uploaded there before the content existed (to its future host, as anyone may) is the
 *   content's only while the content's head maps it in `svcFiles`; until then it stays its
 *   uploader's, as below. Else whoever creates the content, such as a user who took over the
 *   draft of new content it was uploaded for, would get another user's files with it.
 * - Otherwise (`tmp/`, or a content host that does not exist: generated, future or deleted):
 *   anyone may upload (the file becomes theirs); reading and deleting is for the uploader and
 *   `sysadmin` only. A file stored before uploaders were recorded has none: sysadmin only.
 *   To anyone else the file is `hidden`, the same answer as a missing file.
 *
 * @example
 * const d = await fileAccess(deps, reader, fileKeyOf('tmp', 'editor', `${id}/a.txt`), 'update');
 * // { kind: 'hidden' }: the reader learns nothing of the editor's file
 */
export async function fileAccess(
  d: FileAccessDeps,
  principal: Principal,
  key: FileKey,
  action: FileAction,
  lookups: Lookups = new Lookups(d),
): Promise<FileDecision> {
  if (key.space === 'content') {
    const head = await lookups.head(key.host);
    if (head && !head.deleted) {
      const permission = CONTENT_FILE_PERMISSION[action];
      if (!isAllowed(d.security, principal, permission, head.type, contextsOf(head.meta))) return { kind: 'denied', permission };
      if (action === 'upload') return { kind: 'allowed', file: null };
      const file = await d.files.stat(key);
      if (!file || file.creationTime >= head.created || isUploaderOrSysadmin(principal, file) || (await mappedFiles(d, head)).has(storageKeyOf(key)))
        return { kind: 'allowed', file };
      return { kind: 'hidden' };
    }
  }
  if (action === 'upload') return key.space === 'content' ? { kind: 'allowed', file: null, unclaimed: true } : { kind: 'allowed', file: null };
  const file = await d.files.stat(key);
  if (file && isUploaderOrSysadmin(principal, file)) return { kind: 'allowed', file };
  return { kind: 'hidden' };
}

const isUploaderOrSysadmin = (principal: Principal, file: StoredFile): boolean =>
  isSysadmin(principal) || (file.uploader !== undefined && file.uploader === principal.userId);

/**
 * The heads one check reads, each host once: a write's svcFiles may name many files of one
 * content (and each file in two spellings).
 */
class Lookups {
  private readonly heads = new Map<string, Promise<Snapshot | null>>();

  constructor(private readonly d: FileAccessDeps) {}

  head(cid: string): Promise<Snapshot | null> {
    let h = this.heads.get(cid);
    if (!h) {
      h = this.d.store.head(cid);
      this.heads.set(cid, h);
    }
    return h;
  }
}

/**
 * The storage keys of the files a content's head version maps (its `svcFiles`). A version never
 * changes, so the set is kept per version (and per store): before, every look at a file uploaded
 * to a content before it existed read and decoded the content's whole head version again, once
 * per URI of a write's svcFiles (a refused create of 4 KB made Redis send 168 MB: the fifteenth
 * session's review). Reads of one version under way are shared.
 */
function mappedFiles(d: FileAccessDeps, head: Snapshot): Promise<Set<string>> {
  let m = mappedByStore.get(d.store);
  if (!m) {
    m = { kept: new LRUCache({ max: 1000, maxSize: 16 * 2 ** 20, sizeCalculation: setChars }), reading: new Map() };
    mappedByStore.set(d.store, m);
  }
  const id = `${head.cid}/${head.head}`;
  const kept = m.kept.get(id);
  if (kept) return Promise.resolve(kept);
  let reading = m.reading.get(id);
  if (!reading) {
    const mine = m;
    reading = d.store
      .version(head.cid, head.head)
      .then((version) => {
        const keys = new Set<string>();
        for (const r of fileReferencesOf(version?.aspects.svcFiles)) {
          const k = fileKeyOfUri(r.fileUri);
          if (k) keys.add(storageKeyOf(k));
        }
        // A version not found (a replica behind) is not kept.
        if (version) mine.kept.set(id, keys);
        return keys;
      })
      .finally(() => mine.reading.delete(id));
    m.reading.set(id, reading);
  }
  return reading;
}

const mappedByStore = new WeakMap<object, { kept: LRUCache<string, Set<string>>; reading: Map<string, Promise<Set<string>>> }>();

const setChars = (s: Set<string>): number => {
  let n = 64;
  for (const k of s) n += k.length + 32;
  return n;
};

/** One entry of `svcFiles`: the path in the content and the file URI it maps. */
export interface FileReference {
  path: string;
  fileUri: string;
}

/**
 * The entries of an `svcFiles` aspect (`{files: {<key>: {fileUri, filePath}}}`) that name a
 * file URI, with the path each maps (`filePath`, else the entry's key). File delivery serves
 * exactly these, so the write check looks at exactly these.
 */
export function fileReferencesOf(aspect: Aspect | null | undefined): FileReference[] {
  const files = aspect?.files;
  if (!files || typeof files !== 'object' || Array.isArray(files)) return [];
  const out: FileReference[] = [];
  for (const [key, entry] of Object.entries(files)) {
    if (entry && typeof entry === 'object' && !Array.isArray(entry) && typeof entry.fileUri === 'string') {
      out.push({ path: typeof entry.filePath === 'string' ? entry.filePath : key, fileUri: entry.fileUri });
    }
  }
  return out;
}

/** A file URI (`<space>://<host>/<path>` or `<space>:<host>/<path>`) as a key; null when it is none. */
export function fileKeyOfUri(uri: string): FileKey | null {
  const m = /^([a-z]+):(?:\/\/)?([^/]+)\/(.+)$/.exec(uri);
  if (!m) return null;
  try {
    return fileKeyOf(m[1], m[2], m[3]);
  } catch {
    return null;
  }
}

/**
 * The URIs of an `svcFiles` aspect that `principal` may map: those naming a file it may read
 * by `fileAccess`. Every other URI (a file of a content it may not read, another user's tmp
 * file, a missing file, anything that is no file address) is left out; the write then refuses
 * it (see `checkFileReferences`).
 */
export async function readableFileUris(d: FileAccessDeps, principal: Principal, aspect: Aspect | null | undefined): Promise<string[]> {
  const uris = [...new Set(fileReferencesOf(aspect).map((r) => r.fileUri))];
  if (uris.length > MAX_FILE_REFERENCES) {
    throw new AppError('BAD_REQUEST', `svcFiles maps ${uris.length} file URIs; at most ${MAX_FILE_REFERENCES}`, {
      path: 'svcFiles',
      limit: MAX_FILE_REFERENCES,
    });
  }
  // Each file once, whichever spelling names it; each host's head once (Lookups).
  const byKey = new Map<string, FileKey>();
  const keyOf = uris.map((uri) => {
    const key = fileKeyOfUri(uri);
    if (!key) return null;
    const s = storageKeyOf(key);
    if (!byKey.has(s)) byKey.set(s, key);
    return s;
  });
  const lookups = new Lookups(d);
  const readable = new Set<string>();
  const todo = [...byKey];
  await Promise.all(
    Array.from({ length: Math.min(LOOKUPS_AT_ONCE, todo.length) }, async () => {
      for (let next = todo.pop(); next; next = todo.pop()) {
        if ((await fileAccess(d, principal, next[1], 'read', lookups)).kind === 'allowed') readable.add(next[0]);
      }
    }),
  );
  return uris.filter((_, i) => keyOf[i] !== null && readable.has(keyOf[i]!));
}

/**
 * The most file URIs one write's svcFiles may name: each is a look at the file store (a stat, an
 * S3 HEAD) before the write is even tried, and a body may hold 65,000 keys.
 */
export const MAX_FILE_REFERENCES = 1000;
/** Lookups of one write's files under way at once. */
const LOOKUPS_AT_ONCE = 16;

/**
 * The write check of CONTRACT §20 "File references", run by the content actor (the one writer
 * of main and drafts) on the `svcFiles` a write leaves in place: every URI it maps must be one
 * the gateway found readable for the writer (`approved`, from `readableFileUris`) or one the
 * base (the version or draft the write replaces) already maps, which this write does not add.
 * Anything else answers 400 naming the path in the content and the URI, before anything is
 * stored. A command without approvals (none were asked for) may add no mapping at all.
 */
export function checkFileReferences(written: Aspect | null | undefined, base: Aspect | null | undefined, approved: readonly string[] | undefined): void {
  const refs = fileReferencesOf(written);
  if (!refs.length) return;
  const allowed = new Set([...(approved ?? []), ...fileReferencesOf(base).map((r) => r.fileUri)]);
  for (const r of refs) {
    if (!allowed.has(r.fileUri)) {
      throw new AppError('BAD_REQUEST', `svcFiles may map only files the writer may read: ${r.path} maps ${r.fileUri}`, { path: r.path, fileUri: r.fileUri });
    }
  }
}
