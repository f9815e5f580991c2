import { Redis, Cluster, type RedisOptions } from 'ioredis';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Settings } from '../../config/settings.js';
import type { Logger } from './log.js';
import { repoPath } from '../repo-files.js';

/**
 * The Redis key layout. Every key of one content and its partition's streams share the hash
 * tag `{p}` (the partition), so one Lua script can commit a change and append its event, also
 * on Redis Cluster. Global indexes (aliases, members, reply streams) live in their own slots.
 */
export const keys = {
  lease: (p: number) => `lease:{${p}}`,
  commands: (p: number) => `cmd:{${p}}`,
  events: (p: number) => `events:{${p}}`,
  deadLetter: (p: number) => `dead:{${p}}`,
  /** Documents the search engine refused, set aside by the indexer (src/actors/index-writer.ts). */
  indexerDeadLetter: (p: number) => `indexer-dead:{${p}}`,
  /** Hash: content id → why the engine refused its documents, until that content is indexed. */
  indexerRefused: 'indexer:refused',
  /**
   * Hash: content id -> the root documents the indexer sent for it that the index may still
   * hold, and the indexers in flight on it (src/actors/index-writer.ts; the scripts
   * index-claim-1.lua and index-settle-1.lua write it). No field: the content was not indexed
   * since records were kept, or it is gone and its documents deleted.
   */
  indexedDocs: (p: number) => `ixd:{${p}}`,
  done: (p: number, commandId: string) => `done:{${p}}:${commandId}`,
  content: (p: number, cid: string) => `ct:{${p}}:${cid}`,
  revisions: (p: number, cid: string) => `rv:{${p}}:${cid}`,
  versions: (p: number, cid: string) => `vr:{${p}}:${cid}`,
  versionIndex: (p: number, cid: string) => `vi:{${p}}:${cid}`,
  viewHistory: (p: number, cid: string) => `vh:{${p}}:${cid}`,
  drafts: (p: number, cid: string) => `dr:{${p}}:${cid}`,
  /** String: one packed entry per segment of the content's history in the version archive, appended in order (src/adapters/version-archive.ts). */
  archiveIndex: (p: number, cid: string) => `ar:{${p}}:${cid}`,
  /** The lease of the archiver that moves this partition's old versions (src/actors/archiver.ts). */
  archiveLease: (p: number) => `arc:{${p}}:lease`,
  /** Hash: versions, revisions, segments, bytes archived in this partition, and the backlog of the last pass. */
  archiveStats: (p: number) => `arc:{${p}}:stats`,
  /**
   * The files uploaded to a content host no live content held (src/security/unclaimed-files.ts),
   * p being the host's partition: their marks (storage key -> upload time), those the sweep set
   * aside (-> when), each mark's uploader, each uploader's marks, the files taken to delete (->
   * when: remembered a day) and those not yet deleted (-> when to try).
   */
  unclaimedFiles: (p: number) => `unclaimed:{${p}}`,
  unclaimedAside: (p: number) => `unclaimed:{${p}}:aside`,
  unclaimedBy: (p: number) => `unclaimed:{${p}}:by`,
  unclaimedCount: (p: number) => `unclaimed:{${p}}:count`,
  unclaimedTaken: (p: number) => `unclaimed:{${p}}:taken`,
  unclaimedDeleting: (p: number) => `unclaimed:{${p}}:deleting`,
  workspace: (workspace: string) => `ws:${workspace}`,
  /** The audit trail of main writes (CONTRACT §15), copied from events:{p} by src/actors/audit-trail.ts. */
  auditLog: (p: number) => `auditlog:{${p}}`,
  catalog: (p: number) => `cat:{${p}}`,
  catalogOfType: (p: number, type: string) => `cat:{${p}}:t:${type}`,
  /** contents that hold (or once held) a taxonomy definition or the content hierarchy aspect */
  taxonomyMembers: (p: number) => `cat:{${p}}:tx`,
  reindexQueue: (topic: string) => topic,
  reindexSession: (id: string) => `reindex:${id}`,
  /** Sorted set of re-indexing session ids by start time (for the progress metric). */
  reindexSessions: 'reindex:sessions',
  alias: (namespace: string, alias: string) => `alias:${namespace}/${alias}`,
  replies: (gatewayId: string) => `reply:${gatewayId}`,
  members: 'actors:members',
  /** Webhook deliveries of partition p waiting, by creation time (src/webhooks/keys.ts has the rest of their layout). */
  webhookPending: (p: number) => `wh:{${p}}:pending`,
  /** Hash: outcome (delivered, retried, failed) → delivery attempts counted, by every webhooks process. */
  webhookOutcomes: 'webhooks:outcomes',
} as const;

