import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { SolrEngine } from '../adapters/search-engine.js';
import { escapeTerm } from '../content/search-document.js';
import { mainAlias, type Aspects, type Snapshot } from '../content/model.js';
import {
  addIndexedCompletions,
  buildTaxonomyModel,
  CONTENT_HIERARCHY_ASPECT,
  CONTENT_HIERARCHY_DIMENSION,
  completionLevels,
  completionOf,
  contextsOfHolder,
  definedCompletions,
  definitionOf,
  hierarchyNodeOf,
  MAX_COMPLETIONS,
  MAX_TAXONOMY_TEXT_CHARS,
  structureOf,
  type Sees,
  type TaxonomyModel,
  type TaxonomyNode,
  taxonomyDepthOf,
} from '../content/taxonomy.js';
import { resolveContentRefs } from '../actors/content/taxonomy-references.js';
import { fieldSafe } from '../content/variants.js';
import { AppError } from '../errors.js';
import type { Principal, SecurityConfig } from '../content/permissions.js';
import type { TokenService } from '../security/token-service.js';
import type { Exchange } from './http.js';
import { Reads } from './reads.js';
import { callerKey } from './keyed-counts.js';
import { type SearchSlots, searchSlotsOf } from './search-slots.js';
import { SEARCH_CPU_ALLOWED_MS } from './search-params.js';

export const TAXONOMY_PREFIX = 'taxonomy-service';

/** How long a loaded model serves reads before the next (incremental) load starts. */
const CACHE_MS = 1000;
/** Changes this much older than the previous load are read again (commit lag, clocks of other processes). */
const CHANGE_MARGIN_MS = 3000;
/** Contents read at once while loading. */
const LOAD_BATCH = 500;
/** Every definition is read again this often, whatever the catalog of changes says. */
const FULL_LOAD_MS = 5 * 60_000;

/**
 * The taxonomy service's structure reads (spec "Taxonomy service", CONTRACT §10): all
 * taxonomies, or one taxonomy, dimension or entity with its children down to `depth` levels
 * (default and maximum 100); `childrenOmitted` is true exactly where children exist that the
 * depth left out. GET only, no token. Definitions are the content of the definition types,
 * read from the commit catalogs; entities reference their parent, taxonomies list dimensions.
 */
export class TaxonomyService {
  /** Definitions (and content hierarchy nodes) by content key. */
  private readonly defs = new Map<string, TaxonomyNode>();
  private built?: TaxonomyModel;
  private current?: Promise<TaxonomyModel>;
  private loadedAt = 0;
  private fullAt = 0;
  private reloading?: Promise<void>;

  /** The routes, for the OpenAPI document. */
  static readonly routes = {
    describe: () => [
      { pattern: 'structure', methods: ['GET'] },
      { pattern: 'structure/:id', methods: ['GET'] },
      { pattern: 'complete/:dimension/:input', methods: ['GET'] },
    ],
  };

  /** Who may see which indexed content: completion candidates from the index are filtered like search. */
  private readonly reads: Reads;
  /** Searches under way per caller and in all, shared with the search service (SEARCH_AT_ONCE_PER_CALLER, SEARCH_AT_ONCE). */
  private readonly slots: SearchSlots;

  constructor(
    private readonly d: {
      store: ContentStore;
      settings: Settings;
      engine: SolrEngine | null;
      tokens: TokenService;
      security: SecurityConfig;
      clock: () => number;
      /** The search service's slots, so that completions count among the caller's searches (gateway/server.ts); else its own. */
      searchSlots?: SearchSlots;
    },
  ) {
    this.reads = new Reads(d);
    this.slots = d.searchSlots ?? searchSlotsOf(d.settings);
  }

  async handle(x: Exchange, segs: string[]): Promise<void> {
    // An input or an id may hold `/` (levels of an input, `contentid/<key>` in the content hierarchy).
    if (segs[0] === 'complete' && segs.length >= 3) return this.complete(x, segs[1], segs.slice(2).join('/'));
    if (segs[0] !== 'structure') throw new AppError('NOT_FOUND', 'No such resource');
    x.route = `${TAXONOMY_PREFIX}/structure${segs.length >= 2 ? '/:id' : ''}`;
    if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', 'The structure supports GET only', { allow: ['GET'] });
    const depth = taxonomyDepthOf(x.query.get('depth'));
    const sees = this.viewer(await this.d.tokens.caller(x.header('x-auth-token')));
    const model = await this.model();
    const id = segs.length === 1 ? null : segs.slice(1).join('/');
    const body = structureOf(model, id, depth, sees);
    if (body === null) throw new AppError('NOT_FOUND', `No taxonomy, dimension or entity ${id}`);
    x.sendJson(200, body);
  }

