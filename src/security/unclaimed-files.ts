/**
 * Files uploaded to a content host that no live content holds: CONTRACT §20 makes them their
 * uploader's, "as tmp/", and so they expire as tmp files do unless a content write maps them
 * first (SECURITY.md, "Files uploaded to a content host no live content holds"). Before, only
 * `tmp/` expired: any signed-in user, a reader included, could keep any number of files of up to
 * `MAX_UPLOAD_BYTES` for good under `content/<a host nobody holds>/`, such as `content/<own user
 * id>/`, where an upload without a host goes.
 *
 * - **Mark.** An upload into `content/<host>/` while no live content is `<host>` adds its stored
 *   key (with its object id: nobody can name another's file) to `unclaimed:{p}` (p: the
 *   partition of `<host>`), scored by the upload time, before the file is visible: a crash
 *   leaves a mark of no file, never a file without its mark.
 * - **Claim.** A write of content or of a draft, once the actor's every check has passed, just
 *   before its commit, removes the content files its `svcFiles` maps from the marks. Those are
 *   files the writer may read (`checkFileReferences`), so a reader's refused write claims
 *   nothing; claimed before the commit, no crash between the two loses a mapped file. A file
 *   the sweep has taken to delete (kept in `unclaimed:{p}:taken` for `TAKEN_KEPT_MS` after) is
 *   no longer the writer's to map: the write answers 400 as for a missing file, so no content
 *   maps a file deleted under it, whatever the order of the write's look at the file, the
 *   sweep and the commit.
 * - **Sweep**, in two steps, in every web process (each mark is taken by one): a mark older than
 *   `TMP_TTL_SECONDS` is set aside (`unclaimed:{p}:aside`); a file still aside `ASIDE_GRACE_MS`
 *   later (no claim took it from either place) is taken and deleted. A host that has become a
 *   live content meanwhile changes nothing: CONTRACT §20 leaves a file uploaded before its
 *   content existed its uploader's until a write maps it (`fileAccess`).
 *
 * Files uploaded before marks were made have none and are kept, as before. Upgrades: a process
 * of an earlier release neither marks nor claims, so while processes of two releases run side
 * by side, run the new ones with `UNCLAIMED_FILE_MARKS=false` (no marks: nothing expires, as
 * before) and turn it on once every web and actor process runs this release (RELIABILITY.md).
 */
import type { FileKey, FileStore } from '../adapters/file-store.js';
import { fileKeyOf, storageKeyOf } from '../adapters/file-store.js';
import { partitionOf } from '../adapters/ids.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import type { Aspect } from '../content/model.js';
import { AppError } from '../errors.js';
import { fileKeyOfUri, fileReferencesOf } from './file-access.js';

/** How long a mark stays set aside before its file is deleted: a claim in that time keeps it. */
export const ASIDE_GRACE_MS = 3600_000;
/**
 * How long a taken file is remembered after the sweep took it: a write that looked at the file
 * before it was deleted and claims it within this time is refused. Longer than any command's
 * life (ACTOR_REPLY_TIMEOUT_MS is at most 10 minutes).
 */
export const TAKEN_KEPT_MS = 86_400_000;
/** Marks one script call moves or takes. */
const BATCH = 256;

/** The rule of this module, over one Redis and its partitions. */
export class UnclaimedFiles {
  constructor(
    private readonly redis: RedisClient,
    private readonly partitions: number,
  ) {}

  private partitionOfKey(k: Pick<FileKey, 'host'>): number {
    return partitionOf(k.host, this.partitions);
  }

  /** Marks a stored file of a host no live content holds, uploaded at `at` (ms). */
  async mark(stored: FileKey, at: number): Promise<void> {
    if (stored.space !== 'content') return;
    await this.redis.zadd(keys.unclaimedFiles(this.partitionOfKey(stored)), at, storageKeyOf(stored));
  }

  /**
   * Claims the content files an `svcFiles` aspect maps: their marks go, wherever they are. 400
   * naming the path when one was taken by the sweep (it is deleted, or about to be).
   */
  async claim(svcFiles: Aspect | null | undefined): Promise<void> {
    const byPartition = new Map<number, Map<string, string>>();
    for (const r of fileReferencesOf(svcFiles)) {
      const k = fileKeyOfUri(r.fileUri);
      if (!k || k.space !== 'content') continue;
      const p = this.partitionOfKey(k);
      const members = byPartition.get(p) ?? new Map<string, string>();
      byPartition.set(p, members);
      members.set(storageKeyOf(k), r.path);
    }
    if (!byPartition.size) return;
    const taken = await Promise.all(
      [...byPartition].map(async ([p, members]) => {
        const gone = await this.redis.unclaimedClaim(keys.unclaimedFiles(p), keys.unclaimedAside(p), keys.unclaimedTaken(p), ...members.keys());
        return gone.map((m) => members.get(m) ?? m);
      }),
    );
    const path = taken.flat()[0];
    if (path !== undefined) {
      throw new AppError('BAD_REQUEST', `svcFiles may map only files the writer may read: ${path} maps a file that expired`, { path });
    }
  }

  /**
   * One pass of the sweep at `now`: sets aside the marks older than `ttlMs`, takes the files
   * aside for `ASIDE_GRACE_MS` and deletes them from `files`. Answers how many it deleted.
   */
  async sweep(files: Pick<FileStore, 'delete'>, now: number, ttlMs: number): Promise<number> {
    let deleted = 0;
    for (let p = 0; p < this.partitions; p++) {
      const [marks, aside, taken] = [keys.unclaimedFiles(p), keys.unclaimedAside(p), keys.unclaimedTaken(p)];
      await this.redis.zremrangebyscore(taken, '-inf', now - TAKEN_KEPT_MS);
      while ((await this.redis.unclaimedMove(marks, aside, now - ttlMs, now, BATCH)).length === BATCH);
      const due = now - ASIDE_GRACE_MS;
      for (;;) {
        const gone = await this.redis.unclaimedMove(aside, taken, due, now, BATCH);
        for (const m of gone) {
          const host = m.split('/', 2)[1];
          try {
            if (await files.delete(fileKeyOf('content', host, m.slice(`content/${host}/`.length)))) deleted++;
          } catch (e) {
            // Not deleted: aside again (taken no more), for the next pass.
            await this.redis.multi().zadd(aside, due, m).zrem(taken, m).exec();
            throw e;
          }
        }
        if (gone.length < BATCH) break;
      }
    }
    return deleted;
  }
}
