import { readFileSync } from 'node:fs';
import type { RedisClient } from '../adapters/redis.js';
import { repoPath } from '../repo-files.js';

/** The webhooks' Lua state transitions (src/webhooks/scripts, `<name>-<numkeys>.lua`), as commands of a client. */
export interface WebhookScripts {
  enqueueDeliveries(lock: string, due: string, pending: string, ...args: (string | number)[]): Promise<number>;
  claimDeliveries(due: string, prefix: string, now: number, until: number, max: number, token: string, ...skip: string[]): Promise<string[][]>;
  settleDelivery(due: string, pending: string, ...args: (string | number)[]): Promise<(number | string)[]>;
  redeliver(
    due: string,
    pending: string,
    events: string,
    prefix: string,
    webhook: string,
    pos: string,
    now: number,
    ttl: number,
    entry: string,
  ): Promise<number>;
  sweepWebhook(due: string, pending: string, prefix: string, webhook: string, max: number): Promise<number>;
}

const defined = new WeakSet<object>();

/** The client with the webhook scripts defined on it (once per client). */
export function withScripts(redis: RedisClient): RedisClient & WebhookScripts {
  if (!defined.has(redis)) {
    for (const [name, file] of [
      ['enqueueDeliveries', 'enqueue-deliveries-3.lua'],
      ['claimDeliveries', 'claim-deliveries-1.lua'],
      ['settleDelivery', 'settle-delivery-2.lua'],
      ['redeliver', 'redeliver-3.lua'],
      ['sweepWebhook', 'sweep-webhook-2.lua'],
    ]) {
      const numberOfKeys = Number(/-(\d+)\.lua$/.exec(file)![1]);
      redis.defineCommand(name, { numberOfKeys, lua: readFileSync(repoPath('src', 'webhooks', 'scripts', file), 'utf8') });
    }
    defined.add(redis);
  }
  return redis as RedisClient & WebhookScripts;
}
