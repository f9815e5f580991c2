import { AppError } from '../errors.js';
import SolrNode from 'solr-node';
import type { Json } from '../content/model.js';
import { escapePhrase, escapeTerm, type RawSchema } from '../content/search-document.js';

/** A search document: the fields of an svcSolrDocument aspect, `_type` removed. */
export type SearchDoc = Record<string, Json>;

/** The documents one content should have in the index now (none once it is deleted or on no indexed view). */
export interface ContentDocs {
  cid: string;
  docs: SearchDoc[];
  /**
   * The content has one revision: the index can hold no document of it but these (its one
   * version), so a content the indexer kept no record of has nothing stale to delete. Most of a
   * create-heavy load is such.
   */
  firstRevision?: boolean;
  /** The content is deleted (or unknown): once its documents are deleted, nothing of it is kept (src/actors/index-writer.ts). */
  gone?: boolean;
}

/**
 * The engine refused documents it was sent (HTTP 400 to an add): sent again as they are, they
 * would be refused again. `reason` is the engine's message (Solr's `error.msg`).
 */
export class DocumentRefused extends Error {
  constructor(readonly reason: string) {
    super(`The search engine refused a document: ${reason}`);
    this.name = 'DocumentRefused';
  }
}

/** An update the engine did not take for another reason (5xx, authentication, unreachable): an outage, retried. */
class UpdateFailed extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    /** The engine answered, or was never reached (connection refused): nothing of the request can be applied later. */
    readonly ended: boolean,
  ) {
    super(`Solr update failed: ${status ? `${status} ` : ''}${reason}`);
    this.name = 'UpdateFailed';
  }
}

/**
 * May the engine still apply an update that failed with `e`? Yes after a timeout or a broken
 * connection (the request may be in the engine yet) and for any error this module did not make;
 * no when the engine answered (a refusal, a 5xx) or was never reached.
 */
export function mayStillApply(e: unknown): boolean {
  return !(e instanceof DocumentRefused) && !(e instanceof UpdateFailed && e.ended);
}

/** A long batch may take the engine this long; a hung connection is an outage after it. */
const UPDATE_TIMEOUT_MS = 60_000;
/** Reasons are logged and kept in dead letters: the start of a long one is enough. */
const MAX_REASON_CHARS = 2000;

/**
 * The largest answer the gateway takes from the engine for a search (bytes as they come): past it
 * the answer is cut off (the engine stops at the broken connection) and the search answers 413.
 * An answer is held whole, and turned into a string for JSON, so nothing else bounded what one
 * search held: the twenty-third session's review made one anonymous GET of 1.9 KB (100
 * `group.field`s of one 4 MB public document, `rows=1&group.limit=1`) answer 405 MB in 4.8 s, and
 * four searches of 20 such documents at once (`rows=20`, 81 MB each) added 950 MB of RSS.
 */
export const SEARCH_MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** What the platform uses of a solr-node client. */
interface SolrClient {
  ping(): Promise<{ status?: string }>;
}

/**
 * The search engine behind a small interface: Solr through `solr-node` for the ping, plain
 * HTTP for updates (so that Solr's reason for refusing a document can be read: solr-node hides
 * the body of an error) and for the search proxy (which must pass the engine's status and
 * body on unchanged).
 */
export class SolrEngine {
  private readonly client: SolrClient;
  private readonly base: URL;
  private readonly auth?: string;

