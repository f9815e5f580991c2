import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { pooledRandomBytes } from '../adapters/ids.js';
import { EventReader, heldBytes, snapshotBytes } from '../adapters/event-reader.js';
import { AppError } from '../errors.js';
import type { ContentStore } from '../adapters/content-store.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import { changeKeys } from '../actors/timestate-schedule.js';
import {
  audienceKey,
  type ChangeEvent,
  type ChangeFilter,
  compareFeedOrder,
  compareIds,
  type FeedEntryId,
  takeInFeedOrder,
  matchesFilter,
  parseStreamId,
  type StreamPosition,
  streamIdOf,
  encodePositions,
} from '../content/change-events.js';
import type { Snapshot } from '../content/model.js';
import type { Principal } from '../content/permissions.js';
import type { Reads } from './reads.js';
import { type CursorBatch, CursorSeal } from './cursor-seal.js';

/** One entry of a partition's event stream, read against its snapshots: its feed events, and who may see them. */
export interface ResolvedEntry {
  p: number;
  ms: number;
  seq: number;
  changes: ChangeEvent[];
  /** The content at the entry's revision (permissions are decided on it); null when unknown. */
  at: Snapshot | null;
  /**
   * The cursor after each of `changes` for a subscriber whose position before this entry is the
   * fan-out's own (ChangeFanout): made once for all such subscribers.
   */
  cursors?: string[];
  /** Each of `changes` as JSON without its opening brace, made when the entry is resolved (`resolveEntry`). */
  rests?: string[];
  /** The characters of its events' JSON with their cursors (`rests` and CURSOR_CHARS each): what a page or an offer of it writes. */
  chars?: number;
  /** What its events' JSON takes in memory: a character a byte, two in a string that needs them. */
  bytes?: number;
  /** Each of `changes` as delivered with `cursors`: one object, and its JSON and frame, for every subscriber that shares them. */
  shared?: Delivered[];
}

/** About the length of a sealed cursor (560 characters for 64 partitions) and its JSON around it. */
const CURSOR_CHARS = 600;

/**
 * A feed event as delivered to one caller: its cursor and the event. Its JSON is the cursor
 * first, then the event's fields (CONTRACT §13), the event's part serialised once per stream
 * entry read and shared by every caller it is delivered to.
 */
export class Delivered {
  /** Its JSON and its server-sent event, made when first sent. */
  private text?: string;
  private frame?: string;

  constructor(
    /** Set when the page it is in is sealed (CursorBatch), for an event of a page: before it is first sent. */
    public cursor: string,
    readonly event: ChangeEvent,
    /** The event's JSON without its opening brace. */
    private readonly rest: string,
  ) {}

  get kind(): ChangeEvent['kind'] {
    return this.event.kind;
  }

  /** About the characters of its JSON: the event's and a cursor's. */
  get size(): number {
    return this.rest.length + CURSOR_CHARS;
  }

  /**
   * As JSON.stringify({ cursor, ...event }) would write it (a cursor is base64url: nothing to
   * escape). Made once: live subscribers whose position is the fan-out's share one Delivered per
   * event (ChangeSource.consume), so 10,000 of them send the same string rather than each make
   * one of about a kilobyte.
   */
  json(): string {
    this.text ??= `{"cursor":"${this.cursor}",${this.rest}`;
    return this.text;
  }

  /**
   * Writes its JSON (as `json()`) into `buf` at `at`, which has room for `maxBytes()`; returns
   * where it ends. For a page, whose events are each written once: no string is made.
   */
  writeJson(buf: Buffer, at: number): number {
    if (this.text !== undefined) return at + buf.write(this.text, at, 'utf8');
    at += buf.write(`{"cursor":"${this.cursor}",`, at, 'latin1');
    return at + buf.write(this.rest, at, 'utf8');
  }

  /** The most bytes its JSON takes in UTF-8 (a cursor is base64url, a byte a character; any other character at most three). */
  maxBytes(): number {
    return 14 + this.cursor.length + 3 * this.rest.length;
  }

