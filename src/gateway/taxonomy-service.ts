import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { SolrEngine } from '../adapters/search-engine.js';
import { escapeTerm } from '../content/search-document.js';
import { mainAlias, type Aspects, type Snapshot } from '../content/model.js';
import {
  CONTENT_HIERARCHY,
  CONTENT_HIERARCHY_ASPECT,
  CONTENT_HIERARCHY_DIMENSION,
  stringMap,
  strings,
  str,
  taxonomyRepresentation,
} from '../content/taxonomy.js';
import { resolveContentRef } from '../actors/content/taxonomy-references.js';
import { fieldSafe } from '../content/variants.js';
import { AppError } from '../errors.js';
import type { Principal, SecurityConfig } from '../content/permissions.js';
import type { TokenService } from '../security/token-service.js';
import type { Exchange } from './http.js';
import { Reads } from './reads.js';

export const TAXONOMY_PREFIX = 'taxonomy-service';

/** Default and maximum of the `depth` parameter (CONTRACT §10). */
export const MAX_TAXONOMY_DEPTH = 100;
/** How long a loaded model serves reads before the next (incremental) load starts. */
const CACHE_MS = 1000;
/** Changes this much older than the previous load are read again (commit lag, clocks of other processes). */
const CHANGE_MARGIN_MS = 3000;
/** Contents read at once while loading. */
const LOAD_BATCH = 500;
/** Every definition is read again this often, whatever the catalog of changes says. */
const FULL_LOAD_MS = 5 * 60_000;
/** At most this many entities in a completion result. */
const MAX_COMPLETIONS = 50;

type Localizations = Record<string, string>;

interface TaxonomyDef {
  kind: 'taxonomy';
  id: string;
  name: string;
  dimensions: string[];
}
interface DimensionDef {
  kind: 'dimension';
  id: string;
  name: string;
  enumerable: boolean;
  localizations: Localizations;
}
interface EntityDef {
  kind: 'entity';
  id: string;
  name: string;
  localizations: Localizations;
  parent: string | null;
  attributes: Record<string, string>;
  /**
   * The content of a content hierarchy node: the node is seen only by callers who may see the
   * content's current version (CONTRACT §20), definitions have none and are public (§10).
   */
  head?: Snapshot;
}
/** Does the caller of a request see this entity? */
type Sees = (e: EntityDef) => boolean;
type Def = TaxonomyDef | DimensionDef | EntityDef;

function defOf(aspects: Aspects): Def | null {
  const rep = taxonomyRepresentation(aspects);
  if (!rep) return null;
  if (rep.svcTaxonomy)
    return { kind: 'taxonomy', id: str(rep.svcTaxonomy.id), name: str(rep.svcTaxonomy.name), dimensions: strings(rep.svcTaxonomy.dimensions) };
  if (rep.svcDimension) {
    const d = rep.svcDimension;
    return { kind: 'dimension', id: str(d.id), name: str(d.name), enumerable: d.enumerable === true, localizations: stringMap(d.localizations) };
  }
  const e = rep.svcEntity!;
  return {
    kind: 'entity',
    id: str(e.id),
    name: str(e.name),
    localizations: stringMap(e.localizations),
    parent: typeof e.parent === 'string' ? e.parent : null,
    attributes: stringMap(e.attributes),
  };
}

/** Definitions by id, and the children (entities) of each entity or dimension id. */
interface Model {
  byId: Map<string, Def>;
  children: Map<string, EntityDef[]>;
  taxonomies: TaxonomyDef[];
  /** Completion candidates per dimension, made on the first completion of the model. */
  candidates: Map<string, Candidate[]>;
}

/** A name path with its lowercased tokens per level, and the entity when it is defined. */
interface Candidate {
  path: string[];
  words: string[][];
  entity?: EntityDef;
}

const candidate = (path: string[], entity?: EntityDef): Candidate => ({ path, words: path.map(tokens), entity });

/** Every defined entity of a dimension with its name path, parents before children. */
function candidatesOf(model: Model, dimId: string): Candidate[] {
  let list = model.candidates.get(dimId);
  if (list) return list;
  list = [];
  const walk = (parent: string, path: string[], depth: number) => {
    if (depth > MAX_TAXONOMY_DEPTH) return;
    for (const e of model.children.get(parent) ?? []) {
      const p = [...path, e.name];
      list!.push(candidate(p, e));
      walk(e.id, p, depth + 1);
    }
  };
  walk(dimId, [], 1);
  model.candidates.set(dimId, list);
  return list;
}

