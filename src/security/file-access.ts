/**
 * Who may touch a file, and which files a content may map (CONTRACT §20 "Files in
 * content/<key>/", "Files in tmp/", "File references"). The file service asks `fileAccess` for
 * every read, info, upload and delete; the content writes ask `readableFileUris` (the same
 * rule, for Read) about the URIs their `svcFiles` carries.
 */
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
 * - `allowed`, with the file's stat when the rule looked it up (null: not looked up);
 * - `denied`: the owning content's permission refuses (403), decided before the file is looked up;
 * - `hidden`: answer exactly as for a missing file (404), whether or not the file exists, so that
 *   nobody learns of another user's tmp files.
 */
export type FileDecision = { kind: 'allowed'; file: StoredFile | null } | { kind: 'denied'; permission: 'Read' | 'Update' } | { kind: 'hidden' };

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
export async function fileAccess(d: FileAccessDeps, principal: Principal, key: FileKey, action: FileAction): Promise<FileDecision> {
  if (key.space === 'content') {
    const head = await d.store.head(key.host);
    if (head && !head.deleted) {
      const permission = CONTENT_FILE_PERMISSION[action];
      if (!isAllowed(d.security, principal, permission, head.type, contextsOf(head.meta))) return { kind: 'denied', permission };
      if (action === 'upload') return { kind: 'allowed', file: null };
      const file = await d.files.stat(key);
      if (!file || file.creationTime >= head.created || isUploaderOrSysadmin(principal, file) || (await headMaps(d, head, key)))
        return { kind: 'allowed', file };
      return { kind: 'hidden' };
    }
  }
  if (action === 'upload') return { kind: 'allowed', file: null };
  const file = await d.files.stat(key);
  if (file && isUploaderOrSysadmin(principal, file)) return { kind: 'allowed', file };
  return { kind: 'hidden' };
}

const isUploaderOrSysadmin = (principal: Principal, file: StoredFile): boolean =>
  isSysadmin(principal) || (file.uploader !== undefined && file.uploader === principal.userId);

/** Does the content's head version map the file (its `svcFiles`)? */
async function headMaps(d: FileAccessDeps, head: Snapshot, key: FileKey): Promise<boolean> {
  const version = await d.store.version(head.cid, head.head);
  const wanted = storageKeyOf(key);
  return fileReferencesOf(version?.aspects.svcFiles).some((r) => {
    const k = fileKeyOfUri(r.fileUri);
    return k !== null && storageKeyOf(k) === wanted;
  });
}

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
  const readable = await Promise.all(
    uris.map(async (uri) => {
      const key = fileKeyOfUri(uri);
      return key !== null && (await fileAccess(d, principal, key, 'read')).kind === 'allowed';
    }),
  );
  return uris.filter((_, i) => readable[i]);
}

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
