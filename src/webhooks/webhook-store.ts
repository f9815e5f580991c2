import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Settings } from '../../config/settings.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import { type ChangeFilter, parseFilter } from '../content/change-events.js';
import { AppError } from '../errors.js';
import { DELIVERY_STATUSES, type DeliveryStatus, POSITION, deliveryIdOf, entryOf, whKeys } from './keys.js';
import { withScripts, type WebhookScripts } from './scripts.js';
import { newSecret } from './signing.js';
import { checkTargetForRequest, type Resolver } from './ssrf.js';

/** A webhook as stored (its secret included). */
export interface Webhook extends ChangeFilter {
  id: string;
  url: string;
  description: string;
  secret: string;
  /** Epoch ms: the webhook receives the events committed from then on. */
  created: number;
  updated: number;
}

/** A webhook as the API shows it: never its secret (CONTRACT §14), except in the answer to its creation. */
export interface WebhookView {
  id: string;
  url: string;
  types: string[];
  views: string[];
  kinds: string[];
  description: string;
  created: string;
  updated: string;
}

/** One row of the delivery log (CONTRACT §14 "Log"). */
export interface DeliveryView {
  id: string;
  eventId: string;
  status: DeliveryStatus;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  nextAttempt: string | null;
  /** When the delivery was made (or put back by a redelivery). */
  time: string;
}

/** The body of POST and PUT /webhooks (also for the OpenAPI document). */
export const webhookBodySchema = z.strictObject({
  url: z.string().min(1).max(2048),
  types: z.array(z.string()).max(100).optional(),
  views: z.array(z.string()).max(100).optional(),
  kinds: z.array(z.string()).max(10).optional(),
  description: z.string().max(1000).optional(),
});

const ID = /^wh_[0-9a-f]{24}$/;
/** Delivery records a sweep script call deletes at most (each script runs alone in Redis: kept short). */
const SWEEP_BATCH = 500;

export const viewOf = (w: Webhook): WebhookView => ({
  id: w.id,
  url: w.url,
  types: w.types,
  views: w.views,
  kinds: w.kinds,
  description: w.description,
  created: new Date(w.created).toISOString(),
  updated: new Date(w.updated).toISOString(),
});

/**
 * The webhooks and their delivery logs (CONTRACT §14 "Manage", "Log"): what the management API
 * does, apart from HTTP. Webhooks live in one hash; a counter that moves on every change tells
 * the dispatchers to reload them.
 */
export class WebhookStore {
  private readonly redis: RedisClient & WebhookScripts;

  constructor(
    redis: RedisClient,
    private readonly settings: Pick<Settings, 'PARTITIONS' | 'WEBHOOK_ALLOW_PRIVATE' | 'WEBHOOK_MAX_AGE_HOURS' | 'WEBHOOK_LOG_HOURS'>,
    private readonly resolve?: Resolver,
    private readonly clock: () => number = Date.now,
  ) {
    this.redis = withScripts(redis);
  }

  /** A request body as a webhook's settings: 400 naming what is wrong, or the URL the guard refuses. */
  private async parse(body: unknown): Promise<Omit<Webhook, 'id' | 'secret' | 'created' | 'updated'>> {
    const r = webhookBodySchema.safeParse(body);
    if (!r.success) {
      const issue = r.error.issues[0];
      throw new AppError('BAD_REQUEST', `Invalid webhook: ${issue.path.join('.') || 'body'}: ${issue.message}`, { field: issue.path.join('.') });
    }
    const filter = parseFilter(r.data);
    await checkTargetForRequest(r.data.url, this.settings.WEBHOOK_ALLOW_PRIVATE, this.resolve);
    return { url: r.data.url, ...filter, description: r.data.description ?? '' };
  }

  private async save(w: Webhook): Promise<void> {
    await this.redis.hset(whKeys.hooks, w.id, JSON.stringify(w));
    await this.redis.incr(whKeys.revision);
  }

  /** POST /webhooks: the new webhook with its secret (shown this once). */
  async create(body: unknown): Promise<WebhookView & { secret: string }> {
    const fields = await this.parse(body);
    const now = this.clock();
    const w: Webhook = { id: `wh_${randomBytes(12).toString('hex')}`, secret: newSecret(), created: now, updated: now, ...fields };
    await this.save(w);
    return { ...viewOf(w), secret: w.secret };
  }

  /** Every webhook, secrets included (for the dispatchers). */
  async all(): Promise<Webhook[]> {
    const raw = await this.redis.hvals(whKeys.hooks);
    return raw.map((r) => JSON.parse(r) as Webhook).sort((a, b) => a.created - b.created || a.id.localeCompare(b.id));
  }

  /** The counter that moves on every change of a webhook. */
  async revision(): Promise<string> {
    return (await this.redis.get(whKeys.revision)) ?? '0';
  }

  async list(): Promise<WebhookView[]> {
    return (await this.all()).map(viewOf);
  }

  /** The stored webhook; 404 when there is none. */
  async get(id: string): Promise<Webhook> {
    const raw = ID.test(id) ? await this.redis.hget(whKeys.hooks, id) : null;
    if (!raw) throw new AppError('NOT_FOUND', `Webhook ${id} not found`);
    return JSON.parse(raw) as Webhook;
  }

