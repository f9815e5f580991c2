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
 *   leaves a mark of no file, never a file without its mark. A mark costs Redis about its key's
 *   length twice, so an uploader may have at most `UNCLAIMED_FILES_PER_USER` marks in a partition
 *   (429 past it, before and after the body): a reader's stream of tiny uploads cannot fill Redis.
 * - **Claim.** A write of content or of a draft, once the actor's every check has passed (and
 *   its aliases are reserved), just before its commit, drops the marks of the content files its
 *   request maps (the URIs the gateway approved for it: `checkFileReferences`; none when it
 *   leaves `svcFiles` out). They are files the writer may read, so a reader's refused write
 *   claims nothing; claimed before the commit, no crash between the two loses a mapped file. A
 *   write the commit itself then refuses (a revision conflict, a lost lease, its deadline) keeps
 *   its claims: its writer could have mapped the files in any content it may write. An upload
 *   the store fails after its mark drops the mark again. A file the sweep has taken (being deleted, or deleted within `TAKEN_KEPT_MS`) is
 *   no longer the writer's to map: the write answers 400 as for a missing file, so no content
 *   maps a file deleted under it, whatever the order of the write's look at the file, the sweep
 *   and the commit. Deleting a file drops its mark too.
 * - **Sweep**, in steps, in every web process (each mark is taken by one): a mark older than
 *   `TMP_TTL_SECONDS` is set aside (`unclaimed:{p}:aside`); a file still aside `ASIDE_GRACE_MS`
 *   later (no claim took it from either place) is taken, and deleted; a key leaves
 *   `unclaimed:{p}:deleting` only once its file is gone, so a failed delete (or a process stopped
 *   meanwhile) is tried again by a later pass, and never becomes claimable again. A host that
 *   has become a live content meanwhile changes nothing: CONTRACT §20 leaves a file uploaded
 *   before its content existed its uploader's until a write maps it (`fileAccess`).
 *
 * Files uploaded before marks were made have none and are kept, as before. Upgrades and
 * rollbacks (RELIABILITY.md): a process of an earlier release neither marks nor claims, so while
 * processes of two releases run side by side, run the new ones with `UNCLAIMED_FILE_MARKS=false`
 * (no marks, no sweep) and turn it on once every web and actor process runs this release.
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
 * How long a file is remembered once the sweep deleted it: a write that looked at the file
 * before and claims it within this time is refused. Longer than any command's life
 * (ACTOR_REPLY_TIMEOUT_MS is at most 10 minutes).
 */
export const TAKEN_KEPT_MS = 86_400_000;
/** Marks one script call moves or takes, and deletes one read of the deleting set tries. */
const BATCH = 256;

/** The keys of one partition's marks, in the order the scripts take them. */
const keysOf = (p: number) => ({
  marks: keys.unclaimedFiles(p),
  aside: keys.unclaimedAside(p),
  by: keys.unclaimedBy(p),
  count: keys.unclaimedCount(p),
  taken: keys.unclaimedTaken(p),
  deleting: keys.unclaimedDeleting(p),
});

/** The rule of this module, over one Redis and its partitions. */
export class UnclaimedFiles {
  constructor(
    private readonly redis: RedisClient,
    private readonly partitions: number,
    /** Marks an uploader may have in one partition (UNCLAIMED_FILES_PER_USER). */
    private readonly perUser: number,
  ) {}

  private partitionOfKey(k: Pick<FileKey, 'host'>): number {
    return partitionOf(k.host, this.partitions);
  }

  /** 429 when `uploader` may mark no more files of `host` (their marks of its partition are at the bound). */
  async refuseFull(host: string, uploader: string): Promise<void> {
    const n = Number((await this.redis.hget(keys.unclaimedCount(this.partitionOfKey({ host })), uploader)) ?? 0);
    if (n >= this.perUser) throw this.full();
  }

  private full(): AppError {
    return new AppError(
      'TOO_MANY_REQUESTS',
      `At most ${this.perUser} files uploaded to content hosts no content holds may wait for a write to map them; map or delete some first`,
      { limit: this.perUser },
      60,
    );
  }