  /** Its server-sent event (`id`, `event`, `data`), made once. */
  sse(): string {
    this.frame ??= `id: ${this.cursor}\nevent: ${this.kind}\ndata: ${this.json()}\n\n`;
    return this.frame;
  }
}

/** What a page read: the events, the positions after it, and whether every stream was read to its end. */
export interface PageResult {
  changes: Delivered[];
  positions: StreamPosition[];
  exhausted: boolean;
  /** What the page read past its end, for the page after it (made ahead from `positions`). */
  carry?: PageCarry;
}

/**
 * The entries a page read past its end, per partition in stream order (each after the page's
 * position there), and where each partition's next read starts: the next page begins with them
 * instead of reading them again (a page of 1,000 events read about 1,560 entries, the rest read
 * again by the next one). Valid only for a page from the same positions.
 */
export interface PageCarry {
  held: ResolvedEntry[][];
  from: StreamPosition[];
}

/** 410 (41000): the stream no longer holds what follows this cursor. */
export const cursorGone = (): AppError => new AppError('GONE', 'The cursor is older than the events kept (CHANGES_RETENTION_HOURS); start again without since');

type RawEntry = [id: Buffer, fields: Buffer[]];

/**
 * What a partition's stream has lost: `bound` is the position below which a cursor has lost
 * events. Retention records the last id it removed (XTRIM moves no XINFO field that tells);
 * when MAXLEN trimming removed entries too, the bound is taken just below the first entry kept
 * (a cursor exactly at the last removed entry may then be refused: it is safe, never a gap).
 */
interface StreamInfo {
  last: { ms: number; seq: number };
  bound: { ms: number; seq: number };
}

const ZERO = { ms: 0, seq: 0 };

/**
 * Stream entries kept resolved (their events, snapshot and JSON): an entry never changes, and the
 * same ones are read again by every subscriber that catches up over them, by long polls, and by
 * the pages that follow live delivery.
 */
const RESOLVED_ENTRIES = 50000;
/**
 * And their size (entrySize): a few thousand events of content with thousands of aliases must not
 * fill the heap (a count alone allowed gigabytes).
 */
const RESOLVED_BYTES = 256 * 2 ** 20;
/**
 * Entries a page resolved while the cache above was full: kept apart, so that a catch-up over more
 * entries than that cache holds does not push out, oldest first, the very entries it reads next
 * (with 60,000 entries and room for 50,000 a second catch-up found none of them: every read was
 * a miss). What a page reads past its end is found here by the next page.
 */
const SCANNED_ENTRIES = 8192;
const SCANNED_BYTES = 32 * 2 ** 20;

/**
 * What a resolved entry takes in memory, in bytes: its events' JSON (`bytes`), their shared
 * frames once delivered live (a JSON and a server-sent event each, about `chars` apiece: counted
 * from the start, since they come after the entry is kept), the events' arrays of the snapshot's
 * names, and the snapshot. Measured on 40,000 entries of small contents: 2,296 bytes each read by
 * pages only, 3,427 delivered live, counted 4,199 (before, 5,629).
 */
export function entrySize(e: ResolvedEntry): number {
  measureEntry(e);
  const names = e.at ? e.at.aliases.length + Object.keys(e.at.views).length + 2 : 0;
  return 1024 + e.changes.length * (64 + 8 * names) + e.bytes! + 2 * e.chars! + (e.at ? snapshotBytes(e.at) : 0);
}

/**
 * A page ends once its events' JSON passes this many characters, however many events `limit`
 * allows: every event carries the content's aliases, and a view change fans out to each symbolic
 * view that follows it, so 1,000 events could be hundreds of megabytes (the fourteenth session's
 * review). The caller goes on from the page's `last` as after any page.
 */
export const PAGE_MAX_CHARS = 8 * 2 ** 20;

