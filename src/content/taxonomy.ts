import { AppError } from '../errors.js';
import { contextsOf, mainAlias, TAXONOMY_NAMESPACE, type Aspect, type Aspects, type Json, type Snapshot } from './model.js';
import { GLOBAL_CONTEXT } from './permissions.js';

/**
 * The taxonomy rules of the spec ("Taxonomy resources", "Categorization"; CONTRACT §10) that
 * hold for every write and every reader: the definition aspects and their `svcTaxonomy`
 * representation, the special `contentHierarchy` taxonomy, parent references without cycles,
 * `childrenOmitted` never accepted back in a categorization, and the bounds of what a definition
 * holds.
 */

/** The special taxonomy that models hierarchies among contents (spec "Taxonomy resources"). */
export const CONTENT_HIERARCHY = 'contentHierarchy';
/** Its one dimension: every content that holds the `svcContentHierarchy` aspect is an entity of it. */
export const CONTENT_HIERARCHY_DIMENSION = 'contentHierarchy.contents';
/**
 * The aspect that places a content in the content hierarchy:
 * `{ name?, localizations?, attributes?, parent? }`, `parent` the id (`contentid/<key>`) or any
 * alias (`<namespace>/<alias>`) of the parent content; without a parent it is a root.
 */
export const CONTENT_HIERARCHY_ASPECT = 'svcContentHierarchy';

/** The aspects that make a content part of a taxonomy, whatever its type. */
export const TAXONOMY_ASPECTS = ['svcTaxonomyDefinition', 'svcDimensionDefinition', 'svcEntityDefinition', CONTENT_HIERARCHY_ASPECT] as const;

export const str = (v: Json | undefined, fallback = ''): string => (typeof v === 'string' ? v : fallback);
export const strings = (v: Json | undefined): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
export function stringMap(v: Json | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (v && typeof v === 'object' && !Array.isArray(v)) for (const [k, x] of Object.entries(v)) if (typeof x === 'string' && k !== '__proto__') out[k] = x;
  return out;
}

// ---- Bounds of a definition (SECURITY.md "Content, workspaces, taxonomy") ----
//
// Definitions are public (CONTRACT §10) and every web process keeps all of them in its taxonomy
// model, answered whole to anonymous structure reads. Before these bounds a sportseditor's 20
// definitions with 4 MB names (content of its own holding a `_taxonomy/<id>` alias) made one
// 40-byte anonymous request answer 80 MiB, and past about 512 MB every answer was a 500. A write
// past a bound answers 400 (`refuseOversizedDefinitions`, on every write path); a definition
// stored before is held to them when the model loads (`definitionOf`, `hierarchyNodeOf`).

/**
 * Most characters of each string a definition or a content hierarchy node keeps: its id, name
 * and parent, each dimension id a taxonomy lists, and each localization's language and name and
 * each attribute's name and value.
 */
export const MAX_TAXONOMY_TEXT_CHARS = 1_000;
/** Most localizations of a dimension, an entity or a content hierarchy node. */
export const MAX_TAXONOMY_LOCALIZATIONS = 100;
/** Most attributes of an entity or a content hierarchy node (the hierarchy adds `contentType`). */
export const MAX_TAXONOMY_ATTRIBUTES = 100;
/** Most dimensions a taxonomy lists. */
export const MAX_TAXONOMY_DIMENSIONS = 100;

type TaxonomyAspect = (typeof TAXONOMY_ASPECTS)[number];
/** A field the model keeps: a string, or a list or map of at most `most` strings. */
type Kept = { kind: 'text' } | { kind: 'list' | 'map'; most: number };
const TEXT: Kept = { kind: 'text' };
const LOCALIZATIONS: Kept = { kind: 'map', most: MAX_TAXONOMY_LOCALIZATIONS };
const ATTRIBUTES: Kept = { kind: 'map', most: MAX_TAXONOMY_ATTRIBUTES };
/** The fields of each taxonomy aspect that its representation and the model keep. */
const KEPT: Record<TaxonomyAspect, Record<string, Kept>> = {
  svcTaxonomyDefinition: { id: TEXT, name: TEXT, dimensions: { kind: 'list', most: MAX_TAXONOMY_DIMENSIONS } },
  svcDimensionDefinition: { id: TEXT, name: TEXT, localizations: LOCALIZATIONS },
  svcEntityDefinition: { id: TEXT, name: TEXT, parent: TEXT, localizations: LOCALIZATIONS, attributes: ATTRIBUTES },
  [CONTENT_HIERARCHY_ASPECT]: { name: TEXT, parent: TEXT, localizations: LOCALIZATIONS, attributes: ATTRIBUTES },
};

