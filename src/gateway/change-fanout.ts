import type { Settings } from '../../config/settings.js';
import type { Logger } from '../adapters/log.js';
import { connectRedis, keys, type RedisClient } from '../adapters/redis.js';
import {
  audienceKey,
  type ChangeFilter,
  compareFeedOrder,
  compareIds,
  type FeedEntryId,
  takeInFeedOrder,
  parseStreamId,
  type StreamPosition,
  streamIdOf,
} from '../content/change-events.js';
import type { Principal } from '../content/permissions.js';
import { AppError } from '../errors.js';
import { sleep } from '../wait.js';
import { type ChangeSource, type Delivered, measureEntry, type ResolvedEntry } from './change-source.js';
import { FeedCheckpoints } from './feed-checkpoints.js';
import { KeyedCounts } from './keyed-counts.js';

/** Entries kept per partition for subscribers that attach after a catch-up read. */
const BUFFER_PER_PARTITION = 256;
const BLOCK_MS = 2000;
/** An offer that took this long (ms) paces the next read (ChangeFanout.read). */
const PACE_FROM_MS = 10;
/** The longest pause between reads, whatever the offers cost. */
const PACE_MAX_MS = 100;
/** Entries read from each stream at most per read. */
const READ_COUNT = 1000;
/** The events' JSON one offer carries at most (measureEntry); a larger read is offered in parts. */
const OFFER_MAX_CHARS = 8 * 2 ** 20;

/**
 * Where one subscriber's events go: `write` takes a batch and answers false while the client is
 * behind (the batch was taken all the same); `onWritable` is called once it caught up.
 */
export interface FeedSink {
  write(batch: Delivered[]): boolean;
  /** The subscriber is closed by the feed: `reason` 'slow' (it did not read) or 'gone' (its cursor expired) or 'stopped'. */
  close(reason: 'slow' | 'gone' | 'stopped' | 'failed'): void;
}

/**
 * One subscriber: its caller, filter and position; a bounded queue of events not yet written. It
 * catches up from Redis in pages, then attaches to the fan-out, which offers it every new entry.
 * A subscriber whose queue passes its bound is closed: memory never grows with a client that does
 * not read, and it resumes from the cursor of the last event it received.
 */
export class FeedSubscriber {
  readonly positions: StreamPosition[];
  private queue: Delivered[] = [];
  /** The sink refused more (the client is behind); the queue holds what waits. */
  private blocked = false;
  /** Since when the client has been behind (0: it is not). */
  private blockedSince = 0;
  closed = false;
  live = false;
  /**
   * Its position is the fan-out's own (as after attaching, once caught up): every later entry
   * moves both alike, so it takes the cursors the fan-out made once for all.
   */
  canonical = false;
  /**
   * Subscribers of one group (the same user, contexts and filter) that are canonical get the
   * same events of every entry offered: the events are chosen once for the group (dispatch).
   */
  readonly group: string;

  constructor(
    private readonly fanout: ChangeFanout,
    readonly principal: Principal,
    readonly filter: ChangeFilter,
    positions: StreamPosition[],
    private readonly sink: FeedSink,
    private readonly maxQueue: number,
  ) {
    this.positions = positions.map((p) => ({ ...p }));
    this.group = audienceKey(principal, filter);
  }

  /** Events waiting in this subscriber's queue (for the memory bound and its tests). */
  get queued(): number {
    return this.queue.length;
  }

