import { randomBytes } from 'node:crypto';
import type { createClient, createCluster } from 'redis';

type NodeRedisClient = ReturnType<typeof createClient> | ReturnType<typeof createCluster>;

/** What the feed needs of the token service: its cache, told what to forget. */
export interface RevocationListener {
  /** A token (by the SHA-256 of it) was revoked: forget it. */
  revoked(digest: string): void;
  /** Revocations may have been missed (the feed was down): forget every cached token. */
  lost(): void;
  log(level: 'warn' | 'error', msg: string): void;
}

/**
 * Published in place of a token's digest when an account changed (password, deletion,
 * re-creation): every process forgets every cached token, since their generations are checked
 * again (TokenService). Not a SHA-256 in hex, so never a token's digest.
 */
export const ACCOUNT_CHANGED = 'account-changed';

/** How long a revocation waits for every process to confirm it has forgotten the token. */
export const CONFIRM_WAIT_MS = 1000;

/**
 * Revocations told to every web process at once, so that a token cache may never accept a
 * revoked token (CONTRACT §20 "Tokens"). A revocation is published on `<prefix>{revocations}`
 * as `<nonce> <sha256 of the token>` (never the token); every process that receives it drops
 * the token from its cache and answers `<nonce>` on `<prefix>{revocations}:confirmed`.
 * `publish` resolves once as many processes confirmed as the publication reached (PUBLISH
 * answers that count), or after CONFIRM_WAIT_MS (logged; a process that late keeps a cached
 * token at most its cache time). A process uses its cache only while `up`: its subscription is
 * confirmed by Redis; a lost connection clears the cache, which stays off until the
 * subscription is back.
 *
 * Plain Redis: PUBLISH / SUBSCRIBE on a connection of its own. Redis Cluster: the sharded forms
 * (SPUBLISH / SSUBSCRIBE) through the cluster client, so that every subscriber sits on the one
 * master of the channel's slot and SPUBLISH's count covers all of them.
 */
export class RevocationFeed {
  readonly channel: string;
  readonly confirmations: string;
  /** The subscriber connection's name in CLIENT LIST (plain Redis). */
  readonly name: string;
  private sub: ReturnType<typeof createClient> | null = null;
  private cluster: ReturnType<typeof createCluster> | null = null;
  private subscribed = false;
  private stopped = false;
  /** Confirmations awaited, by nonce. */
  private readonly waiting = new Map<string, { needed: number; got: number; done: () => void }>();

  constructor(
    prefix: string,
    private readonly listener: RevocationListener,
    private readonly publisher: () => NodeRedisClient,
  ) {
    // One hash tag: on Redis Cluster both sharded channels live in one slot, on one master.
    this.channel = `${prefix}{revocations}`;
    this.confirmations = `${prefix}{revocations}:confirmed`;
    this.name = `${prefix.replace(/[^A-Za-z0-9:_-]/g, '_')}revocation-feed-${randomBytes(4).toString('hex')}`;
  }

  /** True while the subscription is confirmed: only then may tokens be cached. */
  get up(): boolean {
    return this.subscribed && !this.stopped;
  }

  /** Subscribes: on plain Redis on a connection of its own (a duplicate of `client`). */
  async start(client: NodeRedisClient): Promise<void> {
    this.stopped = false;
    if ('masters' in client) return this.startSharded(client);
    const sub = client.duplicate({ name: this.name, disableOfflineQueue: true });
    this.sub = sub;
    sub.on('error', () => this.down());
    sub.on('end', () => this.down());
    sub.on('reconnecting', () => this.down());
    // After a reconnect node-redis subscribes again, and emits 'ready' once Redis confirmed it.
    sub.on('ready', () => {
      if (this.sub === sub && sub.isPubSubActive && !this.stopped) this.markUp();
    });
    await sub.connect();
    await sub.subscribe([this.channel, this.confirmations], (message, channel) => this.onMessage(channel, message));
    if (this.sub === sub && sub.isReady && !this.stopped) this.markUp();
  }