interface SizeProblem {
  field: string;
  limit: number;
  found: number;
  message: string;
}

const tooLong = (field: string, found: number, what = field): SizeProblem => ({
  field,
  limit: MAX_TAXONOMY_TEXT_CHARS,
  found,
  message: `${what} holds ${found} characters; at most ${MAX_TAXONOMY_TEXT_CHARS} are allowed`,
});

const tooMany = (field: string, limit: number, found: number): SizeProblem => ({
  field,
  limit,
  found,
  message: `${field} has ${found} entries; at most ${limit} are allowed`,
});

/** The first bound a taxonomy aspect passes (the field, the bound and the figure); null within them all. */
function definitionSizeProblem(aspect: TaxonomyAspect, value: Aspect): SizeProblem | null {
  for (const [name, bound] of Object.entries(KEPT[aspect])) {
    const v = value[name];
    const field = `${aspect}.${name}`;
    if (bound.kind === 'text') {
      if (typeof v === 'string' && v.length > MAX_TAXONOMY_TEXT_CHARS) return tooLong(field, v.length);
    } else if (bound.kind === 'list') {
      if (!Array.isArray(v)) continue;
      if (v.length > bound.most) return tooMany(field, bound.most, v.length);
      for (let i = 0; i < v.length; i++) {
        const x = v[i];
        if (typeof x === 'string' && x.length > MAX_TAXONOMY_TEXT_CHARS) return tooLong(`${field}[${i}]`, x.length);
      }
    } else {
      if (!v || typeof v !== 'object' || Array.isArray(v)) continue;
      const entries = Object.entries(v);
      if (entries.length > bound.most) return tooMany(field, bound.most, entries.length);
      for (const [k, x] of entries) {
        if (k.length > MAX_TAXONOMY_TEXT_CHARS) return tooLong(field, k.length, `A key of ${field}`);
        if (typeof x === 'string' && x.length > MAX_TAXONOMY_TEXT_CHARS) return tooLong(`${field}.${k}`, x.length);
      }
    }
  }
  return null;
}

/**
 * 400 naming the field, the bound and the figure when a taxonomy aspect of a write passes a bound
 * (MAX_TAXONOMY_TEXT_CHARS, MAX_TAXONOMY_LOCALIZATIONS, MAX_TAXONOMY_ATTRIBUTES,
 * MAX_TAXONOMY_DIMENSIONS). The gateway refuses what a request sends (drafts included); the
 * content actor what a version would hold (a merge, a promote, a restore).
 */
export function refuseOversizedDefinitions(aspects: Readonly<Record<string, Aspect | null | undefined>>): void {
  for (const name of TAXONOMY_ASPECTS) {
    const a = aspects[name];
    const problem = a ? definitionSizeProblem(name, a) : null;
    if (problem) throw new AppError('BAD_REQUEST', problem.message, { field: problem.field, limit: problem.limit, found: problem.found });
  }
}

/** A string held to MAX_TAXONOMY_TEXT_CHARS (one stored before the bound is cut, never inside a surrogate pair). */
function kept(s: string): string {
  if (s.length <= MAX_TAXONOMY_TEXT_CHARS) return s;
  const last = s.charCodeAt(MAX_TAXONOMY_TEXT_CHARS - 1);
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? MAX_TAXONOMY_TEXT_CHARS - 1 : MAX_TAXONOMY_TEXT_CHARS);
}
/** A reference (a parent, a dimension id) the model keeps; a longer one names nothing it holds (ids are aliases): null. */
const keptRef = (s: string | null): string | null => (s !== null && s.length <= MAX_TAXONOMY_TEXT_CHARS ? s : null);
/** The first `most` entries of a string map, each key within the bound (a longer one is dropped), each value held to it. */
function keptMap(v: Json | undefined, most: number): Record<string, string> {
  const out: Record<string, string> = {};
  let n = 0;
  if (v && typeof v === 'object' && !Array.isArray(v))
    for (const [k, x] of Object.entries(v)) {
      if (typeof x !== 'string' || k === '__proto__' || k.length > MAX_TAXONOMY_TEXT_CHARS) continue;
      out[k] = kept(x);
      if (++n >= most) break;
    }
  return out;
}
/** The first `most` ids of a list within the bound. */
const keptIds = (v: Json | undefined, most: number): string[] =>
  strings(v)
    .filter((s) => s.length <= MAX_TAXONOMY_TEXT_CHARS)
    .slice(0, most);

