import { EventReader, heldBytes } from '../adapters/event-reader.js';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { Logger } from '../adapters/log.js';
import { connectRedis, keys, type RedisClient } from '../adapters/redis.js';
import { autoclaim, ensureGroup, type StreamEntry } from '../adapters/redis-streams.js';
import { matchesFilter, parseStreamId } from '../content/change-events.js';
import { sleep } from '../wait.js';
import { entryOf, eventIdOf, positionOf, WEBHOOKS_GROUP, whKeys } from './keys.js';
import { post, type PostResult } from './http-post.js';
import { withScripts, type WebhookScripts } from './scripts.js';
import { deliveryHeaders, secretKey } from './signing.js';
import { checkTarget, type Resolver, systemResolver, TargetRefused } from './ssrf.js';
import { recordTtlMs, type Webhook, WebhookStore } from './webhook-store.js';

/** The fan-out lease of a partition; renewed every second while held. */
const FANOUT_LEASE_MS = 5000;
const BALANCE_MS = 1000;
const READ_BLOCK_MS = 500;
const FANOUT_BATCH = 256;
/** The fan-out's pause after a read that found less than a batch (delivery latency budget: 200 ms). */
const FOLLOW_IDLE_MS = 10;
/** Deliveries per enqueue script call (the script runs alone in Redis: kept short). */
const ENQUEUE_CHUNK = 500;
/** A delivery queue with nothing due is looked at again after this long at most (other processes' work, retries). */
const IDLE_POLL_MS = 200;
/** Host lookups are reused this long (the guard still runs on every attempt). */
const LOOKUP_TTL_MS = 1000;
/** What the bodies of stream entries kept for the deliveries may weigh (bodiesBytes). */
const ENTRY_CACHE_BYTES = 64 * 2 ** 20;
/** A removed webhook is swept again once every process has reloaded the webhooks since (they reload within a second or so). */
const REMOVED_SETTLE_MS = 10_000;
/** The error of a delivery whose event its stream no longer holds (the change feed's retention): it cannot be made. */
const EVENT_GONE = 'event no longer in the event stream (trimmed by the change feed retention)';

type Hook = Webhook & { key: Buffer };
type Claimed = { p: number; member: string; pos: string; eventId: string; attempts: number; created: number };

/**
 * What an entry's bodies take in memory, in bytes: each string a byte a character, two in one that
 * needs them (as V8 keeps them; measureEntry in gateway/change-source.ts), and a header each.
 * Before, an entry was counted at its snapshot's size: a delete's snapshot has no aliases, its
 * event those of the revision before (63,000 characters of them counted as about 1 KB).
 */
function bodiesBytes(bodies: string[]): number {
  let n = 64;
  for (const b of bodies) n += 32 + heldBytes(b);
  return n;
}

/**
 * The `webhooks` role (CONTRACT §14). Two jobs, shared by every webhooks process:
 *
 * - Fan-out: each partition's events are read in the `webhooks` consumer group by the one process
 *   holding the partition's fan-out lease (processes share the partitions by heartbeat), turned
 *   into feed events (content/change-events.ts) and, for every webhook whose filter matches, into
 *   a delivery queued behind the earlier deliveries of the same content to the same webhook. The
 *   enqueue is fenced by the lease and idempotent, and an entry is acknowledged only once
 *   enqueued: a process that dies leaves its entries pending, and the next holder of the lease
 *   takes them over (XAUTOCLAIM) before reading on, so the queues keep stream order.
 * - Delivery: any process claims due queue heads of any partition (a claim lasts past the timeout;
 *   when its process dies the queue is due again), makes each body from its event's stream entry
 *   and revision snapshots (a record holds no body: what Redis keeps per delivery does not grow
 *   with the event), POSTs them signed, and records the outcome: on
 *   failure the queue waits for the retry (exponential back-off with jitter) while other contents
 *   and other webhooks go on; past WEBHOOK_MAX_AGE_HOURS the delivery is `failed` and the next one
 *   of the content goes.
 */