/**
 * A page ends once the entries it examined weigh this much (their snapshots and their events'
 * JSON, delivered or not), however few events it found for the caller: a caller that may read
 * none of thousands of entries of content with 50 KB of aliases made each page read 17-69 MB
 * from Redis and hold it (24 such pages at once: 1.8 GB of heap; the fifteenth session's review).
 * The caller goes on from the page's `last`.
 */
export const PAGE_EXAMINE_BYTES = 16 * 2 ** 20;
/** Entries a page's first round reads in all, before it knows what they weigh. */
const FIRST_ROUND = 256;

/**
 * The events of an entry as JSON (`rests`), their size with cursors (`chars`) and in memory
 * (`bytes`), made once when it is resolved: the caches count what an entry really holds, and pages
 * and offers bound what they write by it.
 */
export function measureEntry(entry: ResolvedEntry): number {
  if (entry.chars === undefined) {
    entry.rests ??= entry.changes.map((c) => JSON.stringify(c).slice(1));
    let chars = 0;
    let bytes = 0;
    for (const r of entry.rests) {
      chars += r.length + CURSOR_CHARS;
      bytes += heldBytes(r);
    }
    entry.chars = chars;
    entry.bytes = bytes;
  }
  return entry.chars;
}

/**
 * Reads the partitions' event streams for the change feed: entries resolved against the revision
 * snapshots (cached: a revision never changes), pages from a position, start positions and the
 * retention check. The domain decides what each entry means and who sees it (content/change-events.ts).
 */
export class ChangeSource {
  private readonly events: EventReader;
  private readonly resolved = new LRUCache<string, ResolvedEntry>({ max: RESOLVED_ENTRIES, maxSize: RESOLVED_BYTES, sizeCalculation: entrySize });
  private readonly scanned = new LRUCache<string, ResolvedEntry>({ max: SCANNED_ENTRIES, maxSize: SCANNED_BYTES, sizeCalculation: entrySize });
  private sealing?: Promise<CursorSeal>;
  private seal?: CursorSeal;
  /** The read of `info` under way, and the one the callers that came meanwhile wait for. */
  private infoRunning: Promise<StreamInfo[]> | null = null;
  private infoNext: Promise<StreamInfo[]> | null = null;

  constructor(
    private readonly redis: RedisClient,
    store: ContentStore,
    readonly partitions: number,
    private readonly reads: Reads,
  ) {
    this.events = new EventReader(store, 50000);
  }

  /**
   * Reads the feed's cursor key (changeKeys.cursorKey: 32 random bytes, written by the first web
   * process that needs it and read by every other, so a cursor from one gateway is good at all).
   * Every request of the feed awaits it before it reads or writes a cursor; a failure (Redis out
   * of reach) is tried again by the next one.
   */
  ready(): Promise<CursorSeal> {
    this.sealing ??= (async () => {
      await this.redis.set(changeKeys.cursorKey, randomBytes(32), 'NX');
      const key = await this.redis.getBuffer(changeKeys.cursorKey);
      if (key?.length !== 32) throw new Error(`${changeKeys.cursorKey} does not hold a key of 32 bytes`);
      this.seal = new CursorSeal(key, this.partitions, pooledRandomBytes);
      return this.seal;
    })().catch((e: unknown) => {
      this.sealing = undefined;
      throw e;
    });
    return this.sealing;
  }

  /** Cursors to and from positions (once ready() resolved). */
  get cursors(): CursorSeal {
    if (!this.seal) throw new Error('the change feed wrote a cursor before its key was read');
    return this.seal;
  }

  /**
   * Reads stream entries against their snapshots (those not in memory in one call). An entry read
   * before is answered from memory; one whose snapshot is missing (a replica behind) is not kept.
   * Entries resolved for live delivery are always kept; entries a page resolves are kept with them
   * while there is room, else apart (SCANNED_ENTRIES).
   */
  async resolve(p: number, raw: RawEntry[], live = true): Promise<ResolvedEntry[]> {
    return this.resolveWithin(p, raw, live);
  }

