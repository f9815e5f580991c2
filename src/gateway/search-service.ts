import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import { indexSchema } from '../adapters/index-schema.js';
import type { SolrEngine } from '../adapters/search-engine.js';
import { escapePhrase } from '../content/search-document.js';
import { parseVersionId, type Snapshot } from '../content/model.js';
import type { Variants } from '../content/variants.js';
import { AppError } from '../errors.js';
import type { Principal, SecurityConfig } from '../content/permissions.js';
import type { TokenService } from '../security/token-service.js';
import { contentEnvelope } from './envelope.js';
import type { Exchange } from './http.js';
import { Reads } from './reads.js';
import { requestCaller } from './request-auth.js';
import { Router, type Params } from './router.js';
import { checkParameterCount, checkSearchParams, engineErrorQuery, type SearchRequest } from './search-params.js';
import { engineErrorAnswer, noCollection } from './search-errors.js';
import { callerKey } from './keyed-counts.js';
import { type SearchSlots, searchSlotsOf } from './search-slots.js';
import { composeVariant } from './variant-reads.js';

export const SEARCH_PREFIX = 'search-service';

/**
 * The largest form body of a search (the gateway answers 413 past it, as for MAX_BODY_BYTES):
 * what the engine itself takes in a form body (`formdataUploadLimitInKB="2048"`,
 * tools/solr/configsets/content/conf/solrconfig.xml), far more than MAX_SEARCH_PARAMETERS values
 * of a useful length need. Before (the eighteenth session's third review), a search body could
 * have MAX_BODY_BYTES (10 MiB).
 */
export const SEARCH_MAX_BODY_BYTES = 2048 * 1024;

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
 * The engine's JSON answer without its `responseHeader` (the caller's `omitHeader`), unless the
 * header says the results are partial (`timeAllowed` or `cpuAllowed` ran out): that the caller
 * must see. The header is the answer's first member (Solr's JSON writer); an answer of another
 * shape is left as it is.
 */
export function withoutHeader(body: string): string {
  const start = /^\s*\{\s*"responseHeader"\s*:\s*(?=\{)/.exec(body);
  if (!start) return body;
  const end = endOfObject(body, start[0].length);
  if (end < 0) return body;
  try {
    if ((JSON.parse(body.slice(start[0].length, end)) as { partialResults?: unknown }).partialResults === true) return body;
  } catch {
    return body;
  }
  return `{${body.slice(end).replace(/^\s*,/, '')}`;
}

/** The index just past the JSON object that starts at `from` (a `{`), strings read with their escapes; -1 when it does not end. */
function endOfObject(text: string, from: number): number {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '{' || c === '[') depth++;
    else if ((c === '}' || c === ']') && --depth === 0) return i + 1;
  }
  return -1;
}

/** Results whose content is read at once for `inlineData` (SearchService.inlineAll). */
const INLINE_AT_ONCE = 16;

/**
 * The search service: a permission-aware proxy in front of the engine's standard search
 * handler. The caller's parameters must pass the allowlist (search-params.ts, CONTRACT §20);
 * the platform adds its filters as extra `fq` parameters, which the caller cannot remove (every
 * fq must match) and which use explicit local params, so defType and the like do not touch them.
 * Inlined content is loaded only where the caller may read it, by the same rule as the filters
 * (reads.ts over content/visibility.ts); engine errors come back without traces or addresses (search-errors.ts).
 * Answers are JSON, or javabin for SolrJ (`wt=javabin`, passed through unread).
 */
export class SearchService {
  readonly router = new Router();
  /** What the caller may see: the filters and the inlined content follow the one read rule. */
  private readonly reads: Reads;
  /** Searches under way per caller and in all (SEARCH_AT_ONCE_PER_CALLER, SEARCH_AT_ONCE); the gateway hands them to taxonomy completion too. */
  readonly slots: SearchSlots;

  constructor(private readonly d: SearchServiceDeps) {
    this.reads = new Reads(d);
    this.slots = searchSlotsOf(d.settings);
    this.router.on('GET', ':collection/select', (x, p) => this.select(x, p));
    this.router.on('POST', ':collection/select', (x, p) => this.select(x, p));
  }