/**
 * The taxonomy service's structure reads (spec "Taxonomy service", CONTRACT §10): all
 * taxonomies, or one taxonomy, dimension or entity with its children down to `depth` levels
 * (default and maximum 100); `childrenOmitted` is true exactly where children exist that the
 * depth left out. GET only, no token. Definitions are the content of the definition types,
 * read from the commit catalogs; entities reference their parent, taxonomies list dimensions.
 */
export class TaxonomyService {
  /** Definitions (and content hierarchy nodes) by content key. */
  private readonly defs = new Map<string, Def>();
  private built?: Model;
  private current?: Promise<Model>;
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

  constructor(
    private readonly d: {
      store: ContentStore;
      settings: Settings;
      engine: SolrEngine | null;
      tokens: TokenService;
      security: SecurityConfig;
      clock: () => number;
    },
  ) {
    this.reads = new Reads(d);
  }

  async handle(x: Exchange, segs: string[]): Promise<void> {
    // An input or an id may hold `/` (levels of an input, `contentid/<key>` in the content hierarchy).
    if (segs[0] === 'complete' && segs.length >= 3) return this.complete(x, segs[1], segs.slice(2).join('/'));
    if (segs[0] !== 'structure') throw new AppError('NOT_FOUND', 'No such resource');
    x.route = `${TAXONOMY_PREFIX}/structure${segs.length >= 2 ? '/:id' : ''}`;
    if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', 'The structure supports GET only', { allow: ['GET'] });
    const depth = parseDepthParam(x.query.get('depth'));
    const sees = this.viewer(await this.d.tokens.caller(x.header('x-auth-token')));
    const model = await this.model();
    if (segs.length === 1) {
      x.sendJson(
        200,
        model.taxonomies.map((t) => this.taxonomy(model, t, depth, sees)),
      );
      return;
    }
    const id = segs.slice(1).join('/');
    const def = model.byId.get(id);
    // A node the caller may not see answers as one that does not exist. (Below a node it may
    // not see, a node is still found by its id, as it would be if that node did not exist.)
    if (!def || (def.kind === 'entity' && !sees(def))) throw new AppError('NOT_FOUND', `No taxonomy, dimension or entity ${id}`);
    x.sendJson(
      200,
      def.kind === 'taxonomy'
        ? this.taxonomy(model, def, depth, sees)
        : def.kind === 'dimension'
          ? this.dimension(model, def, depth, sees)
          : this.entity(model, def, depth, sees),
    );
  }

  /**
   * Completion (spec "Taxonomy service", completion matching): the input's `/`-separated levels
   * are matched against the last levels of an entity's name path, and within a level each
   * whitespace token of the input must be a prefix of a token of the name, in order. Candidates:
   * the dimension's defined entities, and (for entities that exist once something is
   * categorized with them) the name paths in the dimension's tag fields of the index, narrowed
   * by a query on its autocomplete field `svc_tag_autocomplete_<dim>_lc` and filtered like search
   * for the caller (CONTRACT §20): without a token, content on public views only; with one, what
   * the caller may Read.
   */
  private async complete(x: Exchange, dimId: string, input: string): Promise<void> {
    x.route = `${TAXONOMY_PREFIX}/complete/:dimension/:input`;
    if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', 'Completion supports GET only', { allow: ['GET'] });
    const user = await this.d.tokens.caller(x.header('x-auth-token'));
    const sees = this.viewer(user);
    const model = await this.model();
    const dim = model.byId.get(dimId);
    if (dim?.kind !== 'dimension') throw new AppError('NOT_FOUND', `No dimension ${dimId}`);
    const levels = input
      .split('/')
      .map((l) => tokens(l))
      .filter((l) => l.length > 0);
    if (!levels.length) return this.sendCompletion(x, model, dim, [], sees);
    const defined = candidatesOf(model, dim.id);
    const matches: Candidate[] = [];
    for (const c of defined) if (matchesWords(c.words, levels) && seenWithAncestors(model, c.entity!, sees) && matches.push(c) >= MAX_COMPLETIONS) break;
    // An enumerable dimension has all its entities defined; only the others are looked up in the index.
    if (this.d.engine && !dim.enumerable && matches.length < MAX_COMPLETIONS) {
      const known = new Set(defined.map((c) => c.path.join('/')));
      for (const path of await this.indexedPaths(dim.id, levels.flat(), user)) {
        if (known.has(path)) continue;
        const c = candidate(path.split('/'));
        if (matchesWords(c.words, levels) && matches.push(c) >= MAX_COMPLETIONS) break;
      }
    }
    this.sendCompletion(x, model, dim, matches, sees);
  }

