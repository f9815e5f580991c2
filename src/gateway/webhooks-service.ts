import type { RedisClient } from '../adapters/redis.js';
import { AppError } from '../errors.js';
import { viewOf, WebhookStore } from '../webhooks/webhook-store.js';
import type { ContentEndpoints, ContentServiceDeps } from './content-deps.js';
import type { Exchange } from './http.js';
import type { Params } from './router.js';

/** Bounds and default of the delivery log's `limit` (also the OpenAPI document's). */
export const DELIVERIES_LIMIT = { min: 1, max: 1000, default: 100 } as const;

/**
 * The webhook management API of CONTRACT §14 under the content service: sysadmin in `__global__`
 * only (401 without a valid token, 403 otherwise). What each call does is src/webhooks'.
 */
export class WebhooksService {
  private readonly hooks: WebhookStore;

  constructor(
    private readonly d: ContentServiceDeps,
    private readonly content: ContentEndpoints,
  ) {
    this.hooks = new WebhookStore(d.store.redis as RedisClient, d.settings);
    const r = content.router;
    r.on('POST', 'webhooks', (x) => this.create(x));
    r.on('GET', 'webhooks', (x) => this.list(x));
    r.on('GET', 'webhooks/:id', (x, p) => this.get(x, p));
    r.on('PUT', 'webhooks/:id', (x, p) => this.update(x, p));
    r.on('DELETE', 'webhooks/:id', (x, p) => this.remove(x, p));
    r.on('GET', 'webhooks/:id/deliveries', (x, p) => this.deliveries(x, p));
    r.on('POST', 'webhooks/:id/deliveries/:delivery/redeliver', (x, p) => this.redeliver(x, p));
  }

  private async sysadmin(x: Exchange): Promise<void> {
    await this.content.authenticate(x, { sysadmin: 'Managing webhooks requires sysadmin in __global__' });
  }

  private async create(x: Exchange): Promise<void> {
    await this.sysadmin(x);
    const w = await this.hooks.create(await x.json());
    x.sendJson(201, w, [['Location', `${this.d.baseUrl()}/content-service/webhooks/${w.id}`]]);
  }

  private async list(x: Exchange): Promise<void> {
    await this.sysadmin(x);
    x.sendJson(200, { webhooks: await this.hooks.list() });
  }

  private async get(x: Exchange, p: Params): Promise<void> {
    await this.sysadmin(x);
    x.sendJson(200, viewOf(await this.hooks.get(p.id)));
  }

  private async update(x: Exchange, p: Params): Promise<void> {
    await this.sysadmin(x);
    x.sendJson(200, await this.hooks.update(p.id, await x.json()));
  }

  private async remove(x: Exchange, p: Params): Promise<void> {
    await this.sysadmin(x);
    await this.hooks.remove(p.id);
    x.send(204, []);
  }

  private async deliveries(x: Exchange, p: Params): Promise<void> {
    await this.sysadmin(x);
    const raw = x.query.get('limit');
    const { min, max } = DELIVERIES_LIMIT;
    // Digits only, as the feed's limit: Number() took `1e3`, `0x10` and ` 5`.
    const limit = raw === null ? DELIVERIES_LIMIT.default : /^\d{1,9}$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isInteger(limit) || limit < min || limit > max)
      throw new AppError('BAD_REQUEST', `limit must be an integer from ${min} to ${max}`, { parameter: 'limit' });
    x.sendJson(200, { deliveries: await this.hooks.deliveries(p.id, x.query.get('status'), limit) });
  }

  private async redeliver(x: Exchange, p: Params): Promise<void> {
    await this.sysadmin(x);
    await this.hooks.redeliver(p.id, p.delivery);
    x.sendJson(202, { status: 'pending' });
  }
}