/**
 * The `svcTaxonomy.default` composer mapping (spec "Taxonomy resources"): a definition aspect
 * to its representation (svcTaxonomy, svcDimension, svcEntity); null when the content holds no
 * definition aspect. Custom types reuse it by naming the composer in config/variants.json.
 */
export function taxonomyRepresentation(aspects: Aspects): Aspects | null {
  const t = aspects.svcTaxonomyDefinition;
  if (t) return { svcTaxonomy: { _type: 'svcTaxonomy', id: str(t.id), name: str(t.name), dimensions: strings(t.dimensions) } };
  const d = aspects.svcDimensionDefinition;
  if (d)
    return {
      svcDimension: { _type: 'svcDimension', id: str(d.id), name: str(d.name), enumerable: d.enumerable === true, localizations: stringMap(d.localizations) },
    };
  const e = aspects.svcEntityDefinition;
  if (e) {
    const entity: Aspect = {
      _type: 'svcEntity',
      id: str(e.id),
      name: str(e.name),
      localizations: stringMap(e.localizations),
      attributes: stringMap(e.attributes),
    };
    if (typeof e.parent === 'string') entity.parent = e.parent;
    return { svcEntity: entity };
  }
  return null;
}

// ---- The taxonomy read model (spec "Taxonomy service", CONTRACT §10) ----
//
// What the taxonomy service answers, built from the definitions alone: the taxonomies,
// dimensions and entities by id, the tree below each, how deep a read goes, and completion
// matching. The service reads the definitions and the index; everything it decides from them is
// here, without I/O.

/**
 * Default and maximum of the `depth` parameter (CONTRACT §10); also the most ancestors a write's
 * parent check follows (`refuseParentCycle`), as no read shows a deeper level.
 */
export const MAX_TAXONOMY_DEPTH = 100;
/** At most this many entities in a completion result. */
export const MAX_COMPLETIONS = 50;

type Localizations = Record<string, string>;

export interface TaxonomyDef {
  kind: 'taxonomy';
  id: string;
  name: string;
  dimensions: string[];
  /**
   * The contexts of the content that holds it (`contextsOfHolder`); absent or empty: `__global__`
   * only. It shows a dimension it lists only when they are the dimension's (`hangsUnder`).
   */
  contexts?: readonly string[];
}
export interface DimensionDef {
  kind: 'dimension';
  id: string;
  name: string;
  enumerable: boolean;
  localizations: Localizations;
  /** The contexts of the content that holds it (`contextsOfHolder`); absent or empty: `__global__` only. */
  contexts?: readonly string[];
}
export interface EntityDef {
  kind: 'entity';
  id: string;
  name: string;
  localizations: Localizations;
  parent: string | null;
  attributes: Record<string, string>;
  /**
   * The contexts of the content that holds it (`contextsOfHolder`); absent or empty: `__global__`
   * only. It hangs under its parent only when they are the parent's (`hangsUnder`).
   */
  contexts?: readonly string[];
  /**
   * The content of a content hierarchy node: the node is seen only by callers who may see the
   * content's current version (CONTRACT §20), definitions have none and are public (§10).
   */
  head?: Snapshot;
}
export type TaxonomyNode = TaxonomyDef | DimensionDef | EntityDef;
/** Does the caller of a request see this entity? */
export type Sees = (e: EntityDef) => boolean;