  /** Marks a stored file of a host no live content holds, uploaded at `at` (ms); 429 past the uploader's bound. */
  async mark(stored: FileKey, at: number, uploader: string): Promise<void> {
    if (stored.space !== 'content') return;
    const k = keysOf(this.partitionOfKey(stored));
    if (!(await this.redis.unclaimedMark(k.marks, k.by, k.count, storageKeyOf(stored), at, uploader, this.perUser))) throw this.full();
  }

  /**
   * Claims the content files an `svcFiles` aspect maps among `approved` (the URIs the write adds,
   * which the gateway found the writer may read): their marks go, wherever they are. 400 naming
   * the path when the sweep has taken one (it is deleted, or about to be).
   */
  async claim(svcFiles: Aspect | null | undefined, approved: readonly string[] | undefined): Promise<void> {
    if (!approved?.length) return;
    const added = new Set(approved);
    const refs = fileReferencesOf(svcFiles).filter((r) => added.has(r.fileUri));
    const taken = await this.drop(refs.map((r) => ({ uri: r.fileUri, label: r.path })));
    if (taken.length) {
      throw new AppError('BAD_REQUEST', `svcFiles may map only files the writer may read: ${taken[0]} maps a file that expired`, { path: taken[0] });
    }
  }

  /** Drops the mark of a deleted file. */
  async forget(key: FileKey): Promise<void> {
    if (key.space !== 'content') return;
    const k = keysOf(this.partitionOfKey(key));
    await this.redis.unclaimedDrop(k.marks, k.aside, k.by, k.count, k.taken, k.deleting, storageKeyOf(key));
  }

  /** Drops the marks of content files, by partition: the labels of those the sweep has taken. */
  private async drop(files: { uri: string; label: string }[]): Promise<string[]> {
    const byPartition = new Map<number, Map<string, string>>();
    for (const f of files) {
      const key = fileKeyOfUri(f.uri);
      if (key?.space !== 'content') continue;
      const p = this.partitionOfKey(key);
      const members = byPartition.get(p) ?? new Map<string, string>();
      byPartition.set(p, members);
      members.set(storageKeyOf(key), f.label);
    }
    const taken = await Promise.all(
      [...byPartition].map(async ([p, members]) => {
        const k = keysOf(p);
        const gone = await this.redis.unclaimedDrop(k.marks, k.aside, k.by, k.count, k.taken, k.deleting, ...members.keys());
        return gone.map((m) => members.get(m) ?? m);
      }),
    );
    return taken.flat();
  }

  /**
   * One pass of the sweep at `now`: sets aside the marks older than `ttlMs`, takes the files
   * aside for `ASIDE_GRACE_MS`, deletes the files taken (and those an earlier pass could not
   * delete) from `files`. Answers how many it deleted; when some deletes failed, it goes on with
   * the others and every partition, then throws saying how many (they are tried next pass).
   */
  async sweep(files: Pick<FileStore, 'delete'>, now: number, ttlMs: number): Promise<number> {
    let deleted = 0;
    let failed = 0;
    let firstError: unknown;
    for (let p = 0; p < this.partitions; p++) {
      const k = keysOf(p);
      await this.redis.zremrangebyscore(k.taken, '-inf', now - TAKEN_KEPT_MS);
      while ((await this.redis.unclaimedMove(k.marks, k.aside, now - ttlMs, now, BATCH)) === BATCH);
      while ((await this.redis.unclaimedTake(k.aside, k.by, k.count, k.taken, k.deleting, now - ASIDE_GRACE_MS, now, BATCH)) === BATCH);
      // Each file to delete once this pass: one that fails is due again at the next pass.
      for (;;) {
        const due = await this.redis.zrangebyscore(k.deleting, '-inf', now, 'LIMIT', 0, BATCH);
        if (!due.length) break;
        for (const m of due) {
          const host = m.split('/', 2)[1];
          try {
            if (await files.delete(fileKeyOf('content', host, m.slice(`content/${host}/`.length)))) deleted++;
            // Gone (or never stored): remembered as taken a day from now, deleting no more.
            await this.redis.multi().zadd(k.taken, now, m).zrem(k.deleting, m).exec();
          } catch (e) {
            failed++;
            firstError ??= e;
            await this.redis.zadd(k.deleting, now + 1, m);
          }
        }
      }
    }
    if (failed) throw new Error(`${failed} file(s) not deleted, tried again next pass (${deleted} deleted): ${(firstError as Error).message}`);
    return deleted;
  }
}