export class WebhookDispatcher {
  readonly consumer = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly redis: RedisClient & WebhookScripts;
  private readonly store: WebhookStore;
  private running = false;
  private readonly owned = new Map<number, { token: string; drained: boolean }>();
  private hooks: Hook[] = [];
  private hooksById = new Map<string, Hook>();
  private hooksRevision = '';
  private readonly events: EventReader;
  private readonly lookups = new Map<string, { at: number; addresses: Promise<{ address: string; family: number }[]> }>();
  private readonly loops: Promise<void>[] = [];
  private blocking?: RedisClient;
  private inFlight = 0;
  /** Delivery queues in flight per webhook, and how many one webhook may have. */
  private readonly inFlightByHook = new Map<string, number>();
  private readonly perHookCap: number;
  private wake?: () => void;
  private slotFree?: () => void;
  private lastBalance = 0;
  /** Attempts counted here and added to Redis once a second (one write, not one per delivery). */
  private outcomes = { delivered: 0, retried: 0, failed: 0 };
  private flushTimer?: NodeJS.Timeout;
  /** The bodies (feed events as JSON) of stream entries read for the deliveries, by `<p>/<entry id>`; and the reads under way. */
  private readonly entries = new LRUCache<string, string[]>({ max: 20000, maxSize: ENTRY_CACHE_BYTES, sizeCalculation: bodiesBytes });
  private readonly entryReads = new Map<string, Promise<string[] | null>>();
  private lastSweep = 0;

  constructor(
    redis: RedisClient,
    contents: ContentStore,
    private readonly settings: Settings,
    private readonly log: Logger,
    private readonly resolver: Resolver = systemResolver,
    private readonly clock: () => number = Date.now,
  ) {
    this.redis = withScripts(redis);
    this.store = new WebhookStore(redis, settings, resolver, clock);
    this.perHookCap = Math.max(1, Math.ceil(settings.WEBHOOK_CONCURRENCY / 4));
    this.events = new EventReader(contents, 20000);
  }

  async start(): Promise<void> {
    for (let p = 0; p < this.settings.PARTITIONS; p++) await ensureGroup(this.redis, keys.events(p), WEBHOOKS_GROUP);
    this.running = true;
    await this.reloadHooks();
    if (!this.settings.REDIS_CLUSTER_NODES) this.blocking = connectRedis(this.settings, { blocking: true, name: 'webhooks', log: this.log });
    this.loops.push(this.fanoutLoop(), this.deliveryLoop());
    this.flushTimer = setInterval(() => {
      void this.flushOutcomes();
      void this.renewLeases();
    }, BALANCE_MS);
    this.flushTimer.unref();
    this.log.info({ consumer: this.consumer }, 'webhooks dispatcher started');
  }

  async stop(): Promise<void> {
    this.running = false;
    // No renewal or heartbeat after the hand-over below.
    clearInterval(this.flushTimer);
    this.wake?.();
    this.slotFree?.();
    this.blocking?.disconnect();
    await Promise.all(this.loops);
    // Hand the fan-out over at once; deliveries in flight finish or are claimed again after their claim.
    await Promise.all([...this.owned.keys()].map((p) => this.redis.releaseLease(whKeys.lock(p), this.owned.get(p)!.token).catch(() => 0)));
    await this.redis.zrem(whKeys.members, this.consumer).catch(() => 0);
    const end = Date.now() + this.settings.WEBHOOK_TIMEOUT_MS;
    while (this.inFlight > 0 && Date.now() < end) await sleep(20);
    await this.flushOutcomes();
  }

  /** Reloads the webhooks when one changed. */
  private async reloadHooks(): Promise<void> {
    const rev = await this.store.revision();
    if (rev === this.hooksRevision) return;
    const all = await this.store.all();
    this.hooks = all.map((w) => ({ ...w, key: secretKey(w.secret) }));
    this.hooksById = new Map(this.hooks.map((h) => [h.id, h]));
    this.hooksRevision = rev;
  }

  // ---- fan-out ----

  /**
   * Renews the fan-out leases held, on a timer of its own: a fan-out of a long backlog may keep
   * the loop busy for longer than a lease.
   */
  private async renewLeases(): Promise<void> {
    await this.redis.zadd(whKeys.members, Date.now(), this.consumer).catch(() => 0);
    await Promise.all(
      [...this.owned].map(async ([p, o]) => {
        // Redis out of reach: the lease is kept until it is known lost (the enqueue is fenced anyway).
        const renewed = await this.redis.renewLease(whKeys.lock(p), o.token, FANOUT_LEASE_MS).catch(() => 1);
        if (!renewed && this.owned.get(p) === o) {
          this.owned.delete(p);
          this.log.warn({ partition: p }, 'webhooks fan-out lease lost');
        }
      }),
    );
  }

