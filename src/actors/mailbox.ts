import { randomBytes } from 'node:crypto';
import { pack, unpack } from '../adapters/codec.js';
import { keys, connectRedis, type RedisClient } from '../adapters/redis.js';
import { partitionOf } from '../adapters/ids.js';
import type { Logger } from '../adapters/log.js';
import type { Settings } from '../../config/settings.js';
import { AppError } from '../errors.js';
import { noActorInTime, recordedReply, type CommandBase, type Reply } from './runtime.js';
import { ConsumedTrimmer, readOrRetry, type ReadRetry } from './stream-reads.js';
import type { ContentStore } from '../adapters/content-store.js';
import { replyOf, type RecordedReply } from './content/replays.js';

const REPLY_TTL_MS = 300000;

interface Waiting {
  resolve: (v: unknown) => void;
  reject: (e: AppError) => void;
  timer: NodeJS.Timeout;
  partition: number;
  since: number;
}

/** A command waiting longer than this has its recorded reply looked up (see sweepLostReplies). */
const LOST_REPLY_AFTER_MS = 1500;

/**
 * The gateway's side of the actors: it appends a command to the mailbox of the content's
 * partition and waits, bounded in time and in number, for the reply on its own reply stream.
 */
export class Mailbox {
  readonly gatewayId = randomBytes(8).toString('hex');
  private readonly replyStream = keys.replies(this.gatewayId);
  private readonly waiting = new Map<string, Waiting>();
  private readonly reader: RedisClient;
  private running = true;
  private loop?: Promise<void>;

  constructor(
    private readonly redis: RedisClient,
    private readonly settings: Settings,
    private readonly log: Logger,
    /**
     * Where a recorded reply's answer is read back from (`replyOf`): the platform's store, which
     * reads a revision the archiver moved meanwhile from the archive.
     */
    private readonly store: ContentStore,
    /** The actor host of this process, when it runs one: commands of its partitions skip the streams. */
    private readonly local?: { runLocal(cmd: CommandBase): Promise<Reply | null> },
  ) {
    this.reader = connectRedis(settings, { blocking: true, name: `replies-${this.gatewayId}`, log: this.log });
  }

  private ttlTimer?: NodeJS.Timeout;
  private sweepTimer?: NodeJS.Timeout;

  start(): void {
    this.loop = this.readReplies();
    // The reply stream outlives a gateway that dies by at most REPLY_TTL_MS.
    const touch = () => void this.redis.pexpire(this.replyStream, REPLY_TTL_MS).catch(() => undefined);
    this.ttlTimer = setInterval(touch, REPLY_TTL_MS / 3);
    this.ttlTimer.unref();
    this.sweepTimer = setInterval(() => void this.sweepLostReplies(), LOST_REPLY_AFTER_MS / 2);
    this.sweepTimer.unref();
  }

  /**
   * An actor that dies after its commit and before its reply leaves the command committed and
   * acknowledged, so nobody replays it; its reply is recorded with the commit, though. Commands
   * waiting unusually long look theirs up, so the client gets the answer instead of a 503.
   */
  private async sweepLostReplies(): Promise<void> {
    const now = Date.now();
    const old = [...this.waiting.entries()].filter(([, w]) => now - w.since > LOST_REPLY_AFTER_MS);
    if (!old.length) return;
    const found = await Promise.all(old.map(([id, w]) => recordedReply(this.redis, w.partition, id).catch(() => null)));
    old.forEach(([id], i) => {
      const buf = found[i];
      if (buf) this.deliver(buf, id);
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.ttlTimer);
    clearInterval(this.sweepTimer);
    this.reader.disconnect();
    await this.loop;
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.reject(new AppError('UNAVAILABLE', 'Gateway is shutting down', {}, 1));
    }
    this.waiting.clear();
    await this.redis.del(this.replyStream).catch(() => 0);
  }

  /** Requests in flight, for back-pressure and metrics. */
  get inFlight(): number {
    return this.waiting.size;
  }

