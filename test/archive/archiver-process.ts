/**
 * An archiver process for test/archive/archive-crash.test.ts: the archiver role on the settings of
 * the environment, passes back to back, with a pause of up to 20 ms after each segment is written
 * (a slow object store), so that a kill -9 lands anywhere in a move. Prints `pass <json>` after each pass.
 */
import { loadSettings } from '../../config/settings.js';
import { Archiver } from '../../src/actors/archiver.js';
import { ContentStore } from '../../src/adapters/content-store.js';
import { createFileStore } from '../../src/main.js';
import { createLogger } from '../../src/adapters/log.js';
import { connectRedis } from '../../src/adapters/redis.js';
import { SystemObjects } from '../../src/adapters/system-objects.js';
import { VersionArchive } from '../../src/adapters/version-archive.js';
import { sleep } from '../../src/wait.js';

const settings = loadSettings(process.env);
const log = createLogger('warn');
const redis = connectRedis(settings);
const files = await createFileStore(settings);
await files.ready();
const archive = new VersionArchive(redis, async () => new SystemObjects(files, 'archive'));
const store = new ContentStore(redis, settings.PARTITIONS, settings.EVENTS_MAXLEN, settings.DEDUP_TTL_SECONDS, archive);
const archiver = new Archiver(redis, store, settings, log, Date.now, { afterPut: () => sleep(Math.random() * 20) });
await archiver.start();
console.log('started');
for (;;) {
  const stats = await archiver.runOnce();
  console.log(`pass ${JSON.stringify(stats)}`);
  await sleep(10);
}
