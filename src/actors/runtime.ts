import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { pack, unpack } from '../adapters/codec.js';
import { keys, ACTOR_GROUP, connectRedis, type RedisClient } from '../adapters/redis.js';
import { ensureGroup, type StreamEntry } from '../adapters/redis-streams.js';
import { partitionOf } from '../adapters/ids.js';
import type { Logger } from '../adapters/log.js';
import type { Settings } from '../../config/settings.js';
import { AppError, type WireError } from '../errors.js';
import { sleep } from '../wait.js';
import { ConsumedTrimmer, readGroup, readOrRetry, type ReadRetry } from './stream-reads.js';

/** Every command names its content and a command id; the gateway adds where to reply and its deadline. */
export interface CommandBase {
  id: string;
  cid: string;
  replyTo?: string;
  requestId?: string;
  /**
   * Until when (epoch ms) an actor may start the command: the gateway sets it when it sends
   * (sent + ACTOR_REPLY_TIMEOUT_MS) and answers 503 once it has passed (plus
   * ACTOR_DEADLINE_GRACE_MS). An actor refuses a command past it (`pastDeadline`): a 503 means
   * "not applied", and a command never runs with a principal older than this. A command
   * without one (appended by hand, or by a gateway of an earlier release) has none.
   */
  deadline?: number;
}

export type Reply = { id: string; ok: true; value: unknown } | { id: string; ok: false; error: WireError };

export interface ActorContext {
  partition: number;
  owner: string;
  /** The command's stream entry; the commit script acknowledges it ('' for a local command). */
  entryId: string;
  /**
   * A command handed over in process by a gateway of this process (no stream entry): nobody
   * will replay it, so its commit records no reply.
   */
  local?: boolean;
}

/**
 * What a partition's actor does with one command. It returns the reply, saying whether its
 * commit already acknowledged the entry and recorded the reply, or 'lease-lost' when the
 * commit found that this process no longer owns the partition.
 */
export interface CommandHandler<C extends CommandBase = CommandBase> {
  handle(cmd: C, ctx: ActorContext): Promise<{ reply: Reply; committed: boolean; packed?: Buffer } | 'lease-lost'>;
  /**
   * Before a retry: when the command's commit took place although its answer was lost (Redis
   * restarting), finishes the idempotent steps that follow that commit and answers the reply;
   * null when the commit did not take place and the command must run again.
   */
  resumeApplied?(cmd: C): Promise<Reply | null>;
  /**
   * The reply a command's recorded reply stands for (`recordedReply`: a record may name what its
   * commit wrote rather than hold it); without this, the recorded reply is the reply.
   */
  replayOf?(recorded: Buffer): Promise<Reply | Buffer>;
}

const REPLY_STREAM_MAXLEN = 100000;
const BLOCK_MS = 2000;

/**
 * Sends the reply of command `id` to the gateway that is waiting for it (its own reply stream),
 * the id in a field of its own (`i`) so that a gateway no longer waiting for it (it answered
 * from the recorded reply already, or 503) never decodes the reply. The gateway keeps a TTL on
 * its stream, so the stream of a gateway that died goes away.
 */
export function sendReply(redis: RedisClient, replyTo: string | undefined, id: string, reply: Reply | Buffer): void {
  if (!replyTo) return;
  const body = Buffer.isBuffer(reply) ? reply : pack(reply);
  redis.xadd(replyTo, 'MAXLEN', '~', REPLY_STREAM_MAXLEN, '*', 'i', id, 'r', body).catch(() => undefined);
}

/**
 * The refusal of a command past its deadline (nothing of it ran, nothing is committed), or null
 * when it may run. The check of the deadline, with this host's clock (NTP-synced with the
 * gateway's; the gateway waits ACTOR_DEADLINE_GRACE_MS longer): before an actor starts a command
 * (`PartitionLoop.attempt`, every kind, local and streamed), and for a stream command again just
 * before a main commit (`ContentActor.commitRaw`: lifecycle hooks may have held it long, and
 * its gateway stops waiting at the deadline; a local command's gateway waits for the answer).
 * A deadline that is not a number counts as past. The answer is the gateway's own 503.
 */