  /**
   * `resolve`, and with `within` (a page's) only the first entries whose snapshots not in memory
   * make Redis send at most `within.budget` bytes, the first of all with `within.first`:
   * a prefix of `raw`.
   */
  private async resolveWithin(p: number, raw: RawEntry[], live: boolean, within?: { budget: number; first: boolean }): Promise<ResolvedEntry[]> {
    const out: ResolvedEntry[] = new Array(raw.length);
    const ids: string[] = new Array(raw.length);
    const misses: number[] = [];
    for (let i = 0; i < raw.length; i++) {
      const id = raw[i][0].toString();
      ids[i] = id;
      const key = `${p}/${id}`;
      const hit = this.resolved.get(key) ?? this.scanned.get(key);
      if (hit) out[i] = hit;
      else misses.push(i);
    }
    if (!misses.length) return out;
    const fields = misses.map((i) => raw[i][1]);
    const read = within ? await this.events.readWithin(fields, within.budget, within.first && misses[0] === 0) : await this.events.readMany(fields);
    // Left out by the budget: the entries from the first miss not read on.
    if (read.length < misses.length) out.length = misses[read.length];
    read.forEach((r, k) => {
      const i = misses[k];
      const { ms, seq } = parseStreamId(ids[i]);
      const entry: ResolvedEntry = { p, ms, seq, changes: r?.changes ?? [], at: r?.at ?? null };
      measureEntry(entry);
      if (entry.at) {
        const size = entrySize(entry);
        const room = this.resolved.size < RESOLVED_ENTRIES && this.resolved.calculatedSize + size <= RESOLVED_BYTES;
        (live || room ? this.resolved : this.scanned).set(`${p}/${ids[i]}`, entry, { size });
      }
      out[i] = entry;
    });
    return out;
  }

  /** Stream entries of partition `p` after `pos` (from `pos` itself when it was delivered only in part), for a page. */
  private rangeAfter(p: number, pos: StreamPosition, count: number): Promise<RawEntry[]> {
    const start = pos.ms === 0 && pos.seq === 0 ? '-' : pos.sub > 0 ? streamIdOf(pos) : `(${streamIdOf(pos)}`;
    return this.redis.xrangeBuffer(keys.events(p), start, '+', 'COUNT', count) as unknown as Promise<RawEntry[]>;
  }

  /**
   * XINFO STREAM of every partition, with what retention removed (a stream that does not exist
   * yet: nothing added or removed), read after the call: every subscriber, page and resumed
   * stream asks it (128 commands with 64 partitions). Callers that come while a read is under
   * way share the next one, never the one under way (it began before them, and may not see a
   * trim they must), so 10,000 clients reconnecting at once make a few reads, not 10,000.
   */
  info(): Promise<StreamInfo[]> {
    if (!this.infoRunning) return this.runInfo();
    this.infoNext ??= this.infoRunning
      .catch(() => undefined)
      .then(() => {
        this.infoNext = null;
        return this.runInfo();
      });
    return this.infoNext;
  }

  private runInfo(): Promise<StreamInfo[]> {
    const run: Promise<StreamInfo[]> = this.readInfo().finally(() => {
      if (this.infoRunning === run) this.infoRunning = null;
    });
    this.infoRunning = run;
    return run;
  }

