import { AppError } from '../errors.js';

/** Retry-After (s) of a body refused for what the process holds: a write lasts at most ACTOR_REPLY_TIMEOUT_MS, most far less. */
const RETRY_AFTER_SECONDS = 1;

/** Anonymous bodies together hold at most this part of the process's bound (`BodiesHeld.anonymous`). */
const ANONYMOUS_PART = 4;

/**
 * The most of each anonymous body held to the process's bound only, not to the anonymous bodies'
 * part of it (`BodiesHeld.small`): a login's whole body (LOGIN_MAX_BODY_BYTES) at most, so that
 * anonymous searches cannot have logins refused.
 */
const SMALL_BODY_BYTES = 64 * 1024;

/** What the key of a signed-in caller's search body starts with, before its user's (`searchBodyKey`). */
const SEARCH = 'search ';

/**
 * The key a signed-in caller's search body counts under (its user's key, `callerKey`): a share of
 * its own, apart from the user's writes, in the anonymous bodies' part of the bound (`isAnonymous`).
 * A search writes nothing, and its form body is held only until the engine is asked. Counted under
 * its user as a write (its token is read before its body: request-auth.ts), nine reader accounts'
 * searches that never finished, 1,000,000 bytes each, held 8,000,000 bytes of a bound of 8 MiB,
 * and a writer's body answered 503 (the fourth review); accounts that may only read hold no more
 * now than anonymous callers may.
 */
export function searchBodyKey(userKey: string): string {
  return SEARCH + userKey;
}

/**
 * A body held in the anonymous bodies' part: one counted by its client address (`callerKey`
 * without a user: no token, or read by a handler that checks none, a login's), not as a token not
 * checked yet; or a signed-in caller's search (`searchBodyKey`).
 */
function isAnonymous(caller: string): boolean {
  return caller.startsWith('address:') || caller.startsWith(SEARCH);
}

/**
 * What the collected request bodies of a web process weigh while their requests are under way
 * (SECURITY.md "Bodies and limits"): the bytes as they arrive, then, once parsed, what the body
 * holds parsed (`parsedWeight`: its bytes and 64 per object, array, key and value), until the
 * request ends. Two bounds:
 *
 * - Per caller, BODIES_HELD_PER_CALLER_BYTES: 429 with Retry-After past it. While a body arrives
 *   its caller is the client address (`callerKey` without a user); once the handler checked the
 *   request's token, its user (`Exchange.countUnder`, `Exchange.json`). Bodies with a token not
 *   checked yet have a share of their own at their address (`unchecked address:…`): counted in
 *   the address's share, an anonymous caller there (logins it never finishes) had every writer
 *   there refused; a token that is not valid is answered 401 within its lookup, so such bodies
 *   are held only that long.
 * - For the process, BODIES_HELD_BYTES: 503 with Retry-After past it; anonymous bodies (under an
 *   address) past their first `small` bytes at most a quarter of it together (503), and their
 *   first `small` bytes at most another quarter (MAX_IN_FLIGHT requests of `small`): signed-in
 *   writes always have half of it. A signed-in caller's search counts with them (`searchBodyKey`).
 *
 * Before, only MAX_IN_FLIGHT (10,000 requests) and MAX_BODY_BYTES (10 MiB each) bounded them: a
 * writer's hundred PUTs at once of 300 KB of empty objects, while the actors were slow to answer,
 * held about 600 MB of the gateway's heap. A body is never refused for what the same request
 * already holds, nor when nothing else is held under its caller (or in the process): one body
 * of MAX_BODY_BYTES always passes, whatever the settings. Streamed bodies (file uploads, bulk
 * imports) are not counted here: they are read as their reader takes them, with bounds of their
 * own.
 */