export function pastDeadline(cmd: CommandBase, now: number, partition?: number): Reply | null {
  if (cmd.deadline === undefined || (typeof cmd.deadline === 'number' && now <= cmd.deadline)) return null;
  return { id: cmd.id, ok: false, error: noActorInTime(partition).toWire() };
}

/** The 503 of a command not applied in time: the gateway's timeout and an actor's refusal past the deadline answer the same. */
export function noActorInTime(partition?: number): AppError {
  return new AppError('UNAVAILABLE', 'No actor answered in time', partition === undefined ? {} : { partition }, 1);
}

/**
 * The reply a command's commit recorded (packed), or null: a stream command's commit script
 * records its reply under `done:{p}:<id>` in the same atomic step, so a recorded reply means the
 * commit took place. Read by the actors before running a command again and by a gateway whose
 * command waits unusually long (the actor died between its commit and its reply). What it holds
 * is the handler's (`CommandHandler.replayOf`; the content actor's: src/actors/content/replays.ts).
 */
export function recordedReply(redis: RedisClient, partition: number, commandId: string): Promise<Buffer | null> {
  return redis.getBuffer(keys.done(partition, commandId));
}

/**
 * The actor runtime of one process: it owns a fair share of the P partitions through leases,
 * reads each owned partition's command stream in batches (one blocking reader per partition,
 * in the `actors` consumer group), runs the commands of one content in order and those of
 * different contents side by side, reclaims the pending commands of a dead owner (XAUTOCLAIM)
 * and replays them, and moves commands that keep failing to the dead-letter stream.
 */
