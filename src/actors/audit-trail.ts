import type { Settings } from '../../config/settings.js';
import { unpack } from '../adapters/codec.js';
import type { Logger } from '../adapters/log.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import { autoclaim, ensureGroup, type StreamEntry } from '../adapters/redis-streams.js';
import { isAudited } from '../content/audit.js';
import type { ContentEvent } from '../content/model.js';
import { sleep } from '../wait.js';
import { type AuditSegment, type AuditSegments, segmentStart } from '../adapters/audit-segments.js';
import { LeasedFollower } from './leased-follower.js';

/** The consumer group of the audit trail on every content event stream. */
export const AUDIT_GROUP = 'audit';
/** The lease of the one process that copies events into the audit trail. */
const OWNER_KEY = 'audit:owner';
/** Entries with stream ids before this time (ms) are in segments of the file store, the rest in `auditlog:{p}`. */
export const AUDIT_FLUSHED_KEY = 'audit:flushed';
const BATCH = 500;
/** At most this many entries of one partition go into one segment (a flush that fell behind catches up in steps). */
const SEGMENT_PART_MAX = 50_000;
/** Retention looks at the segment listing at most this often. */
const RETENTION_EVERY_MS = 10 * 60_000;

type AuditScripts = { auditCopy(events: string, trail: string, group: string, minId: string, ...pairs: (string | Buffer)[]): Promise<number> };

/**
 * The audit trail's copier (CONTRACT §15 Audit). Every commit of a main write already appends
 * its event to the partition's stream in the same atomic step (who, when, version, revision,
 * request id, via); the owner of the `audit:owner` lease, among the `actors` processes, follows
 * those streams in the `audit` consumer group and copies each write's event into
 * `auditlog:{p}`, acknowledging it in the same script (audit-copy-2.lua): always on, nothing
 * acknowledged before it is stored, nothing stored twice. The trail keeps the event's stream id.
 *
 * Redis holds only the newest part: every AUDIT_FLUSH_SECONDS the owner moves the entries before a
 * safe cutoff (no event before it is still to be copied) into one segment of the file store
 * (src/adapters/audit-segments.ts), records the cutoff in `audit:flushed`, then trims them from
 * Redis; segments past AUDIT_RETENTION_DAYS are deleted. A flush cut short is done again whole:
 * the segment is written again under the same name, and nothing leaves Redis before the cutoff
 * that covers it is recorded.
 */
export class AuditTrail {
  private readonly follower: LeasedFollower;
  private flushTimer?: NodeJS.Timeout;
  private flushing = false;
  /** The `audit:flushed` this owner last saw trimmed from Redis (a new owner trims what an earlier one left). */
  private trimmedTo = -1;
  private retentionAt = 0;

  constructor(
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly log: Logger,
    /** Where flushed entries go; null keeps them all in Redis (no file store in this process). */
    private readonly segments: AuditSegments | null = null,
  ) {
    this.follower = new LeasedFollower(redis, settings, log, {
      name: 'audit trail',
      leaseKey: OWNER_KEY,
      group: AUDIT_GROUP,
      batch: BATCH,
      // Older events first, so the trail stays in commit order.
      takeOver: (p) => this.claimPending(p),
      handle: (p, entries) => this.copy(p, entries),
    });
  }

  async start(): Promise<void> {
    // From the start of what each stream keeps: a first deployment records what is still there.
    for (let p = 0; p < this.settings.PARTITIONS; p++) await ensureGroup(this.redis, keys.events(p), AUDIT_GROUP);
    await this.follower.start();
    if (this.segments) this.flushTimer = setInterval(() => void this.flush(), Math.min(5000, (this.settings.AUDIT_FLUSH_SECONDS * 1000) / 2));
  }

  async stop(): Promise<void> {
    clearInterval(this.flushTimer);
    while (this.flushing) await sleep(20);
    await this.follower.stop();
  }

  /** Every entry of the partition pending in the group (any consumer's), copied in stream order. */
  private async claimPending(p: number): Promise<void> {
    let start = '0-0';
    do {
      const [next, entries] = await autoclaim(this.redis, keys.events(p), AUDIT_GROUP, this.follower.owner, 0, start, BATCH);
      await this.copy(p, entries);
      start = next.toString();
    } while (start !== '0-0' && this.follower.isRunning && this.follower.isOwner);
  }

  /** Copies the audited events of a batch into the trail and acknowledges the whole batch. */
  private async copy(p: number, entries: StreamEntry[]): Promise<void> {
    const pairs: (string | Buffer)[] = [];
    for (const entry of entries) {
      if (!entry) continue;
      const [id, fields] = entry;
      let keep: Buffer | '' = '';
      if (fields) {
        try {
          if (isAudited(unpack<ContentEvent>(fields[1]))) keep = fields[1];
        } catch {
          // Not an event this platform wrote: acknowledged, not recorded.
        }
      }
      pairs.push(id.toString(), keep);
    }
    if (!pairs.length) return;
    const minId = `${Math.max(0, Date.now() - this.settings.AUDIT_RETENTION_DAYS * 86_400_000)}-0`;
    await (this.redis as unknown as AuditScripts).auditCopy(keys.events(p), keys.auditLog(p), AUDIT_GROUP, minId, ...pairs);
  }

