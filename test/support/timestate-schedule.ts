import { keys } from '../../src/adapters/redis.js';
import { changeKeys, memberOf } from '../../src/actors/timestate-schedule.js';
import type { Boundary } from '../../src/content/change-events.js';

/** The keys of partition p the schedule scripts take, in the names the tests give them. */
export function scheduleKeysOf(p: number): { schedule: string; fired: string; by: string; next: string; events: string } {
  return { schedule: changeKeys.schedule(p), fired: changeKeys.fired(p), by: changeKeys.scheduledBy(p), next: changeKeys.nextOf(p), events: keys.events(p) };
}

/** A boundary as the schedule names it (the schedule's own `memberOf`). */
export const member = (cid: string, view: string, edge: Boundary['edge'], at: number): string => memberOf(cid, { view, edge, at });