export class ActorHost<C extends CommandBase = CommandBase> {
  readonly owner: string;
  private readonly owned = new Map<number, PartitionLoop<C>>();
  /**
   * On one Redis server, one blocking read serves every owned partition; on Redis Cluster each
   * partition's stream lives in its own slot, so each partition reads its own.
   */
  private readonly shared?: SharedCommandReader;
  private ticker?: NodeJS.Timeout;
  private ticking = false;
  private stopping = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly handler: CommandHandler<C>,
    private readonly log: Logger,
  ) {
    this.owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    if (!settings.REDIS_CLUSTER_NODES) this.shared = new SharedCommandReader(redis, settings, this.owner, log);
  }

  /** Joins the actors and takes partitions; resolves once the first share is taken. */
  async start(): Promise<void> {
    await this.tick();
    this.ticker = setInterval(() => void this.tick(), Math.max(100, Math.floor(this.settings.LEASE_MS / 3)));
    this.log.info({ owner: this.owner, partitions: [...this.owned.keys()].length }, 'actor host started');
  }

  /**
   * Runs a command here when this process owns its partition, in order with the partition's
   * stream commands of the same content; null when it does not (then it goes by the stream).
   * A gateway in the same process skips the mailbox round trips this way. Nothing is lost if
   * the process dies: the client's connection dies with it, before any acknowledgement.
   */
  runLocal(cmd: C): Promise<Reply | null> {
    const loop = this.owned.get(partitionOf(cmd.cid, this.settings.PARTITIONS));
    return loop ? loop.runLocal(cmd) : Promise.resolve(null);
  }

  /** Partitions this process owns now. */
  partitions(): number[] {
    return [...this.owned.keys()].sort((a, b) => a - b);
  }

  /** Graceful stop: finishes the batches in hand, then hands every partition over. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.ticker) clearInterval(this.ticker);
    const loops = [...this.owned.values()];
    // The loops first (each stops taking commands at once), then the shared read they leave.
    const stopped = Promise.all(loops.map((l) => l.stop()));
    await this.shared?.stop();
    await stopped;
    await Promise.all(loops.map((l) => this.redis.releaseLease(keys.lease(l.partition), this.owner).catch(() => 0)));
    this.owned.clear();
    await this.redis.zrem(keys.members, this.owner).catch(() => 0);
    this.log.info({ owner: this.owner }, 'actor host stopped, partitions handed over');
  }

  /** Heartbeat, lease renewal, and taking or giving partitions to keep a fair share. */
  private async tick(): Promise<void> {
    if (this.ticking || this.stopping) return;
    this.ticking = true;
    try {
      const now = Date.now();
      const P = this.settings.PARTITIONS;
      await this.redis.zadd(keys.members, now, this.owner);
      // A member silent for a whole lease (three missed heartbeats) is gone: its leases have
      // expired too, so the survivors' shares grow at once and they take its partitions over.
      await this.redis.zremrangebyscore(keys.members, '-inf', now - this.settings.LEASE_MS);
      const members = Math.max(1, await this.redis.zcard(keys.members));
      const share = Math.ceil(P / members);

      const renewals = await Promise.all(
        [...this.owned.keys()].map(async (p) => [p, await this.redis.renewLease(keys.lease(p), this.owner, this.settings.LEASE_MS)] as const),
      );
      for (const [p, ok] of renewals) {
        if (!ok) {
          this.log.warn({ partition: p }, 'partition lease lost');
          this.owned.get(p)?.abandon();
          this.owned.delete(p);
        }
      }

      const before = this.owned.size;
      if (this.owned.size < share) {
        const start = Math.floor(Math.random() * P);
        const candidates: number[] = [];
        for (let i = 0; i < P; i++) {
          const p = (start + i) % P;
          if (!this.owned.has(p)) candidates.push(p);
        }
        const results = await Promise.all(
          candidates.map(async (p) => [p, await this.redis.set(keys.lease(p), this.owner, 'PX', this.settings.LEASE_MS, 'NX')] as const),
        );
        for (const [p, ok] of results) {
          if (ok !== 'OK') continue;
          if (this.owned.size >= share || this.stopping) {
            await this.redis.releaseLease(keys.lease(p), this.owner);
            continue;
          }
          const loop = new PartitionLoop<C>(p, this.owner, this.redis, this.settings, this.handler, this.log, this.shared);
          this.owned.set(p, loop);
          loop.start();
          this.log.debug({ partition: p, owner: this.owner }, 'partition taken');
        }
      } else if (this.owned.size > share) {
        const extra = [...this.owned.keys()].slice(share);
        for (const p of extra) {
          const loop = this.owned.get(p)!;
          this.owned.delete(p);
          void loop
            .stop()
            .then(() => this.redis.releaseLease(keys.lease(p), this.owner))
            .then(() => this.log.info({ partition: p }, 'partition handed over'));
        }
      }
      if (this.owned.size !== before) this.log.info({ owner: this.owner, partitions: this.owned.size, members }, 'partition share changed');
    } catch (e) {
      this.log.error({ err: e }, 'actor host tick failed');
    } finally {
      this.ticking = false;
    }
  }
}

/** Where a partition's loop takes its commands from: its own blocking read, or its share of one. */
interface CommandSource {
  /** The next entries; null when none came within the block time, when a read failed, or after `close`. */
  next(): Promise<StreamEntry[] | null>;
  close(): void;
}

/** A partition's own blocking read of its command stream (Redis Cluster: each stream has its own slot). */
class OwnCommandRead implements CommandSource {
  private readonly conn: RedisClient;
  private open = true;
  private readonly retry: ReadRetry;
  private readonly query;

  constructor(partition: number, owner: string, redis: RedisClient, settings: Settings, log: Logger) {
    this.conn = connectRedis(settings, { blocking: true, name: `actor-p${partition}`, log });
    this.retry = {
      running: () => this.open,
      warn: (e) => {
        log.warn({ err: e, partition }, 'command read failed, retrying');
        regroupIfLost(redis, e, [partition]);
      },
      retryMs: 200,
    };
    this.query = { group: ACTOR_GROUP, consumer: owner, count: settings.ACTOR_BATCH, blockMs: BLOCK_MS, streams: [keys.commands(partition)], ids: ['>'] };
  }

  async next(): Promise<StreamEntry[] | null> {
    const res = await readOrRetry(() => readGroup(this.conn, this.query), this.retry);
    return res !== 'failed' && res?.[0][1].length ? res[0][1] : null;
  }