  /** PUT /webhooks/<id>: new settings (url, filters, description); the secret stays. */
  async update(id: string, body: unknown): Promise<WebhookView> {
    const old = await this.get(id);
    const w: Webhook = { ...old, ...(await this.parse(body)), updated: this.clock() };
    await this.save(w);
    return viewOf(w);
  }

  /**
   * DELETE /webhooks/<id>: the webhook goes, then its delivery records, logs and queues, in
   * bounded steps (`sweep`). A dispatcher that had not yet reloaded the webhooks may still add a
   * delivery; it drops any of a removed webhook it claims, and sweeps the webhook again later
   * (`sweepRemoved`), which also finishes a sweep cut short here.
   */
  async remove(id: string): Promise<void> {
    await this.get(id);
    await this.redis.hset(whKeys.removed, id, String(Date.now()));
    await this.redis.hdel(whKeys.hooks, id);
    await this.redis.incr(whKeys.revision);
    await this.sweep(id);
  }

  /** Deletes a removed webhook's delivery records, logs and queue entries in every partition, at most SWEEP_BATCH records a script call. */
  async sweep(id: string): Promise<void> {
    for (let p = 0; p < this.settings.PARTITIONS; p++) {
      while (await this.redis.sweepWebhook(whKeys.due(p), whKeys.pending(p), whKeys.prefix(p), id, SWEEP_BATCH));
    }
  }

  /** Sweeps again the webhooks removed more than `settledMs` ago (no dispatcher can still add a delivery for them), then forgets them. */
  async sweepRemoved(settledMs: number): Promise<void> {
    const removed = await this.redis.hgetall(whKeys.removed);
    for (const [id, at] of Object.entries(removed)) {
      if (Date.now() - Number(at) < settledMs) continue;
      await this.sweep(id);
      await this.redis.hdel(whKeys.removed, id);
    }
  }

  /** The delivery log of a webhook, newest first, across every partition. */
  async deliveries(id: string, status: string | null, limit: number): Promise<DeliveryView[]> {
    await this.get(id);
    if (status !== null && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
      throw new AppError('BAD_REQUEST', `status must be one of ${DELIVERY_STATUSES.join(', ')}`, { parameter: 'status' });
    }
    const statuses = status ? [status as DeliveryStatus] : DELIVERY_STATUSES;
    const rows: { p: number; pos: string; at: number }[] = [];
    await Promise.all(
      Array.from({ length: this.settings.PARTITIONS }, async (_, p) => {
        for (const s of statuses) {
          const r = await this.redis.zrevrange(whKeys.log(p, id, s), 0, limit - 1, 'WITHSCORES');
          for (let i = 0; i < r.length; i += 2) rows.push({ p, pos: r[i], at: Number(r[i + 1]) });
        }
      }),
    );
    rows.sort((a, b) => b.at - a.at || b.pos.localeCompare(a.pos));
    const picked = rows.slice(0, limit);
    const records = await Promise.all(
      picked.map((r) => this.redis.hmget(whKeys.delivery(r.p, id, r.pos), 'eventId', 'status', 'attempts', 'lastStatus', 'lastError', 'next', 'created')),
    );
    const out: DeliveryView[] = [];
    picked.forEach((r, i) => {
      const [eventId, st, attempts, lastStatus, lastError, next, created] = records[i];
      if (!eventId || !st) return; // expired between the two reads
      out.push({
        id: deliveryIdOf(r.p, r.pos),
        eventId,
        status: st as DeliveryStatus,
        attempts: Number(attempts ?? 0),
        lastStatus: lastStatus ? Number(lastStatus) : null,
        lastError: lastError || null,
        nextAttempt: st === 'pending' && next ? new Date(Number(next)).toISOString() : null,
        time: new Date(Number(created)).toISOString(),
      });
    });
    return out;
  }

  /** POST .../deliveries/<delivery id>/redeliver: the delivery is attempted again; 404 when unknown. */
  async redeliver(id: string, deliveryId: string): Promise<void> {
    await this.get(id);
    const m = /^(\d+)_(.+)$/.exec(deliveryId);
    const p = m ? Number(m[1]) : -1;
    if (!m || p >= this.settings.PARTITIONS || !POSITION.test(m[2])) throw new AppError('NOT_FOUND', `Delivery ${deliveryId} not found`);
    const ttl = recordTtlMs(this.settings);
    const done = await this.redis.redeliver(whKeys.due(p), whKeys.pending(p), keys.events(p), whKeys.prefix(p), id, m[2], this.clock(), ttl, entryOf(m[2]).id);
    if (done === 0) throw new AppError('NOT_FOUND', `Delivery ${deliveryId} not found`);
    // The body is made from the event stream: an event its retention removed cannot be sent again.
    if (done < 0) throw new AppError('NOT_FOUND', `Delivery ${deliveryId} not found: its event is no longer in the event stream`);
  }
}

/** How long a delivery record lives from its creation: past its last retry, and its log retention after that. */
export const recordTtlMs = (s: Pick<Settings, 'WEBHOOK_MAX_AGE_HOURS' | 'WEBHOOK_LOG_HOURS'>): number =>
  Math.ceil((s.WEBHOOK_MAX_AGE_HOURS + s.WEBHOOK_LOG_HOURS) * 3_600_000 + 3_600_000);
