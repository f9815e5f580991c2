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
  done: (p: number, commandId: string) => `done:{${p}}:${commandId}`,
  content: (p: number, cid: string) => `ct:{${p}}:${cid}`,
  revisions: (p: number, cid: string) => `rv:{${p}}:${cid}`,
  versions: (p: number, cid: string) => `vr:{${p}}:${cid}`,
  versionIndex: (p: number, cid: string) => `vi:{${p}}:${cid}`,
  viewHistory: (p: number, cid: string) => `vh:{${p}}:${cid}`,
  drafts: (p: number, cid: string) => `dr:{${p}}:${cid}`,
  workspace: (workspace: string) => `ws:${workspace}`,
  audit: (p: number) => `audit:{${p}}`,
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
} as const;

/** The consumer group of the content actors on every command stream. */
export const ACTOR_GROUP = 'actors';
/** The consumer group of the indexers on every content event stream. */
export const INDEXER_GROUP = 'indexer';

export type RedisClient = (Redis | Cluster) & ScriptCommands;

/** The Lua scripts of src/actors/scripts, loaded by file name (`<name>-<numkeys>.lua`). */
export interface ScriptCommands {
  commitContent(...args: (string | Buffer | number)[]): Promise<[number, number?]>;
  renewLease(key: string, owner: string, ms: number): Promise<number>;
  releaseLease(key: string, owner: string): Promise<number>;
  reserveAlias(key: string, cid: string, workspace: string): Promise<number>;
  commitDraft(...args: (string | Buffer | number)[]): Promise<[number]>;
  releaseAlias(key: string, cid: string): Promise<number>;
}

/** The commit scripts (they stay in src/actors/scripts, also for the built dist/). */
const scriptsDir = repoPath('src', 'actors', 'scripts');

const camel = (s: string) => s.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

function defineScripts(client: Redis | Cluster): void {
  for (const file of readdirSync(scriptsDir)) {
    const m = /^(.*)-(\d+)\.lua$/.exec(file);
    if (!m) continue;
    client.defineCommand(camel(m[1]), { numberOfKeys: Number(m[2]), lua: readFileSync(join(scriptsDir, file), 'utf8') });
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
