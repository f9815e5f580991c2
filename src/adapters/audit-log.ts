import { unpack } from './codec.js';
import { partitionOf } from './ids.js';
import { keys, type RedisClient } from './redis.js';
import { auditEntryOf, auditMatches, comparePositions, type AuditEntryBody, type AuditPosition, type AuditQuery } from '../content/audit.js';
import type { ContentEvent } from '../content/model.js';
import { type AuditSegments, segmentStart } from './audit-segments.js';

/** Entries with stream ids before this time (ms) are in segments (written by src/actors/audit-trail.ts). */
const FLUSHED_KEY = 'audit:flushed';
/** How long a listing of the segments is used before it is read again (when nothing was flushed). */
const LISTING_MS = 60_000;

type Entry = { pos: AuditPosition; event: ContentEvent };

/** The XREVRANGE end just below a stream id (exclusive); null below `0-0`, where no id is (Redis refuses `(0-0`). */
const below = (id: string): string | null => (/^0+-0+$/.test(id) ? null : `(${id}`);

/** One partition's side of a query: entries read and not yet answered, and where to read on. */
interface Reader {
  p: number;
  buf: Entry[];
  /** The XREVRANGE end of the next read. */
  end: string;
  done: boolean;
}

/**
 * Reads the audit trail (`auditlog:{p}`, written by src/actors/audit-trail.ts), newest first:
 * each partition's stream is read backwards in the time range, from the cursor's position on,
 * and the partitions are merged by (stream id, partition). A query of one content reads only its
 * partition. The content and user filters are applied while reading, so a rare user over a long
 * range reads that range's entries (CONTRACT §15 leaves that to the range the caller asks for).
 */
export class AuditLog {
  private listing: { flushed: number; at: number; names: string[] } | null = null;

  constructor(
    private readonly redis: RedisClient,
    private readonly partitions: number,
    /** The flushed part of the trail; null when this process has no file store (then only Redis is read). */
    private readonly segments: AuditSegments | null = null,
  ) {}

  async query(q: AuditQuery): Promise<{ entries: AuditEntryBody[]; next: AuditPosition | null }> {
    // A flush that moved entries from Redis to a segment while this read them: read again.
    for (let attempt = 0; ; attempt++) {
      const flushed = Number((await this.redis.get(FLUSHED_KEY)) ?? 0);
      const res = await this.queryAt(q, flushed);
      if (attempt >= 2 || Number((await this.redis.get(FLUSHED_KEY)) ?? 0) === flushed) return res;
    }
  }

  private async queryAt(q: AuditQuery, flushed: number): Promise<{ entries: AuditEntryBody[]; next: AuditPosition | null }> {
    // Stream ids are unsigned: a `to` before 1970 matches nothing, a `from` before it bounds nothing.
    if (q.to !== undefined && q.to < 0) return { entries: [], next: null };
    const parts = q.cid !== undefined ? [partitionOf(q.cid, this.partitions)] : Array.from({ length: this.partitions }, (_, p) => p);
    // Entries before `flushed` left Redis for segments (some may still wait for their trim: not read twice).
    const tailFrom = Math.max(q.from ?? 0, flushed, 0);
    const start = tailFrom === 0 ? '-' : `${tailFrom}-0`;
    const top = q.to === undefined ? '+' : `${q.to}-18446744073709551615`;
    const readers: Reader[] = parts.map((p) => {
      const a = q.after;
      // Newest first by (id, partition): after (id, p), a lower partition may still hold that same id.
      const end = a === undefined ? top : a.p > p ? a.id : below(a.id);
      // Nothing is below `0-0`: that partition is done.
      return { p, buf: [], end: end ?? '', done: end === null };
    });
    const batch = Math.min(1000, Math.max(50, q.limit + 1));
    const out: Entry[] = [];
    while (out.length <= q.limit) {
      await Promise.all(readers.map((r) => this.fill(r, q, start, batch)));
      let best: Reader | undefined;
      for (const r of readers) if (r.buf.length && (!best || comparePositions(r.buf[0].pos, best.buf[0].pos) < 0)) best = r;
      if (!best) break;
      out.push(best.buf.shift()!);
    }
    if (out.length <= q.limit && this.segments && flushed > 0 && (q.from === undefined || q.from < flushed)) {
      await this.fromSegments(q, flushed, out);
    }
    const more = out.length > q.limit;
    const page = out.slice(0, q.limit);
    return { entries: page.map((e) => auditEntryOf(e.event)), next: more ? page[page.length - 1].pos : null };
  }

  /**
   * Goes on into the segments, newest first, each read whole and walked backwards: a segment holds
   * the entries of every partition from its start to the next segment's start, in (id, partition) order.
   */
  private async fromSegments(q: AuditQuery, flushed: number, out: Entry[]): Promise<void> {
    const names = await this.segmentNames(flushed);
    for (let i = names.length - 1; i >= 0 && out.length <= q.limit; i--) {
      const start = segmentStart(names[i])!;
      const end = i + 1 < names.length ? segmentStart(names[i + 1])! : flushed;
      if (q.to !== undefined && start > q.to) continue;
      if (q.from !== undefined && end <= q.from) break;
      if (q.after !== undefined && start > Number(q.after.id.split('-')[0])) continue;
      const seg = await this.segments!.get(names[i]);
      if (!seg) continue;
      for (let j = seg.entries.length - 1; j >= 0 && out.length <= q.limit; j--) {
        const [id, p, buf] = seg.entries[j];
        const pos = { id, p };
        const t = Number(id.split('-')[0]);
        if ((q.to !== undefined && t > q.to) || (q.after !== undefined && comparePositions(pos, q.after) <= 0)) continue;
        if (q.from !== undefined && t < q.from) break;
        const event = unpack<ContentEvent>(buf);
        if (auditMatches(q, event)) out.push({ pos, event });
      }
    }
  }

  /** The segment names, oldest first: listed again when a flush moved `audit:flushed`, else at most once a minute. */
  private async segmentNames(flushed: number): Promise<string[]> {
    const l = this.listing;
    if (l && l.flushed === flushed && Date.now() - l.at < LISTING_MS) return l.names;
    const names = await this.segments!.list();
    this.listing = { flushed, at: Date.now(), names };
    return names;
  }

  /** Reads on until the reader holds a matching entry or its range is exhausted. */
  private async fill(r: Reader, q: AuditQuery, start: string, batch: number): Promise<void> {
    while (!r.buf.length && !r.done) {
      const rows = (await this.redis.xrevrangeBuffer(keys.auditLog(r.p), r.end, start, 'COUNT', batch)) as [Buffer, Buffer[]][];
      if (rows.length < batch) r.done = true;
      if (rows.length) {
        const end = below(rows[rows.length - 1][0].toString());
        r.end = end ?? '';
        if (end === null) r.done = true;
      }
      for (const [id, fields] of rows) {
        const i = fields.findIndex((f, n) => n % 2 === 0 && f.toString() === 'e');
        if (i < 0) continue;
        const event = unpack<ContentEvent>(fields[i + 1]);
        if (auditMatches(q, event)) r.buf.push({ pos: { id: id.toString(), p: r.p }, event });
      }
    }
  }
}