  private readInfo(): Promise<StreamInfo[]> {
    return Promise.all(
      Array.from({ length: this.partitions }, async (_, p) => {
        const [reply, trimmed] = await Promise.all([
          (this.redis.xinfo('STREAM', keys.events(p)) as Promise<unknown[]>).catch((e: unknown) => {
            if (String(e).includes('no such key')) return null;
            throw e;
          }),
          this.redis.hmget(changeKeys.trimmed(p), 'id', 'n'),
        ]);
        const byAge = trimmed[0] ? parseStreamId(trimmed[0]) : ZERO;
        if (!reply) return { last: ZERO, bound: byAge };
        const field = (name: string) => {
          const i = reply.indexOf(name);
          return i >= 0 ? String(reply[i + 1]) : '0';
        };
        const last = parseStreamId(field('last-generated-id'));
        const length = Number(field('length'));
        const removedOtherwise = Number(field('entries-added')) - length - Number(trimmed[1] ?? 0);
        if (removedOtherwise <= 0 || length === 0) return { last, bound: byAge };
        const first = parseStreamId(field('recorded-first-entry-id'));
        const below = first.seq > 0 ? { ms: first.ms, seq: first.seq - 1 } : { ms: first.ms - 1, seq: 0 };
        return { last, bound: compareIds(below, byAge) > 0 ? below : byAge };
      }),
    );
  }

  /** Where a feed starts: `now` after the last event, `oldest` before the first event kept. */
  async startPositions(since: 'now' | 'oldest'): Promise<StreamPosition[]> {
    const info = await this.info();
    return info.map((i) => ({ ...(since === 'now' ? i.last : i.bound), sub: 0 }));
  }

  /**
   * Throws cursorGone() (410) when a stream no longer holds what follows a position: something
   * after it was trimmed, or the stream never reached it (its data was lost).
   */
  async checkKept(positions: StreamPosition[]): Promise<void> {
    const info = await this.info();
    for (let p = 0; p < this.partitions; p++) {
      const pos = positions[p];
      const d = compareIds(pos, info[p].bound);
      if (d < 0 || (d === 0 && pos.sub > 0)) throw cursorGone();
      if (compareIds(pos, info[p].last) > 0) throw cursorGone();
    }
  }

  /**
   * Consumes one resolved entry from `pos` for a caller: the feed events it may receive and that
   * pass the filter, each with the cursor just after it. Returns false when `room` ran out before
   * the entry was consumed to its end (`pos` then names how far it got).
   */
  consume(
    entry: ResolvedEntry,
    pos: StreamPosition[],
    principal: Principal,
    filter: ChangeFilter,
    out: Delivered[],
    room: number,
    /** The fan-out's cursors made once for all (ResolvedEntry.cursors), or a page's batch its cursors are sealed in. */
    cursors?: string[] | CursorBatch,
  ): boolean {
    const cur = pos[entry.p];
    const d = compareIds(entry, cur);
    if (d < 0 || (d === 0 && cur.sub === 0 && (cur.ms > 0 || cur.seq > 0))) return true; // delivered already
    const from = d === 0 ? cur.sub : 0;
    const visible = entry.at !== null && this.reads.mayRead(principal, entry.at);
    for (let i = from; i < entry.changes.length; i++) {
      const c = entry.changes[i];
      if (!visible || !matchesFilter(filter, c)) continue;
      if (out.length >= room) {
        // Nothing of this entry taken yet: the position stays where the caller's was.
        pos[entry.p] = i === from ? cur : { ms: entry.ms, seq: entry.seq, sub: i };
        return false;
      }
      let cursor = '';
      if (Array.isArray(cursors)) {
        entry.shared ??= [];
        const shared = entry.shared[i];
        if (shared) {
          out.push(shared);
          continue;
        }
        cursor = cursors[i];
      } else {
        pos[entry.p] = { ms: entry.ms, seq: entry.seq, sub: i + 1 === entry.changes.length ? 0 : i + 1 };
        if (cursors) cursors.add(pos);
        else cursor = this.cursors.encode(pos);
      }
      measureEntry(entry);
      const delivered = new Delivered(cursor, c, entry.rests![i]);
      if (Array.isArray(cursors)) entry.shared![i] = delivered;
      out.push(delivered);
    }
    pos[entry.p] = { ms: entry.ms, seq: entry.seq, sub: 0 };
    return true;
  }

