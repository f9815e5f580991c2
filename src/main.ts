import { fileURLToPath } from 'node:url';
import { describeSettings, loadSettings, s3Connection, solrCredentials, type Settings } from '../config/settings.js';
import { ContentStore } from './adapters/content-store.js';
import { createLogger, type Logger } from './adapters/log.js';
import { connectRedis, type RedisClient } from './adapters/redis.js';
import { Metrics } from './adapters/metrics.js';
import { SolrEngine } from './adapters/search-engine.js';
import { IndexingRules } from './actors/indexing.js';
import { Indexer } from './actors/indexer.js';
import { ReindexSessions, Reindexer } from './actors/reindex-session.js';
import { ensureLocalRedis } from './dev/redis-server.js';
import { startSweeper, type FileStore, type FileStoreLog } from './adapters/file-store.js';
import { UnclaimedFiles } from './security/unclaimed-files.js';
import { javaAndMavenAvailable, startSolr } from './dev/solr-server.js';
import { ContentActor, type ContentCommand } from './actors/content/content-actor.js';
import { Mailbox } from './actors/mailbox.js';
import type { LifecycleHook } from './actors/content/lifecycle-hooks.js';
import { Variants } from './content/variants.js';
import { loadVariantsConfig } from '../config/variants.js';
import { ActorHost } from './actors/runtime.js';
import { startHeadDBackfill } from './actors/head-d-backfill.js';
import { TimestateSchedule } from './actors/timestate-schedule.js';
import { AuditTrail } from './actors/audit-trail.js';
import { AuditSegments } from './adapters/audit-segments.js';
import { SystemObjects } from './adapters/system-objects.js';
import { VersionArchive } from './adapters/version-archive.js';
import { Archiver } from './actors/archiver.js';
import { Gateway } from './gateway/server.js';
import { condemnRenditions } from './gateway/renditions.js';
import { WebhookDispatcher } from './webhooks/dispatcher.js';
import { loadSecurityConfig } from './security/security-config.js';
import { TokenService } from './security/token-service.js';

/** How long each part (gateway, actors, ...) may take to stop before the shutdown goes on. */
const STOP_PART_MS = 8000;

/** The roles of the Procfile; `npm start` runs them all in one process. */
export const ROLES = ['web', 'actors', 'indexer', 'reindexer', 'webhooks', 'archiver'] as const;
export type Role = (typeof ROLES)[number];

/**
 * V8 flags of every platform process (scripts/start.sh, the Procfile and the fleet's children
 * carry the same; a test keeps them equal). A request allocates much that dies young (decoded
 * records, JSON, Redis replies); with Node's default young generation (16 MB semi-spaces) busy
 * processes spent 20-31% of their CPU collecting and promoted short-lived objects into an old
 * generation of 300 MB of garbage, which made the slowest requests. Flags go on the command line:
 * the young generation's size is fixed when the heap is made.
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];

export interface Platform {
  settings: Settings;
  /** The gateway's base address (web role only). */
  url?: string;
  redis: RedisClient;
  actors?: ActorHost<ContentCommand>;
  /** The change feed's time-state schedule (actors role). */
  timestate?: TimestateSchedule;
  gateway?: Gateway;
  tokens?: TokenService;
  engine?: SolrEngine | null;
  indexer?: Indexer;
  /** The webhook deliveries (webhooks role). */
  webhooks?: WebhookDispatcher;
  files?: FileStore;
  /** The marks of files no content has claimed, which the web role's sweeper deletes past their TTL. */
  unclaimed?: UnclaimedFiles;
  /** The version archive's mover (archiver role). */
  archiver?: Archiver;
  stop(): Promise<void>;
}

