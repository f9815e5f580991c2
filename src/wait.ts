/** Waiting: a pause, and retrying a step with back-off until it succeeds or the caller stops. */

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `step` until it succeeds or `keepGoing()` turns false, waiting 200 ms, 400 ms, … up to
 * 5 s between attempts; `onFailure` hears each failure before the wait (to log it).
 * The caller checks `keepGoing()` afterwards to tell success from being stopped.
 */
export async function retryWithBackoff(
  step: () => Promise<unknown>,
  keepGoing: () => boolean,
  onFailure: (err: unknown, attempt: number, retryInMs: number) => void,
): Promise<void> {
  for (let attempt = 1; keepGoing(); attempt++) {
    try {
      await step();
      return;
    } catch (e) {
      const wait = Math.min(5000, 100 * 2 ** attempt);
      onFailure(e, attempt, wait);
      await sleep(wait);
    }
  }
}