/** Definitions by id, and the children (entities) of each entity or dimension id. */
export interface TaxonomyModel {
  byId: Map<string, TaxonomyNode>;
  children: Map<string, EntityDef[]>;
  taxonomies: TaxonomyDef[];
  /**
   * The dimensions each taxonomy shows, by taxonomy id: those it lists that the model holds and
   * that may hang under it (`hangsUnder`; the built-in dimension under any), each once, in the
   * order listed.
   */
  dimensionsOf: Map<string, DimensionDef[]>;
  /** Completion candidates per dimension, made on the first completion of the model. */
  candidates: Map<string, Candidate[]>;
}

/** A name path with its lowercased tokens per level, and the entity when it is defined. */
export interface Candidate {
  path: string[];
  words: string[][];
  entity?: EntityDef;
}

/**
 * The definition a content's aspects hold (through its svcTaxonomy representation), when the
 * content also holds its alias `_taxonomy/<id>` (spec: each definition has an alias in
 * `_taxonomy`); null otherwise. An alias names one content, so an id has one definition, and a
 * writer cannot rename, move or hide a definition by putting its id in content of its own.
 */
export function definitionOf(aspects: Aspects, aliases: readonly string[], contexts: readonly string[] = []): TaxonomyNode | null {
  const def = definitionIn(aspects, contexts);
  return def && aliases.includes(`${TAXONOMY_NAMESPACE}/${def.id}`) ? def : null;
}

/**
 * The contexts a content's definition or content hierarchy node carries into the model: the owners
 * of its svcSecurityContext (CONTRACT §3), without `__global__` (every check passes there for a
 * global role anyway), each once. None: the content is in `__global__` only.
 */
export function contextsOfHolder(meta: Aspects): string[] {
  return [...new Set(contextsOf(meta).filter((c) => c !== GLOBAL_CONTEXT))];
}

/**
 * A content's definition as the model keeps it: held to the bounds of a write (a definition
 * stored before them is cut: its strings to MAX_TAXONOMY_TEXT_CHARS, its maps and dimensions to
 * their first entries; a longer id, parent, key or dimension id names nothing and is dropped).
 */
function definitionIn(aspects: Aspects, contexts: readonly string[]): TaxonomyNode | null {
  const rep = taxonomyRepresentation(aspects);
  if (!rep) return null;
  const def = rep.svcTaxonomy ?? rep.svcDimension ?? rep.svcEntity!;
  const id = str(def.id);
  if (id.length > MAX_TAXONOMY_TEXT_CHARS) return null;
  const name = kept(str(def.name));
  if (rep.svcTaxonomy) return { kind: 'taxonomy', id, name, dimensions: keptIds(def.dimensions, MAX_TAXONOMY_DIMENSIONS), contexts };
  const localizations = keptMap(def.localizations, MAX_TAXONOMY_LOCALIZATIONS);
  if (rep.svcDimension) return { kind: 'dimension', id, name, enumerable: def.enumerable === true, localizations, contexts };
  return {
    kind: 'entity',
    id,
    name,
    localizations,
    parent: keptRef(typeof def.parent === 'string' ? def.parent : null),
    attributes: keptMap(def.attributes, MAX_TAXONOMY_ATTRIBUTES),
    contexts,
  };
}

/**
 * The entity of a content hierarchy node: its id is the content's main alias, its parent the
 * main alias of the parent content (`parent`, resolved by the caller; the dimension for a root),
 * and its `contentType` attribute the content's type. Held to the bounds of a write, as
 * `definitionIn` (a parent reference longer than MAX_TAXONOMY_TEXT_CHARS names none).
 */
export function hierarchyNodeOf(cid: string, head: Snapshot, type: string, node: Aspect, parent: string): EntityDef {
  const id = mainAlias(cid);
  return {
    kind: 'entity',
    id,
    name: kept(str(node.name, id)),
    localizations: keptMap(node.localizations, MAX_TAXONOMY_LOCALIZATIONS),
    parent: keptRef(parent),
    attributes: { ...keptMap(node.attributes, MAX_TAXONOMY_ATTRIBUTES), contentType: type },
    head,
    contexts: contextsOfHolder(head.meta ?? {}),
  };
}

/** The special content hierarchy taxonomy and its dimension, always present. */
const BUILT_IN: TaxonomyNode[] = [
  { kind: 'taxonomy', id: CONTENT_HIERARCHY, name: 'Content hierarchy', dimensions: [CONTENT_HIERARCHY_DIMENSION] },
  { kind: 'dimension', id: CONTENT_HIERARCHY_DIMENSION, name: 'Contents', enumerable: true, localizations: {} },
];