  /** Once: a disconnect() of a closed connection would add a listener to its socket. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    this.conn.disconnect();
  }
}

/** A partition's share of the shared read: the entries read for it, waiting for its loop. */
class QueuedCommands implements CommandSource {
  entries: StreamEntry[] = [];
  closed = false;
  private waiter?: (entries: StreamEntry[] | null) => void;

  constructor(
    readonly partition: number,
    private readonly taken: () => void,
  ) {}

  push(entries: StreamEntry[]): void {
    if (this.closed) return;
    for (const e of entries) this.entries.push(e);
    this.handOver();
  }

  /** Once closed, null after the block time like an empty read: a loop still running never spins on it. */
  next(): Promise<StreamEntry[] | null> {
    if (!this.closed && this.entries.length) return Promise.resolve(this.take());
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve(null);
      }, BLOCK_MS);
      if (this.closed) return;
      this.waiter = (v) => {
        clearTimeout(timer);
        this.waiter = undefined;
        resolve(v);
      };
    });
  }

  close(): void {
    this.closed = true;
    this.entries = [];
    this.waiter?.(null);
  }

  private handOver(): void {
    if (this.waiter && this.entries.length) this.waiter(this.take());
  }

  private take(): StreamEntry[] {
    const batch = this.entries;
    this.entries = [];
    this.taken();
    return batch;
  }
}

/**
 * One blocking XREADGROUP over the command streams of every partition this process owns, on one
 * Redis server (issue 23). With a blocking read per partition, each command woke its partition's
 * reader alone: one read, one reply and one wake-up per command, on each of 32 connections. One
 * read answers for every partition that has commands, and hands each its entries.
 *
 * A partition whose loop has ACTOR_BATCH entries waiting is left out of the next read until it
 * takes them (back-pressure, as a partition's own reader reads again only after its batch). A
 * read is over the partitions readable when it started: when one joins, leaves, or becomes
 * readable again while a read blocks, the read is ended (CLIENT UNBLOCK) and made anew, so a new
 * partition's commands do not wait for the block to time out.
 */
class SharedCommandReader {
  private readonly conn: RedisClient;
  private clientId: number | null = null;
  private readonly queues = new Map<number, QueuedCommands>();
  private running = true;
  private loop?: Promise<void>;
  /** The read in progress: its sequence number and partitions; null between reads. */
  private reading: { seq: number; partitions: Set<number> } | null = null;
  private seq = 0;
  /** Resolves the wait of a reader that had no readable partition. */
  private idle?: () => void;
  /** Settles when the read in progress has ended. */
  private readDone: Promise<void> = Promise.resolve();
  /**
   * Resolves at `stop`: the loop ends then, whatever its command does. ioredis did not always
   * settle a command sent on a connection still connecting when it was closed (a host stopped
   * right after it started): the stop waited for it for good (seen once in eight runs).
   */
  private readonly stopped: Promise<'stopped'>;
  private markStopped!: () => void;

  constructor(
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly owner: string,
    private readonly log: Logger,
  ) {
    this.stopped = new Promise((resolve) => (this.markStopped = () => resolve('stopped')));
    this.conn = connectRedis(settings, { blocking: true, name: 'actor-commands', log });
    // A new connection has a new client id: asked again before the next read.
    this.conn.on('close', () => (this.clientId = null));
  }

  /** The entries of partition `p` from now on; its consumer group exists. */
  join(p: number): QueuedCommands {
    const q = new QueuedCommands(p, () => this.changed());
    this.queues.set(p, q);
    this.loop ??= this.run().catch((e: unknown) => this.log.error({ err: e }, 'command reader failed'));
    this.changed();
    return q;
  }

