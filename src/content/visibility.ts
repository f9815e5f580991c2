import { escapePhrase, escapeTerm } from './search-document.js';
import { contextsOf, type Snapshot } from './model.js';
import { fieldSafe } from './variants.js';
import { timeWindow, versionOnView } from './views.js';
import { GLOBAL_CONTEXT, WILDCARD, isAllowed, type Principal, type SecurityConfig } from './permissions.js';

/**
 * Who may see a content version (CONTRACT §9 and §20): with a token, what the caller may Read;
 * without, a version on a public view, not hidden, inside its time state. One rule in two forms,
 * kept side by side so they cannot drift apart: over a stored snapshot (`mayReadVersion`, for
 * inlined search results and file delivery) and as a search filter over the index
 * (`visibilityFilter`, for search and taxonomy completion).
 */
export interface VisibilityRules {
  security: SecurityConfig;
  /** The views marked public (setting PUBLIC_VIEWS). */
  publicViews: readonly string[];
}

/** Keys of the versions on a public view at `now` (inside its time state); none for hidden content. */
export function publicVersionKeys(head: Snapshot, publicViews: readonly string[], now: number): string[] {
  if (head.deleted || head.meta.svcContentState?.hidden === true) return [];
  return publicViews.map((v) => versionOnView(head, v, now)).filter((k): k is string => k !== null);
}

/**
 * Until when version `versionKey` stays on a public view by its time state, as seen at `now`:
 * the latest `offTime` of the public views that hold it now (epoch ms), or null when one of them
 * has none. What shared caches may keep it for (a takedown by hiding, a view change or a delete
 * cannot be foreseen; README, PUBLIC_CACHE_MAX_AGE).
 */
export function publicUntil(head: Snapshot, publicViews: readonly string[], versionKey: string, now: number): number | null {
  let until = Number.NEGATIVE_INFINITY;
  for (const v of publicViews) {
    if (versionOnView(head, v, now) !== versionKey) continue;
    const off = timeWindow(head, v).off;
    if (off === undefined) return null;
    until = Math.max(until, off);
  }
  return until;
}

/** Read permission on a content, by its type and the contexts of its owners: what a token may see of it. */
export function mayRead(security: SecurityConfig, principal: Principal, head: Snapshot): boolean {
  return isAllowed(security, principal, 'Read', head.type, contextsOf(head.meta));
}

/** May the caller (null: no token) read version `versionKey` of the content whose current state is `head`? */
export function mayReadVersion(rules: VisibilityRules, principal: Principal | null, head: Snapshot, versionKey: string, now: number): boolean {
  if (head.deleted) return false;
  if (principal) return mayRead(rules.security, principal, head);
  return publicVersionKeys(head, rules.publicViews, now).includes(versionKey);
}

/**
 * The same rule as a filter query (an `fq` value) over the documents of the indexer
 * (`svc_views_ss`, `svc_timestate_<view>_drange`, `svc_contentstate_hidden_b`, `svc_type_s`,
 * `svc_security_context_ss`). Its explicit `{!lucene}` and operators make it independent of the
 * request's defType, q.op and df.
 */
export function visibilityFilter(rules: VisibilityRules, principal: Principal | null, now: number): string {
  if (principal) return `{!lucene}${readFilter(rules.security, principal)}`;
  return `{!lucene}(${rules.publicViews.map((v) => onViewClause(v, now)).join(' OR ')}) AND -svc_contentstate_hidden_b:true`;
}

/** Documents on `view` at `now` (inside its time state), as a filter query. */
export function onViewFilter(view: string, now: number): string {
  return `{!lucene}${onViewClause(view, now)}`;
}

function onViewClause(view: string, now: number): string {
  return `(+svc_views_ss:${escapeTerm(view)} +svc_timestate_${fieldSafe(view)}_drange:"${new Date(now).toISOString()}")`;
}

/**
 * What a principal may read, as a query: for each context where it holds roles, the content
 * types those roles grant Read on. Roles in `__global__` apply to all content; others only to
 * content owned by that context.
 */
export function readFilter(cfg: SecurityConfig, user: Principal): string {
  const clauses: string[] = [];
  for (const [ctx, roles] of Object.entries(user.contexts)) {
    const types = new Set<string>();
    for (const role of roles) {
      const byType = Object.hasOwn(cfg.roles, role) ? cfg.roles[role] : {};
      for (const [type, perms] of Object.entries(byType)) if (perms.includes('Read') || perms.includes(WILDCARD)) types.add(type);
    }
    if (!types.size) continue;
    const typeClause = types.has(WILDCARD) ? '' : `+svc_type_s:(${[...types].map((t) => `"${escapePhrase(t)}"`).join(' OR ')})`;
    const ctxClause = ctx === GLOBAL_CONTEXT ? '' : `+svc_security_context_ss:"${escapePhrase(ctx)}"`;
    clauses.push(typeClause || ctxClause ? `(${ctxClause} ${typeClause})`.replace('( ', '(').replace(' )', ')') : '(*:*)');
  }
  return clauses.length ? `(${clauses.join(' OR ')})` : '(-*:*)';
}
