import { expect } from 'chai';
import { loadSettings } from '../../config/settings.js';
import { fileKeyOf, newObjectId, storageKeyOf, type FileKey } from '../../src/adapters/file-store.js';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { ASIDE_GRACE_MS, TAKEN_KEPT_MS, UnclaimedFiles } from '../../src/security/unclaimed-files.js';

/**
 * The unclaimed-files sweep when a delete fails (review of 4f900b9, where both cases failed).
 * That sweep took up to 256 marks at once into `unclaimed:{p}:taken` and deleted them one by
 * one; on the first delete that threw it put that one mark back aside and gave up the pass.
 *
 * - The marks taken after the failing one in the same batch stayed in `taken`, which is only
 *   trimmed by age: their files were never deleted (kept for good, what the fix was to end).
 *   A web process stopped mid-batch (every deploy) left the same.
 * - A delete that threw after the file was gone (the disk store unlinks the sidecar, then the
 *   data; an S3 DELETE whose answer is lost) put the mark back aside, claimable: a write then
 *   mapped a deleted file, which the taken set exists to prevent.
 *
 * Now a key leaves `unclaimed:{p}:deleting` only once its file is gone, and claims are refused
 * while it is there. A Redis of its own; one partition.
 */
describe('unclaimed-files sweep: a delete that fails (review of 4f900b9)', () => {
  const P = 1;
  let redis: RedisClient;
  let unclaimed: UnclaimedFiles;
  const ttlMs = 3 * 86_400_000;
  const t0 = Date.UTC(2030, 0, 1);

  let server: RedisServerHandle;

  before(async () => {
    server = await startRedisServer({ appendonly: false });
    redis = connectRedis(loadSettings({ ...process.env, REDIS_URL: server.url, PARTITIONS: String(P) }));
    unclaimed = new UnclaimedFiles(redis, P, 1000);
  });
  beforeEach(async () => {
    await redis.flushall();
  });
  after(async () => {
    redis.disconnect();
    await server?.stop();
  });

  /** A file store of a set of storage keys; `failing` decides, per key, what a delete does. */
  function store(present: Set<string>, failing: (k: string) => 'ok' | 'throw' | 'delete-then-throw') {
    return {
      async delete(key: FileKey): Promise<boolean> {
        const k = storageKeyOf(key);
        const how = failing(k);
        if (how === 'throw') throw new Error('S3 unavailable');
        const had = present.delete(k);
        if (how === 'delete-then-throw') throw new Error('socket hang up after the DELETE was applied');
        return had;
      },
    };
  }

  const mapping = (uris: Record<string, string>) => ({
    files: Object.fromEntries(Object.entries(uris).map(([path, fileUri]) => [path, { fileUri, filePath: path }])),
  });

  it('every file of a batch is deleted in the end, whatever one delete of the batch did', async () => {
    const stored = ['a.txt', 'b.txt', 'c.txt'].map((n) => fileKeyOf('content', 'reader', `${newObjectId()}/${n}`));
    const present = new Set(stored.map(storageKeyOf));
    for (const k of stored) await unclaimed.mark(k, t0, 'editor');
    const first = storageKeyOf(stored.slice().sort((x, y) => storageKeyOf(x).localeCompare(storageKeyOf(y)))[0]);
    // Set aside past the TTL, then taken past the grace: the first delete of the batch fails once.
    await unclaimed.sweep(
      store(present, () => 'ok'),
      t0 + ttlMs + 1,
      ttlMs,
    );
    let failed = false;
    const once = store(present, (k) => {
      if (k !== first || failed) return 'ok';
      failed = true;
      return 'throw';
    });
    await unclaimed.sweep(once, t0 + ttlMs + ASIDE_GRACE_MS + 2, ttlMs).catch(() => undefined);
    expect(failed, 'the delete failed once').to.equal(true);
    // Later passes, the store well again, up to past the day taken files are remembered.
    for (const later of [2 * ASIDE_GRACE_MS, 3 * ASIDE_GRACE_MS, TAKEN_KEPT_MS + 4 * ASIDE_GRACE_MS, TAKEN_KEPT_MS + 6 * ASIDE_GRACE_MS]) {
      await unclaimed.sweep(
        store(present, () => 'ok'),
        t0 + ttlMs + later,
        ttlMs,
      );
    }
    expect([...present], 'files never deleted').to.deep.equal([]);
  });

  it('a file whose delete threw after it was gone is not claimable: the write answers 400, it maps no deleted file', async () => {
    const k = fileKeyOf('content', 'editor', `${newObjectId()}/gone.txt`);
    const present = new Set([storageKeyOf(k)]);
    await unclaimed.mark(k, t0, 'editor');
    await unclaimed.sweep(
      store(present, () => 'ok'),
      t0 + ttlMs + 1,
      ttlMs,
    );
    await unclaimed
      .sweep(
        store(present, () => 'delete-then-throw'),
        t0 + ttlMs + ASIDE_GRACE_MS + 2,
        ttlMs,
      )
      .catch(() => undefined);
    expect(present.has(storageKeyOf(k)), 'the file is gone').to.equal(false);
    // A write that had looked at the file before the sweep took it now claims it.
    const uri = `content://editor/${k.path}`;
    const claimed = await unclaimed.claim(mapping({ 'gone.txt': uri }), [uri]).then(
      () => 'claimed',
      (e: Error) => e.message,
    );
    expect(claimed).to.match(/maps a file that expired/);
  });
});