  /**
   * Partition `p` is read no more. Resolves once no read in progress covers it: entries read for
   * it after that stay pending in the group, and the partition's next owner claims them.
   */
  async leave(p: number): Promise<void> {
    this.queues.get(p)?.close();
    this.queues.delete(p);
    if (this.reading?.partitions.has(p)) {
      this.changed();
      await this.readDone;
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.markStopped();
    for (const q of this.queues.values()) q.close();
    this.queues.clear();
    this.idle?.();
    this.conn.disconnect();
    await this.loop;
  }

  private readable(): number[] {
    const limit = this.settings.ACTOR_BATCH;
    return [...this.queues.values()].filter((q) => q.entries.length < limit).map((q) => q.partition);
  }

  /** The readable partitions may differ from those of the read in progress: end it, or wake the idle reader. */
  private changed(): void {
    if (this.idle) {
      this.idle();
      return;
    }
    const r = this.reading;
    if (!r) return;
    const now = this.readable();
    if (now.length === r.partitions.size && now.every((p) => r.partitions.has(p))) return;
    void this.unblock(r.seq);
  }

  /**
   * Ends read `seq` from the main connection. The UNBLOCK can reach Redis before the read it
   * means (two connections): while that read has not ended, it is tried again shortly.
   */
  private async unblock(seq: number): Promise<void> {
    for (let wait = 2; this.running && this.reading?.seq === seq; wait = Math.min(50, wait * 2)) {
      if (this.clientId !== null && (await this.redis.client('UNBLOCK', this.clientId).catch(() => 0)) === 1) return;
      await sleep(wait);
    }
  }

  private async run(): Promise<void> {
    let parts: number[] = [];
    const retry: ReadRetry = {
      running: () => this.running,
      warn: (e) => {
        this.log.warn({ err: e }, 'command read failed, retrying');
        regroupIfLost(this.redis, e, parts);
      },
      retryMs: 200,
    };
    while (this.running) {
      if (this.clientId === null) {
        const id = await Promise.race([readOrRetry(() => this.conn.client('ID'), retry), this.stopped]);
        if (id === 'stopped') break;
        if (id === 'failed') continue;
        this.clientId = Number(id);
      }
      // Taken just before the read is sent: a change after this point ends the read.
      parts = this.readable();
      if (!parts.length) {
        await new Promise<void>((resolve) => (this.idle = resolve));
        this.idle = undefined;
        continue;
      }
      const streams = parts.map((p) => keys.commands(p));
      let ended!: () => void;
      this.readDone = new Promise<void>((resolve) => (ended = resolve));
      this.reading = { seq: ++this.seq, partitions: new Set(parts) };
      const res = await Promise.race([
        readOrRetry(
          () =>
            readGroup(this.conn, {
              group: ACTOR_GROUP,
              consumer: this.owner,
              count: this.settings.ACTOR_BATCH,
              blockMs: BLOCK_MS,
              streams,
              ids: parts.map(() => '>'),
            }),
          retry,
        ),
        this.stopped,
      ]);
      this.reading = null;
      if (res === 'stopped') {
        ended();
        break;
      }
      if (res !== 'failed' && res) {
        for (const [stream, entries] of res) {
          // A partition that left meanwhile: its entries stay pending for its next owner.
          if (entries.length) this.queues.get(parts[streams.indexOf(stream.toString())])?.push(entries);
        }
      }
      ended();
    }
  }
}

/** One owned partition: its commands (read by its own reader or the shared one), recovery of pending commands, batches in order. */
class PartitionLoop<C extends CommandBase> {
  private source?: CommandSource;
  private running = true;
  private done?: Promise<void>;
  private readonly attempts = new Map<string, number>();
  /** The tail of each content's chain: its commands run one after another, in arrival order. */
  private readonly tails = new Map<string, Promise<unknown>>();
  private readonly trimmer: ConsumedTrimmer;

  constructor(
    readonly partition: number,
    private readonly owner: string,
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly handler: CommandHandler<C>,
    private readonly log: Logger,
    private readonly shared?: SharedCommandReader,
  ) {
    // Never past a pending command (one a previous owner took and did not run): it is reclaimed.
    this.trimmer = new ConsumedTrimmer(redis, keys.commands(partition), Date.now, () => oldestPending(redis, keys.commands(partition)));
  }

  start(): void {
    this.done = this.run().catch((e) => this.log.error({ err: e, partition: this.partition }, 'partition loop failed'));
  }

  /** Stops after the batch in hand. */
  async stop(): Promise<void> {
    this.running = false;
    this.source?.close();
    await this.shared?.leave(this.partition);
    await this.done;
  }