  /**
   * Completion (spec "Taxonomy service", completion matching): the input's `/`-separated levels
   * are matched against the last levels of an entity's name path, and within a level each
   * whitespace token of the input must be a prefix of a token of the name, in order. Candidates:
   * the dimension's defined entities, and (for entities that exist once something is
   * categorized with them) the name paths in the dimension's tag fields of the index, narrowed
   * by a query on its autocomplete field `svc_tag_autocomplete_<dim>_lc` and filtered like search
   * for the caller (CONTRACT §20): without a token, content on public views only; with one, what
   * the caller may Read. That query is one of the caller's searches: past SEARCH_AT_ONCE_PER_CALLER
   * under way at once, 429 before the engine is asked (search-slots.ts, shared with the search
   * service); an answer from the definitions alone asks nothing and counts nothing.
   */
  private async complete(x: Exchange, dimId: string, input: string): Promise<void> {
    x.route = `${TAXONOMY_PREFIX}/complete/:dimension/:input`;
    if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', 'Completion supports GET only', { allow: ['GET'] });
    const user = await this.d.tokens.caller(x.header('x-auth-token'));
    const sees = this.viewer(user);
    const model = await this.model();
    const dim = model.byId.get(dimId);
    if (dim?.kind !== 'dimension') throw new AppError('NOT_FOUND', `No dimension ${dimId}`);
    const levels = completionLevels(input);
    // Each distinct word of the input is a prefix term of the index query, expanded over the
    // terms of the whole index: bounded as search bounds its own (SEARCH_MAX_MULTI_TERMS).
    const words = new Set(levels.flat()).size;
    const most = this.d.settings.SEARCH_MAX_MULTI_TERMS;
    if (words > most)
      throw new AppError('BAD_REQUEST', `The completion input has ${words} distinct words; at most ${most} (SEARCH_MAX_MULTI_TERMS)`, { parameter: 'input' });
    if (!levels.length) {
      x.sendJson(200, completionOf(model, dim, [], sees));
      return;
    }
    const matches = definedCompletions(model, dim.id, levels, sees);
    // An enumerable dimension has all its entities defined; only the others are looked up in the
    // index: a search of the caller, within its SEARCH_AT_ONCE_PER_CALLER (search-slots.ts).
    if (this.d.engine && !dim.enumerable && matches.length < MAX_COMPLETIONS) {
      // A client gone asks the engine nothing (and its address, by which it is counted, is gone).
      if (x.aborted) return;
      const paths = await this.slots.run(callerKey(user, x, this.d.settings), async () => (x.aborted ? [] : this.indexedPaths(dim.id, levels.flat(), user)));
      addIndexedCompletions(model, dim.id, levels, matches, paths, sees);
    }
    x.sendJson(200, completionOf(model, dim, matches, sees));
  }

  /**
   * Name paths of the dimension in the index whose autocomplete tokens start with every input
   * token, in documents the caller may see (the search proxy's visibility filter). The query
   * carries the bounds every search of the proxy carries, `timeAllowed` SEARCH_TIME_ALLOWED_MS
   * and `cpuAllowed` SEARCH_CPU_ALLOWED_MS: a completion the engine cuts short answers the
   * completions it found (fewer, never another caller's). Before, the query had neither.
   */
  private async indexedPaths(dimId: string, inputTokens: string[], user: Principal | null): Promise<string[]> {
    const field = fieldSafe(dimId);
    const q = `svc_tag_autocomplete_${field}_lc:(${[...new Set(inputTokens)].map((t) => `${escapeTerm(t)}*`).join(' AND ')})`;
    const params = new URLSearchParams({
      q,
      rows: '0',
      wt: 'json',
      facet: 'true',
      'facet.field': `svc_tag_${field}_ss`,
      'facet.limit': '1000',
      'facet.mincount': '1',
      timeAllowed: String(this.d.settings.SEARCH_TIME_ALLOWED_MS),
      cpuAllowed: String(SEARCH_CPU_ALLOWED_MS),
    });
    for (const fq of this.reads.searchFilters(user, null, this.d.clock())) params.append('fq', fq);
    const res = await this.d.engine!.select(this.d.settings.SOLR_COLLECTION, params);
    if (res.status !== 200) return [];
    const body = JSON.parse(res.body) as { facet_counts?: { facet_fields?: Record<string, (string | number)[]> } };
    const flat = body.facet_counts?.facet_fields?.[`svc_tag_${field}_ss`] ?? [];
    return flat.filter((v, i): v is string => i % 2 === 0 && typeof v === 'string');
  }