  /** Catches up in pages (following the client's pace), then goes live. */
  async run(): Promise<void> {
    try {
      while (!this.closed && this.fanout.running) {
        if (this.fanout.attach(this)) return;
        const seen = this.fanout.seenIds();
        const page = await this.fanout.pages.wait(this.principal.userId, () =>
          this.closed
            ? Promise.resolve(null)
            : this.fanout.source.page(this.principal, this.filter, this.positions, Math.max(1, Math.min(1000, this.maxQueue))),
        );
        if (this.closed || !page) return;
        for (let p = 0; p < this.positions.length; p++) {
          // Read to its end after the fan-out had seen `seen[p]`: nothing lies between the two
          // (entries trimmed away, or ids never used), so the position may move up to it.
          const pos = page.positions[p];
          this.positions[p] = page.exhausted && pos.sub === 0 && compareIds(pos, seen[p]) < 0 ? { ...seen[p], sub: 0 } : pos;
        }
        if (page.changes.length) this.enqueue(page.changes);
        while (this.blocked && !this.closed && this.fanout.running) {
          if (this.stalled()) return this.close('slow');
          await sleep(20);
        }
      }
      if (!this.closed) this.close('stopped');
    } catch {
      this.close('failed');
    }
  }

  /**
   * Entries from the fan-out, in stream order per partition (entries it already has are skipped);
   * one write for all. `chosen`: the events a canonical subscriber of the same group took from
   * the same entries (the same array, so its SSE text is made once), with the positions they
   * leave (the fan-out's own); null to choose them here.
   */
  offer(entries: readonly ResolvedEntry[], chosen: { events: Delivered[]; canon: readonly StreamPosition[] } | null = null): Delivered[] | null {
    if (this.closed) return null;
    let out: Delivered[];
    if (chosen && this.canonical) {
      out = chosen.events;
      // Past every entry, as consume would have moved it: the fan-out's positions (never changed in place).
      for (const entry of entries) this.positions[entry.p] = chosen.canon[entry.p];
    } else {
      out = [];
      const shared = this.canonical;
      for (const entry of entries)
        this.fanout.source.consume(entry, this.positions, this.principal, this.filter, out, Number.POSITIVE_INFINITY, shared ? entry.cursors : undefined);
      if (!shared) this.canonical = this.fanout.isCanonical(this.positions);
    }
    if (out.length) this.enqueue(out);
    return out;
  }

  /** Has the client taken nothing for longer than the stall bound? */
  stalled(): boolean {
    return this.blocked && Date.now() - this.blockedSince > this.fanout.stallMs;
  }

  /** The client took some of what its sink holds: it is still behind, but not stalled. */
  progressed(): void {
    if (this.blocked) this.blockedSince = Date.now();
  }

  private setBlocked(blocked: boolean): void {
    if (blocked && !this.blocked) this.blockedSince = Date.now();
    this.blocked = blocked;
  }

  private enqueue(batch: Delivered[]): void {
    if (!this.blocked) {
      this.setBlocked(!this.sink.write(batch));
      return;
    }
    this.queue.push(...batch);
    if (this.queue.length > this.maxQueue) this.close('slow');
  }

  /** The client caught up: what waits is written. */
  writable(): void {
    if (this.closed) return;
    this.setBlocked(false);
    if (!this.queue.length) return;
    const batch = this.queue;
    this.queue = [];
    this.setBlocked(!this.sink.write(batch));
  }

  close(reason: 'slow' | 'gone' | 'stopped' | 'failed'): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.fanout.detach(this);
    this.sink.close(reason);
  }
}

/**
 * The one reader of the event streams in a web process, shared by all its subscribers: it reads
 * each new entry once, resolves it against its snapshots once, keeps the last ones per partition
 * (for subscribers that attach after a catch-up), and offers it to every live subscriber.
 */
export class ChangeFanout {
  running = false;
  private readonly subscribers = new Set<FeedSubscriber>();
  /** Per partition: every entry after this id is in `buffers` (or not yet read). */
  private readonly covered: { ms: number; seq: number }[];
  private readonly buffers: ResolvedEntry[][];
  /** Per partition: the last entry offered to subscribers (at start: the stream's last id). */
  private readonly seen: { ms: number; seq: number }[];
  /** The fan-out's own position (`seen` as a cursor position), from which the shared cursors are made. */
  private readonly canon: StreamPosition[];
  private readonly conns: RedisClient[] = [];
  private loops: Promise<void>[] = [];
  private ready?: Promise<void>;
  private sweeper?: NodeJS.Timeout;
  /** A subscriber whose client takes nothing for this long is closed. */
  readonly stallMs: number;
  /** Pages being made, requested ones and those of streams catching up. */
  readonly pages: PageSlots;
  /** The records the cursors of live events name (short cursors). */
  readonly checkpoints: FeedCheckpoints;

