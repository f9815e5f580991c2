import { ACTOR_GROUP, INDEXER_GROUP, keys, type RedisClient } from '../adapters/redis.js';
import { isSysadmin } from '../content/permissions.js';
import { AppError } from '../errors.js';
import type { ContentEndpoints, ContentServiceDeps } from './content-deps.js';
import type { Exchange } from './http.js';

/** A consumer group's backlog on one stream: entries not yet read (`lag`) and read but unacknowledged (`pending`). */
interface GroupLag {
  lag: number | null;
  pending: number;
}

/**
 * `GET {base_url}/operations` (sysadmin in `__global__` only; 401 without a token, 403
 * otherwise): a read-only snapshot for the console's operations page (CONTRACT §19). Per
 * partition its lease owner, the actors' mailbox and the indexer's backlog, and the dead
 * letters of both; the live actor processes; the latest re-indexing sessions with their
 * progress; webhook deliveries waiting and their outcomes. It reads Redis only and changes
 * nothing.
 */
export class OperationsService {
  private readonly redis: RedisClient;

  constructor(
    private readonly d: ContentServiceDeps,
    private readonly content: ContentEndpoints,
  ) {
    this.redis = d.store.redis as RedisClient;
    content.router.on('GET', 'operations', (x) => this.operations(x));
  }

  private async operations(x: Exchange): Promise<void> {
    const user = await this.content.authenticate(x);
    if (!isSysadmin(user)) throw new AppError('PERMISSION_DENIED', 'The operations snapshot requires sysadmin in __global__');
    const r = this.redis;
    const partitions = await Promise.all(
      Array.from({ length: this.d.settings.PARTITIONS }, async (_, p) => {
        const [owner, mailbox, indexer, deadLetters, indexerDeadLetters, webhooksPending] = await Promise.all([
          r.get(keys.lease(p)),
          this.group(keys.commands(p), ACTOR_GROUP),
          this.group(keys.events(p), INDEXER_GROUP),
          r.xlen(keys.deadLetter(p)),
          r.xlen(keys.indexerDeadLetter(p)),
          r.zcard(keys.webhookPending(p)),
        ]);
        return { partition: p, owner, mailbox, indexer, deadLetters, indexerDeadLetters, webhooksPending };
      }),
    );
    const members = await r.zrange(keys.members, '0', '-1', 'WITHSCORES');
    const sessionIds = await r.zrevrange(keys.reindexSessions, 0, 19);
    const sessions = (
      await Promise.all(
        sessionIds.map(async (id) => {
          const h = await r.hgetall(keys.reindexSession(id));
          if (!h.total) return null; // expired
          const num = (v: string | undefined) => (v === undefined ? null : Number(v));
          return { session: id, total: Number(h.total), done: Number(h.done ?? 0), started: num(h.started), completed: num(h.completed) };
        }),
      )
    ).filter((s) => s !== null);
    const outcomes = await r.hgetall(keys.webhookOutcomes);
    x.sendJson(200, {
      time: new Date().toISOString(),
      members: pairs(members).map(([id, seen]) => ({ id, lastSeen: new Date(Number(seen)).toISOString() })),
      partitions,
      reindexSessions: sessions,
      webhooks: {
        pending: partitions.reduce((n, p) => n + p.webhooksPending, 0),
        outcomes: Object.fromEntries(Object.entries(outcomes).map(([k, v]) => [k, Number(v)])),
      },
    });
  }

  /** XINFO GROUPS of a stream, this group's lag and pending count; zeros while the stream or group does not exist yet. */
  private async group(stream: string, name: string): Promise<GroupLag> {
    const groups = (await this.redis.xinfo('GROUPS', stream).catch(() => [])) as unknown[][];
    for (const g of groups) {
      const f = new Map<string, unknown>(pairs(g as unknown[]).map(([k, v]) => [String(k), v]));
      if (f.get('name') !== name) continue;
      const lag = f.get('lag');
      return { lag: typeof lag === 'number' ? lag : null, pending: Number(f.get('pending') ?? 0) };
    }
    return { lag: 0, pending: 0 };
  }
}

function pairs<T>(flat: T[]): [T, T][] {
  const out: [T, T][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}
