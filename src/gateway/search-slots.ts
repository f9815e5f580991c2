import type { Settings } from '../../config/settings.js';
import { AppError } from '../errors.js';
import { Turns } from '../adapters/turns.js';
import { KeyedCounts } from './keyed-counts.js';

/** Retry-After (s) of a refused search: searches last at most SEARCH_TIME_ALLOWED_MS (5 s), most far less. */
const SEARCH_RETRY_AFTER_SECONDS = 1;

/**
 * Searches under way on this web process, whatever asks the engine for them (the search proxy,
 * JSON or javabin, and taxonomy completion that looks in the index). Two bounds:
 *
 * - Per caller, at most SEARCH_AT_ONCE_PER_CALLER, running or waiting. A caller is its user id
 *   when signed in, else its client address as the login limit and the change feed count it
 *   (`limitedAddress`: IPv6 by its /64; behind TRUSTED_PROXIES the forwarded address). Past it
 *   `run` refuses with 429 and Retry-After, before the engine is asked. Before, one caller,
 *   anonymous ones included, could run as many at once as MAX_IN_FLIGHT let through (eight heavy
 *   phrase searches at once cost the embedded Solr 5 s of CPU on its 2 cores).
 * - For the process, at most SEARCH_AT_ONCE asked of the engine at once; the next
 *   SEARCH_WAITING wait their turn, first come first, and past those `run` refuses with 503 and
 *   Retry-After. Before, many callers together (many addresses, many users, each within its own
 *   bound) were bounded only by MAX_IN_FLIGHT: as many searches as requests, each one costing
 *   the engine up to SEARCH_CPU_ALLOWED_MS of CPU and its memory for facets, sorts and groups.
 *
 * Each search costs the engine at most about `SEARCH_CPU_ALLOWED_MS` of CPU and
 * SEARCH_TIME_ALLOWED_MS of wall time.
 */
export class SearchSlots {
  private readonly held = new KeyedCounts();
  /** The process's turns at the engine: SEARCH_AT_ONCE asking, SEARCH_WAITING waiting. */
  private readonly turns: Turns;

  constructor(
    private readonly perCaller: number,
    private readonly atOnce = Number.POSITIVE_INFINITY,
    private readonly waiting = Number.POSITIVE_INFINITY,
  ) {
    this.turns = new Turns(atOnce, waiting);
  }

  /**
   * Runs `search` in a slot of the caller and of the process, or refuses: 429 past the caller's
   * bound, 503 past the process's waiting line. The caller's slot is counted as `run` is called,
   * before anything is awaited, so that searches sent at once cannot all pass the check before
   * one of them counts; both are given back however the search ends (answered, failed, thrown).
   * `search` is called when its turn comes: a search that waited asks itself whether its client
   * is still there.
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
      return await this.turns.run(
        search,
        () =>
          new AppError(
            'UNAVAILABLE',
            `Too many searches are under way on this process (SEARCH_AT_ONCE ${this.atOnce}, and ${this.waiting} waiting): retry shortly`,
            {},
            SEARCH_RETRY_AFTER_SECONDS,
          ),
      );
    } finally {
      this.held.remove(caller);
    }
  }

  /** Searches asked of the engine now, and waiting (tests, metrics). */
  get underWay(): { asking: number; waiting: number } {
    const { running, waiting } = this.turns.load;
    return { asking: running, waiting };
  }
}

/** The slots of a web process's searches by its settings. */
export function searchSlotsOf(s: Settings): SearchSlots {
  return new SearchSlots(s.SEARCH_AT_ONCE_PER_CALLER, s.SEARCH_AT_ONCE, s.SEARCH_WAITING);
}
