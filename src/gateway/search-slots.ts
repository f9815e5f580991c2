import type { Settings } from '../../config/settings.js';
import type { Principal } from '../content/permissions.js';
import { AppError } from '../errors.js';
import { limitedAddress, trustedProxies } from '../security/client-address.js';
import type { Exchange } from './http.js';
import { KeyedCounts } from './keyed-counts.js';

/** Retry-After (s) of a search refused for its caller's bound: searches last at most SEARCH_TIME_ALLOWED_MS (5 s), most far less. */
const SEARCH_RETRY_AFTER_SECONDS = 1;

/**
 * Searches under way at once per caller on this web process: at most SEARCH_AT_ONCE_PER_CALLER,
 * whatever asks the engine for them (the search proxy, JSON or javabin, and taxonomy completion
 * that looks in the index). A caller is its user id when signed in, else its client address as
 * the login limit and the change feed count it (`limitedAddress`: IPv6 by its /64; behind
 * TRUSTED_PROXIES the forwarded address). Past the bound `run` refuses with 429 and Retry-After,
 * before the engine is asked. Each search costs the engine at most about `SEARCH_CPU_ALLOWED_MS`
 * of CPU and SEARCH_TIME_ALLOWED_MS of wall time; before, one caller, anonymous ones included,
 * could run as many at once as MAX_IN_FLIGHT let through (eight heavy phrase searches at once
 * cost the embedded Solr 5 s of CPU on its 2 cores).
 */
export class SearchSlots {
  private readonly held = new KeyedCounts();

  constructor(private readonly perCaller: number) {}

  /**
   * Runs `search` in a slot of the caller, or refuses with 429 past its bound. The slot is counted
   * as `run` is called, before anything is awaited, so that searches sent at once cannot all pass
   * the check before one of them counts; it is given back however the search ends (answered,
   * failed, thrown).
   */
  async run<T>(caller: string, search: () => Promise<T>): Promise<T> {
    if (this.held.get(caller) >= this.perCaller)
      throw new AppError(
        'TOO_MANY_REQUESTS',
        `At most ${this.perCaller} searches of one caller are under way at once (SEARCH_AT_ONCE_PER_CALLER): retry when one has answered`,
        {},
        SEARCH_RETRY_AFTER_SECONDS,
      );
    this.held.add(caller);
    try {
      return await search();
    } finally {
      this.held.remove(caller);
    }
  }
}

/**
 * The caller a search counts for: `user:<id>` when signed in, else `address:` and the client
 * address as `limitedAddress` counts it (behind TRUSTED_PROXIES the forwarded one). Asked while
 * the client is still there (not `x.aborted`): the socket's address is gone with it.
 */
export function searchCaller(user: Principal | null, x: Exchange, settings: Settings): string {
  return user ? `user:${user.userId}` : `address:${limitedAddress(x.clientAddress(trustedProxies(settings.TRUSTED_PROXIES)))}`;
}