  /** The Completion result: the Dimension shape with each match an element of `entities`. */
  private sendCompletion(x: Exchange, model: Model, dim: DimensionDef, matches: Candidate[], sees: Sees): void {
    x.sendJson(200, {
      id: dim.id,
      name: dim.name,
      localizations: dim.localizations,
      enumerable: dim.enumerable,
      childrenOmitted: false,
      entities: matches.map(({ path, entity }) =>
        entity
          ? { id: entity.id, name: entity.name, entities: [], attributes: entity.attributes, childrenOmitted: (model.children.get(entity.id) ?? []).some(sees) }
          : { id: path.join('/'), name: path[path.length - 1], entities: [], attributes: {}, childrenOmitted: false },
      ),
    });
  }

  /**
   * Name paths of the dimension in the index whose autocomplete tokens start with every input
   * token, in documents the caller may see (the search proxy's visibility filter).
   */
  private async indexedPaths(dimId: string, inputTokens: string[], user: Principal | null): Promise<string[]> {
    const field = fieldSafe(dimId);
    const q = `svc_tag_autocomplete_${field}_lc:(${inputTokens.map((t) => `${escapeTerm(t)}*`).join(' AND ')})`;
    const params = new URLSearchParams({
      q,
      rows: '0',
      wt: 'json',
      facet: 'true',
      'facet.field': `svc_tag_${field}_ss`,
      'facet.limit': '1000',
      'facet.mincount': '1',
    });
    for (const fq of this.reads.searchFilters(user, null, this.d.clock())) params.append('fq', fq);
    const res = await this.d.engine!.select(this.d.settings.SOLR_COLLECTION, params);
    if (res.status !== 200) return [];
    const body = JSON.parse(res.body) as { facet_counts?: { facet_fields?: Record<string, (string | number)[]> } };
    const flat = body.facet_counts?.facet_fields?.[`svc_tag_${field}_ss`] ?? [];
    return flat.filter((v, i): v is string => i % 2 === 0 && typeof v === 'string');
  }

  private taxonomy(m: Model, t: TaxonomyDef, depth: number, sees: Sees) {
    const dims = t.dimensions.map((id) => m.byId.get(id)).filter((d): d is DimensionDef => d?.kind === 'dimension');
    return { id: t.id, name: t.name, dimensions: depth > 0 ? dims.map((d) => this.dimension(m, d, depth - 1, sees)) : [] };
  }

  private dimension(m: Model, d: DimensionDef, depth: number, sees: Sees) {
    const { entities, childrenOmitted } = this.children(m, d.id, depth, sees);
    return { id: d.id, name: d.name, localizations: d.localizations, enumerable: d.enumerable, entities, childrenOmitted };
  }

  private entity(m: Model, e: EntityDef, depth: number, sees: Sees): Record<string, unknown> {
    const { entities, childrenOmitted } = this.children(m, e.id, depth, sees);
    return { id: e.id, name: e.name, localizations: e.localizations, entities, attributes: e.attributes, childrenOmitted };
  }