/**
 * The field of `keys.drafts(p, cid)` that keeps, beside the draft of `workspace` (its field is the
 * workspace's name), what a workspace listing needs of it (`DraftSummary` in content-store.ts).
 * No workspace name holds `:`, so it names no workspace.
 */
export const draftSummaryField = (workspace: string): string => `${workspace}:summary`;

/** The consumer group of the content actors on every command stream. */
export const ACTOR_GROUP = 'actors';
/** The consumer group of the indexers on every content event stream. */
export const INDEXER_GROUP = 'indexer';

export type RedisClient = (Redis | Cluster) & ScriptCommands;

/**
 * The Lua scripts of src/actors/scripts, loaded by file name (`<name>-<numkeys>.lua`, `<name>-n.lua`
 * when the caller gives the number of keys first). The commit
 * scripts take their keys, then one argument packed by `packScriptArgs`.
 */
export interface ScriptCommands {
  /** Commits of one partition (commit-content-n.lua): 12 keys a commit, then one argument a commit; two numbers a commit. */
  commitContent(numKeys: number, ...keysThenArgs: (string | Buffer)[]): Promise<number[]>;
  renewLease(key: string, owner: string, ms: number): Promise<number>;
  /** XAUTOCLAIM of `stream` by `owner` while it holds `lease`: its answer, or null otherwise. */
  claimIfOwnerBuffer(lease: string, stream: string, owner: string, group: string, minIdleMs: number, start: string, count: number): Promise<unknown>;
  releaseLease(key: string, owner: string): Promise<number>;
  reserveAlias(key: string, cid: string, workspace: string): Promise<number>;
  commitDraft(...keysThenArgs: [...keys: string[], args: Buffer]): Promise<[number]>;
  /** Per content (drafts hashes, then head hashes): its draft's length on workspace `field`, the draft's summary and its snapshot, flat. */
  draftListBuffer(numKeys: number, ...keysThenArgs: string[]): Promise<(number | Buffer | null)[]>;
  /** Keeps the summary of a draft stored before summaries were kept, while that draft (of `size` bytes) is still there: 1 when written. */
  draftSummaryAdopt(drafts: string, workspace: string, summaryField: string, summary: Buffer, size: number): Promise<number>;
  releaseAlias(key: string, cid: string): Promise<number>;
  /**
   * Per content (id, n, n record keys): adds its documents to its record in `ixd:{p}` and notes
   * the writer `token` in flight for `leaseMs`; answers per content what the record kept before
   * (null: no record, or one whose content's older documents were not yet deleted by query).
   */
  indexClaim(key: string, token: string, leaseMs: number, ...contents: (string | number)[]): Promise<(string[] | null)[]>;
  /**
   * Per content (id, gone 1/0, swept 1/0, n, n record keys): ends the writer's claim; the record
   * keeps exactly these documents when no other writer was in flight beside it and `release` is 0.
   */
  indexSettle(key: string, token: string, release: 0 | 1, ...contents: (string | number)[]): Promise<number>;
  archiveMove(...keysThenArgs: [...keys: string[], args: Buffer]): Promise<number>;
  /** Field ARGV[i] of hash KEYS[i] for every i, in one call (keys of one partition). */
  hgetEachBuffer(numKeys: number, ...keysThenFields: string[]): Promise<(Buffer | null)[]>;
  /**
   * Per head hash (keys of one partition): 1 when the content exists and is not deleted, 0 when it
   * is deleted or never existed, its snapshot where the head has no `d` or one of another revision
   * (an older build committed it); the snapshot is not read otherwise (live-heads-n.lua).
   */
  liveHeadsBuffer(numKeys: number, ...keys: string[]): Promise<(number | Buffer)[]>;
  /**
   * Field ARGV[i] of hash KEYS[i] for every i (keys of one partition), in one call, up to the first
   * value that would take their total past `budget` bytes; `first` 1: that one is read whatever
   * its length. Fewer values than keys when the budget ended the read (hget-each-within-n.lua).
   */
  hgetEachWithinBuffer(numKeys: number, ...keysThenArgs: string[]): Promise<(Buffer | null)[]>;
  /** How many entries of a content's history list (vi or vh) are of revisions up to `upTo` (history-count-1.lua). */
  historyCount(list: string, upTo: number): Promise<number>;
  /** Per content (head hashes, then versions hashes, then "0" for snapshots only): its stored snapshot and head version, flat. */
  exportReadBuffer(numKeys: number, ...keysThenVersions: string[]): Promise<(Buffer | null)[]>;
  /** Marks a file no live content holds, unless its uploader has `cap` marks here (unclaimed-mark-3.lua): 1 marked, 0 refused. */
  unclaimedMark(marks: string, by: string, count: string, member: string, at: number, uploader: string, cap: number): Promise<number>;
  /** Drops marks (a claim, a delete) (unclaimed-drop-6.lua): the keys of those the sweep has taken. */
  unclaimedDrop(marks: string, aside: string, by: string, count: string, taken: string, deleting: string, ...members: string[]): Promise<string[]>;
  /** Sets aside up to `limit` marks made at or before `before`, scored `now` (unclaimed-move-2.lua): how many moved. */
  unclaimedMove(marks: string, aside: string, before: number, now: number, limit: number): Promise<number>;
  /** Takes up to `limit` files set aside at or before `due`, to delete (unclaimed-take-5.lua): how many. */
  unclaimedTake(aside: string, by: string, count: string, taken: string, deleting: string, due: number, now: number, limit: number): Promise<number>;
  /** A kept rendition's stored path (null: none), its use recorded (src/gateway/renditions.ts). */
  renditionLookup(index: string, lru: string, id: string, now: number): Promise<string | null>;
  /** Names a rendered file as a kept rendition, evicting past the bound: the path the index names; null (the file put in the trash) once the source is being deleted. */
  renditionKeep(index: string, lru: string, trash: string, id: string, path: string, stale: string, now: number, bound: number): Promise<string | null>;
  /** A source file is being deleted: its kept renditions go to the trash, its index is marked `!gone` for `markMs` (rendition-condemn-3.lua); how many moved. */
  renditionCondemn(index: string, lru: string, trash: string, now: number, markMs: number): Promise<number>;
  /** After a sweep of a source's trash: the source leaves `sources` (next '') or is due at next, unless its score is no longer `seen`. */
  renditionTrashSettle(sources: string, tag: string, seen: string, next: number | ''): Promise<number>;
}

