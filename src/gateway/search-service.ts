import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import { escapePhrase, escapeTerm, type SolrEngine } from '../adapters/search-engine.js';
import { parseVersionId, type Snapshot } from '../actors/content/model.js';
import type { Variants } from '../actors/content/variants.js';
import { AppError } from '../errors.js';
import { GLOBAL_CONTEXT, WILDCARD, type Principal, type SecurityConfig } from '../security/permissions.js';
import type { TokenService } from '../security/token-service.js';
import { contentEnvelope } from './envelope.js';
import type { Exchange } from './http.js';
import { Router, type Params } from './router.js';
import { entityHasContent } from '../actors/content/taxonomy.js';

export const SEARCH_PREFIX = 'search-service';

/**
 * Parameters a caller may not send: they would change the handler, the response format, the
 * collection or where the engine reads from, and so could step around the filters.
 */
const FORBIDDEN = /^(qt|shards|shards\..*|stream\..*|collection|json|json\..*|_route_|wt|echoParams|debug.*|explainOther|update.*|commit.*|indent|spellcheck.*|terms.*|suggest.*|expand\..*|.+\.q|.+\.fq)$/;
/** Our own parameters, not sent to the engine. */
const OWN = new Set(['view', 'variant', 'inlineData']);

export interface SearchServiceDeps {
  settings: Settings;
  store: ContentStore;
  tokens: TokenService;
  security: SecurityConfig;
  variants: Variants;
  engine: SolrEngine | null;
  clock: () => number;
}

/**
 * The search service: a permission-aware proxy in front of the engine's standard search
 * handler. The caller's parameters go through unchanged except the forbidden ones; the
 * platform adds its filters as extra `fq` parameters, which the caller cannot remove (every
 * fq must match) and which use explicit local params, so defType and the like do not touch them.
 */
export class SearchService {
  readonly router = new Router();

  constructor(private readonly d: SearchServiceDeps) {
    this.router.on('GET', ':collection/select', (x, p) => this.select(x, p));
    this.router.on('POST', ':collection/select', (x, p) => this.select(x, p));
  }