  /** The children the caller sees (a node it may not see hides its subtree, as if it did not exist). */
  private children(m: Model, id: string, depth: number, sees: Sees) {
    const kids = (m.children.get(id) ?? []).filter(sees);
    if (depth <= 0) return { entities: [], childrenOmitted: kids.length > 0 };
    return { entities: kids.map((k) => this.entity(m, k, depth - 1, sees)), childrenOmitted: false };
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
  private model(): Promise<Model> {
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
  private async load(): Promise<Model> {
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
    for (let i = 0; i < changed.length; i += LOAD_BATCH) {
      await Promise.all(changed.slice(i, i + LOAD_BATCH).map((cid) => this.reread(cid)));
    }
    this.loadedAt = started;
    if (full) {
      this.fullAt = started;
      for (const cid of this.defs.keys()) if (!members.has(cid)) this.defs.delete(cid);
    }
    if (full || changed.length) this.built = buildModel(this.defs.values());
    return this.built!;
  }

  /** Reads one content's definition (or content hierarchy node) into `defs`, or drops it. */
  private async reread(cid: string): Promise<void> {
    const head = await this.d.store.head(cid);
    const version = head && !head.deleted ? await this.d.store.version(cid, head.head) : null;
    const def = head && version && (await this.defOf(cid, head, version.type, version.aspects));
    if (def?.id) this.defs.set(cid, def);
    else this.defs.delete(cid);
  }

  private async defOf(cid: string, head: Snapshot, type: string, aspects: Aspects): Promise<Def | null> {
    const node = aspects[CONTENT_HIERARCHY_ASPECT];
    if (node) {
      const id = mainAlias(cid);
      let parent = CONTENT_HIERARCHY_DIMENSION;
      if (typeof node.parent === 'string') {
        const holder = await resolveContentRef(this.d.store, node.parent);
        parent = holder === null ? node.parent : mainAlias(holder);
      }
      return {
        kind: 'entity',
        id,
        name: str(node.name, id),
        localizations: stringMap(node.localizations),
        parent,
        attributes: { ...stringMap(node.attributes), contentType: type },
        head,
      };
    }
    return defOf(aspects);
  }
}

/** The special content hierarchy taxonomy and its dimension, always present. */
const BUILT_IN: Def[] = [
  { kind: 'taxonomy', id: CONTENT_HIERARCHY, name: 'Content hierarchy', dimensions: [CONTENT_HIERARCHY_DIMENSION] },
  { kind: 'dimension', id: CONTENT_HIERARCHY_DIMENSION, name: 'Contents', enumerable: true, localizations: {} },
];

/** Definitions by id (built-ins win), children sorted by name, entities on a parent cycle left out. */
function buildModel(defs: Iterable<Def>): Model {
  const byId = new Map<string, Def>();
  for (const def of defs) byId.set(def.id, def);
  for (const def of BUILT_IN) byId.set(def.id, def);
  const children = new Map<string, EntityDef[]>();
  for (const def of byId.values()) {
    if (def.kind !== 'entity' || def.parent === null || wouldCycle(byId, def)) continue;
    const list = children.get(def.parent) ?? [];
    list.push(def);
    children.set(def.parent, list);
  }
  for (const list of children.values()) list.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  const taxonomies = [...byId.values()].filter((d): d is TaxonomyDef => d.kind === 'taxonomy').sort((a, b) => a.id.localeCompare(b.id));
  return { byId, children, taxonomies, candidates: new Map() };
}

/** Lowercased whitespace tokens. */
function tokens(s: string): string[] {
  return s.toLowerCase().split(/\s+/).filter(Boolean);
}

/** Every input token is a prefix of a name token, in order (`A B` matches `Ab Bc`, not `Bc Ab`). */
function levelMatches(words: string[], input: string[]): boolean {
  let at = 0;
  for (const t of input) {
    while (at < words.length && !words[at].startsWith(t)) at++;
    if (at === words.length) return false;
    at++;
  }
  return true;
}

/** The input's levels match the last levels of a path (given as tokens per level), one each. */
function matchesWords(words: string[][], levels: string[][]): boolean {
  const skip = words.length - levels.length;
  if (skip < 0) return false;
  for (let i = levels.length - 1; i >= 0; i--) if (!levelMatches(words[skip + i], levels[i])) return false;
  return true;
}

/** The input's levels match the last levels of the path, one each (spec "completion matching"). */
export function matchesLevels(path: string[], levels: string[][]): boolean {
  return matchesWords(path.map(tokens), levels);
}

/**
 * The caller sees the entity and every entity above it: a completion candidate's name path runs
 * through its ancestors, and below a node the caller may not see it would not exist.
 */
function seenWithAncestors(model: Model, e: EntityDef, sees: Sees): boolean {
  let cur: Def | undefined = e;
  for (let depth = 0; cur?.kind === 'entity' && depth <= MAX_TAXONOMY_DEPTH; depth++) {
    if (!sees(cur)) return false;
    cur = cur.parent === null ? undefined : model.byId.get(cur.parent);
  }
  return true;
}

/** Does following parents from `e` come back to `e` (a cycle is never shown)? */
function wouldCycle(byId: Map<string, Def>, e: EntityDef): boolean {
  const seen = new Set<string>([e.id]);
  let cur: Def | undefined = e;
  while (cur?.kind === 'entity' && cur.parent !== null) {
    if (seen.has(cur.parent)) return true;
    seen.add(cur.parent);
    cur = byId.get(cur.parent);
  }
  return false;
}

/** The `depth` parameter: a non-negative integer, default 100, larger values taken as 100; 400 otherwise. */
function parseDepthParam(v: string | null): number {
  if (v === null || v === '') return MAX_TAXONOMY_DEPTH;
  if (!/^\d{1,9}$/.test(v)) throw new AppError('BAD_REQUEST', 'depth must be a non-negative integer (at most 100 levels are given)', { depth: v });
  return Math.min(Number(v), MAX_TAXONOMY_DEPTH);
}