/** A value a script reads from its packed arguments; undefined ones are left out (nil in Lua). */
export type ScriptArg = string | number | boolean | Buffer | Buffer[] | undefined;

/**
 * Packs a script's arguments into one MessagePack map, which the script reads by name with
 * `cmsgpack.unpack(ARGV[1])` (built into Redis's Lua). Redis's cmsgpack knows no `bin` type, so
 * blobs (snapshots, versions, events: msgpack already) go in as `str`, which Lua reads as the
 * same bytes, unchanged; no base64. Numbers go in as float64, Lua's own number type (integers
 * up to 2^53 keep their value, and Redis writes them back as integers). On the commit path:
 * the size is counted first, then everything is written into one buffer.
 */
export function packScriptArgs(args: Record<string, ScriptArg>): Buffer {
  let count = 0;
  let size = 0;
  for (const name in args) {
    const v = args[name];
    if (v === undefined) continue;
    count++;
    size += nameOf(name).length + sizeOf(v);
  }
  size += headerSize(count, 15, false);
  const out = Buffer.allocUnsafe(size);
  let at = writeHeader(out, 0, count, 0x80, 15, 0, 0xde, 0xdf);
  for (const name in args) {
    const v = args[name];
    if (v === undefined) continue;
    const n = nameOf(name);
    n.copy(out, at);
    at += n.length;
    if (typeof v === 'string') at = writeStr(out, at, v);
    else if (typeof v === 'number') {
      out[at] = 0xcb;
      at = out.writeDoubleBE(v, at + 1);
    } else if (typeof v === 'boolean') out[at++] = v ? 0xc3 : 0xc2;
    else if (Buffer.isBuffer(v)) at = writeStr(out, at, v);
    else {
      at = writeHeader(out, at, v.length, 0x90, 15, 0, 0xdc, 0xdd);
      for (const b of v) at = writeStr(out, at, b);
    }
  }
  return out;
}

/** The packed names (a str header and the name), made once: the scripts use a handful. */
const names = new Map<string, Buffer>();
function nameOf(name: string): Buffer {
  let b = names.get(name);
  if (!b) {
    const bytes = Buffer.from(name);
    b = Buffer.allocUnsafe(headerSize(bytes.length, 31, true) + bytes.length);
    bytes.copy(b, writeHeader(b, 0, bytes.length, 0xa0, 31, 0xd9, 0xda, 0xdb));
    names.set(name, b);
  }
  return b;
}

function sizeOf(v: Exclude<ScriptArg, undefined>): number {
  if (typeof v === 'string') {
    const n = Buffer.byteLength(v);
    return headerSize(n, 31, true) + n;
  }
  if (typeof v === 'number') return 9;
  if (typeof v === 'boolean') return 1;
  if (Buffer.isBuffer(v)) return headerSize(v.length, 31, true) + v.length;
  let n = headerSize(v.length, 15, false);
  for (const b of v) n += headerSize(b.length, 31, true) + b.length;
  return n;
}