  private async select(x: Exchange, p: Params): Promise<void> {
    if (!this.d.engine) throw new AppError('UNAVAILABLE', 'No search engine is configured (set SOLR_URL, or install Java and Maven for the embedded Solr)', {}, 30);
    if (!/^[A-Za-z0-9_.-]{1,128}$/.test(p.collection)) throw new AppError('BAD_REQUEST', 'Invalid collection name');
    const params = await this.params(x);
    const token = x.header('x-auth-token');
    let user: Principal | null = null;
    if (token !== undefined) {
      user = await this.d.tokens.authenticate(token);
      if (!user) throw new AppError('NOT_AUTHENTICATED', 'Invalid or expired token');
    }
    const view = params.get('view');
    const variant = params.get('variant');
    const inline = params.has('inlineData');
    const out = new URLSearchParams();
    for (const [k, v] of params) {
      if (OWN.has(k)) continue;
      if (FORBIDDEN.test(k)) throw new AppError('BAD_REQUEST', `Parameter '${k}' is not allowed through the search service`);
      // A [subquery] document transformer runs queries without the platform's filters.
      if (k === 'fl' && /\[\s*subquery/i.test(v)) throw new AppError('BAD_REQUEST', 'The [subquery] transformer is not allowed through the search service');
      out.append(k, v);
    }
    out.set('wt', 'json');
    for (const fq of this.filters(user, view, variant)) out.append('fq', fq);
    const res = await this.d.engine.select(p.collection, out);
    if (res.status !== 200 || !inline) {
      // The engine's status and JSON body, unchanged (CONTRACT §12).
      x.send(res.status, [['Content-Type', res.contentType.startsWith('application/json') ? 'application/json' : res.contentType]], res.body);
      return;
    }
    const body = JSON.parse(res.body) as { response?: { docs?: Record<string, unknown>[] } };
    await Promise.all((body.response?.docs ?? []).map(async (doc) => {
      doc._content = await this.inline(String(doc.id ?? ''), variant);
    }));
    x.sendJson(200, body);
  }

  /** Query parameters, and for POST the form body; the JSON request API is refused. */
  private async params(x: Exchange): Promise<URLSearchParams> {
    const params = new URLSearchParams(x.rawQuery);
    if (x.method === 'POST') {
      const type = (x.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
      const body = await x.body();
      if (body.length) {
        if (type !== 'application/x-www-form-urlencoded') throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Send search parameters as query parameters or an application/x-www-form-urlencoded body; the JSON request API is not supported');
        for (const [k, v] of new URLSearchParams(body.toString('utf8'))) params.append(k, v);
      }
    }
    const wt = params.get('wt');
    if (wt !== null && wt !== 'json') throw new AppError('BAD_REQUEST', 'Only JSON responses are supported (wt=json)');
    params.delete('wt');
    return params;
  }

  /** The filters the caller's permissions, view and variant impose, as fq values. */
  private filters(user: Principal | null, view: string | null, variant: string | null): string[] {
    const fqs: string[] = [];
    const now = new Date(this.d.clock()).toISOString();
    const onView = (v: string) => `(+svc_views_ss:${escapeTerm(v)} +svc_timestate_${v.replace(/[^A-Za-z0-9_-]/g, '_')}_drange:"${now}")`;
    if (user) {
      fqs.push(`{!lucene}${readFilter(this.d.security, user)}`);
    } else {
      const pub = this.d.settings.PUBLIC_VIEWS.split(',');
      fqs.push(`{!lucene}(${pub.map(onView).join(' OR ')}) AND -svc_contentstate_hidden_b:true`);
    }
    if (view !== null) {
      if (!/^[A-Za-z0-9_~@.-]{1,256}$/.test(view)) throw new AppError('BAD_REQUEST', 'Invalid view name');
      fqs.push(`{!lucene}${onView(view)}`);
    }
    if (variant !== null) {
      if (!/^[A-Za-z0-9_~@.-]{1,256}$/.test(variant)) throw new AppError('BAD_REQUEST', 'Invalid variant name');
      const types = this.d.variants.typesWith(variant);
      if (types !== '*') fqs.push(types.length ? `{!lucene}svc_type_s:(${types.map((t) => `"${escapePhrase(t)}"`).join(' OR ')})` : '{!lucene}-*:*');
    }
    return fqs;
  }

  /** The `_content` of a result: the version's envelope (in the variant, if one was asked). */
  private async inline(versionId: string, variant: string | null): Promise<unknown> {
    const v = parseVersionId(versionId);
    if (!v) return null;
    const head: Snapshot | null = await this.d.store.head(v.cid);
    const version = await this.d.store.version(v.cid, v.key);
    if (!head || head.deleted || !version) return null;
    if (variant === null) return contentEnvelope(head, version);
    const aspects = await this.d.variants.apply(variant, { snapshot: head, version, hasTaxonomyContent: (id, dim) => entityHasContent(this.d.store, dim, id) });
    return aspects ? contentEnvelope(head, { ...version, aspects }) : null;
  }
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
      const byType = Object.prototype.hasOwnProperty.call(cfg.roles, role) ? cfg.roles[role] : {};
      for (const [type, perms] of Object.entries(byType)) if (perms.includes('Read') || perms.includes(WILDCARD)) types.add(type);
    }
    if (!types.size) continue;
    const typeClause = types.has(WILDCARD) ? '' : `+svc_type_s:(${[...types].map((t) => `"${escapePhrase(t)}"`).join(' OR ')})`;
    const ctxClause = ctx === GLOBAL_CONTEXT ? '' : `+svc_security_context_ss:"${escapePhrase(ctx)}"`;
    clauses.push(typeClause || ctxClause ? `(${ctxClause} ${typeClause})`.replace('( ', '(').replace(' )', ')') : '(*:*)');
  }
  return clauses.length ? `(${clauses.join(' OR ')})` : '(-*:*)';
}