/**
 * Definitions by id (built-ins win), children sorted by name, an entity under its parent only where
 * it may hang there (`hangsUnder`), entities on a loop of such parents left out (`onLoops`), and a
 * dimension in a taxonomy that lists it only where it may hang there (`hangsUnder`).
 */
export function buildTaxonomyModel(defs: Iterable<TaxonomyNode>): TaxonomyModel {
  const byId = new Map<string, TaxonomyNode>();
  for (const def of defs) byId.set(def.id, def);
  for (const def of BUILT_IN) byId.set(def.id, def);
  // The parent each entity hangs under, decided once per entity; each node's contexts made a set once.
  const contextSets = new Map<TaxonomyNode, ReadonlySet<string>>();
  const contextsOfNode = (n: TaxonomyNode): ReadonlySet<string> => {
    let set = contextSets.get(n);
    if (!set) {
      set = new Set((n.contexts ?? []).filter((c) => c !== GLOBAL_CONTEXT));
      contextSets.set(n, set);
    }
    return set;
  };
  const above = new Map<EntityDef, TaxonomyNode | undefined>();
  for (const def of byId.values()) {
    if (def.kind !== 'entity' || def.parent === null) continue;
    const parent = byId.get(def.parent);
    if (!parent || BUILT_IN.includes(parent) || hangsUnder(contextsOfNode(def), contextsOfNode(parent))) above.set(def, parent);
  }
  const looped = onLoops(above);
  const children = new Map<string, EntityDef[]>();
  for (const def of above.keys()) {
    if (looped.has(def)) continue;
    const list = children.get(def.parent!) ?? [];
    list.push(def);
    children.set(def.parent!, list);
  }
  for (const list of children.values()) list.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  const taxonomies = [...byId.values()].filter((d): d is TaxonomyDef => d.kind === 'taxonomy').sort((a, b) => a.id.localeCompare(b.id));
  const dimensionsOf = new Map<string, DimensionDef[]>();
  for (const t of taxonomies) {
    // A dimension listed twice is in the tree once: each copy was the whole subtree again.
    const listed = [...new Set(t.dimensions)].map((id) => byId.get(id));
    dimensionsOf.set(
      t.id,
      listed.filter((d): d is DimensionDef => d?.kind === 'dimension' && (BUILT_IN.includes(d) || hangsUnder(contextsOfNode(d), contextsOfNode(t)))),
    );
  }
  return { byId, children, taxonomies, dimensionsOf, candidates: new Map() };
}

/**
 * May an entity of these contexts hang under a parent of those (a dimension of these contexts be
 * in a taxonomy of those that lists it)? Only when the same writers write both: the contexts are
 * the same set (owners without `__global__`; a content without owners is in `__global__` only, so
 * it hangs only under a parent without owners, and a parent without owners holds only such
 * entities). A place in a tree changes that tree (its children, its completions, the tag paths
 * through it) and the tree decides where the entity shows, so neither side may give it alone:
 *
 * - the entity's writers must write the parent (the entity's contexts among the parent's), or
 *   writing the reference would put entities into another's tree: a sportseditor's entity naming
 *   a culture dimension showed among that dimension's entities to everyone;
 * - the parent's writers must write the entity (the parent's contexts among the entity's), or
 *   holding the alias the reference names would take another's entity into one's own tree, and a
 *   reference that names nothing now (its parent deleted, which frees the alias; a dimension
 *   never defined) names whatever the first writer to take that alias holds: a culture node, or a
 *   content without owners, hung under the sportseditor's node once the sportseditor took the
 *   alias, and a loop of the sportseditor's own nodes above it hid it from every tree (the
 *   security review of the eighteenth session, findings 3 and F4). A node shared by sports and
 *   culture is written by both, so it holds only nodes shared by both.
 *
 * A dimension's place in a taxonomy is alike (the taxonomy names it by its alias), and neither
 * side gives it alone either: not listing the dimension (a sportseditor's taxonomy showed
 * culture's dimensions, with their entities, in its tree), not holding the alias a taxonomy lists
 * (a dimension culture deleted, or never defined: the sportseditor's dimension and entities showed
 * inside culture's taxonomy to everyone).
 *
 * An entity that may not hang under its parent is on no tree and is found by its id, as one whose
 * parent names nothing; a dimension that may not be in a taxonomy is found by its id, as one it does
 * not list. (The built-in dimension holds every root of the content hierarchy and may be in any
 * taxonomy; a parent the model does not hold is reached by no tree.)
 */
