import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { decodeProtectedHeader, importSPKI, importX509, jwtVerify, type CryptoKey, type JWTPayload } from 'jose';
import { LRUCache } from 'lru-cache';
import { ErrorReply, createClient, createCluster } from 'redis';
import { Repository, Schema, type Entity } from 'redis-om';
import { z } from 'zod';
import type { Settings } from '../../config/settings.js';
import { AppError } from '../errors.js';
import { repoPath } from '../repo-files.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { authorizationInfo, type AuthorizationInfo, contextsKey, type Principal } from '../content/permissions.js';
import { limitedAddress } from './client-address.js';
import { ACCOUNT_CHANGED, RevocationFeed } from './revocation-feed.js';
import { loadSecurityConfig, type SecurityConfigWithUsers } from './security-config.js';

/**
 * The token service of the spec ("Token response", "Authentication") and CONTRACT §3-4:
 * accounts and opaque tokens in Redis (redis-om HASH entities), login, renewal, exchange of
 * external JWTs, revocation, and the per-request `authenticate` with a short in-process cache.
 *
 * Redis layout (prefix `security:` by default):
 * - `<prefix>account:<username>` HASH { username, passwordHash, contexts (JSON) }
 * - `<prefix>token:<sha256(token) hex>` HASH { token (the same digest), userId, expireTime },
 *   with a Redis TTL of TOKEN_TTL_SECONDS. Only the digest is stored, so a copy of Redis holds
 *   no usable token.
 * - `<prefix>login-failures:user:<sha256(username) hex>` and
 *   `<prefix>login-failures:address:<client address>` ZSET { attempt id -> time }: failed logins
 *   in the last LOGIN_WINDOW_SECONDS (scripts/login-attempt-1.lua), expiring with the window.
 * - `<prefix>user-tokens:<sha256(user id) hex>` ZSET { token digest -> expireTime }: the user's
 *   live tokens, at most TOKENS_PER_USER_MAX (scripts/tokens-take-1.lua), expiring with the newest;
 *   a revocation takes its token out, an account change deletes it.
 * - channels `<prefix>{revocations}` and `<prefix>{revocations}:confirmed` (revocation-feed.ts).
 */

/** The spec's Token response. Times are epoch milliseconds as strings of digits. */
/** How often the token of a request that stays open is checked again (TokenService.watch). */
export const TOKEN_RECHECK_MS = 5000;