  private async select(x: Exchange, p: Params): Promise<void> {
    if (!this.d.engine)
      throw new AppError('UNAVAILABLE', 'No search engine is configured (set SOLR_URL, or install Java and Maven for the embedded Solr)', {}, 30);
    if (!/^[A-Za-z0-9_.-]{1,128}$/.test(p.collection)) throw new AppError('BAD_REQUEST', 'Invalid collection name');
    // Only the platform's collection: the filters are written for its documents, and another
    // collection of a shared engine (read in full through a global reader's filter) must answer
    // as one that does not exist, so the proxy tells nothing of what else the engine holds.
    if (p.collection !== this.d.settings.SOLR_COLLECTION) throw new AppError('NOT_FOUND', noCollection(p.collection));
    const s = this.d.settings;
    // The token before the body: a form body with a token counts under its user, not its client
    // address (request-auth.ts), and is checked again once it has arrived.
    const user = await requestCaller(this.d.tokens, x);
    const request = checkSearchParams(
      await this.params(x),
      {
        maxRangeBuckets: s.SEARCH_MAX_RANGE_BUCKETS,
        timeAllowedMs: s.SEARCH_TIME_ALLOWED_MS,
        maxClauses: s.SEARCH_MAX_CLAUSES,
        maxMultiTerms: s.SEARCH_MAX_MULTI_TERMS,
        maxFilterQueries: s.SEARCH_MAX_FILTER_QUERIES,
        maxFacetValues: s.SEARCH_MAX_FACET_VALUES,
      },
      indexSchema(),
    );
    // A client gone while its body or its token was awaited has nothing asked of the engine (and
    // its address, by which an anonymous caller is counted, is gone with it).
    if (x.aborted) return;
    const engine = this.d.engine;
    // From here to its last await the search holds one of its caller's slots, taken before
    // anything is awaited (search-slots.ts): past SEARCH_AT_ONCE_PER_CALLER, 429; it may wait for
    // one of the process's SEARCH_AT_ONCE (past SEARCH_WAITING, 503), and a client gone meanwhile
    // has nothing asked of the engine.
    await this.slots.run(callerKey(user, x, s), async () => {
      if (!x.aborted) await this.ask(x, engine, p.collection, request, user);
    });
  }

  /**
   * Asks the engine a checked search with the caller's filters and answers it: JSON (with
   * `inlineData` the content the caller may read), or javabin passed through.
   */
  private async ask(x: Exchange, engine: SolrEngine, collection: string, request: SearchRequest, user: Principal | null): Promise<void> {
    const now = this.d.clock();
    const out = request.engine;
    for (const fq of this.filters(user, request.view, request.variant, now)) out.append('fq', fq);
    if (request.format === 'javabin') return this.passBinary(x, engine, collection, out);
    const res = await engine.select(collection, out);
    if (res.status !== 200) {
      const answer = engineErrorAnswer(collection, res);
      x.sendJson(answer.status, answer.body);
      return;
    }
    if (!request.inlineData) {
      x.send(200, [['Content-Type', 'application/json']], request.omitHeader ? withoutHeader(res.body) : res.body);
      return;
    }
    const body = JSON.parse(res.body) as { responseHeader?: { partialResults?: unknown }; response?: { docs?: Record<string, unknown>[] } };
    if (request.omitHeader && body.responseHeader?.partialResults !== true) delete body.responseHeader;
    await this.inlineAll(body.response?.docs ?? [], request.variant, user, now);
    x.sendJson(200, body);
  }