/** Starts the given roles in this process against the configured Redis. */
export async function startPlatform(
  opts: {
    settings?: Settings;
    roles?: readonly Role[];
    log?: Logger;
    clock?: () => number;
    /** Lifecycle hooks run by this process's actors on main writes and promotes (spec: Events 7). */
    hooks?: LifecycleHook[];
  } = {},
): Promise<Platform> {
  const settings = opts.settings ?? loadSettings();
  const roles = opts.roles ?? ROLES;
  const log = opts.log ?? createLogger(settings.LOG_LEVEL, undefined, settings.LOG_FORMAT);
  const security = loadSecurityConfig();
  const variants = new Variants(loadVariantsConfig());
  const clock = opts.clock ?? Date.now;
  const redis = connectRedis(settings, { name: 'platform', log });
  await redis.ping();
  // Archived history (issue 25) is read from the file store, set up on the first such read.
  const archive = new VersionArchive(redis, async () => new SystemObjects(await fileStore(settings, log), 'archive'), settings.ARCHIVE_CACHE_MB * 1024 * 1024);
  const store = new ContentStore(redis, settings.PARTITIONS, settings.EVENTS_MAXLEN, settings.DEDUP_TTL_SECONDS, archive);
  const stops: [string, () => Promise<void>][] = [];
  const platform: Platform = { settings, redis, stop: async () => undefined };
  const engine = settings.SOLR_URL ? new SolrEngine(settings.SOLR_URL, settings.SOLR_COLLECTION, solrCredentials(settings)) : null;
  const rules = new IndexingRules(store, variants, settings.INDEXED_VIEWS.split(','), log);
  platform.engine = engine;

  if (roles.includes('actors')) {
    const actors = new ActorHost<ContentCommand>(redis, settings, new ContentActor(store, security, opts.hooks ?? []), log.child({ role: 'actors' }));
    await actors.start();
    platform.actors = actors;
    stops.push(['actors', () => actors.stop()]);
    // Once per partition: `d` for the heads an older build committed (SECURITY.md, H4), in the background.
    const headD = startHeadDBackfill(redis, () => actors.partitions(), log.child({ role: 'actors' }), {
      partitions: settings.PARTITIONS,
      everyMs: settings.LEASE_MS,
    });
    stops.push(['head d backfill', () => headD.stop()]);
    // The change feed's time-state boundaries and retention: one owner among the actor processes.
    const timestate = new TimestateSchedule(redis, store, settings, log.child({ role: 'actors' }), clock);
    await timestate.start();
    platform.timestate = timestate;
    stops.push(['timestate schedule', () => timestate.stop()]);
    // The audit trail (CONTRACT §15): one owner among the actor processes copies each write's event.
    // Its older entries go to segments in the file store, so Redis keeps only the newest.
    const auditFiles = await fileStore(settings, log.child({ role: 'actors' }));
    const audit = new AuditTrail(redis, settings, log.child({ role: 'actors' }), new AuditSegments(auditFiles));
    await audit.start();
    stops.push(['audit trail', () => audit.stop()]);
  }
  if (roles.includes('web')) {
    const tokens = new TokenService({
      redisUrl: settings.REDIS_URL ?? 'redis://127.0.0.1:6379',
      settings,
      config: security,
      log: (level, msg) => log[level]({ role: 'web' }, msg),
    });
    await tokens.start();
    const mailbox = new Mailbox(redis, settings, log.child({ role: 'web' }), store, settings.LOCAL_DISPATCH ? platform.actors : undefined);
    mailbox.start();
    const metrics = new Metrics(redis, settings.PARTITIONS, () => mailbox.inFlight);
    const reindex = engine ? new ReindexSessions(redis, store, settings) : null;
    const files = await fileStore(settings, log.child({ role: 'web' }));
    // Whatever deletes a file here (the file service, the tmp sweeper, the unclaimed-files sweep),
    // its kept renditions go first (SECURITY.md, "Renditions of deleted sources").
    files.beforeDelete = (key) => condemnRenditions(redis, key);
    const sweepLog = (m: string) => log.info({ role: 'web' }, m);
    const sweeper = startSweeper('tmp sweeper', () => files.sweepExpired(), { ttlSeconds: settings.TMP_TTL_SECONDS, log: sweepLog });
    stops.push(['tmp sweeper', async () => sweeper.stop()]);
    // Files of content hosts no live content held when uploaded expire as tmp files, unless a write maps them.
    const unclaimed = new UnclaimedFiles(redis, settings.PARTITIONS, settings.UNCLAIMED_FILES_PER_USER);
    platform.unclaimed = unclaimed;
    if (settings.UNCLAIMED_FILE_MARKS) {
      const unclaimedSweeper = startSweeper('unclaimed files sweeper', () => unclaimed.sweep(files, clock(), settings.TMP_TTL_SECONDS * 1000), {
        ttlSeconds: settings.TMP_TTL_SECONDS,
        log: sweepLog,
      });
      stops.push(['unclaimed files sweeper', async () => unclaimedSweeper.stop()]);
    }
    platform.files = files;
    const gateway = new Gateway({
      settings,
      redis,
      store,
      mailbox,
      tokens,
      security,
      variants,
      clock,
      metrics,
      engine,
      reindex,
      files,
      log: log.child({ role: 'web' }),
    });
    await gateway.listen();
    platform.gateway = gateway;
    platform.tokens = tokens;
    platform.url = gateway.baseUrl();
    // Stop order: no new requests, then no more replies awaited, then the token store.
    stops.unshift(['token store', () => tokens.stop()]);
    stops.unshift(['mailbox', () => mailbox.stop()]);
    stops.unshift(['gateway', () => gateway.close()]);
  }
  if (!engine && (roles.includes('indexer') || roles.includes('reindexer'))) {
    log.warn(
      'No search engine: SOLR_URL is unset (npm start sets it when Java and Maven can run the embedded Solr); the indexer and re-indexer stay idle and search answers 503',
    );
  }
  if (engine && roles.includes('indexer')) {
    const indexer = new Indexer(redis, settings, rules, engine, log.child({ role: 'indexer' }));
    await indexer.start();
    platform.indexer = indexer;
    stops.push(['indexer', () => indexer.stop()]);
  }
  if (engine && roles.includes('reindexer')) {
    const reindexer = new Reindexer(redis, settings, rules, engine, log.child({ role: 'reindexer' }));
    await reindexer.start();
    stops.push(['reindexer', () => reindexer.stop()]);
  }

  if (roles.includes('webhooks')) {
    const webhooks = new WebhookDispatcher(redis, store, settings, log.child({ role: 'webhooks' }));
    await webhooks.start();
    platform.webhooks = webhooks;
    stops.push(['webhooks', () => webhooks.stop()]);
  }

  if (roles.includes('archiver')) {
    // Old history leaves Redis for the file store; one archiver per partition at a time.
    const archiver = new Archiver(redis, store, settings, log.child({ role: 'archiver' }), clock);
    await archiver.start();
    platform.archiver = archiver;
    stops.push(['archiver', () => archiver.stop()]);
  }

  // Each part gets a bounded time to stop: a part stuck on a connection that cannot finish (a
  // Redis that restarted mid-command) must not keep the rest from stopping. Leases expire by
  // themselves and another owner replays whatever was pending.
  platform.stop = async () => {
    for (const [name, stop] of stops) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), STOP_PART_MS)));
      const outcome = await Promise.race([stop().then(() => 'stopped' as const), late]).catch((e: unknown) => {
        log.warn({ err: e, part: name }, 'stop failed');
        return 'failed' as const;
      });
      clearTimeout(timer);
      if (outcome === 'late') log.warn({ part: name, ms: STOP_PART_MS }, 'part did not stop in time; going on');
    }
    redis.disconnect();
  };
  return platform;
}