  /** Heartbeat, then this process's share of the partitions' fan-out leases: takes free ones, gives extra ones back (renewals run on their own timer). */
  private async balance(): Promise<void> {
    const now = Date.now();
    if (now - this.lastBalance < BALANCE_MS) return;
    this.lastBalance = now;
    const P = this.settings.PARTITIONS;
    await this.redis.zadd(whKeys.members, now, this.consumer);
    await this.redis.zremrangebyscore(whKeys.members, '-inf', now - FANOUT_LEASE_MS);
    const share = Math.ceil(P / Math.max(1, await this.redis.zcard(whKeys.members)));
    const start = Math.floor(Math.random() * P);
    for (let i = 0; i < P && this.owned.size < share; i++) {
      const p = (start + i) % P;
      if (this.owned.has(p)) continue;
      const token = `${this.consumer}:${now}`;
      if ((await this.redis.set(whKeys.lock(p), token, 'PX', FANOUT_LEASE_MS, 'NX')) === 'OK') this.owned.set(p, { token, drained: false });
    }
    for (const p of [...this.owned.keys()].slice(share)) {
      const o = this.owned.get(p)!;
      this.owned.delete(p);
      await this.redis.releaseLease(whKeys.lock(p), o.token);
    }
    if (now - this.lastSweep >= REMOVED_SETTLE_MS) {
      this.lastSweep = now;
      // What a removed webhook got after its removal's sweep (a process that had not reloaded yet), or a sweep cut short.
      await this.store
        .sweepRemoved(REMOVED_SETTLE_MS)
        .catch((e: unknown) => this.log.warn({ err: String(e) }, 'sweeping removed webhooks failed; retrying later'));
    }
  }

  private async fanoutLoop(): Promise<void> {
    while (this.running) {
      try {
        await this.balance();
        await this.reloadHooks();
        for (const [p, o] of this.owned) if (!o.drained) await this.drainPending(p, o);
        const parts = [...this.owned.keys()];
        if (!parts.length) {
          await sleep(READ_BLOCK_MS);
          continue;
        }
        const read = await this.readNew(parts);
        // Partitions are independent: fanned out side by side, each in its own stream order.
        await Promise.all(
          read.map(([p, entries]) => {
            const o = this.owned.get(p);
            return o && entries.length ? this.fanout(p, o, entries) : undefined;
          }),
        );
        // Caught up: the next read takes what came meanwhile in one answer, rather than a read
        // (and a lease and webhook-list check) per commit.
        if (read.some(([, e]) => e.length > 0) && read.every(([, e]) => e.length < FANOUT_BATCH)) await sleep(FOLLOW_IDLE_MS);
      } catch (e) {
        if (!this.running) return;
        // What was read and not acknowledged is read again from the pending list.
        for (const o of this.owned.values()) o.drained = false;
        this.log.warn({ err: String(e) }, 'webhooks fan-out failed; retrying');
        await sleep(500);
      }
    }
  }

  /** New entries of the owned partitions: one blocking read over all of them, or (Redis Cluster: no read across slots) one short read each. */
  private async readNew(parts: number[]): Promise<[number, StreamEntry[]][]> {
    if (this.blocking) {
      const streams = parts.map((p) => keys.events(p));
      const res = (await this.blocking.xreadgroupBuffer(
        'GROUP',
        WEBHOOKS_GROUP,
        this.consumer,
        'COUNT',
        FANOUT_BATCH,
        'BLOCK',
        READ_BLOCK_MS,
        'STREAMS',
        ...streams,
        ...streams.map(() => '>'),
      )) as [Buffer, StreamEntry[]][] | null;
      return (res ?? []).map(([s, entries]) => [Number(/\{(\d+)\}/.exec(s.toString())![1]), entries]);
    }
    const reads = await Promise.all(
      parts.map(
        async (p) =>
          [
            p,
            (((await this.redis.xreadgroupBuffer('GROUP', WEBHOOKS_GROUP, this.consumer, 'COUNT', FANOUT_BATCH, 'STREAMS', keys.events(p), '>')) as
              | [Buffer, StreamEntry[]][]
              | null) ?? [])[0]?.[1] ?? [],
          ] as [number, StreamEntry[]],
      ),
    );
    if (reads.every(([, e]) => e.length === 0)) await sleep(50);
    return reads;
  }