  /** Redis Cluster: the sharded channel through the cluster client (a new one after a failover). */
  async startSharded(cluster: ReturnType<typeof createCluster>): Promise<void> {
    this.down();
    this.cluster = cluster;
    // An error of any node may have been the channel's: off until subscribed afresh.
    cluster.on('error', () => {
      if (this.cluster !== cluster) return;
      this.down();
      this.resubscribeSoon(cluster);
    });
    await cluster.sSubscribe([this.channel, this.confirmations], this.onShardMessage);
    if (this.cluster === cluster && !this.stopped) this.markUp();
  }

  private readonly onShardMessage = (message: string, channel: string): void => this.onMessage(channel, message);
  private resubscribing = false;

  /** Subscribes again (once a second at most) until Redis confirms it. */
  private resubscribeSoon(cluster: ReturnType<typeof createCluster>): void {
    if (this.resubscribing) return;
    this.resubscribing = true;
    setTimeout(() => {
      const again = async () => {
        await cluster.sUnsubscribe([this.channel, this.confirmations], this.onShardMessage).catch(() => undefined);
        await cluster.sSubscribe([this.channel, this.confirmations], this.onShardMessage);
      };
      again()
        .then(() => {
          if (this.cluster === cluster && !this.stopped) this.markUp();
        })
        .catch(() => undefined)
        .finally(() => {
          this.resubscribing = false;
          if (this.cluster === cluster && !this.stopped && !this.subscribed) this.resubscribeSoon(cluster);
        });
    }, 1000).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.subscribed = false;
    const sub = this.sub;
    this.sub = null;
    this.cluster = null;
    for (const w of this.waiting.values()) w.done();
    this.waiting.clear();
    if (sub?.isOpen) await sub.quit().catch(() => undefined);
  }

  /**
   * Tells every process that the token of `digest` is revoked; resolves once they all confirmed
   * it (or after CONFIRM_WAIT_MS).
   */
  async publish(digest: string): Promise<void> {
    const nonce = randomBytes(8).toString('hex');
    let done!: () => void;
    const confirmed = new Promise<void>((r) => (done = r));
    const wait = { needed: Infinity, got: 0, done };
    this.waiting.set(nonce, wait);
    let timer: NodeJS.Timeout | undefined;
    try {
      const pub = this.publisher();
      const message = `${nonce} ${digest}`;
      const reached = 'masters' in pub ? await pub.sPublish(this.channel, message) : await pub.publish(this.channel, message);
      wait.needed = reached;
      // A process that never subscribed (accounts-cli) hears no confirmation: it tells and goes
      // on. One whose subscription is only down for now waits, as before.
      if (wait.got >= wait.needed || (this.sub === null && this.cluster === null)) return;
      const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), CONFIRM_WAIT_MS)));
      if ((await Promise.race([confirmed, late])) === 'late') {
        this.listener.log(
          'warn',
          `token revocation: ${wait.got} of ${reached} processes confirmed within ${CONFIRM_WAIT_MS} ms; the others may accept the token until their cache entry expires`,
        );
      }
    } finally {
      clearTimeout(timer);
      this.waiting.delete(nonce);
    }
  }

  private onMessage(channel: string, message: string): void {
    if (channel === this.channel) {
      const [nonce, digest] = message.split(' ');
      if (!nonce || !digest) return;
      this.listener.revoked(digest);
      const pub = this.publisher();
      const answer = 'masters' in pub ? pub.sPublish(this.confirmations, nonce) : pub.publish(this.confirmations, nonce);
      answer.catch((e: unknown) => this.listener.log('error', `token revocation: could not confirm: ${(e as Error).message}`));
      return;
    }
    const w = this.waiting.get(message);
    if (w && ++w.got >= w.needed) w.done();
  }

  /** Subscribed: revocations missed before are unknown, so the cache starts empty. */
  private markUp(): void {
    this.listener.lost();
    this.subscribed = true;
  }

  private down(): void {
    if (!this.subscribed) return;
    this.subscribed = false;
    this.listener.lost();
  }
}