function hangsUnder(child: ReadonlySet<string>, parent: ReadonlySet<string>): boolean {
  if (child.size !== parent.size) return false;
  for (const c of child) if (!parent.has(c)) return false;
  return true;
}

/**
 * The entities on a loop of the parents they hang under (`above`): a cycle is never shown, so
 * they are on no tree (found by their ids). Only the entities on a loop: one whose chain reaches
 * a loop without being on it stays under its parent, cut off where the loop begins, as under any
 * parent on no tree. Before, every entity whose chain reached a loop was left out, so a writer's
 * loop of its own nodes hid whatever hung below it (a loop of 101 nodes, or through a head over
 * 64 KiB, passes the write's parent check, `refuseParentCycle` in
 * src/actors/content/taxonomy-references.ts). A loop is among entities of the same contexts
 * (`hangsUnder`), whose writers write every one of them, and a parent an entity may not hang under
 * ends its chain, so a cycle closed through content its writer may not read hides nothing of
 * another's. Each entity is visited once (a chain walked is not walked again).
 */
function onLoops(above: ReadonlyMap<EntityDef, TaxonomyNode | undefined>): Set<EntityDef> {
  const looped = new Set<EntityDef>();
  const done = new Set<EntityDef>();
  for (const start of above.keys()) {
    if (done.has(start)) continue;
    const path: EntityDef[] = [];
    const at = new Map<EntityDef, number>();
    let cur: TaxonomyNode | undefined = start;
    while (cur?.kind === 'entity' && !done.has(cur)) {
      const seen = at.get(cur);
      if (seen !== undefined) {
        for (let i = seen; i < path.length; i++) looped.add(path[i]);
        break;
      }
      at.set(cur, path.length);
      path.push(cur);
      cur = above.get(cur);
    }
    for (const e of path) done.add(e);
  }
  return looped;
}

/** The `depth` parameter: a non-negative integer, default 100, larger values taken as 100; 400 otherwise. */
export function taxonomyDepthOf(v: string | null): number {
  if (v === null || v === '') return MAX_TAXONOMY_DEPTH;
  if (!/^\d{1,9}$/.test(v)) throw new AppError('BAD_REQUEST', 'depth must be a non-negative integer (at most 100 levels are given)', { depth: v });
  return Math.min(Number(v), MAX_TAXONOMY_DEPTH);
}

/**
 * A structure read: every taxonomy (`id` null), or the taxonomy, dimension or entity `id`, with
 * its children down to `depth` levels; null when there is none the caller sees. A node the
 * caller may not see answers as one that does not exist. (Below a node it may not see, a node is
 * still found by its id, as it would be if that node did not exist.)
 */
export function structureOf(m: TaxonomyModel, id: string | null, depth: number, sees: Sees): unknown {
  if (id === null) return m.taxonomies.map((t) => taxonomyTree(m, t, depth, sees));
  const def = m.byId.get(id);
  if (!def || (def.kind === 'entity' && !sees(def))) return null;
  return def.kind === 'taxonomy'
    ? taxonomyTree(m, def, depth, sees)
    : def.kind === 'dimension'
      ? dimensionTree(m, def, depth, sees)
      : entityTree(m, def, depth, sees);
}

function taxonomyTree(m: TaxonomyModel, t: TaxonomyDef, depth: number, sees: Sees) {
  const dims = m.dimensionsOf.get(t.id) ?? [];
  return { id: t.id, name: t.name, dimensions: depth > 0 ? dims.map((d) => dimensionTree(m, d, depth - 1, sees)) : [] };
}

function dimensionTree(m: TaxonomyModel, d: DimensionDef, depth: number, sees: Sees) {
  const { entities, childrenOmitted } = childrenOf(m, d.id, depth, sees);
  return { id: d.id, name: d.name, localizations: d.localizations, enumerable: d.enumerable, entities, childrenOmitted };
}