  /**
   * Sends a command to the actor owning its content and resolves with the reply's value;
   * rejects with the actor's AppError, or 503 with Retry-After when no actor answers in time.
   * The command carries its deadline, set now: an actor starts it only until then, so a 503
   * means it was not applied, and no command runs later with the principal it was sent with.
   * Set here, when the command is really sent (a bulk line waiting for its window has none yet).
   */
  async send<T, C extends CommandBase = CommandBase>(cmd: C): Promise<T> {
    cmd.deadline = Date.now() + this.settings.ACTOR_REPLY_TIMEOUT_MS;
    if (this.local) {
      const reply = await this.local.runLocal(cmd);
      if (reply) {
        if (reply.ok) return reply.value as T;
        throw AppError.fromWire(reply.error);
      }
    }
    return this.sendByStream<T>(cmd);
  }

  private sendByStream<T>(cmd: CommandBase): Promise<T> {
    if (this.waiting.size >= this.settings.MAX_IN_FLIGHT) {
      return Promise.reject(new AppError('UNAVAILABLE', 'Too many requests in flight', {}, 1));
    }
    cmd.replyTo = this.replyStream;
    const p = partitionOf(cmd.cid, this.settings.PARTITIONS);
    // 503 only after the deadline and its grace: a command an actor started just before its
    // deadline has that long to commit and reply (or is refused at its commit, past the
    // deadline), so a write that committed is not answered 503. The deadline was set by send
    // (a command of a partition given up while it waited locally keeps the one it had).
    const waitMs = Math.max(0, (cmd.deadline ?? Date.now() + this.settings.ACTOR_REPLY_TIMEOUT_MS) + this.settings.ACTOR_DEADLINE_GRACE_MS - Date.now());
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(cmd.id);
        reject(noActorInTime(p));
      }, waitMs);
      this.waiting.set(cmd.id, { resolve: resolve as (v: unknown) => void, reject, timer, partition: p, since: Date.now() });
      this.redis.xadd(keys.commands(p), '*', 'm', pack(cmd)).catch((e: unknown) => {
        clearTimeout(timer);
        this.waiting.delete(cmd.id);
        this.log.error({ err: e }, 'command append failed');
        reject(new AppError('UNAVAILABLE', 'Command store unavailable', {}, 1));
      });
    });
  }

  /**
   * Hands a reply to the request waiting for it; a late or duplicate reply finds none, and is
   * not decoded when its command's id came with it (`id`): a large reply of a slow command was
   * decoded twice, from the recorded reply and again from the stream. A recorded reply is read
   * back first (`replyOf`); an actor of an earlier release sends a copy's record as it is.
   */
  private deliver(body: Buffer, id?: string): void {
    if (id !== undefined && !this.waiting.has(id)) return;
    let recorded: RecordedReply;
    try {
      recorded = unpack<RecordedReply>(body);
    } catch {
      return;
    }
    void replyOf(this.store, recorded).then(
      (reply) => this.answer(reply),
      (e: unknown) => this.log.warn({ err: e, command: recorded.id }, 'recorded reply not read back'),
    );
  }

  /** Answers the request waiting for the reply's command, if one still is. */
  private answer(reply: Reply): void {
    const w = this.waiting.get(reply.id);
    if (!w) return;
    this.waiting.delete(reply.id);
    clearTimeout(w.timer);
    if (reply.ok) w.resolve(reply.value);
    else w.reject(AppError.fromWire(reply.error));
  }

  private async readReplies(): Promise<void> {
    let last = '0-0';
    const trimmer = new ConsumedTrimmer(this.redis, this.replyStream);
    const retry: ReadRetry = { running: () => this.running, warn: (e) => this.log.warn({ err: e }, 'reply read failed, retrying'), retryMs: 200 };
    while (this.running) {
      const res = await readOrRetry(() => this.reader.xreadBuffer('COUNT', 1000, 'BLOCK', 2000, 'STREAMS', this.replyStream, last), retry);
      if (res === 'failed' || !res) continue;
      for (const [id, fields] of res[0][1]) {
        last = id.toString();
        // `i` <command id> `r` <reply>; an actor of an earlier release wrote `r` <reply> alone.
        if (fields.length >= 4 && fields[0].toString() === 'i') this.deliver(fields[3], fields[1].toString());
        else if (fields[1]) this.deliver(fields[1]);
      }
      // Replies read are not needed again; keep the stream short.
      trimmer.consumed(last, res[0][1].length);
    }
  }
}
