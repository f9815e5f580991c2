/**
 * The change feed in the typed client (CONTRACT §13): an async iterator over every event the
 * token may see, that resumes by itself. It long-polls pages and carries the cursor of the last
 * event it handed out, so a dropped connection, a gateway restart or a 503 costs a retry, never an
 * event or a duplicate. Keep `cursor` of the last event you processed to resume after your own
 * restart.
 *
 * @example
 * for await (const e of changes('http://127.0.0.1:8080/content-service', token, { kinds: ['update'] })) {
 *   await purge(e.id);
 *   saveCursor(e.cursor);
 * }
 */

export type ChangeKind = 'create' | 'update' | 'delete' | 'view' | 'timestate';

/** One event of the feed. */
export interface ChangeEvent {
  /** Pass as `since` to resume after this event. */
  cursor: string;
  kind: ChangeKind;
  /** `contentid/<key>` */
  id: string;
  /** The version id (`c:<key>:<version key>`); for a delete, the last version. */
  version: string;
  revision: number;
  contentType: string;
  views: string[];
  /** Every alias, as `namespace/alias`, the main one first. */
  aliases: string[];
  committer: string;
  /** ISO 8601. */
  time: string;
  /** `view` and `timestate`: the view concerned. */
  view?: string;
  /** `view`: whether the content was set on the view or removed from it. */
  action?: 'set' | 'removed';
  /** `timestate`: whether the content is now visible on the view. */
  visible?: boolean;
}

export interface ChangesOptions {
  /** A cursor, `now`, or absent for the oldest event kept. */
  since?: string;
  types?: string[];
  views?: string[];
  kinds?: ChangeKind[];
  /** Events per request (1 to 1000, default 100). */
  limit?: number;
  /** How long one long poll waits on the server, ms (default 25000). */
  pollMs?: number;
  /** Stops the iteration (the current request is aborted). */
  signal?: AbortSignal;
  /**
   * What to do when the cursor is older than what the server keeps (410): `throw` (default) a
   * ChangesGoneError, or `restart` from the oldest event kept (events in between are lost).
   */
  onGone?: 'throw' | 'restart';
  /** Called before a retry after a failure (network error, 5xx), with the wait in ms. */
  onRetry?: (error: unknown, waitMs: number) => void;
  /** The token to send; a function is asked before each request (to renew it). */
  token?: string | (() => string | Promise<string>);
}

/** The cursor is older than what the server keeps (410, 41000): start again without `since`. */
export class ChangesGoneError extends Error {
  constructor(readonly cursor: string | undefined) {
    super('The change feed no longer holds what follows this cursor (410)');
    this.name = 'ChangesGoneError';
  }
}

/** A refusal the iterator cannot get past by retrying (401, 400, 403). */
export class ChangesRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`The change feed refused the request: ${status} ${body}`);
    this.name = 'ChangesRefusedError';
  }
}

/** Waits `ms`, or until `signal` aborts; the abort listener goes when the wait ends, so retries add none. */
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(t);
      resolve();
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/** The longest wait setTimeout takes (a longer one fires at once). */
const MAX_WAIT_MS = 2 ** 31 - 1;

/**
 * A `Retry-After` (RFC 9110 §10.2.3) in ms: delta-seconds or an HTTP-date (one in the past is 0);
 * 0 when absent or unreadable, so the normal back-off applies.
 */
function retryAfterMs(value: string | null, now = Date.now()): number {
  const v = value?.trim();
  if (!v) return 0;
  const ms = /^\d+$/.test(v) ? Number(v) * 1000 : Date.parse(v) - now;
  return Number.isFinite(ms) ? Math.min(MAX_WAIT_MS, Math.max(0, ms)) : 0;
}

/**
 * Every event of the feed from `opts.since`, for ever (until `signal` aborts or the loop breaks).
 * `base` is `{base_url}`, e.g. `http://127.0.0.1:8080/content-service`.
 */
export async function* changes(base: string, token: string | ChangesOptions['token'], opts: ChangesOptions = {}): AsyncGenerator<ChangeEvent, void, undefined> {
  const tokenOf = opts.token ?? token;
  let since = opts.since;
  let failures = 0;
  const signal = opts.signal;
  while (!signal?.aborted) {
    const q = new URLSearchParams({ feed: 'longpoll', timeout: String(opts.pollMs ?? 25000), limit: String(opts.limit ?? 100) });
    if (since) q.set('since', since);
    if (opts.types?.length) q.set('types', opts.types.join(','));
    if (opts.views?.length) q.set('views', opts.views.join(','));
    if (opts.kinds?.length) q.set('kinds', opts.kinds.join(','));
    let res: Response;
    let text: string;
    try {
      const t = typeof tokenOf === 'function' ? await tokenOf() : tokenOf;
      res = await fetch(`${base}/changes?${q}`, { headers: t ? { 'X-Auth-Token': t } : {}, signal });
      text = await res.text();
    } catch (e) {
      if (signal?.aborted) return;
      await backOff(e);
      continue;
    }
    if (res.status === 410) {
      if (opts.onGone !== 'restart') throw new ChangesGoneError(since);
      since = undefined;
      continue;
    }
    if (res.status === 429 || res.status >= 500) {
      await backOff(new Error(`${res.status} ${text}`), retryAfterMs(res.headers.get('retry-after')));
      continue;
    }
    if (res.status !== 200) throw new ChangesRefusedError(res.status, text);
    failures = 0;
    const page = JSON.parse(text) as { changes: ChangeEvent[]; last: string };
    for (const e of page.changes) {
      // Advance before handing out: a consumer that breaks has had this event.
      since = e.cursor;
      yield e;
      if (signal?.aborted) return;
    }
    since = page.last;
  }

  async function backOff(e: unknown, atLeast = 0): Promise<void> {
    failures++;
    const wait = Math.max(atLeast, Math.min(10_000, 100 * 2 ** Math.min(failures, 7)));
    opts.onRetry?.(e, wait);
    await sleep(wait, signal);
  }
}
