import type { Settings } from '../../config/settings.js';
import { pack, unpack } from '../adapters/codec.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { Logger } from '../adapters/log.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import { autoclaim, ensureGroup, type StreamEntry } from '../adapters/redis-streams.js';
import { type Boundary, boundariesOf, boundaryHolds, type StoredEvent, timestateEvent } from '../content/change-events.js';
import { LeasedFollower } from './leased-follower.js';

/**
 * The change feed's keys besides the event streams (adapters/redis.ts). The schedule and the
 * fired set of a partition share its hash tag with its content and event stream, so one script
 * fires a boundary (src/actors/scripts/fire-timestate-6.lua) and one schedules a batch of
 * revisions' boundaries (schedule-timestate-5.lua), also on Redis Cluster.
 */
export const changeKeys = {
  /** Sorted set: time-state boundary (JSON [cid, view, edge, at]) -> its time (ms). */
  schedule: (p: number) => `changes:ts:{${p}}`,
  /** Sorted set: boundaries fired -> their time; trimmed with the events. */
  fired: (p: number) => `changes:ts-fired:{${p}}`,
  /**
   * Hash: content id -> JSON `{r, m}`, the revision its boundaries were last scheduled from and
   * those of them on the schedule (no field: none). A revision's boundaries replace the ones
   * before, so a content holds at most the boundaries of its current windows on the schedule.
   */
  scheduledBy: (p: number) => `changes:ts-by:{${p}}`,
  /**
   * Sorted set: content id -> when its next boundary is to fire: its earliest one on the
   * schedule, or, when it had more due than a tick gave it, that tick's time (the fair queue).
   */
  nextOf: (p: number) => `changes:ts-next:{${p}}`,
  /** Hash: `id` the last event removed by age, `n` how many were (src/actors/scripts/trim-events-2.lua). */
  trimmed: (p: number) => `changes:trimmed:{${p}}`,
  /** The lease of the one process that fires boundaries and trims the streams. */
  owner: 'changes:owner',
  /** String: the 32-byte key cursors are sealed with (CursorSeal in src/gateway/cursor-seal.ts), written once. */
  cursorKey: 'changes:cursor-key',
} as const;

/** The consumer group of the schedule on every event stream. */
export const TIMESTATE_GROUP = 'timestate';

/** How often the owner looks for boundaries that passed (they fire within this plus a read). */
const FIRE_EVERY_MS = 1000;
/**
 * Boundaries fired per partition and tick (the rest next tick), shared fairly between the
 * contents due: one boundary each in turn, the contents taken in the order of the fair queue.
 */
const FIRE_BATCH = 200;
/** Events read by an owner that died are taken over after this long (scheduling is idempotent). */
const CLAIM_IDLE_MS = 5000;

/** The scripts of this module (loaded from src/actors/scripts with the others). */
export interface ScheduleScripts {
  fireTimestate(
    schedule: string,
    fired: string,
    head: string,
    events: string,
    scheduledBy: string,
    next: string,
    member: string,
    rev: string,
    event: Buffer | string,
    maxLen: number,
    cid: string,
    tick: number,
  ): Promise<number>;
  /** ARGV: the group, how many event ids then those ids, then per content: cid, rev, commit time, n, n pairs (time, member). */
  scheduleTimestate(schedule: string, fired: string, scheduledBy: string, next: string, events: string, ...args: (string | number | Buffer)[]): Promise<number>;
  trimEvents(events: string, trimmed: string, cut: string): Promise<number>;
}

export const memberOf = (cid: string, b: Boundary) => JSON.stringify([cid, b.view, b.edge, b.at]);