export interface TokenResponse {
  token: string;
  userId: string;
  expireTime: string;
  renewTime: string;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type SecurityLog = (level: LogLevel, msg: string) => void;

export interface TokenServiceOptions {
  redisUrl: string;
  settings: Settings;
  /** Role table and development accounts; default: config/security.json. */
  config?: SecurityConfigWithUsers;
  log?: SecurityLog;
  /** Prefix of every Redis key this service writes (default `security:`); tests use their own. */
  keyPrefix?: string;
  /**
   * How long a valid token is cached in-process, at most (default and maximum 2000 ms). A
   * revocation reaches every cache at once (revocation-feed.ts); the cache time bounds how late
   * a change of the account's roles is seen.
   */
  cacheMs?: number;
}

const MAX_FIELD = 4096;
const field = z.string().min(1).max(MAX_FIELD);

/**
 * Body of POST {base_url}/security/token: `{username, password}` (login), `{username, token}`
 * (renewal) or `{token}` (external identity provider). Unknown fields are refused.
 */
export const tokenRequestSchema = z.union([
  z.strictObject({ username: field, password: field }),
  z.strictObject({ username: field, token: field }),
  z.strictObject({ token: field }),
]);
export type TokenRequest = z.infer<typeof tokenRequestSchema>;

const contextsSchema = z.record(z.string(), z.array(z.string()));

interface AccountEntity extends Entity {
  username: string;
  passwordHash: string;
  /** JSON of Record<context, role[]>. */
  contexts: string;
  /**
   * Random, new with every create and password change of the account: a token is valid only
   * while its `generation` is the account's (accountGeneration). Absent on accounts stored before.
   */
  generation?: string;
}

interface TokenEntity extends Entity {
  token: string;
  userId: string;
  expireTime: number;
  /** The account's generation when the token was issued; NO_ACCOUNT for a user without one. Absent on tokens issued before. */
  generation?: string;
}

/** The generation of a user who has no account (a token from an external identity provider). */
const NO_ACCOUNT = '-';
/**
 * What a token of this user must carry to be valid now. A password change, a deletion or a
 * re-creation of the account changes it, so every token issued before ends at once, in every
 * process (the revocation feed's ACCOUNT_CHANGED clears their caches). An account and a token
 * stored before generations existed both read '' and match until the account changes; a token
 * stored before for a user without an account reads '' too, which NO_ACCOUNT never matches: it
 * ends at the upgrade (SECURITY.md).
 */
const accountGeneration = (account: AccountEntity | null): string => (account ? (account.generation ?? '') : NO_ACCOUNT);
const newGeneration = (): string => randomBytes(12).toString('base64url');

interface CachedToken {
  principal: Principal;
  expireTime: number;
  /** SHA-256 of the token: revocations name tokens by it. */
  digest: string;
}

type NodeRedisClient = ReturnType<typeof createClient> | ReturnType<typeof createCluster>;

/** One message for unknown user and wrong password (CONTRACT §4). */
const BAD_CREDENTIALS = 'Invalid username or password';
const BAD_TOKEN = 'Token is not valid';
/** One message for every refusal of the login limit, whoever the user (CONTRACT §20). */
const TOO_MANY_FAILURES = 'Too many failed logins; try again later';
/** The refusal of a login or renewal past TOKENS_PER_USER_MAX. */
const TOO_MANY_TOKENS = 'Too many live tokens for this user; revoke one or wait until one expires';
// Our tokens are 43 characters; anything much longer is not worth hashing or looking up.
const MAX_TOKEN_CHARS = 512;

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

const escapeGlob = (s: string): string => s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/** A script of src/security/scripts (they stay in src/, also for the built dist/). */
const script = (file: string): string => readFileSync(repoPath('src', 'security', 'scripts', file), 'utf8');
const LOGIN_ATTEMPT_LUA = script('login-attempt-1.lua');
const LOGIN_FAILED_LUA = script('login-failed-1.lua');
const TOKENS_TAKE_LUA = script('tokens-take-1.lua');
/**
 * How long a login attempt may be pending (its password being checked) before it counts as a
 * failure (its process is gone), and how long an attempt waits for pending ones at most.
 */
const LOGIN_PENDING_MS = 10_000;

const defaultLog: SecurityLog = (level, msg) => {
  const line = `[security] ${level}: ${msg}`;
  if (level === 'warn' || level === 'error') console.error(line);
  else console.log(line);
};

/**
 * The `host:port` seeds with those that accept a connection first: node-redis discovers a
 * cluster through the first seed that connects and would keep retrying a dead one.
 */
async function reachableFirst(seeds: string[]): Promise<string[]> {
  const up = await Promise.all(
    seeds.map(
      (hp) =>
        new Promise<boolean>((resolve) => {
          const i = hp.lastIndexOf(':');
          const sock = net.connect({ host: hp.slice(0, i), port: Number(hp.slice(i + 1)), timeout: 500 });
          const done = (ok: boolean) => {
            sock.destroy();
            resolve(ok);
          };
          sock.once('connect', () => done(true));
          sock.once('error', () => done(false));
          sock.once('timeout', () => done(false));
        }),
    ),
  );
  return [...seeds.filter((_, i) => up[i]), ...seeds.filter((_, i) => !up[i])];
}

function freezePrincipal(userId: string, contexts: Record<string, string[]>): Principal {
  const copy: Record<string, string[]> = {};
  for (const [ctx, roles] of Object.entries(contexts)) {
    if (ctx !== '__proto__') copy[ctx] = Object.freeze([...roles]) as string[];
  }
  return Object.freeze({ userId, contexts: Object.freeze(copy) });
}

export class TokenService {
  /** The role table and development accounts in use (for permission checks elsewhere). */
  readonly config: SecurityConfigWithUsers;
  private readonly settings: Settings;
  private readonly redisUrl: string;
  private readonly log: SecurityLog;
  private readonly prefix: string;
  private readonly cacheMs: number;
  private readonly accountSchema: Schema<AccountEntity>;
  private readonly tokenSchema: Schema<TokenEntity>;
  private readonly cache: LRUCache<string, CachedToken>;
  /** Cached tokens by their digest, for revocations (kept in step by the cache's dispose). */
  private readonly byDigest = new Map<string, string>();
  private readonly feed: RevocationFeed;
  /** Set once start() subscribed the feed (account tools connect without it). */
  private feedWanted = false;
  /** Lookups in flight, so a burst of requests with one uncached token costs one Redis trip. */
  private readonly inflight = new Map<string, Promise<Principal | null>>();
  /**
   * Bumped by every revocation (local or told by the feed) and every change of the feed, so a
   * lookup that raced one does not cache the token.
   */
  private revokeEpoch = 0;
  /**
   * Told of the revocations this process hears of, by the digest of the token each watches (open
   * feed streams, imports and exports check their token at once): a revocation tells the
   * watchers of its token only, and a change that may concern any token (an account changed, the
   * feed lost) tells them all. Before, every revocation told every watcher, so one user's
   * renew-and-logout loop made every open stream of the process look its token up again (about
   * 2.4 µs of the gateway's thread per stream per logout, three times per local logout).
   */
  private readonly revocationListeners = new Map<string, Set<() => void>>();
  private client: NodeRedisClient | null = null;
  private accounts: Repository<AccountEntity> | null = null;
  private tokens: Repository<TokenEntity> | null = null;
  private hsKey: Uint8Array | null = null;
  private rsKey: CryptoKey | null = null;
  /** When each Redis failure message was last logged. */
  private readonly redisErrorsLogged = new Map<string, number>();

  /** Name of the connection that receives revocations (CLIENT LIST on plain Redis). */
  get feedName(): string {
    return this.feed.name;
  }

  /** Whether revocations reach this process now (tokens are cached only then). */
  get feedUp(): boolean {
    return this.feed.up;
  }

