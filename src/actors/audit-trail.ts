import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Settings } from '../../config/settings.js';
import { unpack } from '../adapters/codec.js';
import type { Logger } from '../adapters/log.js';
import { connectRedis, keys, type RedisClient } from '../adapters/redis.js';
import { autoclaim, type StreamEntry } from '../adapters/redis-streams.js';
import { isAudited } from '../content/audit.js';
import type { ContentEvent } from '../content/model.js';
import { sleep } from '../wait.js';

/** The consumer group of the audit trail on every content event stream. */
export const AUDIT_GROUP = 'audit';
/** The lease of the one process that copies events into the audit trail. */
const OWNER_KEY = 'audit:owner';
const BLOCK_MS = 1000;
const BATCH = 500;

type AuditScripts = { auditCopy(events: string, trail: string, group: string, minId: string, ...pairs: (string | Buffer)[]): Promise<number> };

/**
 * The audit trail's copier (CONTRACT §15 Audit). Every commit of a main write already appends
 * its event to the partition's stream in the same atomic step (who, when, version, revision,
 * request id, via); the owner of the `audit:owner` lease, among the `actors` processes, follows
 * those streams in the `audit` consumer group and copies each write's event into
 * `auditlog:{p}`, acknowledging it in the same script (audit-copy-2.lua): always on, nothing
 * acknowledged before it is stored, nothing stored twice. The trail keeps the event's stream id
 * and is trimmed by age (AUDIT_RETENTION_DAYS) as entries arrive.
 */
export class AuditTrail {
  private readonly owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private running = false;
  private owning = false;
  private readonly conns: RedisClient[] = [];
  private loops: Promise<void>[] = [];
  private leaseTimer?: NodeJS.Timeout;

  constructor(
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.running = true;
    const P = this.settings.PARTITIONS;
    // From the start of what each stream keeps: a first deployment records what is still there.
    for (let p = 0; p < P; p++) {
      try {
        await this.redis.xgroup('CREATE', keys.events(p), AUDIT_GROUP, '0', 'MKSTREAM');
      } catch (e) {
        if (!String(e).includes('BUSYGROUP')) throw e;
      }
    }
    await this.tryLease();
    this.leaseTimer = setInterval(() => void this.tryLease(), Math.max(200, Math.floor(this.settings.LEASE_MS / 3)));
    const groups = this.settings.REDIS_CLUSTER_NODES ? Array.from({ length: P }, (_, p) => [p]) : [Array.from({ length: P }, (_, p) => p)];
    for (const parts of groups) {
      const conn = connectRedis(this.settings, { blocking: true, name: 'audit', log: this.log });
      this.conns.push(conn);
      this.loops.push(this.follow(conn, parts));
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.leaseTimer);
    for (const c of this.conns) c.disconnect();
    await Promise.all(this.loops);
    if (this.owning) await this.redis.releaseLease(OWNER_KEY, this.owner).catch(() => 0);
    this.owning = false;
  }

  private async tryLease(): Promise<void> {
    if (!this.running) return;
    try {
      if (this.owning) {
        this.owning = (await this.redis.renewLease(OWNER_KEY, this.owner, this.settings.LEASE_MS)) === 1;
        if (!this.owning) this.log.warn('audit trail: lease lost');
      } else {
        this.owning = (await this.redis.set(OWNER_KEY, this.owner, 'PX', this.settings.LEASE_MS, 'NX')) === 'OK';
        if (this.owning) this.log.info({ owner: this.owner }, 'audit trail: owner');
      }
    } catch (e) {
      this.owning = false;
      this.log.warn({ err: String(e) }, 'audit trail: lease check failed');
    }
  }

  /**
   * Follows the event streams while owner. On becoming owner it first takes over what earlier
   * owners read and did not acknowledge (older events first, so the trail stays in commit order).
   */
  private async follow(conn: RedisClient, parts: number[]): Promise<void> {
    const streams = parts.map((p) => keys.events(p));
    let claimed = false;
    while (this.running) {
      if (!this.owning) {
        claimed = false;
        await sleep(200);
        continue;
      }
      try {
        if (!claimed) {
          for (const p of parts) await this.claimPending(p);
          claimed = true;
        }
        const res = (await conn.xreadgroupBuffer(
          'GROUP',
          AUDIT_GROUP,
          this.owner,
          'COUNT',
          BATCH,
          'BLOCK',
          BLOCK_MS,
          'STREAMS',
          ...streams,
          ...streams.map(() => '>'),
        )) as [Buffer, StreamEntry[]][] | null;
        for (const [stream, entries] of res ?? []) await this.copy(parts[streams.indexOf(stream.toString())], entries);
      } catch (e) {
        if (!this.running) return;
        this.log.warn({ err: String(e) }, 'audit trail: copying failed, retrying');
        claimed = false;
        await sleep(500);
      }
    }
  }

  /** Every entry of the partition pending in the group (any consumer's), copied in stream order. */
  private async claimPending(p: number): Promise<void> {
    let start = '0-0';
    do {
      const [next, entries] = await autoclaim(this.redis, keys.events(p), AUDIT_GROUP, this.owner, 0, start, BATCH);
      await this.copy(p, entries);
      start = next.toString();
    } while (start !== '0-0' && this.running && this.owning);
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
}