  /** Takes over every entry of the partition still pending (read by a process that died, or by this one before a failure), in order. */
  private async drainPending(p: number, o: { token: string; drained: boolean }): Promise<void> {
    let start = '0-0';
    for (;;) {
      const [next, entries] = await autoclaim(this.redis, keys.events(p), WEBHOOKS_GROUP, this.consumer, 0, start, FANOUT_BATCH);
      const live = entries.filter((e) => e?.[1]);
      const gone = entries.filter((e) => !e?.[1]).map((e) => e[0]);
      if (gone.length) await this.redis.xack(keys.events(p), WEBHOOKS_GROUP, ...gone);
      if (live.length && !(await this.fanout(p, o, live))) return;
      start = next.toString();
      if (start === '0-0') break;
    }
    o.drained = true;
  }

  /** Turns entries of partition p into deliveries and acknowledges them; false when the lease was lost (nothing acknowledged). */
  private async fanout(p: number, o: { token: string }, entries: StreamEntry[]): Promise<boolean> {
    // Read after the entries: a webhook created before a commit is known when its event is fanned out.
    await this.reloadHooks();
    const hooks = this.hooks;
    const args: (string | number)[] = [];
    // Only entries some webhook receives (committed after its creation) are read against their snapshots.
    const wanted = entries.map(([idBuf]) => parseStreamId(idBuf.toString())).map((id) => (hooks.some((h) => h.created <= id.ms) ? id : null));
    const read = await this.events.readMany(entries.filter((_, i) => wanted[i]).map(([, fields]) => fields));
    let k = 0;
    const resolved = wanted.map((id) => {
      if (!id) return null;
      const r = read[k++];
      // an unreadable entry tells nothing
      return r && { ms: id.ms, seq: id.seq, cid: r.event.cid, changes: r.changes };
    });
    const ttl = recordTtlMs(this.settings);
    const chunks: (string | number)[][] = [];
    for (const r of resolved) {
      if (!r) continue;
      r.changes.forEach((c, sub) => {
        const pos = positionOf(r.ms, r.seq, sub);
        for (const h of hooks) {
          // A webhook receives the events committed from its creation on.
          if (h.created > r.ms || !matchesFilter(h, c)) continue;
          // No body: it is made from the stream entry when the delivery is attempted.
          args.push(h.id, r.cid, pos, eventIdOf(p, pos), r.ms);
          if (args.length >= ENQUEUE_CHUNK * 5) chunks.push(args.splice(0));
        }
      });
    }
    if (args.length) chunks.push(args);
    for (const chunk of chunks) {
      const added = await this.redis.enqueueDeliveries(whKeys.lock(p), whKeys.due(p), whKeys.pending(p), o.token, whKeys.prefix(p), ttl, ...chunk);
      if (added < 0) {
        this.owned.delete(p);
        this.log.warn({ partition: p }, 'webhooks fan-out lease lost before enqueue; the next holder takes the events over');
        return false;
      }
    }
    await this.redis.xack(keys.events(p), WEBHOOKS_GROUP, ...entries.map(([id]) => id));
    if (chunks.length) this.wake?.();
    return true;
  }

  // ---- delivery ----