/**
 * The file store the settings select (S3 when S3_ENDPOINT is set, else FILES_DIR on disk).
 * When it cannot be set up yet (S3 unreachable), the platform starts anyway: file requests
 * answer 503 and /health names the store while setup is retried every 5 s.
 */
async function fileStore(settings: Settings, log: Logger): Promise<FileStore> {
  const files = await createFileStore(settings, (m) => log.warn(m));
  const setUp = (): Promise<boolean> =>
    files.ready().then(
      () => {
        log.info({ kind: files.kind }, 'file store ready');
        return true;
      },
      (e: unknown) => {
        log.error({ err: e }, 'file store could not be set up; retrying in 5 s');
        return false;
      },
    );
  if (!(await setUp())) {
    const retry = setInterval(() => void setUp().then((ok) => ok && clearInterval(retry)), 5000);
    retry.unref();
  }
  return files;
}

/**
 * For a local run: a Redis (started under DATA_DIR unless REDIS_URL or REDIS_CLUSTER_NODES is
 * set) and, when `search` and SOLR_URL is unset, the embedded Solr (8983, else a free port; it
 * stops with this process). Without Java and Maven, or when Solr cannot start, one line is
 * logged and search answers 503.
 */
export async function withLocalServices(settings: Settings, log: Logger, search: boolean): Promise<Settings> {
  if (!settings.REDIS_URL && !settings.REDIS_CLUSTER_NODES) {
    settings = { ...settings, REDIS_URL: await ensureLocalRedis(settings.DATA_DIR, (m) => log.info(m)) };
  }
  if (search && !settings.SOLR_URL) {
    if (javaAndMavenAvailable()) {
      const dataDir = `${settings.DATA_DIR}/solr`;
      const solr = await startSolr({ dataDir, port: 8983, log: (m) => log.info(m) })
        .catch((e: unknown) => {
          log.warn(`embedded Solr on 8983 failed (${(e as Error).message.split('\n')[0]}); trying a free port`);
          return startSolr({ dataDir, log: (m) => log.info(m) });
        })
        .catch((e: unknown) => {
          log.error(`No search engine: the embedded Solr could not start (${(e as Error).message.split('\n')[0]}); search answers 503`);
          return null;
        });
      if (solr) {
        settings = { ...settings, SOLR_URL: solr.url };
        process.once('exit', () => void solr.stop());
      }
    } else {
      log.warn('No search engine: SOLR_URL is unset and Java or Maven is missing, so the embedded Solr cannot run; search answers 503');
    }
  }
  return settings;
}