  /**
   * Sets `_content` on every result, INLINE_AT_ONCE results at a time, within
   * SEARCH_INLINE_MAX_BYTES of stored content read in all: a result's head is read if it fits
   * what is left, then, if the caller may read the version, the version if it fits (their sizes
   * are asked of Redis before they are read). From the first that does not fit on, `_content` is
   * null and `_contentOmitted` true. A version the caller may not read is never counted. Before,
   * every result's head and version were read at once, whatever their size: 1,000 public
   * contents of 9 MB made one anonymous search hold gigabytes, and past V8's longest string the
   * answer was a 500 (the seventeenth session's review).
   */
  private async inlineAll(docs: Record<string, unknown>[], variant: string | null, user: Principal | null, now: number): Promise<void> {
    let left = this.d.settings.SEARCH_INLINE_MAX_BYTES;
    const omit = (doc: Record<string, unknown>) => {
      left = -1;
      doc._content = null;
      doc._contentOmitted = true;
    };
    for (let at = 0; at < docs.length; at += INLINE_AT_ONCE) {
      const chunk = docs.slice(at, at + INLINE_AT_ONCE).map((doc) => ({ doc, v: parseVersionId(String(doc.id ?? '')) }));
      const named = chunk.filter((c): c is { doc: Record<string, unknown>; v: NonNullable<typeof c.v> } => c.v !== null);
      for (const c of chunk) if (!c.v) c.doc._content = null;
      const sizes = await this.d.store.storedSizes(named.map(({ v }) => ({ cid: v.cid, versionKey: v.key })));
      const heads: ((typeof named)[number] & { versionSize: number })[] = [];
      named.forEach((c, i) => {
        if (left < sizes[i].head) omit(c.doc);
        else {
          left -= sizes[i].head;
          heads.push({ ...c, versionSize: sizes[i].version });
        }
      });
      const read = await Promise.all(heads.map(({ v }) => this.d.store.head(v.cid)));
      const versions: { c: (typeof named)[number]; head: Snapshot }[] = [];
      heads.forEach((c, i) => {
        const head = read[i];
        if (!head || !this.reads.mayReadVersion(user, head, c.v.key, now)) c.doc._content = null;
        else if (left < c.versionSize) omit(c.doc);
        else {
          left -= c.versionSize;
          versions.push({ c, head });
        }
      });
      await Promise.all(
        versions.map(async ({ c, head }) => {
          c.doc._content = await this.envelopeOf(head, c.v, variant);
        }),
      );
    }
  }

  /** The `_content` of a result the caller may read: the version's envelope, in the variant if one was asked; null when it is gone or has no such variant. */
  private async envelopeOf(head: Snapshot, v: { cid: string; key: string }, variant: string | null): Promise<unknown> {
    const version = await this.d.store.version(v.cid, v.key);
    if (!version) return null;
    if (variant === null) return contentEnvelope(head, version);
    const aspects = await composeVariant(this.d, variant, head, version);
    return aspects ? contentEnvelope(head, { ...version, aspects }) : null;
  }

  /**
   * A javabin answer (SolrJ's default format) goes to the caller as the engine wrote it, with its
   * content type: the query, and so the filters, are those of a JSON request; only the writer
   * differs. An engine error in javabin cannot be cleaned of traces and addresses (CONTRACT §20)
   * without a decoder, so the engine is asked again in JSON, its query alone with no rows
   * (engineErrorQuery: a search that ran it out of memory does not run twice), and its cleaned
   * error answers (as JSON, which SolrJ reports with the body's text).
   */
  private async passBinary(x: Exchange, engine: SolrEngine, collection: string, params: URLSearchParams): Promise<void> {
    const res = await engine.selectBytes(collection, params);
    if (res.status === 200) {
      x.send(200, [['Content-Type', res.contentType]], res.body);
      return;
    }
    const again = await engine.select(collection, engineErrorQuery(params));
    const answer = engineErrorAnswer(collection, again.status === 200 ? { status: res.status, contentType: '', body: '' } : again);
    x.sendJson(answer.status, answer.body);
  }

  /**
   * Query parameters, and for POST the form body (at most SEARCH_MAX_BODY_BYTES: the gateway's
   * Exchange for a search route); the JSON request API is refused. The parameters are counted on
   * the raw text before either is parsed (checkParameterCount: at most MAX_SEARCH_PARAMETERS).
   */
  private async params(x: Exchange): Promise<URLSearchParams> {
    let body: Buffer | null = null;
    if (x.method === 'POST') {
      const type = (x.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
      body = await x.body();
      if (body.length && type !== 'application/x-www-form-urlencoded')
        throw new AppError(
          'UNSUPPORTED_MEDIA_TYPE',
          'Send search parameters as query parameters or an application/x-www-form-urlencoded body; the JSON request API is not supported',
        );
    }
    checkParameterCount(x.rawQuery, body ?? '');
    const params = new URLSearchParams(x.rawQuery);
    if (body?.length) for (const [k, v] of new URLSearchParams(body.toString('utf8'))) params.append(k, v);
    return params;
  }

  /** The filters the caller's permissions, view and variant impose, as fq values. */
  private filters(user: Principal | null, view: string | null, variant: string | null, now: number): string[] {
    const fqs = this.reads.searchFilters(user, view, now);
    if (variant !== null) {
      const types = this.d.variants.typesWith(variant);
      if (types !== '*') fqs.push(types.length ? `{!lucene}svc_type_s:(${types.map((t) => `"${escapePhrase(t)}"`).join(' OR ')})` : '{!lucene}-*:*');
    }
    return fqs;
  }
}
