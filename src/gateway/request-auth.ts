import type { Principal } from '../content/permissions.js';
import { AppError } from '../errors.js';
import type { TokenService } from '../security/token-service.js';
import type { Exchange } from './http.js';

/**
 * The caller of a request that needs a token, as they are once the whole request has arrived:
 * the one rule every handler of the content and file services gets its principal by.
 *
 * The token is checked when the headers arrive (401 at once, nothing of the body waited for)
 * and, for a request whose body is still coming, again once it is complete (`Exchange.whole`);
 * the principal answered is the second check's. A body may take minutes to arrive (uWS cuts
 * only one slower than 16 KB/s averaged over 10 s: a 10 MiB body may take ~640 s): a write
 * whose body was finished after a logout, a password change or the removal of roles committed
 * as the caller had been when it started (found by a hunt, F1). Now it answers 401 or 403 as a
 * request sent then would, and nothing is stored or queued. The second check is cheap: the
 * token's lookup is cached, and a revocation or account change reaches the cache at once
 * (TokenService.forget; other processes through the revocation feed).
 *
 * `refuse`, given, answers for a caller who cannot do what the request needs whatever its body
 * holds (`ContentService.authenticate` with its `Needs`: a reader's create, update, draft, view
 * change, restore or promote; a webhook or re-index by anyone but sysadmin): 403 at the first
 * check, before the body is waited for, and at the second. Before (the fourth review), a
 * reader's create was refused 403 only once its body was whole, held under its user until then:
 * accounts of one's own with Read alone held BODIES_HELD_PER_CALLER_BYTES each (eight the whole
 * BODIES_HELD_BYTES), and at 2 MiB readers' creates, updates and views that never finished held
 * all of it and a writer's body answered 503.
 *
 * A client that went away before its body was complete gets nothing done. Streamed bodies
 * (uploads, bulk imports) are not waited for here: an upload checks again before its file is
 * made permanent (FileService.upload), an import watches its token (TokenService.watch).
 */
export function authenticateRequest(
  tokens: Pick<TokenService, 'required' | 'known'>,
  x: Exchange,
  refuse?: (user: Principal) => AppError | undefined,
): Promise<Principal> {
  return checkedTwice(tokens, x, (token) => tokens.required(token), refuse);
}

/**
 * The caller of a request whose token is optional (a search, which may have a form body): null
 * without an `X-Auth-Token`, 401 for one that is not valid (TokenService.caller), by the same
 * two checks as `authenticateRequest`, before the handler reads the body. A body with a token
 * thus counts under its user from the first check (bodies-held.ts), not under its client
 * address: before (the fourth review), a search read its form body before its token, and a
 * signed-in user's POST search was counted in its address's share, where anonymous searches
 * that never finished had it answer 429.
 */
export function requestCaller(tokens: Pick<TokenService, 'caller' | 'known'>, x: Exchange): Promise<Principal | null> {
  return checkedTwice(tokens, x, (token) => tokens.caller(token));
}

/**
 * The two checks of `authenticateRequest` and `requestCaller`: `check` answers for a token not in
 * the cache. `refuse` answers for a caller who cannot do what the request needs, whatever its
 * body holds, at each check: at the first, before the body is waited for (bodies-held.ts).
 */
async function checkedTwice<P extends Principal | null>(
  tokens: Pick<TokenService, 'known'>,
  x: Exchange,
  check: (token: string | undefined) => Promise<P>,
  refuse?: (user: Principal) => AppError | undefined,
): Promise<Principal | P> {
  // A body complete before the first check began (a DELETE's, read by noBody first): one check.
  const arrived = x.arrived;
  const token = x.header('x-auth-token');
  const first = tokens.known(token) ?? (await check(token));
  const refused = first && refuse?.(first);
  if (refused) throw refused;
  // The body counts under its writer from now on, not its address (bodies-held.ts).
  if (first) x.countUnder(first);
  if (arrived) return first;
  await x.whole();
  if (x.aborted) throw new AppError('BAD_REQUEST', 'The client went away before the body was complete');
  const second = tokens.known(token) ?? (await check(token));
  const later = second && refuse?.(second);
  if (later) throw later;
  return second;
}

/**
 * `authenticateRequest`'s answer when it is known at once: the request has arrived whole and its
 * token is in this process's cache (TokenService.known); undefined otherwise. A handler of a hot
 * read takes it before awaiting `authenticateRequest`, so that a read answered from caches
 * awaits no promise.
 */
export function knownCaller(tokens: Pick<TokenService, 'known'>, x: Exchange): Principal | undefined {
  return x.arrived ? tokens.known(x.header('x-auth-token')) : undefined;
}
