import net from 'node:net';
import { z } from 'zod';

/**
 * Every setting of the platform, in one zod schema, read once at start from the environment.
 * A bad value stops the start with a message naming the variable (see loadSettings).
 */
const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => v === 'true' || v === '1' || v === 'yes');
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const settingsSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: int(0, 65535).default(8080),
  /** Public base address used in Location headers; defaults to http://HOST:PORT. */
  PUBLIC_URL: z.url().optional(),
  API_VERSION: z
    .string()
    .regex(/^\d+(\.\d+)*$/)
    .default('1.0.0'),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  /** Log lines: `json` (one JSON object a line, for log collectors) or `pretty` (readable lines, for a terminal). */
  LOG_FORMAT: z.enum(['json', 'pretty']).default('json'),

  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),
  REDIS_CLUSTER_NODES: z
    .string()
    .regex(/^[^,:\s]+:\d+(,[^,:\s]+:\d+)*$/, 'must be host:port[,host:port...]')
    .optional(),

  /**
   * Number of actor partitions; fixed at deploy time. At most 272: a change-feed cursor holds a
   * position in every partition, and those of more would pass CONTRACT §13's 2,048 characters
   * (`cursorLength` in src/content/change-events.ts).
   */
  PARTITIONS: int(1, 272).default(64),
  /** Lease of a partition owner, renewed at a third of it. */
  LEASE_MS: int(500, 600000).default(5000),
  /**
   * How long an actor may start a command after the gateway sent it (the command's deadline:
   * sent + this; past it the actor refuses it and nothing is committed), and so how long the
   * gateway waits for the reply before answering 503 (plus ACTOR_DEADLINE_GRACE_MS).
   */
  ACTOR_REPLY_TIMEOUT_MS: int(50, 600000).default(10000),
  /**
   * How much longer than a command's deadline the gateway waits before answering 503: the time
   * a command checked just before its deadline needs to commit and reply, plus the clock skew
   * tolerated between gateway and actor hosts (NTP-synced; see RELIABILITY.md "Clocks").
   */
  ACTOR_DEADLINE_GRACE_MS: int(0, 60000).default(1000),
  /** Commands an actor takes from its mailbox at once. */
  ACTOR_BATCH: int(1, 10000).default(256),
  /**
   * When web and actors run in one process, hand commands of partitions this process owns to
   * its actors directly instead of through the command and reply streams.
   */
  LOCAL_DISPATCH: bool.default(true),
  /** Attempts before a command goes to the dead-letter stream. */
  ACTOR_MAX_ATTEMPTS: int(1, 100).default(3),
  /** Approximate bound of each partition's event stream. */
  EVENTS_MAXLEN: int(1000, 100000000).default(1000000),
  /** The change feed keeps events this long (CONTRACT §13); older ones are trimmed by the time-state schedule's owner. */
  CHANGES_RETENTION_HOURS: z.coerce.number().positive().max(100000).default(168),
  /** Days an audit entry is kept (CONTRACT §15 Audit); older entries are trimmed as new ones arrive. */
  AUDIT_RETENTION_DAYS: z.coerce.number().positive().max(36500).default(3650),
  /** The audit trail's newest entries wait in Redis this long at most before they are flushed into a segment of the file store. */
  AUDIT_FLUSH_SECONDS: int(1, 86400).default(3600),
  /** Version archive (issue 25): past revisions and versions older than this many days leave Redis for the file store (archiver role). */
  ARCHIVE_AFTER_DAYS: z.coerce.number().min(0).max(36500).default(30),
  /** Version archive: the newest this many versions of each content stay in Redis whatever their age (archiver role). */
  ARCHIVE_KEEP_REVISIONS: int(0, 1000000).default(10),
  /** Version archive: the archiver looks for history to move this often (its first pass one interval after start). */
  ARCHIVE_INTERVAL_SECONDS: int(1, 604800).default(600),
  /** Version archive: archived segments each process keeps in memory for reads (MiB; every role that reads content). */
  ARCHIVE_CACHE_MB: int(1, 65536).default(32),
  /** Events a change-feed subscriber may have waiting before it is closed as one that does not read. */
  CHANGES_SUBSCRIBER_BUFFER: int(1, 1000000).default(2000),
  /** A change-feed subscriber whose client takes nothing for this long is closed (it resumes from its last cursor). */
  CHANGES_STALL_SECONDS: int(1, 86400).default(60),
  /**
   * Change-feed streams one user may hold open on a web process at once (SSE, WebSocket and
   * waiting long polls together, whatever the token); past it 429 with Retry-After (WebSocket: 4429).
   */
  CHANGES_MAX_STREAMS_PER_USER: int(1, 1000000).default(16),
  /** Change-feed streams a web process holds at once, all users together; past it 503 with Retry-After (WebSocket: 1013). */
  CHANGES_MAX_SUBSCRIBERS: int(1, 10000000).default(10000),
  /**
   * WebSockets of the feed one client address (IPv6: its /64; behind TRUSTED_PROXIES the
   * forwarded address) may hold open before their first message; past it the upgrade answers 429.
   * Their user is not known yet, so only the address tells one client from another.
   */
  CHANGES_WS_WAITING_PER_ADDRESS: int(1, 1000000).default(32),
  CHANGES_PAGES_PER_USER: int(1, 1000000).default(4),
  CHANGES_PAGES_AT_ONCE: int(1, 1000000).default(32),
  /** Webhooks (CONTRACT §14): targets that resolve to loopback, private or link-local addresses are allowed (tests, private networks). */
  WEBHOOK_ALLOW_PRIVATE: bool.default(false),
  /** A delivery not answered 2xx is retried until it is this old, then `failed` (redeliverable). */
  WEBHOOK_MAX_AGE_HOURS: z.coerce.number().positive().max(100000).default(24),
  /** A delivery attempt not answered within this long is cut (and retried). */
  WEBHOOK_TIMEOUT_MS: int(100, 600000).default(10000),
  /** The first retry waits between half of this and this; each next one twice as long, up to WEBHOOK_RETRY_MAX_MS. */
  WEBHOOK_RETRY_BASE_MS: int(10, 600000).default(5000),
  WEBHOOK_RETRY_MAX_MS: int(100, 86400000).default(3600000),
  /** Delivery attempts in flight per webhooks process. */
  WEBHOOK_CONCURRENCY: int(1, 100000).default(256),
  /** Delivered and failed deliveries stay in the log this long. */
  WEBHOOK_LOG_HOURS: z.coerce.number().positive().max(100000).default(168),
  /** How long a processed command id is remembered for idempotent replay. */
  DEDUP_TTL_SECONDS: int(60, 30 * 86400).default(86400),

  /** Largest JSON request body. */
  MAX_BODY_BYTES: int(1024, 1024 * 1024 * 1024).default(10 * 1024 * 1024),
  /** Requests in flight per gateway before it sheds load with 503. */
  MAX_IN_FLIGHT: int(1, 1000000).default(10000),
  /**
   * What the collected request bodies under way in a gateway may hold together, as bytes while
   * they arrive and at their parsed weight once parsed (src/gateway/bodies-held.ts); past it 503
   * with Retry-After. A body is never refused while nothing else is held. Anonymous bodies hold
   * at most half of it: the first BODIES_HELD_BYTES / 4 / MAX_IN_FLIGHT bytes of each (at most
   * 64 KiB: a login within them is not refused for them) a quarter, the rest another quarter.
   */
  BODIES_HELD_BYTES: int(1024 * 1024, 2 ** 40).default(512 * 1024 * 1024),
  /** The same for one caller (its user once the body is parsed, its client address before); past it 429 with Retry-After. */
  BODIES_HELD_PER_CALLER_BYTES: int(1024 * 1024, 2 ** 40).default(64 * 1024 * 1024),
  /** Lines of one bulk import (CONTRACT §16); the lines past it answer 413. Each line may be up to MAX_BODY_BYTES, as its single request. */
  BULK_MAX_LINES: int(1, 100000000).default(100000),
  /** Lines of one bulk import in flight at once (sent to the actors, or answered and waiting for an earlier line); reading the body pauses at this. */
  BULK_IN_FLIGHT: int(1, 100000).default(2000),
  /**
   * Exports one user may run at once on a web process (whatever the token); past it 429 with
   * Retry-After. Each holds up to a few batches of rendered lines while its client reads.
   */
  EXPORT_MAX_PER_USER: int(1, 10000).default(4),
  /** Exports every user together may run at once on a web process (503 past it). */
  EXPORT_MAX: int(1, 100000).default(16),
  /** Bulk imports one user may run at once on a web process (429 past it): each holds a window of parsed lines. */
  IMPORT_MAX_PER_USER: int(1, 10000).default(4),
  /** Bulk imports every user together may run at once on a web process (503 past it): each holds up to 32 MiB of parsed lines. */
  IMPORT_MAX: int(1, 100000).default(16),
  /** Versioned reads kept in memory per gateway. */
  READ_CACHE_ENTRIES: int(0, 10000000).default(50000),
  /** Bytes of versioned reads kept in memory per gateway (rendered answers and their snapshots); one answer larger than a sixteenth of it is not kept. */
  READ_CACHE_BYTES: int(0, 2 ** 40).default(64 * 1024 * 1024),

  TOKEN_TTL_SECONDS: int(60, 365 * 86400).default(86400),
  /**
   * Live tokens one user may hold (logins, renewals and JWT exchanges; each lives TOKEN_TTL_SECONDS); past it
   * 429 with Retry-After until the oldest expires. A password change or deletion of the account resets it.
   */
  TOKENS_PER_USER_MAX: int(1, 100000000).default(1000),
  EXTERNAL_JWT_SECRET: z.string().min(16).optional(),
  EXTERNAL_JWT_PUBLIC_KEY: z.string().min(32).optional(),
  /** When set, an external JWT's `iss` must be exactly this. */
  EXTERNAL_JWT_ISSUER: z.string().min(1).optional(),
  /** When set, an external JWT's `aud` must hold this. */
  EXTERNAL_JWT_AUDIENCE: z.string().min(1).optional(),
  /** Failed logins per username and per client address within LOGIN_WINDOW_SECONDS before 429. */
  LOGIN_MAX_FAILURES: int(1, 1000000).default(10),
  LOGIN_WINDOW_SECONDS: int(1, 86400).default(900),
  /**
   * Proxies (addresses or CIDR ranges, comma-separated) whose X-Forwarded-For is believed for the
   * client address; unset, the client address is the socket's.
   */
  TRUSTED_PROXIES: z
    .string()
    .refine((v) => v.split(',').every((e) => parseAddressOrRange(e.trim()) !== null), 'must be IP addresses or CIDR ranges, comma-separated')
    .optional(),

  MAX_UPLOAD_BYTES: int(1, Number.MAX_SAFE_INTEGER).default(268435456),
  TMP_TTL_SECONDS: int(60, 10 * 365 * 86400).default(259200),
  /**
   * Whether an upload into a content host no live content holds is marked, to expire after
   * TMP_TTL_SECONDS unless a content write maps it, and the marks are swept
   * (src/security/unclaimed-files.ts). Off while processes of an earlier release run beside this
   * one (they neither mark nor claim).
   */
  UNCLAIMED_FILE_MARKS: bool.default(true),
  /**
   * Files an uploader may have uploaded to content hosts no live content holds (of one partition
   * of hosts) that no write has mapped yet: each costs Redis a mark until then (429 past it).
   */
  UNCLAIMED_FILES_PER_USER: int(1, 10_000_000).default(1000),
  FILES_DIR: z.string().min(1).default('.data/files'),
  S3_ENDPOINT: z.string().min(1).optional(),
  S3_PORT: int(1, 65535).optional(),
  S3_USE_SSL: bool.default(false),
  S3_ACCESS_KEY: z.string().optional(),
  S3_SECRET_KEY: z.string().optional(),
  S3_BUCKET: z.string().min(3).default('content-platform'),

  /** Image renditions (CONTRACT §17): with a key set, free rendition parameters need `sig` (HMAC-SHA256 of the canonical query). */
  RENDITION_SIGNING_KEY: z.string().min(16).optional(),
  /** Sources with more pixels than this are not rendered (422): a decompression bomb must not reach the decoder. */
  RENDITION_MAX_PIXELS: int(1, 1_000_000_000).default(50_000_000),
  /**
   * Source files larger than this are not rendered (422): a render holds its source in memory,
   * and the pixel bound does not bound a file (a small image with a long tail of other bytes).
   */
  RENDITION_MAX_SOURCE_BYTES: int(1, Number.MAX_SAFE_INTEGER).default(64 * 1024 * 1024),
  /** Renders in flight per gateway; past it, 503 with Retry-After. */
  RENDITION_MAX_CONCURRENT: int(1, 1000).default(4),
  /**
   * Renders of one caller in flight per gateway (a signed-in caller counted by user id, an
   * anonymous one by client address: IPv6 its /64, behind TRUSTED_PROXIES the forwarded address);
   * past it 429 with Retry-After before the source is read. Below RENDITION_MAX_CONCURRENT, so one
   * caller never holds every render of the process. Kept renditions, and requests that join a
   * render of the same rendition under way, take none.
   */
  RENDITION_AT_ONCE_PER_CALLER: int(1, 1000).default(2),
  /**
   * Bytes the renders in flight in a gateway may hold while decoding their sources and encoding
   * their renditions, together, estimated from each source's header and each rendition's size and
   * format (`decodeBytesOf` and `encodeBytesOf` in src/adapters/image-renderer.ts): a progressive
   * JPEG, an interlaced PNG, a GIF, WebP, AVIF or TIFF is decoded whole, so a file of a few hundred
   * bytes within RENDITION_MAX_PIXELS can take hundreds of MB to render, and an AVIF, WebP or
   * (progressive) JPEG rendition is encoded whole, whatever its source. A render whose estimate
   * alone passes it is not made (422); one that would pass it with the renders in flight answers
   * 503 with Retry-After. 1 GiB: one full-size JPEG rendition of a 50-megapixel source (the
   * default RENDITION_MAX_PIXELS) is estimated at 545 MB.
   */
  RENDITION_MAX_RENDER_BYTES: int(1, Number.MAX_SAFE_INTEGER).default(1024 * 1024 * 1024),
  /**
   * Kept renditions per source file; past it, the least recently used of that source is removed
   * (its file after a grace for reads in progress). A removed rendition is made again when asked.
   */
  RENDITION_MAX_PER_SOURCE: int(1, 100_000).default(64),
  /**
   * Opt-in public caching: delivery by version of content on a public view, read without a token,
   * answers `public, max-age=<this>, immutable` so a CDN may keep it. Unset, every delivery is private.
   */
  PUBLIC_CACHE_MAX_AGE: int(1, 31536000).optional(),

  SOLR_URL: z.url().optional(),
  /** Default collection of the index and of the search service. */
  SOLR_COLLECTION: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/)
    .default('content'),
  /** The spec's switch `solr.authentication.enabled`: basic authentication towards Solr. */
  SOLR_AUTHENTICATION_ENABLED: bool.default(false),
  SOLR_USERNAME: z.string().optional(),
  SOLR_PASSWORD: z.string().optional(),
  /** Views whose versions are indexed (one document per version on any of them). */
  INDEXED_VIEWS: z
    .string()
    .regex(/^[A-Za-z0-9_~@.-]+(,[A-Za-z0-9_~@.-]+)*$/)
    .default('svcLatest,svcPublic'),
  /** Views marked public: searches without a token see only content on them. */
  PUBLIC_VIEWS: z
    .string()
    .regex(/^[A-Za-z0-9_~@.-]+(,[A-Za-z0-9_~@.-]+)*$/)
    .default('svcPublic'),
  /** The message queue topic of re-indexing sessions. */
  REINDEX_TOPIC: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]+$/)
    .default('svcReindexEvents'),
  /**
   * Documents per request to the search engine (an indexer read takes 1,024 stream entries in all,
   * READ_AT_ONCE in src/actors/indexer.ts). 200: a request of 500 made the event loop of a process that also serves HTTP stall
   * for up to 150 ms (bench/RESULTS.md, eleventh session); the engine's cost per request is
   * about 0.5 ms, per document 50-70 µs.
   */
  INDEX_BATCH: int(1, 100000).default(200),
  /**
   * The indexer's pause (ms) after a read that found less than a batch: what commits meanwhile is
   * indexed as one batch. Longer pauses mean fewer, larger requests to the engine and fewer wake-ups
   * beside the requests of a process that also serves; each adds to commit → searchable (2 s budget).
   */
  INDEX_FOLLOW_MS: int(0, 1000).default(50),
  /** Range facet buckets of one search, over all its range facets; past it the search answers 400 before the engine is asked. */
  SEARCH_MAX_RANGE_BUCKETS: int(1, 1000000).default(1000),
  /** Solr's `timeAllowed` (ms) of every search: sent when the caller sends none, and the most a caller's may be. */
  SEARCH_TIME_ALLOWED_MS: int(1, 600000).default(5000),
  /** Clauses (terms, phrases' words, ranges) of q, every fq and facet.query of one search together; past it 400 before the engine is asked. */
  SEARCH_MAX_CLAUSES: int(1, 100000).default(1024),
  /** Wildcard, prefix, regular expression and range terms of q, every fq and facet.query of one search together (each is expanded over the index's terms). */
  SEARCH_MAX_MULTI_TERMS: int(0, 10000).default(20),
  /** Most `fq` of one search, and most `facet.query`. */
  SEARCH_MAX_FILTER_QUERIES: int(1, 1000).default(20),
  /** Facet values one search may ask for: each facet.field its limit, each facet.pivot every node of its tree. */
  SEARCH_MAX_FACET_VALUES: int(1, 10000000).default(20000),
  /**
   * Searches of one caller under way at once on a web process (the search proxy, and taxonomy
   * completion that asks the engine): a signed-in caller counted by user id, an anonymous one by
   * client address (IPv6: its /64; behind TRUSTED_PROXIES the forwarded address); past it 429
   * with Retry-After before the engine is asked.
   */
  SEARCH_AT_ONCE_PER_CALLER: int(1, 10000).default(4),
  /**
   * Searches a web process asks of the engine at once, all callers together (the search proxy and
   * taxonomy completion that asks the engine); the next SEARCH_WAITING wait their turn, first come
   * first, and past those 503 with Retry-After before the engine is asked.
   */
  SEARCH_AT_ONCE: int(1, 100000).default(16),
  /** Searches that wait for one of a web process's SEARCH_AT_ONCE; past it 503 with Retry-After. */
  SEARCH_WAITING: int(0, 1000000).default(256),
  /**
   * Bytes of stored content (heads and versions, as Redis keeps them) one search with `inlineData`
   * reads: a result past it has `_content: null` and `_contentOmitted: true` (read it with a GET).
   * Before, 1,000 results of public content of 9 MB each made one anonymous search hold gigabytes.
   */
  SEARCH_INLINE_MAX_BYTES: int(0, 2 ** 40).default(16 * 1024 * 1024),

  /** Where `npm start` keeps its local Redis, files and caches. */
  DATA_DIR: z.string().min(1).default('.data'),
});