  constructor(
    url: string,
    readonly collection: string,
    credentials?: { username: string; password: string },
    private readonly commitWithinMs = 500,
  ) {
    this.base = new URL(url.replace(/\/$/, ''));
    // fetch takes no credentials in a URL: those of SOLR_URL become the basic authentication.
    if (this.base.username && !credentials)
      credentials = { username: decodeURIComponent(this.base.username), password: decodeURIComponent(this.base.password) };
    this.base.username = '';
    this.base.password = '';
    this.client = new SolrNode({
      host: this.base.hostname,
      port: this.base.port || (this.base.protocol === 'https:' ? 443 : 80),
      protocol: this.base.protocol === 'https:' ? 'https' : 'http',
      rootPath: this.base.pathname.replace(/^\//, '') || 'solr',
      core: collection,
      ...(credentials ? { user: credentials.username, password: credentials.password } : {}),
    } as ConstructorParameters<typeof SolrNode>[0]) as unknown as SolrClient;
    if (credentials) this.auth = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
  }

  /**
   * Whether the engine answers its ping handler. One ping at a time: solr-node's request has no
   * timeout, so an engine that accepts and never answers holds one request, never one more per
   * health check (the caller bounds its wait, /health's `within`).
   */
  ping(): Promise<boolean> {
    this.pinging ??= this.client
      .ping()
      .then(
        (r) => r?.status === 'OK',
        () => false,
      )
      .finally(() => {
        this.pinging = undefined;
      });
    return this.pinging;
  }

  private pinging?: Promise<boolean>;

  /**
   * Adds (or replaces) documents with their blocks: Solr replaces an added document's whole
   * block (its child documents) through `_root_`. DocumentRefused when the engine refuses one
   * (the documents before it in the batch may be added), anything else on an outage.
   */
  async add(docs: SearchDoc[]): Promise<void> {
    try {
      await this.update(docs, { commitWithin: String(this.commitWithinMs) });
    } catch (e) {
      throw e instanceof UpdateFailed && e.status === 400 ? new DocumentRefused(e.reason) : e;
    }
  }

  /**
   * Deletes root documents by id, each with its block (a root's id removes its children). The
   * engine applies a delete by id in update order, to documents added but not yet searchable too.
   */
  async remove(ids: string[]): Promise<void> {
    if (ids.length) await this.update({ delete: ids }, { commitWithin: String(this.commitWithinMs) });
  }

  /**
   * Deletes everything the index holds for these contents but the root documents of their
   * `docs` (whose children come back when the roots are added again): one delete-by-query, which
   * the engine applies in update order, to documents added but not yet searchable too. About
   * twice the engine's CPU of an update batch (bench/RESULTS.md "Stale documents"): the indexer
   * deletes by id what it recorded sending (src/actors/index-writer.ts) and sends this only for
   * a content it has no record of (indexed before records were kept, or deleted since). Looking
   * the documents up first (a select, then a delete by id) missed those added within the soft
   * commit (`commitWithin`, 500 ms): a content deleted, taken off its view or given a new version
   * within half a second of its last indexing kept its old document in the index for good, found
   * by anyone its old owners and views let see it (found by a hunt).
   */
  async deleteStale(contents: ContentDocs[]): Promise<void> {
    if (!contents.length) return;
    const roots = contents.flatMap((c) => c.docs.map((d) => String(d.id)));
    const prefixes = contents.map(({ cid }) => `id:${escapeTerm(`c:${cid}:`)}*`);
    const keep = roots.map((id) => `"${escapePhrase(id)}"`).join(' OR ');
    const query = `(${prefixes.join(' OR ')})${keep ? ` AND -id:(${keep})` : ''}`;
    await this.update({ delete: { query } }, { commitWithin: String(this.commitWithinMs) });
  }

  /** Makes every change so far searchable (tests and re-index completion). */
  async commit(): Promise<void> {
    await this.update({ commit: {} });
  }

  /**
   * The collection's schema from Solr's Schema API (`GET <collection>/schema`): its fields,
   * dynamic fields and field types, for the write-time check of svcSolrDocument.
   */
  async schema(): Promise<RawSchema> {
    const res = await fetch(`${this.base.href}/${encodeURIComponent(this.collection)}/schema?wt=json`, {
      headers: this.auth ? { Authorization: this.auth } : {},
      signal: AbortSignal.timeout(10_000),
    });
    if (!res.ok) throw new Error(`Solr schema request answered ${res.status}`);
    const body = (await res.json()) as { schema?: Partial<RawSchema> };
    const { fields, dynamicFields, fieldTypes } = body.schema ?? {};
    if (!Array.isArray(fields) || !Array.isArray(dynamicFields) || !Array.isArray(fieldTypes))
      throw new Error('Solr schema answer without fields, dynamicFields and fieldTypes');
    return { fields, dynamicFields, fieldTypes };
  }

  /** POSTs JSON update commands; UpdateFailed with Solr's reason (`error.msg`) when they are not taken. */
  private async update(body: unknown, params: Record<string, string> = {}): Promise<void> {
    const url = `${this.base.href}/${encodeURIComponent(this.collection)}/update?${new URLSearchParams({ ...params, wt: 'json' })}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...(this.auth ? { Authorization: this.auth } : {}) },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(UPDATE_TIMEOUT_MS),
      });
    } catch (e) {
      const cause = (e as Error).cause as { code?: unknown } | undefined;
      throw new UpdateFailed(0, String(cause ?? e), cause?.code === 'ECONNREFUSED');
    }
    const text = await res.text();
    if (res.ok) return;
    throw new UpdateFailed(res.status, reasonOf(text) ?? `HTTP ${res.status}`, true);
  }

  /** Sends a select to the engine and answers its status, content type and body unchanged. */
  async select(collection: string, params: URLSearchParams): Promise<{ status: number; contentType: string; body: string }> {
    const res = await this.selectBytes(collection, params);
    return { ...res, body: res.body.toString('utf8') };
  }

  /** `select` with the answer's bytes as they came (a binary format such as javabin). */
  async selectBytes(collection: string, params: URLSearchParams): Promise<{ status: number; contentType: string; body: Buffer }> {
    const url = `${this.base.href}/${encodeURIComponent(collection)}/select`;
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...(this.auth ? { Authorization: this.auth } : {}) },
      body: params.toString(),
      signal: AbortSignal.timeout(30_000),
    }).catch(unavailable);
    const body = await bounded(res).catch(unavailable);
    return { status: res.status, contentType: res.headers.get('content-type') ?? 'application/json', body };

    /**
     * The engine cannot be reached, or broke off its answer (down, restarting, too slow): 503, try
     * again shortly. The error body names no address (CONTRACT §20: fetch's cause holds it).
     */
    function unavailable(e: unknown): never {
      if (e instanceof AppError) throw e;
      const timedOut = e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError');
      throw new AppError('UNAVAILABLE', timedOut ? 'The search engine did not answer in time' : 'The search engine is unavailable', {}, 5);
    }
  }
}

/** An answer's bytes, at most SEARCH_MAX_ANSWER_BYTES: past them the answer is cancelled and the search answers 413. */
async function bounded(res: Response): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body?.getReader();
  for (;;) {
    const part = reader ? await reader.read() : { done: true as const, value: undefined };
    if (part.done) return Buffer.concat(chunks, size);
    size += part.value.byteLength;
    if (size > SEARCH_MAX_ANSWER_BYTES) {
      await reader?.cancel().catch(() => undefined);
      throw new AppError(
        'PAYLOAD_TOO_LARGE',
        `The search engine's answer is larger than ${SEARCH_MAX_ANSWER_BYTES / 1024 / 1024} MiB (SEARCH_MAX_ANSWER_BYTES): ask for fewer rows, groups or fields`,
      );
    }
    chunks.push(part.value);
  }
}

/** Solr's message in a JSON error answer (`{"error": {"msg": ...}}`); undefined for any other answer (an HTML page). */
function reasonOf(body: string): string | undefined {
  try {
    const msg = (JSON.parse(body) as { error?: { msg?: unknown } }).error?.msg;
    return typeof msg === 'string' ? msg.slice(0, MAX_REASON_CHARS) : undefined;
  } catch {
    return undefined;
  }
}