  constructor(
    readonly source: ChangeSource,
    redis: RedisClient,
    private readonly settings: Settings,
    private readonly log: Logger,
  ) {
    this.checkpoints = new FeedCheckpoints(redis, settings.CHANGES_RETENTION_HOURS * 3600_000, log);
    this.covered = Array.from({ length: source.partitions }, () => ({ ms: Number.MAX_SAFE_INTEGER, seq: 0 }));
    this.buffers = Array.from({ length: source.partitions }, () => []);
    this.stallMs = settings.CHANGES_STALL_SECONDS * 1000;
    this.pages = new PageSlots(settings.CHANGES_PAGES_PER_USER, settings.CHANGES_PAGES_AT_ONCE);
    this.seen = Array.from({ length: source.partitions }, () => ({ ms: 0, seq: 0 }));
    this.canon = Array.from({ length: source.partitions }, () => ({ ms: 0, seq: 0, sub: 0 }));
  }

  /** The last entry offered per partition (a copy). */
  seenIds(): { ms: number; seq: number }[] {
    return this.seen.map((s) => ({ ...s }));
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /** Events queued over all subscribers (bounded by subscribers × their bound). */
  get queuedTotal(): number {
    let n = 0;
    for (const s of this.subscribers) n += s.queued;
    return n;
  }

  /** Starts reading (on first use: a gateway nobody subscribes to reads nothing). */
  ensureStarted(): Promise<void> {
    this.ready ??= this.start().catch((e: unknown) => {
      // Redis out of reach: the next subscriber tries again.
      this.running = false;
      this.ready = undefined;
      throw e;
    });
    return this.ready;
  }

  private async start(): Promise<void> {
    this.running = true;
    await this.source.ready();
    const info = await this.source.info();
    const P = this.source.partitions;
    for (let p = 0; p < P; p++) {
      this.covered[p] = info[p].last;
      this.seen[p] = info[p].last;
      this.canon[p] = { ...info[p].last, sub: 0 };
    }
    this.checkpoints.reset();
    const last = info.map((i) => streamIdOf(i.last));
    // Live subscribers that stopped reading, and get no new event to notice it by.
    this.sweeper = setInterval(() => {
      for (const s of [...this.subscribers]) if (s.stalled()) s.close('slow');
    }, 1000);
    this.sweeper.unref();
    // One blocking reader over all streams; on Redis Cluster one per partition (no cross-slot reads).
    const groups = this.settings.REDIS_CLUSTER_NODES ? Array.from({ length: P }, (_, p) => [p]) : [Array.from({ length: P }, (_, p) => p)];
    for (const parts of groups) {
      const conn = connectRedis(this.settings, { blocking: true, name: 'change-feed', log: this.log });
      this.conns.push(conn);
      this.loops.push(this.read(conn, parts, last));
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.checkpoints.stop();
    clearInterval(this.sweeper);
    for (const s of [...this.subscribers]) s.close('stopped');
    for (const c of this.conns) c.disconnect();
    await Promise.all(this.loops);
    this.loops = [];
  }

  private async read(conn: RedisClient, parts: number[], last: string[]): Promise<void> {
    const streams = parts.map((p) => keys.events(p));
    /** Per stream: entries read and not yet offered (a stream read only in part may still bring one before them). */
    const held: ResolvedEntry[][] = parts.map(() => []);
    while (this.running) {
      let res: [Buffer, [Buffer, Buffer[]][]][] | null;
      const holding = held.some((h) => h.length > 0);
      try {
        // While entries are held, their stream has more (or had exactly READ_COUNT): no wait.
        res = (await (holding
          ? conn.xreadBuffer('COUNT', READ_COUNT, 'STREAMS', ...streams, ...parts.map((p) => last[p]))
          : conn.xreadBuffer('COUNT', READ_COUNT, 'BLOCK', BLOCK_MS, 'STREAMS', ...streams, ...parts.map((p) => last[p])))) as typeof res;
      } catch (e) {
        if (!this.running) return;
        this.log.warn({ err: String(e) }, 'change feed lost the event stream; reading again');
        await sleep(500);
        continue;
      }
      if (!res && !holding) continue;
      /** Each stream's index in `streams`. */
      const at = (res ?? []).map(([stream]) => streams.indexOf(stream.toString()));
      let resolved: ResolvedEntry[][];
      try {
        resolved = await Promise.all((res ?? []).map(([, raw], k) => this.source.resolve(parts[at[k]], raw)));
      } catch (e) {
        // Snapshots could not be read (Redis failing): read the same entries again.
        this.log.warn({ err: String(e) }, 'change feed could not read snapshots; retrying');
        await sleep(500);
        continue;
      }
      // A stream that gave READ_COUNT entries may have more: what it brings next may come before
      // entries of other streams in the feed's order, so those wait for it (the order of a
      // caller's events never depends on how many entries it may not read were read with them).
      const unread: FeedEntryId[] = [];
      (res ?? []).forEach(([, raw], k) => {
        const i = at[k];
        held[i].push(...resolved[k]);
        if (!raw.length) return;
        last[parts[i]] = raw[raw.length - 1][0].toString();
        if (raw.length >= READ_COUNT) {
          const { ms, seq } = parseStreamId(last[parts[i]]);
          unread.push({ p: parts[i], ms, seq });
        }
      });
      const ready = takeInFeedOrder(held, unread);
      // One offer per read: a subscriber gets what came meanwhile in one write, unless that is
      // more than OFFER_MAX_CHARS of events (each carries its content's aliases: a thousand
      // entries could join into a string past what V8 can hold); then one offer per part.
      let took = 0;
      for (let from = 0; from < ready.length; ) {
        let to = from;
        let chars = 0;
        while (to < ready.length && (to === from || chars + measureEntry(ready[to]) <= OFFER_MAX_CHARS)) chars += measureEntry(ready[to++]);
        took += await this.offerSafely(ready.slice(from, to));
        from = to;
      }
      // An offer costs a write per subscriber, however few events it carries: with thousands of
      // subscribers, reading again at once would spend the event loop on offers of one event
      // each. After offers that held the event loop long, the next read waits twice as long, so
      // offers take at most a third of the loop and carry what came meanwhile (a delay of about
      // the offers' own duration, which a few subscribers never see). Only the offers' own time
      // counts: the wait for the checkpoint's write to Redis holds nothing, and on a busy machine
      // it alone passed PACE_FROM_MS, pausing the feed of a single subscriber.
      if (took >= PACE_FROM_MS) await sleep(Math.min(PACE_MAX_MS, 2 * took));
    }
  }

  /**
   * `dispatch`, and should it fail, every subscriber is closed ('failed': each resumes from its
   * cursor) while the fan-out reads on: a failure here must not end the read loop (no later
   * event would reach anyone) nor the process. Answers the ms `dispatch` held the event loop.
   */
  private async offerSafely(entries: ResolvedEntry[]): Promise<number> {
    try {
      // Only subscribers take the shared cursors (a subscriber attaching later makes its own): a
      // web process that once served a feed request went on sealing a cursor for every commit,
      // with nobody to send it to (5 % of a process during a bulk import).
      if (this.subscribers.size > 0 && entries.length) {
        const recorded = await this.checkpoints.record(this.source.cursors, this.canon, entries);
        // An offer made without a record since (Redis Cluster: another partition's loop) went out
        // before this one: the record lacks its moves, so these events get no shared cursors.
        const cursors = recorded && recorded.skips === this.checkpoints.skipCount ? recorded.cursors : null;
        for (let i = 0; i < entries.length; i++) entries[i].cursors = cursors?.[i];
      } else {
        this.checkpoints.skip(entries);
        for (const entry of entries) entry.cursors = undefined;
      }
      if (!this.running) return 0;
      const started = performance.now();
      this.dispatch(entries);
      return performance.now() - started;
    } catch (e) {
      this.log.error({ err: e }, 'change feed offer failed; its subscribers are closed and resume from their cursors');
      for (const s of [...this.subscribers]) s.close('failed');
      return 0;
    }
  }

  /** Keeps new entries and offers them to every live subscriber. */
  private dispatch(entries: ResolvedEntry[]): void {
    if (!entries.length) return;
    for (const entry of entries) {
      this.seen[entry.p] = { ms: entry.ms, seq: entry.seq };
      // Its events' cursors (entry.cursors, recorded by offerSafely) are those of the fan-out's
      // own position as each event moves it: once for every subscriber whose position is the same.
      this.canon[entry.p] = { ms: entry.ms, seq: entry.seq, sub: 0 };
      const buf = this.buffers[entry.p];
      buf.push(entry);
      if (buf.length > BUFFER_PER_PARTITION) {
        const dropped = buf.shift()!;
        this.covered[entry.p] = { ms: dropped.ms, seq: dropped.seq };
      }
    }
    // Canonical subscribers of one group (user, contexts, filter) take the same events: chosen once.
    const chosen = new Map<string, { events: Delivered[]; canon: readonly StreamPosition[] }>();
    for (const s of this.subscribers) {
      if (!s.canonical) {
        s.offer(entries);
        continue;
      }
      const same = chosen.get(s.group);
      if (same) s.offer(entries, same);
      else {
        const events = s.offer(entries);
        if (events) chosen.set(s.group, { events, canon: this.canon });
      }
    }
  }

  /**
   * Makes a subscriber live when the buffers hold everything after its position: what it lacks
   * is offered from them at once, and every later entry as it comes. False when it must read
   * more from Redis first.
   */
  attach(s: FeedSubscriber): boolean {
    if (!this.running) return false;
    for (let p = 0; p < this.source.partitions; p++) {
      const pos = s.positions[p];
      const d = compareIds(pos, this.covered[p]);
      if (d < 0 || (d === 0 && pos.sub > 0)) return false;
    }
    // What it lacks, in the feed's order as a page would give them (not partition by partition):
    // per partition the buffered entries from its position on, found from the end (a subscriber
    // attaches near the tip; consume skips the one at its position unless it stopped inside it).
    // Not every buffered entry sorted: 10,000 subscribers attaching at once, each sorting 64 × 256
    // entries, held the event loop for seconds (first messages then timed out as unsent).
    const lacking: ResolvedEntry[] = [];
    for (let p = 0; p < this.source.partitions; p++) {
      const buf = this.buffers[p];
      let from = buf.length;
      while (from > 0 && compareIds(buf[from - 1], s.positions[p]) >= 0) from--;
      for (let i = from; i < buf.length; i++) lacking.push(buf[i]);
    }
    s.offer(lacking.sort(compareFeedOrder));
    // Caught up: where it lags the fan-out's position, nothing lies between (what did is in the
    // buffers and was just offered), so it moves up to it and shares its cursors from now on.
    for (let p = 0; p < this.source.partitions; p++) {
      if (compareIds(s.positions[p], this.canon[p]) < 0 && s.positions[p].sub === 0) s.positions[p] = { ...this.canon[p] };
    }
    s.canonical = this.isCanonical(s.positions);
    this.subscribers.add(s);
    s.live = true;
    return true;
  }

  /** Is this position the fan-out's own? */
  isCanonical(positions: readonly StreamPosition[]): boolean {
    for (let p = 0; p < this.canon.length; p++) {
      const a = positions[p];
      const b = this.canon[p];
      if (a.ms !== b.ms || a.seq !== b.seq || a.sub !== b.sub) return false;
    }
    return true;
  }

  detach(s: FeedSubscriber): void {
    this.subscribers.delete(s);
  }
}

/**
 * Change-feed pages being made at once: at most `perUser` of one user and `total` in the process
 * (CHANGES_PAGES_PER_USER, CHANGES_PAGES_AT_ONCE). Each holds what it examined until it is sent
 * (PAGE_EXAMINE_BYTES). A requested page past either bound is refused (`run`: 429, 503); a stream
 * catching up (SSE, WebSocket, long poll) waits for a slot (`wait`), in the order they came. Before
 * the seventeenth session's review, streams made their pages outside both bounds: 16 SSE streams
 * of one user made 16 pages at once.
 */
export class PageSlots {
  private readonly held = new KeyedCounts();
  private readonly waiting: { userId: string; go: () => void }[] = [];

  constructor(
    private readonly perUser: number,
    private readonly total: number,
  ) {}

  /** Makes a requested page now, or refuses: 429 past the user's bound, 503 past the process's. */
  async run<T>(userId: string, make: () => Promise<T>): Promise<T> {
    if (this.held.get(userId) >= this.perUser)
      throw new AppError('TOO_MANY_REQUESTS', `At most ${this.perUser} change-feed pages of one user are made at once`, {}, PAGE_RETRY_AFTER_SECONDS);
    if (this.held.total >= this.total)
      throw new AppError('UNAVAILABLE', 'Too many change-feed pages are being made: retry shortly', {}, PAGE_RETRY_AFTER_SECONDS);
    this.held.add(userId);
    return await this.holding(userId, make);
  }

  /** Makes a stream's page once a slot is free. */
  async wait<T>(userId: string, make: () => Promise<T>): Promise<T> {
    // Not before a stream of the same user that waits already.
    if (this.free(userId) && !this.waiting.some((w) => w.userId === userId)) this.held.add(userId);
    // The slot is taken for the waiter when it is given (wake), before anything else can take it.
    else await new Promise<void>((go) => this.waiting.push({ userId, go }));
    return this.holding(userId, make);
  }

  /**
   * Makes a page ahead of its request (PagesAhead) in a slot of the user's, only while that leaves
   * the user and the process a slot for a request and no stream waits: null, made not at all,
   * otherwise. Pages made ahead count in both bounds: before (a review note of the twenty-third
   * session), they were bounded only by the process's four made ahead at once, so a user with
   * CHANGES_PAGES_PER_USER requests under way had as many pages again made for them.
   */
  spare<T>(userId: string, make: () => Promise<T>): Promise<T> | null {
    if (this.waiting.length || this.held.get(userId) + 1 >= this.perUser || this.held.total + 1 >= this.total) return null;
    this.held.add(userId);
    return this.holding(userId, make);
  }

  /** Pages being made (tests, metrics). */
  get making(): number {
    return this.held.total;
  }

  private free(userId: string): boolean {
    return this.held.get(userId) < this.perUser && this.held.total < this.total;
  }

  private async holding<T>(userId: string, make: () => Promise<T>): Promise<T> {
    try {
      return await make();
    } finally {
      this.held.remove(userId);
      this.wake();
    }
  }

  /** Gives free slots to the waiters that may take them, first come first. */
  private wake(): void {
    for (let i = 0; i < this.waiting.length && this.held.total < this.total; ) {
      const w = this.waiting[i];
      if (this.held.get(w.userId) >= this.perUser) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      this.held.add(w.userId);
      w.go();
    }
  }
}

/** Retry-After of a page refused for the bounds of PageSlots. */
const PAGE_RETRY_AFTER_SECONDS = 5;