  /**
   * Which entities the caller sees: every definition (the structure is public, CONTRACT §10),
   * and the content hierarchy nodes whose content's current version the caller may see by the
   * one visibility rule (with a token Read, without one a public view).
   */
  private viewer(user: Principal | null): Sees {
    const now = this.d.clock();
    return (e) => !e.head || this.reads.mayReadVersion(user, e.head, e.head.head, now);
  }

  /**
   * The definitions as a model. Reloaded at most once a second in the background: a stale model
   * keeps serving while the next one loads, so only the first read after start waits.
   */
  private model(): Promise<TaxonomyModel> {
    if (!this.current) {
      this.current = this.load();
      this.current.catch(() => (this.current = undefined));
      return this.current;
    }
    if (Date.now() - this.loadedAt > CACHE_MS && !this.reloading) {
      this.reloading = this.load()
        .then((model) => {
          this.current = Promise.resolve(model);
        })
        .catch(() => undefined)
        .finally(() => (this.reloading = undefined));
    }
    return this.current;
  }

  /**
   * Reads what changed since the last load. The first load reads every member of every
   * partition's taxonomy catalog (contents that hold a definition aspect, of any type, or a
   * content hierarchy node); later loads read only the members whose time of change (the commit catalog)
   * is within CHANGE_MARGIN_MS of the previous load, so 10,000 unchanged entities cost one
   * membership scan, not 20,000 reads.
   */
  private async load(): Promise<TaxonomyModel> {
    const started = Date.now();
    const store = this.d.store;
    const partitions = Array.from({ length: this.d.settings.PARTITIONS }, (_, p) => p);
    const members = new Set<string>();
    await Promise.all(
      partitions.map(async (p) => {
        for (const cid of await store.taxonomyMembers(p)) members.add(cid);
      }),
    );
    const full = this.built === undefined || started - this.fullAt > FULL_LOAD_MS;
    const changed = full
      ? [...members]
      : (await Promise.all(partitions.map((p) => store.changedBetween(p, this.loadedAt - CHANGE_MARGIN_MS, Infinity))))
          .flat()
          .filter((cid) => members.has(cid));
    // The content each parent reference names, looked up once per load (nodes share parents).
    const holders = new Map<string, string | null>();
    for (let i = 0; i < changed.length; i += LOAD_BATCH) await this.reread(changed.slice(i, i + LOAD_BATCH), holders);
    this.loadedAt = started;
    if (full) {
      this.fullAt = started;
      for (const cid of this.defs.keys()) if (!members.has(cid)) this.defs.delete(cid);
    }
    if (full || changed.length) this.built = buildTaxonomyModel(this.defs.values());
    return this.built!;
  }

  /**
   * Reads some contents' definitions (or content hierarchy nodes) into `defs`, or drops them: their
   * heads and head versions in one script call per partition, the parents of the nodes not in
   * `holders` yet together (`resolveContentRefs`), added to it. Before, each content was two calls
   * to Redis and each node's parent a third: a full load of a hierarchy of 40,000 nodes made
   * 120,000 calls (also every FULL_LOAD_MS, in the background).
   */
  private async reread(cids: string[], holders: Map<string, string | null>): Promise<void> {
    const current = await this.d.store.currentVersions(cids);
    const refs = new Set<string>();
    for (const c of current) {
      const parent = c?.version?.aspects[CONTENT_HIERARCHY_ASPECT]?.parent;
      // A reference longer than an id (stored before the bounds) names nothing: not looked up.
      if (typeof parent === 'string' && parent.length <= MAX_TAXONOMY_TEXT_CHARS && !holders.has(parent)) refs.add(parent);
    }
    const asked = [...refs];
    const found = await resolveContentRefs(this.d.store, asked);
    for (let i = 0; i < asked.length; i++) holders.set(asked[i], found[i]);
    cids.forEach((cid, i) => {
      const c = current[i];
      const def = c?.version ? this.defOf(cid, c.head, c.version.type, c.version.aspects, holders) : null;
      if (def?.id) this.defs.set(cid, def);
      else this.defs.delete(cid);
    });
  }

  /** A content's definition or content hierarchy node; `holders`: the content each parent reference names (null: none). */
  private defOf(cid: string, head: Snapshot, type: string, aspects: Aspects, holders: ReadonlyMap<string, string | null>): TaxonomyNode | null {
    const node = aspects[CONTENT_HIERARCHY_ASPECT];
    if (node) {
      let parent = CONTENT_HIERARCHY_DIMENSION;
      if (typeof node.parent === 'string') {
        const holder = holders.get(node.parent) ?? null;
        parent = holder === null ? node.parent : mainAlias(holder);
      }
      return hierarchyNodeOf(cid, head, type, node, parent);
    }
    return definitionOf(aspects, head.aliases, contextsOfHolder(head.meta));
  }
}