function entityTree(m: TaxonomyModel, e: EntityDef, depth: number, sees: Sees): Record<string, unknown> {
  const { entities, childrenOmitted } = childrenOf(m, e.id, depth, sees);
  return { id: e.id, name: e.name, localizations: e.localizations, entities, attributes: e.attributes, childrenOmitted };
}

/**
 * The children the caller sees (a node it may not see hides its subtree, as if it did not
 * exist); `childrenOmitted` is true exactly where children exist that the depth left out.
 */
function childrenOf(m: TaxonomyModel, id: string, depth: number, sees: Sees) {
  const kids = (m.children.get(id) ?? []).filter(sees);
  if (depth <= 0) return { entities: [], childrenOmitted: kids.length > 0 };
  return { entities: kids.map((k) => entityTree(m, k, depth - 1, sees)), childrenOmitted: false };
}

// ---- completion matching ----

/** Lowercased whitespace tokens. */
export function tokens(s: string): string[] {
  return s.toLowerCase().split(/\s+/).filter(Boolean);
}

/** A completion input as levels (split on `/`) of tokens; empty levels dropped. */
export function completionLevels(input: string): string[][] {
  return input
    .split('/')
    .map((l) => tokens(l))
    .filter((l) => l.length > 0);
}

const candidate = (path: string[], entity?: EntityDef): Candidate => ({ path, words: path.map(tokens), entity });

/** Every defined entity of a dimension with its name path, parents before children. */
function candidatesOf(model: TaxonomyModel, dimId: string): Candidate[] {
  let list = model.candidates.get(dimId);
  if (list) return list;
  const found: Candidate[] = [];
  const walk = (parent: string, path: string[], depth: number) => {
    if (depth > MAX_TAXONOMY_DEPTH) return;
    for (const e of model.children.get(parent) ?? []) {
      const p = [...path, e.name];
      found.push(candidate(p, e));
      walk(e.id, p, depth + 1);
    }
  };
  walk(dimId, [], 1);
  list = found;
  model.candidates.set(dimId, list);
  return list;
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
function seenWithAncestors(model: TaxonomyModel, e: EntityDef, sees: Sees): boolean {
  let cur: TaxonomyNode | undefined = e;
  for (let depth = 0; cur?.kind === 'entity' && depth <= MAX_TAXONOMY_DEPTH; depth++) {
    if (!sees(cur)) return false;
    cur = cur.parent === null ? undefined : model.byId.get(cur.parent);
  }
  return true;
}

/** The defined entities of the dimension that match the levels and that the caller sees with their ancestors; at most MAX_COMPLETIONS. */
export function definedCompletions(model: TaxonomyModel, dimId: string, levels: string[][], sees: Sees): Candidate[] {
  const matches: Candidate[] = [];
  for (const c of candidatesOf(model, dimId))
    if (matchesWords(c.words, levels) && seenWithAncestors(model, c.entity!, sees) && matches.push(c) >= MAX_COMPLETIONS) break;
  return matches;
}

/**
 * Adds to `matches` the name paths found in the index (already filtered for the caller) that
 * match the levels and are no path of a defined entity the caller sees, up to MAX_COMPLETIONS in
 * all. An entity the caller does not see is as if it did not exist (CONTRACT §20): a path of the
 * index that equals its path is completed like any other (left out, it told that such an entity
 * exists: anyone could test names by tagging content of their own).
 */
export function addIndexedCompletions(model: TaxonomyModel, dimId: string, levels: string[][], matches: Candidate[], indexedPaths: string[], sees: Sees): void {
  if (matches.length >= MAX_COMPLETIONS) return;
  const known = new Set(
    candidatesOf(model, dimId)
      .filter((c) => seenWithAncestors(model, c.entity!, sees))
      .map((c) => c.path.join('/')),
  );
  for (const path of indexedPaths) {
    if (known.has(path)) continue;
    const c = candidate(path.split('/'));
    if (matchesWords(c.words, levels) && matches.push(c) >= MAX_COMPLETIONS) break;
  }
}

/** The Completion result: the Dimension shape with each match an element of `entities`. */
export function completionOf(model: TaxonomyModel, dim: DimensionDef, matches: Candidate[], sees: Sees) {
  return {
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
  };
}