/** The members a content's list (`changeKeys.scheduledBy`) names; none for no list, or one the schedule script did not write. */
function membersOf(raw: string | null | undefined): string[] {
  try {
    const m = (JSON.parse(raw ?? 'null') as { m?: unknown } | null)?.m;
    return Array.isArray(m) ? m.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

function parseMember(m: string): { cid: string; b: Boundary } | null {
  try {
    const [cid, view, edge, at] = JSON.parse(m) as [string, string, 'on' | 'off', number];
    return { cid, b: { view, edge, at } };
  } catch {
    return null;
  }
}

/**
 * The time-state schedule of the change feed (CONTRACT §13 `timestate`), and its retention. One
 * process at a time owns it (a lease); the owner
 * - follows every event stream in its own consumer group and puts the `onTime`/`offTime`
 *   boundaries of each committed revision on its partition's schedule, in place of those its
 *   content had there (so one content's writes hold at most its current windows' boundaries);
 * - every second fires the boundaries that passed, each once, fairly between their contents:
 *   one script appends the `timestate` event and takes the boundary off (a boundary changed
 *   since is dropped);
 * - trims the event streams by age (CHANGES_RETENTION_HOURS, XTRIM MINID).
 */
export class TimestateSchedule {
  private readonly follower: LeasedFollower;
  private fireTimer?: NodeJS.Timeout;
  private trimTimer?: NodeJS.Timeout;
  private claimTimer?: NodeJS.Timeout;
  private firing = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly store: ContentStore,
    private readonly settings: Settings,
    private readonly log: Logger,
    private readonly clock: () => number = Date.now,
  ) {
    this.follower = new LeasedFollower(redis, settings, log, {
      name: 'time-state schedule',
      leaseKey: changeKeys.owner,
      group: TIMESTATE_GROUP,
      batch: 500,
      handle: (p, entries) => this.scheduleEntries(p, entries),
      onOwner: () => void this.trim(),
    });
  }

  private get scripts(): ScheduleScripts {
    return this.redis as unknown as ScheduleScripts;
  }

  /** Is this process the owner now? */
  get isOwner(): boolean {
    return this.follower.isOwner;
  }

  async start(): Promise<void> {
    // At the end of each stream: a first deployment schedules what is committed from then on,
    // rather than every boundary of the stream's whole past.
    for (let p = 0; p < this.settings.PARTITIONS; p++) await ensureGroup(this.redis, keys.events(p), TIMESTATE_GROUP, '$');
    await this.follower.start();
    this.fireTimer = setInterval(() => void this.fireDue(), FIRE_EVERY_MS);
    const retentionMs = this.settings.CHANGES_RETENTION_HOURS * 3600_000;
    this.trimTimer = setInterval(() => void this.trim(), Math.min(60_000, Math.max(1000, retentionMs / 10)));
    this.claimTimer = setInterval(() => void this.claimAbandoned(), CLAIM_IDLE_MS);
  }

  async stop(): Promise<void> {
    for (const t of [this.fireTimer, this.trimTimer, this.claimTimer]) clearInterval(t);
    await this.follower.stop();
  }

  /**
   * Puts the boundaries of the revisions these events name on the schedule, each content's in
   * place of those it had there (a window moved or removed, a content deleted: its boundaries
   * that no longer hold are taken off), and acknowledges the events, in one script. The
   * revisions go in the order of the stream (a boundary that passed between two commits of a
   * batch, on both, is kept as if they had come one by one); a content without time state costs
   * the script a hash read, one created without it nothing.
   */
  private async scheduleEntries(p: number, entries: StreamEntry[]): Promise<void> {
    const revisions: { cid: string; rev: number; deleted: boolean; created: boolean }[] = [];
    for (const [, fields] of entries) {
      if (!fields) continue;
      let e: StoredEvent;
      try {
        e = unpack<StoredEvent>(fields[1]);
      } catch {
        continue;
      }
      if (e.kind !== 'timestate') revisions.push({ cid: e.cid, rev: e.rev, deleted: e.kind === 'deleted', created: e.kind === 'created' });
    }
    // The snapshots of the whole batch in one call (a commit-heavy load brings hundreds at a time).
    const live = revisions.filter((r) => !r.deleted);
    const snaps = await this.store.snapshotsOf(live.map((r) => [r.cid, r.rev] as const));
    const snapOf = new Map(live.map((r, i) => [r, snaps[i]]));
    const ids = entries.map(([id]) => id);
    const args: (string | number | Buffer)[] = [TIMESTATE_GROUP, ids.length, ...ids];
    for (const r of revisions) {
      if (r.deleted) {
        args.push(r.cid, r.rev, 0, 0);
        continue;
      }
      const snap = snapOf.get(r);
      if (!snap) continue;
      // Every boundary of its windows, passed or not: one that passed stays if it has not fired
      // yet; only those after the commit are added (boundariesOf(snap, snap.modified)).
      const all = boundariesOf(snap, Number.NEGATIVE_INFINITY);
      // A content created without time state had nothing scheduled before (a delete took off
      // what an earlier one of that id had): nothing to put on or take off.
      if (r.created && !all.length) continue;
      args.push(r.cid, r.rev, snap.modified, all.length);
      for (const b of all) args.push(b.at, memberOf(r.cid, b));
    }
    // Only acknowledgements (creates without time state, as a create-heavy load brings): as before.
    if (args.length === 2 + ids.length) {
      if (ids.length) await this.redis.xack(keys.events(p), TIMESTATE_GROUP, ...ids);
      return;
    }
    await this.scripts.scheduleTimestate(changeKeys.schedule(p), changeKeys.fired(p), changeKeys.scheduledBy(p), changeKeys.nextOf(p), keys.events(p), ...args);
  }

  /** Fires every boundary that passed, in every partition (once each, whoever else runs this). */
  async fireDue(): Promise<number> {
    if (!this.follower.isOwner || this.firing) return 0;
    this.firing = true;
    let fired = 0;
    try {
      const now = this.clock();
      for (let p = 0; p < this.settings.PARTITIONS; p++) fired += await this.fireDueIn(p, now);
    } catch (e) {
      this.log.warn({ err: String(e) }, 'time-state schedule: firing failed; retrying');
    } finally {
      this.firing = false;
    }
    return fired;
  }

  /**
   * Fires up to FIRE_BATCH boundaries of partition p that passed by `now`, fairly between their
   * contents: the first FIRE_BATCH contents of the fair queue that are due, one boundary each in
   * turn (each content's in time order), so a content with many boundaries due delays another's
   * by at most one turn a round, and a content left with some waits behind those that had none.
   * Boundaries on the schedule that their content's list does not name (put there by an older
   * build) take their turn after them, by content too, whether or not the content has a place.
   */
  private async fireDueIn(p: number, now: number): Promise<number> {
    const [contents, due] = await Promise.all([
      this.redis.zrangebyscore(changeKeys.nextOf(p), '-inf', now, 'LIMIT', 0, FIRE_BATCH),
      this.redis.zrangebyscore(changeKeys.schedule(p), '-inf', now, 'LIMIT', 0, FIRE_BATCH),
    ]);
    if (!contents.length && !due.length) return 0;
    // The lists of the contents due, and of the contents of the boundaries due that are not among
    // them (each list read once).
    const inQueue = new Set(contents);
    const older = [...new Set(due.map((m) => parseMember(m)?.cid ?? ''))].filter((cid) => !inQueue.has(cid));
    const all = [...contents, ...older];
    const lists = all.length ? await this.redis.hmget(changeKeys.scheduledBy(p), ...all) : [];
    const listedOf = new Map(all.map((cid, i) => [cid, new Set(membersOf(lists[i]))]));
    const listed = contents.map((cid) => {
      const ahead = [...(listedOf.get(cid) ?? [])].map((m) => ({ m, at: parseMember(m)?.b.at ?? Number.POSITIVE_INFINITY })).filter((x) => x.at <= now);
      return ahead.sort((x, y) => x.at - y.at).map((x) => x.m);
    });
    // Boundaries due that their content's list does not name: put there by an older build, which
    // kept no lists. A content's first revision after the upgrade lists only what it still has
    // after its commit, and cannot take off what it never listed; so such a boundary is fired (or
    // dropped) here whether or not its content has a place in the fair queue (review s24: while
    // it had one, they were neither, until its last listed boundary fired).
    const unlisted = new Map<string, string[]>();
    for (const m of due) {
      const cid = parseMember(m)?.cid ?? '';
      if (!listedOf.get(cid)?.has(m)) unlisted.set(cid, [...(unlisted.get(cid) ?? []), m]);
    }
    const queues = [...listed, ...unlisted.values()].filter((q) => q.length);
    let fired = 0;
    let budget = FIRE_BATCH;
    for (let round = 0; budget > 0 && queues.some((q) => round < q.length); round++) {
      for (const q of queues) {
        if (round >= q.length || budget <= 0) continue;
        budget--;
        fired += await this.fire(p, q[round], now);
      }
    }
    return fired;
  }

  private async fire(p: number, member: string, tick: number): Promise<number> {
    const m = parseMember(member);
    const head = m ? await this.store.head(m.cid) : null;
    const cid = m?.cid ?? '';
    const holds = m !== null && head !== null && boundaryHolds(head, m.b);
    const event = holds ? pack(timestateEvent(head, m.b)) : '';
    const res = await this.scripts.fireTimestate(
      changeKeys.schedule(p),
      changeKeys.fired(p),
      keys.content(p, cid),
      keys.events(p),
      changeKeys.scheduledBy(p),
      changeKeys.nextOf(p),
      member,
      String(head?.rev ?? 0),
      event,
      this.settings.EVENTS_MAXLEN,
      cid,
      tick,
    );
    return res === 1 && holds ? 1 : 0;
  }

  /**
   * Retention by age: every stream loses its events older than CHANGES_RETENTION_HOURS (or than
   * `cutoff`, ms). Stream ids carry Redis's own clock, so the age is taken on the wall clock, not
   * on the platform's (a test clock set ahead must not trim what the indexer has yet to read).
   */
  async trim(cutoff = Math.floor(Date.now() - this.settings.CHANGES_RETENTION_HOURS * 3600_000)): Promise<void> {
    if (!this.follower.isOwner || cutoff <= 0) return;
    try {
      for (let p = 0; p < this.settings.PARTITIONS; p++) {
        await this.scripts.trimEvents(keys.events(p), changeKeys.trimmed(p), `${cutoff}-0`);
        await this.redis.zremrangebyscore(changeKeys.fired(p), '-inf', cutoff);
      }
    } catch (e) {
      this.log.warn({ err: String(e) }, 'change feed retention: trimming failed; retrying');
    }
  }

  /** Takes over events a previous owner read and never acknowledged. */
  private async claimAbandoned(): Promise<void> {
    for (let p = 0; p < this.settings.PARTITIONS && this.follower.isRunning && this.follower.isOwner; p++) {
      try {
        const [, entries] = await autoclaim(this.redis, keys.events(p), TIMESTATE_GROUP, this.follower.owner, CLAIM_IDLE_MS, '0-0', 500);
        const live = entries.filter((e) => e?.[1]);
        if (live.length) await this.scheduleEntries(p, live);
      } catch (e) {
        this.log.warn({ err: String(e), partition: p }, 'time-state schedule: claiming abandoned events failed');
      }
    }
  }
}