function writeStr(out: Buffer, at: number, v: string | Buffer): number {
  const n = typeof v === 'string' ? Buffer.byteLength(v) : v.length;
  at = writeHeader(out, at, n, 0xa0, 31, 0xd9, 0xda, 0xdb);
  return at + (typeof v === 'string' ? out.write(v, at) : v.copy(out, at));
}

/** The size of a MessagePack length header: the fix form up to `fixMax`, then 8 (str only), 16 or 32 bits. */
function headerSize(n: number, fixMax: number, has8: boolean): number {
  if (n <= fixMax) return 1;
  if (has8 && n <= 0xff) return 2;
  return n <= 0xffff ? 3 : 5;
}

function writeHeader(out: Buffer, at: number, n: number, fix: number, fixMax: number, code8: number, code16: number, code32: number): number {
  if (n <= fixMax) {
    out[at] = fix | n;
    return at + 1;
  }
  if (code8 && n <= 0xff) {
    out[at] = code8;
    out[at + 1] = n;
    return at + 2;
  }
  if (n <= 0xffff) {
    out[at] = code16;
    return out.writeUInt16BE(n, at + 1);
  }
  out[at] = code32;
  return out.writeUInt32BE(n, at + 1);
}

/** The commit scripts (they stay in src/actors/scripts, also for the built dist/). */
const scriptsDir = repoPath('src', 'actors', 'scripts');

const camel = (s: string) => s.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

function defineScripts(client: Redis | Cluster): void {
  for (const file of readdirSync(scriptsDir)) {
    const m = /^(.*)-(\d+|n)\.lua$/.exec(file);
    if (!m) continue;
    // `-n`: a variable number of keys, which the caller gives first.
    const numberOfKeys = m[2] === 'n' ? undefined : Number(m[2]);
    client.defineCommand(camel(m[1]), { numberOfKeys, lua: readFileSync(join(scriptsDir, file), 'utf8') });
  }
}

/** Connection options shared by every client the platform opens. */
function baseOptions(extra: RedisOptions = {}): RedisOptions {
  return { maxRetriesPerRequest: null, enableAutoPipelining: true, lazyConnect: false, ...extra };
}

/**
 * Is this error Redis being out of reach for a moment (a server down or restarting, a Cluster
 * failover under way) rather than a fault of ours? Such a request is answered 503 with
 * Retry-After, as the spec's errors ask for an unavailable store, never 500.
 */
export function redisUnreachable(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (e.name === 'MaxRetriesPerRequestError' || e.name === 'ClusterAllFailedError') return true;
  return /^(?:Too many Cluster redirections|Connection is closed|Stream isn't writeable|Failed to refresh slots cache|CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY)|ECONNREFUSED|ECONNRESET/.test(
    e.message,
  );
}

/**
 * Opens a client for REDIS_URL or, with REDIS_CLUSTER_NODES, for Redis Cluster.
 * `blocking` clients serve one blocking read each (XREADGROUP/XREAD BLOCK) and skip pipelining.
 */
export function connectRedis(
  settings: Pick<Settings, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'>,
  opts: { blocking?: boolean; name?: string; log?: Logger } = {},
): RedisClient {
  const extra: RedisOptions = opts.blocking ? { enableAutoPipelining: false } : {};
  if (opts.name) extra.connectionName = opts.name;
  let client: Redis | Cluster;
  if (settings.REDIS_CLUSTER_NODES) {
    const nodes = settings.REDIS_CLUSTER_NODES.split(',').map((hp) => {
      const [host, port] = hp.split(':');
      return { host, port: Number(port) };
    });
    // No auto-pipelining on a cluster: ioredis retries a pipeline after MOVED/ASK only when
    // every command in it got the same redirection, so while slots migrate a batch with mixed
    // answers failed with MOVED (seen in test/cluster/redis-cluster.test.ts).
    client = new Cluster(nodes, { redisOptions: baseOptions(extra), enableAutoPipelining: false });
  } else {
    client = new Redis(settings.REDIS_URL ?? 'redis://127.0.0.1:6379', baseOptions(extra));
  }
  defineScripts(client);
  // ioredis reconnects by itself; without a listener every failed attempt is printed to stderr.
  let lastReport = 0;
  client.on('error', (err: Error) => {
    const now = Date.now();
    if (now - lastReport < 10_000) return;
    lastReport = now;
    opts.log?.warn({ err: err.message, connection: opts.name }, 'Redis connection failing; reconnecting');
  });
  return client as RedisClient;
}