  constructor(opts: TokenServiceOptions) {
    this.redisUrl = opts.redisUrl;
    this.settings = opts.settings;
    this.config = opts.config ?? loadSecurityConfig();
    this.log = opts.log ?? defaultLog;
    this.prefix = opts.keyPrefix ?? 'security:';
    this.cacheMs = Math.max(0, Math.min(opts.cacheMs ?? 2000, 2000));
    this.accountSchema = new Schema<AccountEntity>(
      `${this.prefix}account`,
      { username: { type: 'string' }, passwordHash: { type: 'string' }, contexts: { type: 'string' }, generation: { type: 'string' } },
      { dataStructure: 'HASH' },
    );
    this.tokenSchema = new Schema<TokenEntity>(
      `${this.prefix}token`,
      { token: { type: 'string' }, userId: { type: 'string' }, expireTime: { type: 'number' }, generation: { type: 'string' } },
      { dataStructure: 'HASH' },
    );
    this.cache = new LRUCache<string, CachedToken>({
      max: 100_000,
      ttl: Math.max(1, this.cacheMs),
      dispose: (v) => this.byDigest.delete(v.digest),
    });
    this.feed = new RevocationFeed(
      this.prefix,
      {
        revoked: (digest) => {
          if (digest === ACCOUNT_CHANGED) {
            this.cache.clear();
            this.forget();
            return;
          }
          this.forget(this.byDigest.get(digest), digest);
        },
        lost: () => {
          this.cache.clear();
          this.forget();
        },
        log: (level, msg) => this.log(level, msg),
      },
      () => {
        if (!this.client) throw new AppError('UNAVAILABLE', 'Token service is not started');
        return this.client;
      },
    );
  }

  /**
   * After a revocation: the token out of the cache (when this process has it), no lookup under
   * way may cache anything or be shared with a later request (it may have read the token before
   * it was revoked), and the requests watching that token check it. Without a token or digest
   * (an account changed, the feed lost), every watcher checks its own.
   */
  private forget(token?: string, digest = token === undefined ? undefined : sha256(token)): void {
    this.revokeEpoch++;
    this.inflight.clear();
    if (token !== undefined) this.cache.delete(token);
    if (digest === undefined) {
      for (const watchers of this.revocationListeners.values()) for (const f of watchers) f();
      return;
    }
    for (const f of this.revocationListeners.get(digest) ?? []) f();
  }

  /**
   * Calls `f` after every revocation of the token of digest `digest` this process hears of (its
   * own, or another process's by the feed), and after every change that may concern any token.
   * Answers the function that stops the calls.
   */
  private onRevocation(digest: string, f: () => void): () => void {
    const watchers = this.revocationListeners.get(digest) ?? new Set<() => void>();
    this.revocationListeners.set(digest, watchers);
    watchers.add(f);
    return () => {
      watchers.delete(f);
      if (!watchers.size && this.revocationListeners.get(digest) === watchers) this.revocationListeners.delete(digest);
    };
  }

  /**
   * Watches the token of a request that stays open (a change-feed stream, a bulk import, an
   * export): calls `changed` once, with null when the token was revoked or expired, or with the
   * principal it names now when its user's roles differ from `opened`'s. Such a request acts for
   * its caller as the caller is now, never as they were when it opened. Checked at once when the
   * watch starts (the request read for a while after it authenticated: a revocation meanwhile
   * waited for the periodic check, 5 s, before), at once after a revocation this process hears of,
   * and every TOKEN_RECHECK_MS (role changes, expiry). Answers the function that stops watching.
   */
  watch(token: string, opened: Principal, changed: (now: Principal | null) => void): () => void {
    const roles = contextsKey(opened);
    let done = false;
    const stop = () => {
      done = true;
      clearInterval(timer);
      unlisten();
    };
    const check = () => {
      this.authenticate(token).then(
        (p) => {
          if (done || (p && contextsKey(p) === roles)) return;
          stop();
          try {
            changed(p);
          } catch (e) {
            this.log('error', `a request watching its token failed to end: ${String(e)}`);
          }
        },
        () => undefined, // Redis failing: checked again next time
      );
    };
    const timer = setInterval(check, TOKEN_RECHECK_MS);
    timer.unref();
    const unlisten = this.onRevocation(sha256(token), check);
    check();
    return stop;
  }

  /**
   * Connects, loads the external JWT keys, and makes sure accounts exist: with no account in
   * Redis, creates the development accounts (and warns). With NODE_ENV=production, throws while
   * a development account keeps its default password, or when there is no account at all.
   */
  async start(): Promise<void> {
    await this.connect();
    try {
      await this.loadExternalKeys();
      await this.ensureAccounts();
      await this.feed.start(this.client!);
      this.feedWanted = true;
    } catch (e) {
      await this.stop();
      throw e;
    }
  }

  /** Connects to Redis only (no seeding or production checks); for account tools. */
  async connect(): Promise<void> {
    if (this.client) return;
    const client = await this.openClient();
    this.use(client);
  }

  private use(client: NodeRedisClient): void {
    this.client = client;
    this.accounts = new Repository(this.accountSchema, client);
    this.tokens = new Repository(this.tokenSchema, client);
  }