  /**
   * Stops at once: another process owns the partition now, its commits would be refused anyway.
   * Once: every command in flight that finds the lease lost calls it (a bulk import has hundreds).
   */
  abandon(): void {
    if (!this.running) return;
    this.running = false;
    this.source?.close();
    void this.shared?.leave(this.partition);
  }

  /** Runs `work` after every earlier command of the same content (stream or local). */
  private serial<T>(key: string, work: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(work);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }

  /** A command from a gateway in this process; null when the partition is being given up. */
  runLocal(cmd: C): Promise<Reply | null> {
    if (!this.running) return Promise.resolve(null);
    return this.serial(cmd.cid, async () => {
      if (!this.running) return null;
      const ctx: ActorContext = { partition: this.partition, owner: this.owner, entryId: '', local: true };
      for (let attempt = 1; ; attempt++) {
        try {
          const out = await this.attempt(cmd, ctx, attempt > 1);
          if (out === 'lease-lost') {
            this.abandon();
            return null;
          }
          // Only a stream command's answer can be a recorded (packed) reply; kept general all the same.
          return Buffer.isBuffer(out.reply) ? unpack<Reply>(out.reply) : out.reply;
        } catch (e) {
          this.log.error({ err: e, partition: this.partition, command: cmd.id, requestId: cmd.requestId, attempt }, 'command failed');
          if (attempt >= this.settings.ACTOR_MAX_ATTEMPTS || !this.running) {
            return { id: cmd.id, ok: false, error: new AppError('INTERNAL', 'The command could not be processed').toWire() };
          }
          await sleep(50 * attempt);
        }
      }
    });
  }

  /**
   * One attempt of a command, local or from the stream. A copy of a command committed before (a
   * client or gateway retry; `recorded` is its recorded reply, read with the batch) answers that
   * reply: the steps that followed its commit ran with the original, and later commands of the
   * content may have run since, so nothing of it runs again. A retry first asks whether the
   * failed attempt's commit took place with its answer lost (appliedReply); then it answers that
   * commit's reply instead of running the command again, which would answer 409.
   * Only then the deadline: a command past it is refused before the actor does anything with it
   * (`expired`), so a copy or a retry of a command that did commit still answers that commit.
   * `committed: false` when the entry in hand still needs its acknowledgement.
   */
  private async attempt(
    cmd: C,
    ctx: ActorContext,
    retry: boolean,
    recorded: Buffer | null = null,
  ): Promise<{ reply: Reply | Buffer; committed: boolean; expired?: true; packed?: Buffer } | 'lease-lost'> {
    if (recorded) return { reply: await this.replayOf(recorded), committed: false };
    if (retry) {
      const applied = await this.appliedReply(cmd, ctx);
      if (applied) return { reply: applied, committed: false };
    }
    const refused = pastDeadline(cmd, Date.now(), this.partition);
    if (refused) {
      this.log.warn(
        { partition: this.partition, command: cmd.id, requestId: cmd.requestId, lateMs: Date.now() - Number(cmd.deadline) },
        'command past its deadline refused',
      );
      return { reply: refused, committed: false, expired: true };
    }
    return this.handler.handle(cmd, ctx);
  }

  /**
   * Was the command applied already? Its reply, or null when it must run. A stream command's
   * commit records its reply in the same atomic step: when there is one, the steps that follow
   * the commit are finished (`resumeApplied`) and the recorded reply is the answer. A local
   * command's commit records none: `resumeApplied` asks the content's head instead.
   */
  private async appliedReply(cmd: C, ctx: ActorContext): Promise<Reply | Buffer | null> {
    if (ctx.local) return (await this.handler.resumeApplied?.(cmd)) ?? null;
    const reply = await recordedReply(this.redis, this.partition, cmd.id);
    if (!reply) return null;
    await this.handler.resumeApplied?.(cmd);
    return this.replayOf(reply);
  }

  /** The reply a recorded reply stands for (`CommandHandler.replayOf`). */
  private replayOf(recorded: Buffer): Promise<Reply | Buffer> {
    return this.handler.replayOf ? this.handler.replayOf(recorded) : Promise.resolve(recorded);
  }

