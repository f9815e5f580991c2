import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../adapters/log.js';
import type { RedisClient } from '../adapters/redis.js';

/** Heads sent to one call of head-d-backfill-n.lua. */
const BATCH = 256;
/**
 * Snapshot bytes one call decodes at most (beyond its first head): what a call holds Redis for.
 * Redis's cmsgpack decodes a snapshot in about 12 ms per MB.
 */
const BUDGET_BYTES = 1024 * 1024;
/** Keys asked of Redis per SCAN step. */
const SCAN_COUNT = 500;

/**
 * String: the partition's heads all had their `d` written (the time it was done, epoch ms). Not a
 * `ct:{p}:*` key: the scan and the counts of heads never meet it.
 */
export const headDMarker = (p: number): string => `backfill:{${p}}:head-d`;

/** The partition of a head key (`ct:{p}:<cid>`). */
const HEAD = /^ct:\{(\d+)\}:/;

/** What head-d-backfill-n.lua answers per head. */
export enum HeadD {
  NoHead = 0,
  Right = 1,
  WrittenLive = 2,
  WrittenDeleted = 3,
  Undecodable = -1,
}

export interface HeadDBackfillCounts {
  /** Partitions whose heads were gone through and marked by this run. */
  partitions: number[];
  /** Partitions asked for that were marked already. */
  marked: number;
  /** Heads the scan found (a key SCAN returns twice counts twice). */
  heads: number;
  /** `d` was right already. */
  right: number;
  written: { live: number; deleted: number };
  /** Left as they were (no snapshot, or one Redis's cmsgpack cannot read): still answered whole. */
  undecodable: number;
  /** Keys gone (or not a head) by the time the script read them. */
  gone: number;
  calls: number;
  ms: number;
  /** The run was stopped (`running` false) before its end: nothing marked. */
  stopped: boolean;
}

/** Counts of a run that has done nothing yet. */
function noCounts(): HeadDBackfillCounts {
  return { partitions: [], marked: 0, heads: 0, right: 0, written: { live: 0, deleted: 0 }, undecodable: 0, gone: 0, calls: 0, ms: 0, stopped: false };
}

type BackfillScript = { headDBackfill(numKeys: number, ...keysThenBudget: (string | number)[]): Promise<number[]> };

/**
 * Writes the field `d` of every head of `partitions` that lacks it, or whose `d` names another
 * revision (committed by an older build), so that the reference lookups (`live-heads-n.lua`,
 * `ContentStore.liveContents`) read no snapshot any more (SECURITY.md, finding H4). Once per
 * partition: a partition marked (`headDMarker`) is skipped; one is marked only once every head
 * the scan found was handled.
 *
 * The heads are found by SCAN (MATCH `ct:{*}:*`, or `ct:{p}:*` for one partition), once over the
 * keyspace for all the partitions, on every master of a Redis Cluster (each holds some slots),
 * and sent to head-d-backfill-n.lua in calls of one partition and BATCH heads; a call decodes at
 * most BUDGET_BYTES of snapshots, the heads it left out go in the next call. Every step is
 * awaited: neither the event loop nor Redis is held for more than one call.
 *
 * Safe beside commits and beside another process running it: the script reads the head's
 * revision and snapshot and writes `d` in one step, and leaves a `d` that names the head's
 * revision alone, so what it writes is what the commit of that revision wrote or would have
 * written. No lease is needed. `running` false stops it between two steps (nothing marked).
 */