  private async openClient(): Promise<NodeRedisClient> {
    // Fail fast while disconnected instead of queueing: a request should get 503, not hang.
    // REDIS_CLUSTER_NODES selects Redis Cluster, as for the rest of the platform; account and
    // token hashes and the per-user records of live tokens are single keys: nothing here spans slots.
    const nodes = this.settings.REDIS_CLUSTER_NODES?.split(',').filter(Boolean);
    const client: NodeRedisClient = nodes?.length
      ? createCluster({ rootNodes: (await reachableFirst(nodes)).map((hp) => ({ url: `redis://${hp}` })), defaults: { disableOfflineQueue: true } })
      : createClient({ url: this.redisUrl, disableOfflineQueue: true });
    // node-redis emits on every reconnect attempt.
    client.on('error', (err: Error) => this.logRedisError(`token store Redis: ${err.message}`));
    await client.connect();
    return client;
  }

  /**
   * On Redis Cluster, after a connection failure: a new client, which learns the slots afresh.
   * node-redis 4 learns a new topology only from MOVED/ASK answers, which a dead master never
   * gives, so once a replica had taken over every call for its slots kept failing with "The
   * client is offline" (node-redis#2806; found by test/faults/redis-failover.fault.ts). At most
   * one rediscovery runs at a time, and at most one a second.
   */
  private rediscoveryStarted = 0;
  private rediscovering = false;
  private rediscoverCluster(): void {
    if (!this.settings.REDIS_CLUSTER_NODES || !this.client) return;
    // One at a time, one a second; an attempt that hangs (no seed answers) no longer blocks after 5 s.
    const since = Date.now() - this.rediscoveryStarted;
    if (since < 1000 || (this.rediscovering && since < 5000)) return;
    this.rediscoveryStarted = Date.now();
    this.rediscovering = true;
    const old = this.client;
    this.openClient()
      .then((fresh) => {
        if (this.client !== old) return void fresh.disconnect().catch(() => undefined); // stopped or replaced meanwhile
        this.use(fresh);
        if (this.feedWanted && 'masters' in fresh)
          void this.feed.startSharded(fresh).catch((e: unknown) => this.logRedisError(`token store: revocation feed: ${(e as Error).message}`));
        this.log('warn', 'token store: reconnected to Redis Cluster after a connection failure (slots learnt afresh)');
        return void old.disconnect().catch(() => undefined);
      })
      .catch((e: unknown) => this.logRedisError(`token store: Redis Cluster rediscovery failed: ${(e as Error).message}`))
      .finally(() => {
        this.rediscovering = false;
      });
  }

  /** Closes the Redis connections and forgets cached tokens. */
  async stop(): Promise<void> {
    const client = this.client;
    this.feedWanted = false;
    await this.feed.stop();
    this.client = null;
    this.accounts = null;
    this.tokens = null;
    this.cache.clear();
    if (client && (!('isOpen' in client) || client.isOpen)) await client.quit().catch(() => undefined);
  }

  // ---- issuing ---------------------------------------------------------------------------

  /**
   * Validates a POST /security/token body and answers the Token response (400 / 401; 429 past
   * the failed-login limit). `address` is the client's, for the per-address limit.
   */
  async issue(body: unknown, address?: string): Promise<TokenResponse> {
    const parsed = tokenRequestSchema.safeParse(body);
    if (!parsed.success) {
      throw new AppError('BAD_REQUEST', 'Body must be one of {username, password}, {username, token} or {token} with non-empty strings', {
        issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
      });
    }
    const req = parsed.data;
    if ('password' in req) return this.login(req.username, req.password, address);
    if ('username' in req) return this.renew(req.username, req.token);
    return this.exchangeExternal(req.token);
  }

  /**
   * Login with username and password; 401 with one message for unknown user or wrong password.
   * Failed logins are limited per username and, when `address` is given, per client address
   * (CONTRACT §20): past LOGIN_MAX_FAILURES in LOGIN_WINDOW_SECONDS, 429 with Retry-After, the
   * same for a user who does not exist. An attempt is held in the window while its password is
   * checked, so that failures and checks under way together never pass the limit (a burst of
   * guesses cannot get more checks than the limit; a burst of right passwords waits its turn);
   * it then counts as a failure or leaves. A success forgives no other failure.
   */
  async login(username: string, password: string, address?: string): Promise<TokenResponse> {
    const attempt = randomBytes(12).toString('base64url');
    const counters = [`${this.prefix}login-failures:user:${sha256(username)}`];
    if (address) counters.push(`${this.prefix}login-failures:address:${limitedAddress(address)}`);
    const taken: string[] = [];
    for (const key of counters) {
      const waitMs = await this.takeAttempt(key, attempt);
      if (waitMs > 0) {
        await this.endAttempt(taken, attempt, 'forgiven');
        throw new AppError('TOO_MANY_REQUESTS', TOO_MANY_FAILURES, {}, Math.ceil(waitMs / 1000));
      }
      taken.push(key);
    }
    let failed = false;
    let account: AccountEntity | null = null;
    try {
      account = await this.fetchAccount(username);
      // Always run scrypt (against a dummy hash for an unknown user) so timing tells nothing.
      const ok = await verifyPassword(password, account?.passwordHash);
      failed = !ok || !account;
    } finally {
      // A store failure (503) is no failed login.
      await this.endAttempt(taken, attempt, failed ? 'failed' : 'forgiven');
    }
    if (failed || !account) throw new AppError('NOT_AUTHENTICATED', BAD_CREDENTIALS);
    // The generation of the account whose password was checked: read again, a password changed
    // meanwhile would give the old password's login a token of the new generation.
    return this.issueToken(username, accountGeneration(account));
  }

