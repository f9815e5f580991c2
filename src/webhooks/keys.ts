import { keys } from '../adapters/redis.js';

/**
 * The Redis layout of the webhooks. Everything about the deliveries of partition p shares the
 * hash tag `{p}` of that partition's event stream, so each state change of a delivery is one Lua
 * script in one slot (valid on Redis Cluster); the webhooks themselves are one hash.
 *
 * - `wh:{p}:lock`: the fan-out lease of the partition (one process turns its events into deliveries, in order)
 * - `wh:{p}:due`: sorted set, member `<webhook>|<content>` (a delivery queue), score: when its head is due
 * - `wh:{p}:q:<webhook>|<content>`: sorted set of the queue's deliveries, by their position in the stream
 * - `wh:{p}:d:<webhook>:<position>`: hash, one delivery (status, attempts, ...; not its event's body,
 *   which is made from the event stream `events:{p}` at each attempt: see `entryOf`)
 * - `wh:{p}:log:<webhook>:<status>`: sorted set of positions by time, the delivery log
 * - `wh:{p}:pending`: sorted set `<webhook>:<position>` by creation time (oldest pending age)
 */
export const whKeys = {
  /** The prefix every script builds the partition's other keys from. */
  prefix: (p: number) => `wh:{${p}}:`,
  lock: (p: number) => `wh:{${p}}:lock`,
  due: (p: number) => `wh:{${p}}:due`,
  pending: (p: number) => keys.webhookPending(p),
  delivery: (p: number, webhook: string, pos: string) => `wh:{${p}}:d:${webhook}:${pos}`,
  log: (p: number, webhook: string, status: DeliveryStatus) => `wh:{${p}}:log:${webhook}:${status}`,
  /** Hash: webhook id → its record (JSON). */
  hooks: 'webhooks',
  /** Counter raised on every change of a webhook: dispatchers reload when it moves. */
  revision: 'webhooks:rev',
  /** Hash: outcome → count of delivery attempts (delivered, retried, failed). */
  outcomes: keys.webhookOutcomes,
  /** Sorted set of live webhooks processes by heartbeat: the fan-out is shared among them. */
  members: 'webhooks:members',
  /** Hash: removed webhook id → when (ms): its records are swept again once no process can still add any. */
  removed: 'webhooks:removed',
} as const;

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** The consumer group of the webhooks processes on every partition's event stream. */
export const WEBHOOKS_GROUP = 'webhooks';

const pad = (n: number, width: number) => String(n).padStart(width, '0');

/**
 * A feed event's position in its partition's stream, as a string that sorts like the position:
 * `<ms>-<seq>-<sub>` zero-padded (sub: which of the entry's feed events).
 */
export const positionOf = (ms: number, seq: number, sub: number): string => `${pad(ms, 15)}-${pad(seq, 6)}-${pad(sub, 3)}`;
export const POSITION = /^\d{15}-\d{6}-\d{3}$/;

/** The stream entry (`<ms>-<seq>` of `events:{p}`) and the index among its feed events of a position. */
export function entryOf(pos: string): { id: string; sub: number } {
  const [ms, seq, sub] = pos.split('-').map(Number);
  return { id: `${ms}-${seq}`, sub };
}

/** The delivery id of the API: `<partition>_<position>` (unique within one webhook). */
export const deliveryIdOf = (p: number, pos: string): string => `${p}_${pos}`;

/** The `webhook-id` of an event: the same for every webhook and every retry. */
export const eventIdOf = (p: number, pos: string): string => `evt_${p}_${pos}`;