export type Settings = z.infer<typeof settingsSchema>;

/** `10.0.0.0/8`, `::1` and the like as an address, its family and prefix length; null when not one. */
export function parseAddressOrRange(entry: string): { address: string; family: 'ipv4' | 'ipv6'; prefix: number } | null {
  const [address, bits, extra] = entry.split('/');
  const v = net.isIP(address);
  if (v === 0 || extra !== undefined) return null;
  const max = v === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return null;
  return { address, family: v === 4 ? 'ipv4' : 'ipv6', prefix };
}

/** Solr basic-auth credentials when `solr.authentication.enabled`; refuses to start without them. */
export function solrCredentials(s: Settings): { username: string; password: string } | undefined {
  if (!s.SOLR_AUTHENTICATION_ENABLED) return undefined;
  if (!s.SOLR_USERNAME || !s.SOLR_PASSWORD) throw new Error('SOLR_AUTHENTICATION_ENABLED=true needs SOLR_USERNAME and SOLR_PASSWORD');
  return { username: s.SOLR_USERNAME, password: s.SOLR_PASSWORD };
}

/** The S3 server and bucket of the file store when S3_ENDPOINT is set (CONTRACT §1 "Files"). */
export function s3Connection(
  s: Settings,
): { endPoint: string; port?: number; useSSL: boolean; accessKey: string; secretKey: string; bucket: string } | undefined {
  if (!s.S3_ENDPOINT) return undefined;
  return {
    endPoint: s.S3_ENDPOINT,
    port: s.S3_PORT,
    useSSL: s.S3_USE_SSL,
    accessKey: s.S3_ACCESS_KEY ?? '',
    secretKey: s.S3_SECRET_KEY ?? '',
    bucket: s.S3_BUCKET,
  };
}

const SECRET = /SECRET|PASSWORD|KEY$/;

/** Reads and validates the environment once; throws an Error naming every bad variable. */
export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const input: Record<string, string> = {};
  for (const key of Object.keys(settingsSchema.shape)) {
    const v = env[key];
    if (v !== undefined && v !== '') input[key] = v;
  }
  const parsed = settingsSchema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message} (got ${JSON.stringify(input[String(i.path[0])])})`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}

/** Credentials in any URL of a text (`scheme://user:password@host` as `scheme://***@host`). */
export const maskUrlCredentials = (s: string): string => s.replace(/(\/\/)[^@/\s]*@/g, '$1***@');

/** Settings with secrets masked, for the start-up log: secret settings, and credentials in any URL. */
export function describeSettings(s: Settings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) {
    out[k] = v !== undefined && SECRET.test(k) ? '***' : typeof v === 'string' ? maskUrlCredentials(v) : v;
  }
  return out;
}