  private async deliveryLoop(): Promise<void> {
    const P = this.settings.PARTITIONS;
    // A claim outlives its attempt (cut at the timeout) and the recording of the outcome; a dead
    // process's claims run out after this long, and its deliveries are attempted again.
    const claimMs = Math.round(this.settings.WEBHOOK_TIMEOUT_MS * 1.5) + 2000;
    let next = 0;
    while (this.running) {
      try {
        const room = this.settings.WEBHOOK_CONCURRENCY - this.inFlight;
        if (room <= 0) {
          await new Promise<void>((r) => (this.slotFree = r));
          continue;
        }
        await this.reloadHooks();
        const now = this.clock();
        const per = Math.max(1, Math.ceil(room / P));
        const token = `${this.consumer}:${now}`;
        const order = Array.from({ length: P }, (_, i) => (next + i) % P);
        next = (next + 1) % P;
        // A webhook may hold a quarter of the slots: one whose receiver hangs leaves the rest to the others.
        const saturated = [...this.inFlightByHook].filter(([, n]) => n >= this.perHookCap).map(([id]) => id);
        const claims = await Promise.all(
          order.map((p) => this.redis.claimDeliveries(whKeys.due(p), whKeys.prefix(p), now, now + claimMs, per, token, ...saturated)),
        );
        let claimed = 0;
        claims.forEach((rows, i) => {
          for (const [member, pos, eventId, attempts, created] of rows) {
            claimed++;
            const c: Claimed = { p: order[i], member, pos, eventId, attempts: Number(attempts), created: Number(created) };
            this.inFlight++;
            const wid = member.slice(0, member.indexOf('|'));
            this.inFlightByHook.set(wid, (this.inFlightByHook.get(wid) ?? 0) + 1);
            void this.deliverQueue(c, token, claimMs).finally(() => {
              this.inFlight--;
              const n = this.inFlightByHook.get(wid)! - 1;
              if (n) this.inFlightByHook.set(wid, n);
              else this.inFlightByHook.delete(wid);
              const free = this.slotFree;
              this.slotFree = undefined;
              free?.();
              this.wake?.();
            });
          }
        });
        if (claimed === 0) {
          await new Promise<void>((r) => {
            const t = setTimeout(r, IDLE_POLL_MS);
            this.wake = () => {
              clearTimeout(t);
              this.wake = undefined;
              r();
            };
          });
        }
      } catch (e) {
        if (!this.running) return;
        this.log.warn({ err: String(e) }, 'webhooks delivery claim failed; retrying');
        await sleep(500);
      }
    }
  }

  /** The host's addresses, looked up at most once a second (the guard runs on them every attempt). */
  private resolveCached: Resolver = (host) => {
    const now = Date.now();
    const hit = this.lookups.get(host);
    if (hit && now - hit.at < LOOKUP_TTL_MS) return hit.addresses;
    const addresses = this.resolver(host);
    this.lookups.set(host, { at: now, addresses });
    if (this.lookups.size > 10000) this.lookups.clear();
    addresses.catch(() => this.lookups.delete(host));
    return addresses;
  };

  /** Delivers a claimed queue head, then the queue's next ones while each is delivered at once (the settle claims the next). */
  private async deliverQueue(first: Claimed, token: string, claimMs: number): Promise<void> {
    let c: Claimed | null = first;
    while (c && this.running) c = await this.attempt(c, token, claimMs);
  }

  /**
   * The body of a delivery: its feed event as JSON, made from the event's stream entry and the
   * revision snapshots it names (both never change, so every attempt and every redelivery sends
   * the same JSON); null when the stream no longer holds the entry (the change feed's retention).
   * Throws when a snapshot cannot be read now (the attempt is retried).
   */
  private async bodyOf(p: number, pos: string): Promise<string | null> {
    const { id, sub } = entryOf(pos);
    const key = `${p}/${id}`;
    let bodies = this.entries.get(key) ?? null;
    if (!bodies) {
      let read = this.entryReads.get(key);
      if (!read) {
        read = this.readEntry(p, id, key).finally(() => this.entryReads.delete(key));
        this.entryReads.set(key, read);
      }
      bodies = await read;
    }
    return bodies?.[sub] ?? null;
  }

  /**
   * The bodies of one stream entry's feed events (kept for the entry's other deliveries, and
   * counted by what they hold: bodiesBytes); null when the stream no longer holds it.
   */
  private async readEntry(p: number, id: string, key: string): Promise<string[] | null> {
    const found = (await this.redis.xrangeBuffer(keys.events(p), id, id)) as StreamEntry[];
    if (!found.length) return null;
    const [r] = await this.events.readMany([found[0][1]]);
    // An entry this platform cannot read made no delivery.
    if (!r) return null;
    if (!r.at) throw new Error(`the snapshot of revision ${r.event.rev} of ${r.event.cid} cannot be read now`);
    const bodies = r.changes.map((c) => JSON.stringify(c));
    this.entries.set(key, bodies);
    return bodies;
  }