  private get stream(): string {
    return keys.commands(this.partition);
  }

  private async run(): Promise<void> {
    await ensureGroup(this.redis, this.stream, ACTOR_GROUP);
    await this.recover();
    if (!this.running) return;
    // Read only once the group exists (a shared read naming a stream without it fails whole).
    this.source = this.shared ? this.shared.join(this.partition) : new OwnCommandRead(this.partition, this.owner, this.redis, this.settings, this.log);
    let reclaimed = Date.now();
    while (this.running) {
      const entries = await this.source.next();
      if (entries?.length && this.running) await this.processBatch(entries);
      // A previous owner whose blocked read Redis served after this one took the partition (it
      // had not yet seen its lease go) holds commands it will never run: take them once they
      // have waited a lease. Between batches, so this loop runs them like any other.
      if (this.running && Date.now() - reclaimed >= this.settings.LEASE_MS / 2) {
        reclaimed = Date.now();
        await this.recover(this.settings.LEASE_MS).catch((e: unknown) =>
          this.log.warn({ err: e, partition: this.partition }, 'reclaiming stranded commands failed'),
        );
      }
    }
  }

  /**
   * Takes over the pending commands of other consumers idle for at least `minIdleMs` (0: all of
   * a previous owner's, when the partition is taken) and replays them, oldest first.
   */
  private async recover(minIdleMs = 0): Promise<void> {
    let cursor = '0-0';
    let recovered = 0;
    do {
      const claimed = (await this.redis.claimIfOwnerBuffer(
        keys.lease(this.partition),
        this.stream,
        this.owner,
        ACTOR_GROUP,
        minIdleMs,
        cursor,
        this.settings.ACTOR_BATCH,
      )) as [Buffer, StreamEntry[]] | null;
      // The lease went: the tick gives the partition up.
      if (!claimed) break;
      const [next, entries] = claimed;
      cursor = next.toString();
      const live = entries.filter((e) => e?.[1]);
      if (live.length) {
        const counts = await this.deliveryCounts(live[0][0].toString(), live[live.length - 1][0].toString());
        for (const [id] of live) this.attempts.set(id.toString(), Math.max(0, (counts.get(id.toString()) ?? 1) - 1));
        recovered += live.length;
        await this.processBatch(live);
      }
    } while (cursor !== '0-0' && this.running);
    if (recovered) this.log.info({ partition: this.partition, recovered }, 'pending commands recovered from previous owner');
  }

  private async deliveryCounts(from: string, to: string): Promise<Map<string, number>> {
    const rows = (await this.redis.xpending(this.stream, ACTOR_GROUP, from, to, this.settings.ACTOR_BATCH)) as [string, string, number, number][];
    return new Map(rows.map((r) => [r[0], Number(r[3])]));
  }

  private async processBatch(entries: StreamEntry[]): Promise<void> {
    const items: { entryId: string; raw: Buffer | undefined; cmd?: C }[] = entries.map(([id, fields]) => {
      const raw = fieldOf(fields, 'm');
      let cmd: C | undefined;
      try {
        cmd = raw ? unpack<C>(raw) : undefined;
      } catch {
        cmd = undefined;
      }
      return { entryId: id.toString(), raw, cmd: cmd && typeof cmd.id === 'string' && typeof cmd.cid === 'string' ? cmd : undefined };
    });

    // Commands already committed (a replay after a crash) answer their recorded reply. The
    // done keys share the partition's hash tag, so one MGET reads them all.
    const ids = items.filter((it) => it.cmd).map((it) => keys.done(this.partition, it.cmd!.id));
    const found = ids.length ? await this.redis.mgetBuffer(...ids) : [];
    let k = 0;
    const done = items.map((it) => (it.cmd ? found[k++] : null));

    // One chain per content keeps its commands in order; different contents run side by side.
    const seen = new Set<string>();
    await Promise.all(
      items.map((it, i) => {
        // The same command twice in one batch (a client or gateway retry): the later one runs
        // after the first on the same chain, and must look for the first one's recorded reply.
        const again = it.cmd !== undefined && seen.has(it.cmd.id);
        if (it.cmd) seen.add(it.cmd.id);
        return this.serial(it.cmd?.cid ?? `\u0000${it.entryId}`, async () =>
          this.processOne(it.entryId, it.raw, it.cmd, again ? await recordedReply(this.redis, this.partition, it.cmd!.id) : done[i]),
        );
      }),
    );
    if (this.running) this.trimmer.consumed(items[items.length - 1].entryId, items.length);
  }