  /**
   * One page for a caller from `positions`: the first `limit` events it may receive, in the feed's
   * order across partitions (compareFeedOrder), examining at most about `budget` entries (a caller
   * that may see little of a busy feed gets a short or empty page with an advanced cursor rather
   * than a request that runs for minutes).
   *
   * Which events a page holds depends only on the events the caller receives, never on entries
   * it may not read (CONTRACT §20): entries are taken in the feed's order once no partition
   * still being read can bring one before them, so an entry it may not read never pushes one it
   * may out of a page, nor reorders them. The partitions are read in rounds, each partition that is running
   * low taking its share of what the page still misses; what a round reads past the page goes on
   * to the page made after it (`carry`).
   */
  async page(principal: Principal, filter: ChangeFilter, positions: StreamPosition[], limit: number, budget = 20000, carry?: PageCarry): Promise<PageResult> {
    const P = this.partitions;
    const pos = positions.map((p) => ({ ...p }));
    const out: Delivered[] = [];
    /** Per partition: entries read and not yet taken (in id order), where its next read starts, whether it reached its end. */
    const held: ResolvedEntry[][] = carry ? carry.held.map((h) => [...h]) : Array.from({ length: P }, () => []);
    const from = (carry?.from ?? pos).map((p) => ({ ...p }));
    const ended = new Array<boolean>(P).fill(false);
    let scanned = 0;
    let chars = 0;
    const batch = this.cursors.batch();
    /** Per partition: the first entry's time and the entries this page has seen (its rate), and the entries taken. */
    const seen = held.map((h) => ({ first: h.length ? h[0].ms : -1, n: h.length }));
    let took = 0;
    let examined = 0;
    for (;;) {
      // Within the page's budget of entries, and of bytes at the weight of the entries examined so far.
      const byWeight = examined > 0 ? Math.floor(((PAGE_EXAMINE_BYTES - examined) * scanned) / examined) : Number.POSITIVE_INFINITY;
      const counts = this.roundCounts(held, from, ended, seen, limit - out.length, out.length, took, Math.min(budget - scanned, byWeight));
      const low = [...counts.keys()];
      const raws = await Promise.all(low.map((p) => this.rangeAfter(p, from[p], counts.get(p)!)));
      // What the round's snapshots may make Redis send, shared by the partitions that have entries
      // (a snapshot held in memory weighs about twice its stored form, as snapshotBytes counts it);
      // what a partition is left short of, it reads in the next round. Only the entry first in the
      // feed's order is read whatever it weighs: the page always moves on, and a page reads at most
      // PAGE_EXAMINE_BYTES and one entry, however light the entries before (a round's size is
      // guessed from them) and however heavy those after.
      let firstAt = -1;
      let first: FeedEntryId | null = null;
      low.forEach((p, i) => {
        if (!raws[i].length) return;
        const id = { p, ...parseStreamId(raws[i][0][0].toString()) };
        if (!first || compareFeedOrder(id, first) < 0) {
          first = id;
          firstAt = i;
        }
      });
      const share = Math.max(0, (PAGE_EXAMINE_BYTES - examined) / 2 / Math.max(1, raws.filter((r) => r.length > 0).length));
      const reads = await Promise.all(low.map((p, i) => this.resolveWithin(p, raws[i], false, { budget: share, first: i === firstAt })));
      /** Partitions whose round the budget cut short: next comes the first entry left out (`cutAt`). */
      const cutAt = new Map<number, FeedEntryId>();
      low.forEach((p, i) => {
        const got = reads[i];
        scanned += raws[i].length;
        held[p].push(...got);
        for (const e of got) examined += (e.at ? snapshotBytes(e.at) : 0) + (e.bytes ?? 0);
        if (got.length) {
          if (seen[p].first < 0) seen[p].first = got[0].ms;
          seen[p].n += got.length;
          from[p] = { ms: got[got.length - 1].ms, seq: got[got.length - 1].seq, sub: 0 };
        }
        if (got.length < raws[i].length) {
          const next = parseStreamId(raws[i][got.length][0].toString());
          cutAt.set(p, { p, ms: next.ms, seq: next.seq - 1 });
        } else if (got.length < counts.get(p)!) ended[p] = true;
      });
      // An entry is taken once no partition still being read can bring one before it in the
      // feed's order: what is taken is in that order, whatever the caller may read. A partition
      // cut short brings nothing before the first entry it left out.
      const unread: FeedEntryId[] = [];
      for (let p = 0; p < P; p++) {
        if (ended[p]) continue;
        const last = cutAt.get(p) ?? held[p][held[p].length - 1] ?? from[p];
        unread.push({ p, ms: last.ms, seq: last.seq });
      }
      const ready = takeInFeedOrder(held, unread);
      took += ready.length;
      let full = false;
      /** The first entry of `ready` not consumed to its end. */
      let left = ready.length;
      for (let k = 0; k < ready.length; k++) {
        const entry = ready[k];
        const before = out.length;
        if (!this.consume(entry, pos, principal, filter, out, limit, batch)) {
          full = true;
          left = k;
          break;
        }
        // Past PAGE_MAX_CHARS of JSON the page ends after this entry (counted by what the caller receives).
        if (out.length > before) {
          for (let n = before; n < out.length; n++) chars += out[n].size;
          if (chars >= PAGE_MAX_CHARS) {
            full = true;
            left = k + 1;
            break;
          }
        }
      }
      // Taken from `held` but not consumed: back in front of what each partition holds.
      for (let k = ready.length - 1; k >= left; k--) held[ready[k].p].unshift(ready[k]);
      const drained = !full && held.every((h, p) => ended[p] && h.length === 0);
      if (full || out.length >= limit || drained || scanned >= budget || examined >= PAGE_EXAMINE_BYTES) {
        const sealed = await batch.sealed();
        for (let i = 0; i < out.length; i++) out[i].cursor = sealed[i];
        return { changes: out, positions: pos, exhausted: drained, carry: drained ? undefined : { held, from } };
      }
    }
  }