  /** One attempt of a claimed delivery and its outcome recorded; answers the queue's next delivery when it was claimed with it. */
  private async attempt(c: Claimed, token: string, claimMs: number): Promise<Claimed | null> {
    const wid = c.member.slice(0, c.member.indexOf('|'));
    let hook = this.hooksById.get(wid);
    if (!hook) {
      // Created since this process last looked? Else removed: its delivery goes, record and all.
      await this.reloadHooks().catch(() => undefined);
      hook = this.hooksById.get(wid);
    }
    let result: PostResult;
    let gone = false;
    if (!hook) result = { status: null, response: '', error: 'webhook deleted' };
    else {
      try {
        // The body, the lookup and the request together within WEBHOOK_TIMEOUT_MS, well inside the claim (claimMs).
        const until = Date.now() + this.settings.WEBHOOK_TIMEOUT_MS;
        const body = await this.bodyOf(c.p, c.pos);
        if (body === null) {
          gone = true;
          result = { status: null, response: '', error: EVENT_GONE };
        } else {
          const target = await checkTarget(hook.url, this.settings.WEBHOOK_ALLOW_PRIVATE, this.resolveCached, Math.max(1, until - Date.now()));
          result = await post(target, body, deliveryHeaders(hook.key, c.eventId, body, this.clock()), Math.max(1, until - Date.now()));
        }
      } catch (e) {
        result = { status: null, response: '', error: e instanceof TargetRefused ? `refused: ${e.message}` : String(e) };
      }
    }
    const now = this.clock();
    const ok = result.status !== null && result.status >= 200 && result.status < 300;
    let outcome: 'delivered' | 'retry' | 'failed' | 'dropped' = ok ? 'delivered' : 'retry';
    let nextAt = 0;
    if (!hook) outcome = 'dropped';
    else if (gone) outcome = 'failed';
    else if (!ok) {
      const s = this.settings;
      const exp = Math.min(s.WEBHOOK_RETRY_MAX_MS, s.WEBHOOK_RETRY_BASE_MS * 2 ** Math.min(c.attempts, 30));
      nextAt = now + Math.round(exp / 2 + (Math.random() * exp) / 2);
      if (nextAt > c.created + s.WEBHOOK_MAX_AGE_HOURS * 3_600_000) outcome = 'failed';
    }
    const lastError = ok ? '' : (result.error ?? `HTTP ${result.status}: ${result.response}`).slice(0, 1024);
    let next: Claimed | null = null;
    try {
      const settled = await this.redis.settleDelivery(
        whKeys.due(c.p),
        whKeys.pending(c.p),
        whKeys.prefix(c.p),
        c.member,
        c.pos,
        token,
        outcome,
        now,
        nextAt,
        result.status === null ? '' : String(result.status),
        lastError,
        Math.ceil(this.settings.WEBHOOK_LOG_HOURS * 3_600_000),
        now + claimMs,
      );
      // The deliveries of a deleted webhook are dropped, not counted as failed attempts.
      if (settled[0] && outcome !== 'dropped') this.outcomes[outcome === 'retry' ? 'retried' : outcome]++;
      if (settled.length > 1) {
        const [, pos, eventId, attempts, created] = settled as string[];
        next = { p: c.p, member: c.member, pos, eventId, attempts: Number(attempts), created: Number(created) };
      }
    } catch (e) {
      // The claim runs out and the delivery is attempted again: at least once.
      this.log.warn({ err: String(e), webhook: wid }, 'recording a webhook delivery failed');
    }
    if (outcome === 'failed') this.log.warn({ webhook: wid, eventId: c.eventId, attempts: c.attempts + 1 }, 'webhook delivery failed for good');
    return next;
  }

  /** Adds the outcomes counted since the last flush to the shared counts of /metrics. */
  private async flushOutcomes(): Promise<void> {
    const counts = this.outcomes;
    this.outcomes = { delivered: 0, retried: 0, failed: 0 };
    for (const [k, n] of Object.entries(counts))
      if (n) await this.redis.hincrby(whKeys.outcomes, k, n).catch(() => (this.outcomes[k as keyof typeof counts] += n));
  }
}