  private async processOne(entryId: string, raw: Buffer | undefined, cmd: C | undefined, recorded: Buffer | null): Promise<void> {
    if (!this.running) return;
    if (!cmd) {
      await this.deadLetter(entryId, raw, undefined, 'unreadable command');
      return;
    }
    const ctx: ActorContext = { partition: this.partition, owner: this.owner, entryId };
    for (;;) {
      const attempt = (this.attempts.get(entryId) ?? 0) + 1;
      // A copy of a command committed before answers its recorded reply, however often it was tried.
      if (attempt > this.settings.ACTOR_MAX_ATTEMPTS && !recorded) {
        await this.deadLetter(entryId, raw, cmd, `failed ${attempt - 1} times`);
        return;
      }
      this.attempts.set(entryId, attempt);
      try {
        const out = await this.attempt(cmd, ctx, attempt > 1, recorded);
        if (out === 'lease-lost') {
          this.log.warn({ partition: this.partition, command: cmd.id, requestId: cmd.requestId }, 'commit refused: partition lease lost');
          this.abandon();
          return;
        }
        // A refusal past the deadline reaches a gateway still waiting (within the grace); later
        // its gateway answered 503 already, or is gone, and its reply stream is not made anew.
        // A committed reply comes packed already (`packed`): it is not packed again.
        if (!out.expired || Date.now() <= Number(cmd.deadline) + this.settings.ACTOR_DEADLINE_GRACE_MS)
          sendReply(this.redis, cmd.replyTo, cmd.id, out.packed ?? out.reply);
        if (!out.committed) await this.redis.xack(this.stream, ACTOR_GROUP, entryId);
        this.attempts.delete(entryId);
        return;
      } catch (e) {
        this.log.error({ err: e, partition: this.partition, command: cmd.id, requestId: cmd.requestId, attempt }, 'command failed');
        if (!this.running) return;
        await sleep(50 * attempt);
      }
    }
  }

  /** A command that keeps failing goes aside with its reason; the partition goes on. */
  private async deadLetter(entryId: string, raw: Buffer | undefined, cmd: C | undefined, reason: string): Promise<void> {
    this.attempts.delete(entryId);
    await this.redis.xadd(keys.deadLetter(this.partition), 'MAXLEN', '~', 100000, '*', 'm', raw ?? '', 'reason', reason, 'entry', entryId);
    await this.redis.xack(this.stream, ACTOR_GROUP, entryId);
    this.log.error({ partition: this.partition, entry: entryId, command: cmd?.id, requestId: cmd?.requestId, reason }, 'command moved to dead-letter stream');
    if (cmd)
      sendReply(this.redis, cmd.replyTo, cmd.id, { id: cmd.id, ok: false, error: new AppError('INTERNAL', 'The command could not be processed').toWire() });
  }
}

/**
 * A read that failed with NOGROUP names a stream that lost its group or is gone (a Redis that
 * restarted without its data): the groups are made again, so the actors read again once the
 * gateways append commands, instead of failing every read until a restart.
 */
function regroupIfLost(redis: RedisClient, e: unknown, partitions: number[]): void {
  if (!String(e).includes('NOGROUP')) return;
  for (const p of partitions) void ensureGroup(redis, keys.commands(p), ACTOR_GROUP).catch(() => undefined);
}

function fieldOf(fields: Buffer[], name: string): Buffer | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i].toString() === name) return fields[i + 1];
  return undefined;
}

/** The id of the oldest entry of the actors' group not yet acknowledged, or null. */
async function oldestPending(redis: RedisClient, stream: string): Promise<string | null> {
  const summary = (await redis.xpending(stream, ACTOR_GROUP)) as [number, string | null, string | null, unknown];
  return summary[0] > 0 ? summary[1] : null;
}