  /**
   * How many entries each partition still being read reads in a page's next round (those not in
   * the map read nothing). Without a rate known yet, the events missing shared evenly. Then by
   * each partition's rate in this page (entries per millisecond): enough for all of them to reach
   * the time at which, at those rates and the share of entries the caller received so far, the
   * page would be full, and a quarter more. Shared evenly, a partition with three times the
   * others' commits held the page back and a page took 7 to 9 rounds; what is read past the page
   * goes on to the next one (PageCarry).
   */
  private roundCounts(
    held: ResolvedEntry[][],
    from: StreamPosition[],
    ended: boolean[],
    seen: { first: number; n: number }[],
    missing: number,
    received: number,
    took: number,
    /** Entries the page may still read (its budget): a round reads at most that, and at least 4 a partition. */
    allowed: number,
  ): Map<number, number> {
    const reading: number[] = [];
    for (let p = 0; p < held.length; p++) if (!ended[p]) reading.push(p);
    const counts = new Map<number, number>();
    // Before anything is known of the entries' rates or weight, at most FIRST_ROUND in all.
    const even = Math.max(4, Math.ceil(Math.min(missing, FIRST_ROUND, allowed) / Math.max(1, reading.length)));
    const rate = (p: number) => (seen[p].n >= 2 && from[p].ms > seen[p].first ? (seen[p].n - 1) / (from[p].ms - seen[p].first) : 0);
    let total = 0;
    let frontier = Number.POSITIVE_INFINITY;
    for (const p of reading) {
      total += rate(p);
      frontier = Math.min(frontier, from[p].ms);
    }
    if (total === 0) {
      for (const p of reading) if (held[p].length < even) counts.set(p, even);
      return counts;
    }
    // Entries still wanted: the events missing over the share of entries that gave events so far.
    const share = took > 0 && received > 0 ? Math.max(0.05, received / took) : 1;
    const wanted = missing / share;
    const until = frontier + (1.25 * wanted) / total;
    const most = Math.max(4, Math.min(2000, Math.ceil(2 * wanted)));
    let sum = 0;
    for (const p of reading) {
      // The partition furthest behind always reads: at today's times (1.8e12 ms) a rate past
      // about 5,000 entries a millisecond moves `until` by less than a double's step, and a
      // round in which none read spun the page forever without giving the event loop back.
      if (from[p].ms >= until && from[p].ms > frontier) continue;
      const r = rate(p) || total / reading.length;
      const n = Math.min(most, Math.max(4, Math.ceil(r * (until - from[p].ms))));
      counts.set(p, n);
      sum += n;
    }
    // Within the page's budget: a caller that may read few of the entries asks for many.
    if (sum > allowed) for (const [p, n] of counts) counts.set(p, Math.max(4, Math.floor((n * allowed) / sum)));
    return counts;
  }
}

