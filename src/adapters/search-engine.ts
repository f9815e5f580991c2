import { AppError } from '../errors.js';
import SolrNode from 'solr-node';
import type { Json } from '../actors/content/model.js';
import { maskUrlCredentials } from '../../config/settings.js';

/** A search document: the fields of an svcSolrDocument aspect, `_type` removed. */
export type SearchDoc = Record<string, Json>;

/** The documents one content should have in the index now (none once it is deleted or on no indexed view). */
export interface ContentDocs {
  cid: string;
  docs: SearchDoc[];
  /**
   * The content has one revision: the index can hold no document of it but these (its one
   * version), so there is nothing stale to look up. Most of a create-heavy load is such.
   */
  firstRevision?: boolean;
}

/**
 * The search engine behind a small interface: Solr through `solr-node` for updates, plain
 * HTTP for the search proxy (which must pass the engine's status and body on unchanged).
 */
/**
 * What the platform uses of a solr-node client. Its published types lack basic-auth options
 * and `_requestPost`, the client's own POST helper, which sends a batch of JSON update commands
 * in one request (its `update` sends one document per request).
 */
interface SolrClient {
  ping(): Promise<{ status?: string }>;
  _requestPost(path: string, data: unknown, urlOptions: Record<string, unknown>): Promise<unknown>;
}

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

  /** Is the collection answering? */
  async ping(): Promise<boolean> {
    try {
      const r = await this.client.ping();
      return r?.status === 'OK';
    } catch {
      return false;
    }
  }

  /**
   * Makes the index hold exactly `docs` for each content: the documents the index holds for
   * these contents are looked up (a cheap prefix query; not for a content with one revision,
   * see `firstRevision`), those not among `docs` (older
   * versions, views left, a deleted content) are deleted by id, then `docs` are added. Solr
   * replaces an added document's whole block (its child documents) through `_root_`, and a
   * delete by the id of a root document removes its block. A delete-by-query is kept for the
   * rare batch whose lookup would not fit one page.
   */
  async replace(contents: ContentDocs[]): Promise<void> {
    if (!contents.length) return;
    const docs = contents.flatMap((c) => c.docs);
    const older = contents.filter((c) => !c.firstRevision);
    if (older.length) await this.deleteStale(older);
    if (docs.length) await withoutCredentials(this.client._requestPost('update', docs, { commitWithin: this.commitWithinMs, wt: 'json' }));
  }

  /** Deletes what the index holds for these contents that is not among their documents now. */
  private async deleteStale(contents: ContentDocs[]): Promise<void> {
    const wanted = new Set(contents.flatMap((c) => c.docs.map((d) => String(d.id))));
    const prefixes = contents.map(({ cid }) => `id:${escapeTerm(`c:${cid}:`)}*`);
    const rows = Math.max(100, contents.length * 20);
    const found = (await this.postSelect(this.collection, new URLSearchParams({ q: prefixes.join(' OR '), fl: 'id', rows: String(rows), wt: 'json' }))) as { response: { numFound: number; docs: { id: string }[] } };
    if (found.response.numFound > rows) {
      const keep = [...wanted].map((id) => `"${escapePhrase(id)}"`);
      const query = `(${prefixes.join(' OR ')})${keep.length ? ` AND -id:(${keep.join(' OR ')})` : ''}`;
      await withoutCredentials(this.client._requestPost('update', { delete: { query } }, { commitWithin: this.commitWithinMs, wt: 'json' }));
    } else {
      const stale = found.response.docs.map((d) => d.id).filter((id) => !wanted.has(id));
      if (stale.length) await withoutCredentials(this.client._requestPost('update', { delete: stale }, { commitWithin: this.commitWithinMs, wt: 'json' }));
    }
  }

  private async postSelect(collection: string, params: URLSearchParams): Promise<unknown> {
    const r = await this.select(collection, params);
    if (r.status !== 200) throw new Error(`Solr select failed: ${r.status} ${r.body.slice(0, 300)}`);
    return JSON.parse(r.body);
  }

  /** Makes every change so far searchable (tests and re-index completion). */
  async commit(): Promise<void> {
    await withoutCredentials(this.client._requestPost('update', { commit: {} }, { wt: 'json' }));
  }

  /** Sends a select to the engine and answers its status, content type and body unchanged. */
  async select(collection: string, params: URLSearchParams): Promise<{ status: number; contentType: string; body: string }> {
    const url = `${this.base.href}/${encodeURIComponent(collection)}/select`;
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...(this.auth ? { Authorization: this.auth } : {}) },
      body: params.toString(),
      signal: AbortSignal.timeout(30_000),
    }).catch((e: unknown) => {
      // The engine cannot be reached (down, restarting, too slow): 503, try again shortly.
      throw new AppError('UNAVAILABLE', 'The search engine is unavailable', { cause: String((e as Error).cause ?? e) }, 5);
    });
    return { status: res.status, contentType: res.headers.get('content-type') ?? 'application/json', body: await res.text() };
  }
}

/**
 * solr-node sends basic authentication as credentials in its request URLs, and node-fetch names
 * the URL in its errors (`request to http://user:password@host/... failed`): such an error must
 * lose the credentials before anything logs it.
 */
function withoutCredentials<T>(p: Promise<T>): Promise<T> {
  return p.catch((e: unknown) => {
    if (e instanceof Error) {
      e.message = maskUrlCredentials(e.message);
      if (e.stack) e.stack = maskUrlCredentials(e.stack);
      throw e;
    }
    throw typeof e === 'string' ? maskUrlCredentials(e) : e;
  });
}

/** Escapes a term for the standard query parser (every special character). */
export function escapeTerm(s: string): string {
  return s.replace(/[+\-!(){}[\]^"~*?:\\/&|\s]/g, '\\$&');
}

/** Escapes the inside of a quoted phrase. */
export function escapePhrase(s: string): string {
  return s.replace(/["\\]/g, '\\$&');
}