/** The line a process with the web role logs once it serves: where the API, its document, health and metrics are. */
export function readyLine(url: string): string {
  return `ready at ${url} — API document at ${url}/openapi.json, health at ${url}/health, metrics at ${url}/metrics`;
}

/** `node dist/src/main.js [role ...]`: runs the roles until SIGINT or SIGTERM. */
async function cli(): Promise<void> {
  const log = createLogger();
  let settings: Settings;
  try {
    settings = loadSettings();
  } catch (e) {
    log.fatal((e as Error).message);
    process.exit(2);
  }
  const args = process.argv.slice(2);
  const bad = args.filter((a) => !(ROLES as readonly string[]).includes(a));
  if (bad.length) {
    log.fatal(`Unknown role(s) ${bad.join(', ')}: use ${ROLES.join(', ')}`);
    process.exit(2);
  }
  settings = await withLocalServices(settings, log, args.length === 0 || args.some((r) => r !== 'actors' && r !== 'webhooks' && r !== 'archiver'));
  log.info({ settings: describeSettings(settings) }, 'starting');
  const platform = await startPlatform({ settings, roles: args.length ? (args as Role[]) : ROLES, log });
  if (platform.url) log.info(readyLine(platform.url));
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining requests and handing partitions over');
    // A drain that cannot finish (Redis gone: its calls wait for a reconnect) must not keep the
    // process alive: leases expire by themselves and another owner replays what is pending.
    setTimeout(() => {
      log.error('shutdown did not finish within 15 s; exiting');
      process.exit(1);
    }, 15000).unref();
    platform.stop().then(
      () => process.exit(0),
      (e: unknown) => {
        log.error({ err: e }, 'unclean shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  cli().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}

/**
 * The store the settings select (CONTRACT §1 "Files"): S3 when S3_ENDPOINT is set, else the
 * local disk under FILES_DIR. The implementation is loaded on demand: minio only when used,
 * which keeps about 12 MB out of every process that stores on disk.
 */
export async function createFileStore(s: Settings, log: FileStoreLog = () => undefined): Promise<FileStore> {
  const s3 = s3Connection(s);
  if (s3) {
    const { S3FileStore } = await import('./adapters/file-store-s3.js');
    return new S3FileStore({
      ...s3,
      tmpTtlSeconds: s.TMP_TTL_SECONDS,
      log,
    });
  }
  const { DiskFileStore } = await import('./adapters/file-store-disk.js');
  return new DiskFileStore({ dir: s.FILES_DIR, tmpTtlSeconds: s.TMP_TTL_SECONDS, log });
}