/** Pages made ahead at once: beyond, a page waits for the caller's request as before. */
const AHEAD_RUNNING = 4;
/** Pages made ahead and kept, and how long one waits for its request. */
const AHEAD_KEPT = 32;
const AHEAD_TTL_MS = 3000;

/**
 * Pages made ahead for callers paging through the feed (a pipeline catching up): after a page
 * that did not reach the end, the next one (from that page's `last`) is made while the caller
 * reads this one, so the gateway's work and the caller's overlap instead of taking turns (a
 * page of 1,000 events is about a megabyte of JSON for the caller to parse). A page made ahead
 * is what the caller's next request would have made a moment later: the same events after the
 * same positions, chosen for the same user and contexts (what `mayRead` decides on), filter and
 * limit; anything else makes the page anew. The request's cursor is still checked first (400,
 * 410). Each is used once, within AHEAD_TTL_MS; at most AHEAD_RUNNING are being made and
 * AHEAD_KEPT kept, the oldest dropped first, so a caller that never comes back costs at most one
 * page of work.
 */
export class PagesAhead {
  private readonly pages = new Map<string, { page: Promise<PageResult | null>; at: number }>();
  private running = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** The page made ahead for this request, or null. */
  async take(principal: Principal, filter: ChangeFilter, positions: StreamPosition[], limit: number): Promise<PageResult | null> {
    if (!this.pages.size) return null;
    const key = aheadKey(principal, filter, positions, limit);
    const made = this.pages.get(key);
    if (!made) return null;
    this.pages.delete(key);
    return this.now() - made.at <= AHEAD_TTL_MS ? made.page : null;
  }

  /**
   * Starts making the page of this request, unless AHEAD_RUNNING are being made or `page` declines
   * (null: no slot of the caller's to spare, PageSlots.spare).
   */
  make(principal: Principal, filter: ChangeFilter, positions: StreamPosition[], limit: number, page: () => Promise<PageResult> | null): void {
    if (this.running >= AHEAD_RUNNING) return;
    const making = page();
    if (!making) return;
    this.running++;
    const key = aheadKey(principal, filter, positions, limit);
    const made = making.catch(() => null).finally(() => this.running--);
    this.pages.delete(key);
    const now = this.now();
    this.pages.set(key, { page: made, at: now });
    // Oldest first: past AHEAD_KEPT, and any past its time (a page and what it carries are held until then).
    for (const [old, { at }] of this.pages) {
      if (this.pages.size <= AHEAD_KEPT && now - at <= AHEAD_TTL_MS) break;
      this.pages.delete(old);
    }
  }

  /** Pages kept (tests). */
  get kept(): number {
    return this.pages.size;
  }
}

/** What decides a page: the caller's user and contexts, the filter, the limit and the positions. */
function aheadKey(principal: Principal, filter: ChangeFilter, positions: StreamPosition[], limit: number): string {
  return `${audienceKey(principal, filter)}${limit}:${encodePositions(positions).toString('base64')}`;
}