  /**
   * Takes an attempt in a failure window (0), or answers the ms until one more failure fits in.
   * While only attempts under way fill the window, waits for them to end (up to LOGIN_PENDING_MS).
   */
  private async takeAttempt(key: string, attempt: string): Promise<number> {
    const args = [String(this.settings.LOGIN_WINDOW_SECONDS * 1000), String(this.settings.LOGIN_MAX_FAILURES), attempt, String(LOGIN_PENDING_MS)];
    const deadline = Date.now() + LOGIN_PENDING_MS;
    for (;;) {
      const res = Number(await this.withRedis(() => this.evalOn(key, LOGIN_ATTEMPT_LUA, args)));
      if (res >= 0) return res;
      if (Date.now() > deadline) return 1000;
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 30));
    }
  }

  /** Ends attempts: a failure counts for the window; forgiven ones (a success) leave it. */
  private async endAttempt(keys: string[], attempt: string, outcome: 'failed' | 'forgiven'): Promise<void> {
    const windowMs = String(this.settings.LOGIN_WINDOW_SECONDS * 1000);
    await Promise.all(
      keys.map((k) => (outcome === 'failed' ? this.evalOn(k, LOGIN_FAILED_LUA, [windowMs, attempt]) : this.connected().zRem(k, `p:${attempt}`))),
    ).catch((e: unknown) => this.logRedisError(`token store: ${(e as Error).message}`)); // left pending, it counts as failed after LOGIN_PENDING_MS
  }

  /**
   * A new token for `username`, while `token` is valid and was issued to `username` in the
   * account's present generation (not before a password change, deletion or re-creation).
   */
  async renew(username: string, token: string): Promise<TokenResponse> {
    const rec = await this.fetchToken(token);
    if (!rec || rec.userId !== username) throw new AppError('NOT_AUTHENTICATED', BAD_TOKEN);
    const generation = accountGeneration(await this.fetchAccount(username));
    if (rec.generation !== generation) throw new AppError('NOT_AUTHENTICATED', BAD_TOKEN);
    return this.issueToken(username, generation);
  }

  /**
   * Exchanges a JWT of an external identity provider (HS256 with EXTERNAL_JWT_SECRET or RS256
   * with EXTERNAL_JWT_PUBLIC_KEY) for a token of user `sub`. `exp` is required (CONTRACT §20),
   * `nbf` honoured when present; `iss` and `aud` must match EXTERNAL_JWT_ISSUER and
   * EXTERNAL_JWT_AUDIENCE when those are set. The user's roles are those of the account of that
   * name, none when there is none.
   */
  async exchangeExternal(jwt: string): Promise<TokenResponse> {
    if (!this.hsKey && !this.rsKey) {
      throw new AppError('NOT_AUTHENTICATED', 'Tokens of an external identity provider are not accepted');
    }
    let payload: JWTPayload;
    const claims = {
      clockTolerance: 5,
      requiredClaims: ['exp'],
      ...(this.settings.EXTERNAL_JWT_ISSUER ? { issuer: this.settings.EXTERNAL_JWT_ISSUER } : {}),
      ...(this.settings.EXTERNAL_JWT_AUDIENCE ? { audience: this.settings.EXTERNAL_JWT_AUDIENCE } : {}),
    };
    try {
      const { alg } = decodeProtectedHeader(jwt);
      // The algorithm picks the key, and each key is tried with its own algorithm only, so an
      // RS256 public key can never be used as an HMAC secret.
      if (alg === 'HS256' && this.hsKey) {
        ({ payload } = await jwtVerify(jwt, this.hsKey, { algorithms: ['HS256'], ...claims }));
      } else if (alg === 'RS256' && this.rsKey) {
        ({ payload } = await jwtVerify(jwt, this.rsKey, { algorithms: ['RS256'], ...claims }));
      } else {
        throw new Error(`algorithm ${String(alg)} not accepted`);
      }
    } catch {
      throw new AppError('NOT_AUTHENTICATED', BAD_TOKEN);
    }
    if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > MAX_FIELD) {
      throw new AppError('NOT_AUTHENTICATED', BAD_TOKEN);
    }
    // Bounded like a login: one JWT may be exchanged again and again until its exp.
    return this.issueToken(payload.sub, accountGeneration(await this.fetchAccount(payload.sub)));
  }

  /**
   * Makes a token invalid (logout, CONTRACT §20): deleted from Redis, then dropped from the cache
   * of every web process; resolves once they all confirmed it (revocation-feed.ts).
   */
  async revoke(token: string): Promise<void> {
    this.forget(token);
    if (token.length === 0 || token.length > MAX_TOKEN_CHARS) return;
    const id = sha256(token);
    const { userId } = await this.withRedis(() => this.repo('tokens').fetch(id));
    await this.withRedis(() => this.repo('tokens').remove(id));
    // Its place among the user's live tokens is free (TOKENS_PER_USER_MAX).
    if (typeof userId === 'string') await this.withRedis(() => this.connected().zRem(this.userTokensKey(userId), id));
    // Again now that it is gone: a lookup between the first forget and the delete (an open
    // stream's or import's check, TokenService.watch) found it valid and cached it.
    this.forget(token);
    await this.withRedis(() => this.feed.publish(id));
  }

  // ---- per request -----------------------------------------------------------------------

  /**
   * The principal of an `X-Auth-Token` value, or null when missing, unknown, expired or
   * revoked. Valid tokens are cached in-process for at most 2 s, never past their expiry, and
   * only while revocations reach this process (the cache is skipped while they do not).
   */
  async authenticate(token: string | undefined): Promise<Principal | null> {
    if (!token || token.length > MAX_TOKEN_CHARS) return null;
    const hit = this.cached(token);
    if (hit !== undefined) return hit;
    let pending = this.inflight.get(token);
    if (!pending) {
      pending = this.lookup(token).finally(() => this.inflight.delete(token));
      this.inflight.set(token, pending);
    }
    return pending;
  }

  /**
   * The caller of a request whose token is optional (search, delivery, taxonomy): null without
   * an `X-Auth-Token`; 401 for one that is not valid (never read as anonymous).
   */
  async caller(token: string | undefined): Promise<Principal | null> {
    if (token === undefined) return null;
    const principal = await this.authenticate(token);
    if (!principal) throw new AppError('NOT_AUTHENTICATED', 'Invalid or expired token');
    return principal;
  }

  /**
   * The principal of a valid token this process holds in its cache, at once (no promise: a read
   * answered from caches awaits nothing); undefined when the token must be looked up or is not
   * valid, for `required` to answer. The same cache `authenticate` reads first.
   */
  known(token: string | undefined): Principal | undefined {
    if (!token || token.length > MAX_TOKEN_CHARS) return undefined;
    return this.cached(token) ?? undefined;
  }

  /** A cached token: its principal, null when it expired, undefined when not cached (or the revocation feed is down). */
  private cached(token: string): Principal | null | undefined {
    const hit = this.feed.up ? this.cache.get(token) : undefined;
    if (!hit) return undefined;
    return hit.expireTime > Date.now() ? hit.principal : null;
  }

  /** The caller of a request that needs a token: 401 without one or for one that is not valid. */
  async required(token: string | undefined): Promise<Principal> {
    const principal = await this.caller(token);
    if (!principal) throw new AppError('NOT_AUTHENTICATED', 'X-Auth-Token required');
    return principal;
  }

  /** The principal of a user id: the account's contexts, or no roles without an account. */
  async principalFor(userId: string): Promise<Principal> {
    return this.principalOf(userId, await this.fetchAccount(userId));
  }

  /** The principal of a user with this account: its contexts, or no roles without one. */
  private principalOf(userId: string, account: AccountEntity | null): Principal {
    return freezePrincipal(userId, account ? this.parseContexts(userId, account.contexts) : {});
  }

  /** The spec's Authorization information response for a principal. */
  authorizationInfo(principal: Principal): AuthorizationInfo {
    return authorizationInfo(this.config, principal);
  }

  // ---- accounts --------------------------------------------------------------------------

  /**
   * Creates or replaces an account. Replacing it with the same password changes its roles only:
   * its tokens stay valid and act with the new roles (in every process at once). Any other
   * password, or an account created anew (after a deletion), ends every token issued before.
   */
  async createAccount(username: string, password: string, contexts: Record<string, string[]>): Promise<void> {
    field.parse(username);
    contextsSchema.parse(contexts);
    const existing = await this.fetchAccount(username);
    const samePassword = existing !== null && (await verifyPassword(password, existing.passwordHash));
    await this.saveAccount(username, await hashPassword(password), contexts, samePassword ? (existing.generation ?? '') : newGeneration());
    await this.accountChanged(samePassword ? undefined : username);
  }

  /** Sets a new password of an existing account, and ends its tokens; 404 when there is none. */
  async setPassword(username: string, password: string): Promise<void> {
    const account = await this.fetchAccount(username);
    if (!account) throw new AppError('NOT_FOUND', `No account ${username}`);
    const contexts = this.parseContexts(username, account.contexts);
    await this.saveAccount(username, await hashPassword(password), contexts);
    await this.accountChanged(username);
  }

  /** Removes an account, and ends its tokens. */
  async deleteAccount(username: string): Promise<void> {
    await this.withRedis(() => this.repo('accounts').remove(username));
    await this.accountChanged(username);
  }

  /**
   * After an account changed: every process drops the tokens it holds valid and checks its open
   * streams, imports and exports again (they end for tokens of an old generation, and act with
   * the new roles otherwise). `ended`: the user whose tokens all ended (a new generation), whose
   * record of live tokens goes with them.
   */
  private async accountChanged(ended?: string): Promise<void> {
    this.cache.clear();
    this.forget();
    if (ended !== undefined) await this.withRedis(() => this.connected().del(this.userTokensKey(ended)));
    await this.withRedis(() => this.feed.publish(ACCOUNT_CHANGED));
  }

  /** Redis key of a user's record of live tokens (one key, so one Redis Cluster slot). */
  private userTokensKey(userId: string): string {
    return `${this.prefix}user-tokens:${sha256(userId)}`;
  }

  /** Redis key of a token (for operations and tests). */
  keyOfToken(token: string): string {
    return `${this.tokenSchema.schemaName}:${sha256(token)}`;
  }

  // ---- internals -------------------------------------------------------------------------

  private async lookup(token: string): Promise<Principal | null> {
    const epoch = this.revokeEpoch;
    const rec = await this.fetchToken(token);
    if (!rec) return null;
    const account = await this.fetchAccount(rec.userId);
    if (rec.generation !== accountGeneration(account)) return null;
    const principal = this.principalOf(rec.userId, account);
    const left = rec.expireTime - Date.now();
    if (left <= 0) return null;
    if (epoch === this.revokeEpoch && this.cacheMs > 0 && this.feed.up) {
      const digest = sha256(token);
      this.cache.set(token, { principal, expireTime: rec.expireTime, digest }, { ttl: Math.max(1, Math.min(this.cacheMs, left)) });
      this.byDigest.set(digest, token);
    }
    return principal;
  }

  /**
   * Mints a token of `userId` (a login, a renewal or a JWT exchange). It takes a place among the
   * user's live tokens first, and past TOKENS_PER_USER_MAX answers 429 with Retry-After = the seconds
   * until the oldest expires. Refusing keeps CONTRACT §4 (every token issued stays valid to its
   * expiry), where evicting the oldest would not. Before, one client renewing in a loop kept a
   * 24-h key per renewal (2,000 renewals: 2,001 keys).
   */
  private async issueToken(userId: string, generation: string): Promise<TokenResponse> {
    const token = randomBytes(32).toString('base64url');
    const ttl = this.settings.TOKEN_TTL_SECONDS;
    const issued = Date.now();
    const expireTime = issued + ttl * 1000;
    const id = sha256(token);
    const repo = this.repo('tokens');
    const record = this.userTokensKey(userId);
    const args = [String(issued), String(this.settings.TOKENS_PER_USER_MAX), id, String(expireTime)];
    const waitMs = Number(await this.withRedis(() => this.evalOn(record, TOKENS_TAKE_LUA, args)));
    if (waitMs > 0) throw new AppError('TOO_MANY_REQUESTS', TOO_MANY_TOKENS, {}, Math.ceil(waitMs / 1000));
    await this.withRedis(async () => {
      try {
        await repo.save(id, { token: id, userId, expireTime, generation });
        // redis-om's save is UNLINK + HSET, so the TTL can only be set afterwards. Should that
        // fail, take the token back rather than leave a key that never expires.
        try {
          await repo.expire(id, ttl);
        } catch (e) {
          await repo.remove(id).catch(() => undefined);
          throw e;
        }
      } catch (e) {
        // No token: its place is free again.
        await this.connected()
          .zRem(record, id)
          .catch(() => undefined);
        throw e;
      }
    });
    return {
      token,
      userId,
      expireTime: String(expireTime),
      renewTime: String(issued + Math.floor((expireTime - issued) / 2)),
    };
  }

  /** The token's record while valid; null when unknown or expired. */
  private async fetchToken(token: string): Promise<{ userId: string; expireTime: number; generation: string } | null> {
    if (token.length === 0 || token.length > MAX_TOKEN_CHARS) return null;
    const e = await this.withRedis(() => this.repo('tokens').fetch(sha256(token)));
    // redis-om answers a missing key with an entity that has only its id: check the fields.
    if (typeof e.userId !== 'string' || typeof e.expireTime !== 'number' || !Number.isFinite(e.expireTime)) return null;
    if (e.expireTime <= Date.now()) return null;
    return { userId: e.userId, expireTime: e.expireTime, generation: typeof e.generation === 'string' ? e.generation : '' };
  }

  private async fetchAccount(username: string): Promise<AccountEntity | null> {
    const e = await this.withRedis(() => this.repo('accounts').fetch(username));
    return typeof e.passwordHash === 'string' && typeof e.username === 'string' ? e : null;
  }

  private async saveAccount(username: string, passwordHash: string, contexts: Record<string, string[]>, generation = newGeneration()): Promise<void> {
    await this.withRedis(() => this.repo('accounts').save(username, { username, passwordHash, contexts: JSON.stringify(contexts), generation }));
  }

  private parseContexts(userId: string, json: string | undefined): Record<string, string[]> {
    try {
      const parsed = contextsSchema.safeParse(JSON.parse(json ?? '{}'));
      if (parsed.success) return parsed.data;
    } catch {
      /* reported below */
    }
    this.log('error', `account ${userId} has malformed contexts; treating it as holding no roles`);
    return {};
  }

  private async anyAccountExists(): Promise<boolean> {
    const client = this.client;
    if (!client) throw new Error('TokenService is not connected');
    // No search module on plain Redis: one SCAN that stops at the first account key.
    const match = `${escapeGlob(this.accountSchema.schemaName)}:*`;
    // On Redis Cluster every master holds a part of the keys: scan each.
    const nodes = 'masters' in client ? await Promise.all(client.masters.map((m) => client.nodeClient(m))) : [client];
    for (const node of nodes) for await (const _key of node.scanIterator({ MATCH: match, COUNT: 1000 })) return true;
    return false;
  }

  private async ensureAccounts(): Promise<void> {
    const production = this.settings.NODE_ENV === 'production';
    const devNames = Object.keys(this.config.users);
    if (!(await this.anyAccountExists())) {
      if (production) {
        throw new Error(
          `Refusing to start with NODE_ENV=production: Redis holds no accounts, and the only ones this start would create are the development accounts (${devNames.join(', ')}) with their default passwords. Create accounts first with: node dist/src/security/accounts-cli.js create <username> '<contexts JSON>' (password on stdin).`,
        );
      }
      for (const [username, acct] of Object.entries(this.config.users)) {
        // Another process may be seeding at the same moment; never overwrite an account.
        if (await this.fetchAccount(username)) continue;
        await this.saveAccount(username, acct.passwordHash, acct.contexts);
      }
      this.log(
        'warn',
        `No accounts found: created the development accounts ${devNames.join(', ')}, each with its username as password. Change their passwords before production; NODE_ENV=production refuses to start while any keeps its default.`,
      );
    }
    if (production) {
      const weak = await this.accountsWithDefaultPassword();
      if (weak.length > 0) {
        throw new Error(
          `Refusing to start with NODE_ENV=production: the development account(s) ${weak.join(', ')} still have their default password. Change it with: node dist/src/security/accounts-cli.js set-password <username> (password on stdin), or delete the account.`,
        );
      }
    }
  }

  /** Development accounts whose stored hash still matches the default password (= username). */
  private async accountsWithDefaultPassword(): Promise<string[]> {
    const checks = await Promise.all(
      Object.entries(this.config.users).map(async ([username, dev]) => {
        const acct = await this.fetchAccount(username);
        if (!acct) return null;
        const weak = acct.passwordHash === dev.passwordHash || (await verifyPassword(username, acct.passwordHash));
        return weak ? username : null;
      }),
    );
    return checks.filter((u): u is string => u !== null);
  }

  private async loadExternalKeys(): Promise<void> {
    const secret = this.settings.EXTERNAL_JWT_SECRET;
    this.hsKey = secret ? new TextEncoder().encode(secret) : null;
    const pem = this.settings.EXTERNAL_JWT_PUBLIC_KEY;
    if (!pem) {
      this.rsKey = null;
      return;
    }
    // Environment variables often carry the PEM with literal "\n".
    const text = pem.includes('\\n') ? pem.replace(/\\n/g, '\n') : pem;
    try {
      this.rsKey = text.includes('BEGIN CERTIFICATE') ? await importX509(text, 'RS256') : await importSPKI(text, 'RS256');
    } catch (e) {
      throw new Error(`EXTERNAL_JWT_PUBLIC_KEY is not a PEM RSA public key or certificate: ${(e as Error).message}`);
    }
  }

  /**
   * EVAL of a one-key script. On Redis Cluster through `sendCommand` with the key named: node-redis
   * 4's `eval(script, {keys})` passes the script where it looks for the keys, so it sent the
   * script to a random master and gave up on MOVED after a few tries (found as a 503 on login).
   */
  private evalOn(key: string, script: string, args: string[]): Promise<unknown> {
    const command = ['EVAL', script, '1', key, ...args];
    const client = this.connected();
    return 'masters' in client ? client.sendCommand(key, false, command) : client.sendCommand(command);
  }

  private connected(): NodeRedisClient {
    if (!this.client) throw new AppError('UNAVAILABLE', 'Token service is not started');
    return this.client;
  }

  private repo(which: 'accounts'): Repository<AccountEntity>;
  private repo(which: 'tokens'): Repository<TokenEntity>;
  private repo(which: 'accounts' | 'tokens'): Repository<AccountEntity> | Repository<TokenEntity> {
    const r = which === 'accounts' ? this.accounts : this.tokens;
    if (!r) throw new AppError('UNAVAILABLE', 'Token service is not started');
    return r;
  }

  /** Logs a Redis failure once per message per 10 s: an outage fails every request alike. */
  private logRedisError(msg: string): void {
    const now = Date.now();
    if (now - (this.redisErrorsLogged.get(msg) ?? 0) <= 10_000) return;
    if (this.redisErrorsLogged.size > 100) this.redisErrorsLogged.clear();
    this.redisErrorsLogged.set(msg, now);
    this.log('error', msg);
  }

  /** Runs a Redis call; a Redis failure becomes 503 (the token store is unavailable). */
  private async withRedis<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof AppError) throw e;
      this.logRedisError(`token store: ${(e as Error).message}`);
      // An error answer of a live server (other than CLUSTERDOWN) says nothing about topology.
      if (!(e instanceof ErrorReply) || e.message.startsWith('CLUSTERDOWN')) this.rediscoverCluster();
      throw new AppError('UNAVAILABLE', 'Token store unavailable', {}, 1);
    }
  }
}