  /** Moves the entries before a safe cutoff from Redis into a segment, and applies retention to segments. */
  async flush(): Promise<void> {
    if (!this.segments || !this.follower.isOwner || this.flushing || !this.follower.isRunning) return;
    this.flushing = true;
    try {
      const P = this.settings.PARTITIONS;
      const flushed = Number((await this.redis.get(AUDIT_FLUSHED_KEY)) ?? 0);
      if (flushed !== this.trimmedTo) {
        // What an earlier flush (of this process or another) recorded and did not get to trim.
        for (let p = 0; p < P; p++) if (flushed > 0) await this.redis.xtrim(keys.auditLog(p), 'MINID', `${flushed}-0`);
        this.trimmedTo = flushed;
      }
      const [sec, usec] = await this.redis.time();
      const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
      if (now - flushed >= this.settings.AUDIT_FLUSH_SECONDS * 1000) {
        const cutoff = await this.safeCutoff(now);
        if (cutoff > flushed) await this.flushUpTo(flushed, cutoff);
      }
      if (now - this.retentionAt >= Math.min(RETENTION_EVERY_MS, this.settings.AUDIT_RETENTION_DAYS * 86_400_000)) {
        await this.applyRetention(now);
        this.retentionAt = now;
      }
    } catch (e) {
      this.log.warn({ err: String(e) }, 'audit trail: flush failed; retrying');
    } finally {
      this.flushing = false;
    }
  }

  /**
   * The time before which every audited event is copied: no partition has an event before it that
   * is pending (read, not yet copied) or not yet read. New commits get later stream ids (Redis's clock).
   */
  private async safeCutoff(now: number): Promise<number> {
    let cutoff = now;
    const ms = (id: string) => Number(id.split('-')[0]);
    for (let p = 0; p < this.settings.PARTITIONS; p++) {
      const stream = keys.events(p);
      const groups = (await this.redis.xinfo('GROUPS', stream)) as (string | number)[][];
      const g = groups.map((row) => Object.fromEntries(pairs(row))).find((r) => r.name === AUDIT_GROUP);
      if (!g) return 0;
      if (Number(g.pending) > 0) {
        const [, smallest] = (await this.redis.xpending(stream, AUDIT_GROUP)) as [number, string | null];
        if (smallest) cutoff = Math.min(cutoff, ms(smallest));
      }
      const last = (await this.redis.xrevrange(stream, '+', '-', 'COUNT', 1))[0]?.[0];
      if (last && last !== g['last-delivered-id']) cutoff = Math.min(cutoff, ms(String(g['last-delivered-id'])));
    }
    return cutoff;
  }

  private async flushUpTo(flushed: number, upTo: number): Promise<void> {
    const P = this.settings.PARTITIONS;
    let cutoff = upTo;
    let entries: AuditSegment['entries'] = [];
    const ms = (id: string) => Number(id.split('-')[0]);
    for (let p = 0; p < P; p++) {
      const rows = (await this.redis.xrangeBuffer(keys.auditLog(p), '-', `(${cutoff}-0`, 'COUNT', SEGMENT_PART_MAX)) as [Buffer, Buffer[]][];
      // A full batch: this segment ends before the millisecond of its last entry (all before it were read).
      if (rows.length === SEGMENT_PART_MAX) cutoff = Math.min(cutoff, ms(rows[rows.length - 1][0].toString()));
      for (const [id, fields] of rows) {
        const i = fields.findIndex((f, n) => n % 2 === 0 && f.toString() === 'e');
        if (i >= 0) entries.push([id.toString(), p, fields[i + 1]]);
      }
    }
    if (cutoff <= flushed) return;
    if (cutoff < upTo) entries = entries.filter((e) => ms(e[0]) < cutoff);
    entries.sort((a, b) => {
      const [am, as] = a[0].split('-').map(Number);
      const [bm, bs] = b[0].split('-').map(Number);
      return am - bm || as - bs || a[1] - b[1];
    });
    // An empty stretch needs no segment: the segment before it ends where the next one starts.
    if (entries.length) await this.segments!.put({ start: flushed, end: cutoff, entries });
    await this.redis.set(AUDIT_FLUSHED_KEY, String(cutoff));
    for (let p = 0; p < P; p++) await this.redis.xtrim(keys.auditLog(p), 'MINID', `${cutoff}-0`);
    this.trimmedTo = cutoff;
    if (entries.length) this.log.info({ entries: entries.length, from: flushed, to: cutoff }, 'audit trail: segment flushed');
  }

  /** Deletes segments whose every entry is older than AUDIT_RETENTION_DAYS (a segment ends where the next starts). */
  private async applyRetention(now: number): Promise<void> {
    const keepFrom = now - this.settings.AUDIT_RETENTION_DAYS * 86_400_000;
    const names = await this.segments!.list();
    for (let i = 0; i + 1 < names.length; i++) {
      const nextStart = segmentStart(names[i + 1]);
      if (nextStart === null || nextStart > keepFrom) break;
      await this.segments!.delete(names[i]);
    }
    if (!names.length) return;
    const last = names[names.length - 1];
    const flushed = Number((await this.redis.get(AUDIT_FLUSHED_KEY)) ?? 0);
    if (flushed <= keepFrom) await this.segments!.delete(last);
  }
}

/** The field/value pairs of an XINFO row. */
function pairs(row: (string | number)[]): [string, string | number][] {
  const out: [string, string | number][] = [];
  for (let i = 0; i + 1 < row.length; i += 2) out.push([String(row[i]), row[i + 1]]);
  return out;
}