export async function backfillHeadD(
  redis: RedisClient,
  partitions: readonly number[],
  opts: { running?: () => boolean; batch?: number; budgetBytes?: number } = {},
): Promise<HeadDBackfillCounts> {
  const started = Date.now();
  const running = opts.running ?? (() => true);
  const batch = opts.batch ?? BATCH;
  const budget = opts.budgetBytes ?? BUDGET_BYTES;
  const counts = noCounts();
  const todo = new Set<number>();
  const marked = await Promise.all(partitions.map((p) => redis.exists(headDMarker(p))));
  partitions.forEach((p, i) => {
    if (marked[i]) counts.marked++;
    else todo.add(p);
  });

  const send = async (keys: string[]): Promise<void> => {
    while (keys.length) {
      const answers = await (redis as RedisClient & BackfillScript).headDBackfill(keys.length, ...keys, budget);
      counts.calls++;
      for (const a of answers) {
        if (a === HeadD.Right) counts.right++;
        else if (a === HeadD.WrittenLive) counts.written.live++;
        else if (a === HeadD.WrittenDeleted) counts.written.deleted++;
        else if (a === HeadD.Undecodable) counts.undecodable++;
        else counts.gone++;
      }
      keys = keys.slice(answers.length);
    }
  };

  const match = todo.size === 1 ? `ct:{${[...todo][0]}}:*` : 'ct:{*}:*';
  const nodes: Redis[] = redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
  const pending = new Map<number, string[]>();
  for (const node of todo.size ? nodes : []) {
    let cursor = '0';
    do {
      if (!running()) return { ...counts, stopped: true, ms: Date.now() - started };
      const [next, found] = await node.scan(cursor, 'MATCH', match, 'COUNT', SCAN_COUNT);
      cursor = next;
      for (const key of found) {
        const p = Number(HEAD.exec(key)?.[1]);
        if (!todo.has(p)) continue;
        counts.heads++;
        const keys = pending.get(p) ?? [];
        keys.push(key);
        pending.set(p, keys);
        if (keys.length >= batch) {
          pending.delete(p);
          await send(keys);
        }
      }
    } while (cursor !== '0');
  }
  for (const keys of pending.values()) {
    if (!running()) return { ...counts, stopped: true, ms: Date.now() - started };
    await send(keys);
  }
  if (!running()) return { ...counts, stopped: true, ms: Date.now() - started };
  for (const p of [...todo].sort((a, b) => a - b)) {
    await redis.set(headDMarker(p), Date.now());
    counts.partitions.push(p);
  }
  return { ...counts, ms: Date.now() - started };
}

/** Whether every partition of the deployment is marked: then no process has more to do. */
async function allMarked(redis: RedisClient, partitions: number): Promise<boolean> {
  const found = await Promise.all(Array.from({ length: partitions }, (_, p) => redis.exists(headDMarker(p))));
  return found.every((n) => n === 1);
}

/**
 * Runs `backfillHeadD` in the background (src/main.ts, the actors role): for the partitions this
 * process holds as it starts, then, every `everyMs`, for those it took since (an older build's
 * processes handing theirs over during a rolling upgrade), until every partition of the
 * deployment is marked; a pass that failed is tried again the same way. Logs one line of counts
 * when it ends (all marked, or `stop`); a failed pass is logged as a warning. `stop` ends it
 * between two steps, marking nothing unfinished.
 */
export function startHeadDBackfill(
  redis: RedisClient,
  held: () => readonly number[],
  log: Logger,
  opts: { partitions: number; everyMs: number },
): { done: Promise<HeadDBackfillCounts>; stop(): Promise<void> } {
  let running = true;
  let wake = () => {};
  const total: HeadDBackfillCounts & { passes: number } = { ...noCounts(), passes: 0 };
  const started = Date.now();
  const run = async (): Promise<HeadDBackfillCounts> => {
    for (;;) {
      try {
        const c = await backfillHeadD(redis, held(), { running: () => running });
        if (!total.passes++) total.marked = c.marked;
        total.partitions.push(...c.partitions);
        total.heads += c.heads;
        total.right += c.right;
        total.written.live += c.written.live;
        total.written.deleted += c.written.deleted;
        total.undecodable += c.undecodable;
        total.gone += c.gone;
        total.calls += c.calls;
        if (running && (await allMarked(redis, opts.partitions))) break;
      } catch (e) {
        log.warn({ err: e }, 'head d backfill: a pass failed; tried again');
      }
      if (!running) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, opts.everyMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (!running) break;
    }
    total.partitions.sort((a, b) => a - b);
    total.stopped = !running;
    total.ms = Date.now() - started;
    log.info(total, running ? 'head d backfill done: every partition marked' : 'head d backfill stopped; an actor process started later goes on');
    return total;
  };
  const done = run();
  return {
    done,
    stop: async () => {
      running = false;
      wake();
      await done;
    },
  };
}