export class BodiesHeld {
  private readonly byCaller = new Map<string, number>();
  private sum = 0;
  /**
   * What anonymous bodies (counted under a client address: without a token, or read by a handler
   * that checks none, a login's) and searches (`searchBodyKey`) hold together; past a quarter of
   * `limit`, such a body past its first `small` bytes is refused (503). Without it, anonymous search bodies (2 MiB each, 32 an
   * address) from 8 addresses (an IPv6 attacker holds many /64s) held all of `limit`, and every
   * signed-in write of the process answered 503 while they were held (review 3).
   */
  private anonymous = 0;
  /**
   * What of each anonymous body is held to the process's bound only, not to the anonymous part:
   * a quarter of `limit` shared by MAX_IN_FLIGHT requests (`maxInFlight`, the most a web process
   * has under way: past it 503 before any body is read), at most SMALL_BODY_BYTES; 13,421 bytes
   * with the defaults (512 MiB, 10,000). Whatever anonymous callers send, the first bytes of
   * their bodies hold at most a quarter of `limit` and the rest at most another quarter, so
   * signed-in writes keep half of it; and a login within `small` (a username and password take
   * some 100 bytes, an external JWT of 4,096 characters 4 KiB) is never refused for the
   * anonymous bodies, only for the process's bound, which they cannot fill. Before (the fourth
   * review), this was a login's whole 64 KiB, held to nothing but the process's bound: slow
   * logins of 64 KiB from 8 addresses (1,024 an address, each within its 64 MiB share) held all
   * of BODIES_HELD_BYTES, and every signed-in write and every login of the process answered 503
   * (at 1 MiB, 17 logins of 60 KiB and 4 of 1 KiB from 21 addresses held 1,048,576 bytes). Of a
   * body larger than `small`, the chunk that crosses it counts in the anonymous part whole.
   */
  readonly small: number;

  constructor(
    readonly limit: number,
    readonly perCaller: number,
    maxInFlight: number,
  ) {
    this.small = Math.min(SMALL_BODY_BYTES, Math.floor(limit / ANONYMOUS_PART / Math.max(1, maxInFlight)));
  }

  /** What every body of the process holds now (the `gateway_request_bodies_held_bytes` gauge). */
  get total(): number {
    return this.sum;
  }

  /** What the bodies of one caller hold now. */
  heldBy(caller: string): number {
    return this.byCaller.get(caller) ?? 0;
  }

  /**
   * Takes `n` more bytes for a request of `caller` that holds `mine` under that caller already;
   * the error to answer when refused (nothing is taken then). Nothing more (`n` 0, the empty last
   * chunk of every body) is never refused.
   */
  take(caller: string, n: number, mine: number): AppError | undefined {
    if (n <= 0) return undefined;
    const had = this.heldBy(caller);
    const anonymous = isAnonymous(caller);
    const small = mine + n <= this.small;
    if (had > mine && had + n > this.perCaller)
      return new AppError(
        'TOO_MANY_REQUESTS',
        `The request bodies of this caller under way on this process hold more than ${this.perCaller} bytes (BODIES_HELD_PER_CALLER_BYTES): retry when one has been answered`,
        {},
        RETRY_AFTER_SECONDS,
      );
    if (anonymous && !small && this.anonymous > mine && this.anonymous + n > this.limit / ANONYMOUS_PART)
      return new AppError(
        'UNAVAILABLE',
        `The request bodies of anonymous callers and searches under way on this process hold more than ${Math.floor(this.limit / ANONYMOUS_PART)} bytes (a quarter of BODIES_HELD_BYTES): retry shortly`,
        {},
        RETRY_AFTER_SECONDS,
      );
    if (this.sum > mine && this.sum + n > this.limit)
      return new AppError(
        'UNAVAILABLE',
        `The request bodies under way on this process hold more than ${this.limit} bytes (BODIES_HELD_BYTES): retry shortly`,
        {},
        RETRY_AFTER_SECONDS,
      );
    this.byCaller.set(caller, had + n);
    this.sum += n;
    if (anonymous) this.anonymous += n;
    return undefined;
  }

  /**
   * Counts the `n` bytes a request holds under `from` under `to` (its token checked: its user; a
   * body read without one: its address), checked there as if they came now (`take`, the request
   * holding nothing else): the error to answer when refused, and nothing is held then. Moved as
   * they were, refused for nothing, a body that came whole while its token was looked up (in the
   * share of such bodies) was never checked in the anonymous bodies' part: a search's form body,
   * not weighed again parsed as a write's is, held outside it (the fourth review: nine readers'
   * searches of 1,000,000 bytes held 6,000,000 where the part was 2 MiB).
   */
  move(from: string, to: string, n: number): AppError | undefined {
    if (n <= 0 || from === to) return undefined;
    this.give(from, n);
    return this.take(to, n, 0);
  }

  /** Gives back `n` bytes a request of `caller` held. */
  give(caller: string, n: number): void {
    if (n <= 0) return;
    const left = this.heldBy(caller) - n;
    if (left > 0) this.byCaller.set(caller, left);
    else this.byCaller.delete(caller);
    this.sum -= n;
    if (isAnonymous(caller)) this.anonymous -= n;
  }
}
