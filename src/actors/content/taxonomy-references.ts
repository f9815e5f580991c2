import type { ContentStore } from '../../adapters/content-store.js';
import { AppError } from '../../errors.js';
import { MAIN_NAMESPACE, TAXONOMY_NAMESPACE, mainAlias, type Aspect, type Aspects, type Json, type Snapshot } from '../../content/model.js';
import { CONTENT_HIERARCHY_ASPECT, CONTENT_HIERARCHY_DIMENSION, refuseOversizedDefinitions, str } from '../../content/taxonomy.js';

/**
 * The taxonomy rules that read the store: content references resolved through aliases, whether
 * an entity has content, and the definition aspects of a write checked (parent references
 * without cycles). The pure rules are in src/content/taxonomy.ts.
 */

/** A parent chain longer than this is refused (the structure shows at most 100 levels anyway). */
const MAX_CHAIN = 10_000;

/** The content key a content reference (`contentid/<key>` or `<namespace>/<alias>`) names, or null. */
export async function resolveContentRef(store: ContentStore, ref: string): Promise<string | null> {
  const parts = splitRef(ref);
  if (!parts) return null;
  const [ns, rest] = parts;
  if (ns === MAIN_NAMESPACE) {
    const head = await store.head(rest);
    return head && !head.deleted ? rest : null;
  }
  return store.resolveAlias(ns, rest);
}

/** A content reference's namespace and the rest (which may hold `/`); null when either is empty. */
function splitRef(ref: string): [namespace: string, rest: string] | null {
  const i = ref.indexOf('/');
  return i <= 0 || i === ref.length - 1 ? null : [ref.slice(0, i), ref.slice(i + 1)];
}

/**
 * `resolveContentRef` for many references, in a few calls to Redis whatever their number: the
 * heads of `contentid/<key>` references in one script call per partition, the aliases of the
 * others together (ContentStore.heads, aliasTargets); each distinct reference is looked up once.
 * One call per reference made a content hierarchy of 40,000 nodes cost 40,000 lookups of their
 * parents at every full load of the taxonomy.
 */
export async function resolveContentRefs(store: ContentStore, refs: readonly string[]): Promise<(string | null)[]> {
  const keys: string[] = [];
  const aliases: [string, string][] = [];
  const distinct = new Map<string, { key: number } | { alias: number } | null>();
  for (const ref of refs) {
    if (distinct.has(ref)) continue;
    const parts = splitRef(ref);
    if (!parts) distinct.set(ref, null);
    else if (parts[0] === MAIN_NAMESPACE) distinct.set(ref, { key: keys.push(parts[1]) - 1 });
    else distinct.set(ref, { alias: aliases.push(parts) - 1 });
  }
  const [heads, targets] = await Promise.all([store.heads(keys), store.aliasTargets(aliases)]);
  return refs.map((ref) => {
    const at = distinct.get(ref);
    if (!at) return null;
    if ('alias' in at) return targets[at.alias];
    const head = heads[at.key];
    return head && !head.deleted ? keys[at.key] : null;
  });
}

/**
 * Does an entity of this dimension have content (spec: `svc_tag_id_<dim>_ss` holds id paths
 * "for entities that have content")? Entities of the content hierarchy are contents; others
 * have content when their alias `_taxonomy/<id>` exists.
 */
export async function entityHasContent(store: ContentStore, dimension: string, id: string): Promise<boolean> {
  if (dimension === CONTENT_HIERARCHY_DIMENSION) return (await resolveContentRef(store, id)) !== null;
  return (await store.resolveAlias(TAXONOMY_NAMESPACE, id)) !== null;
}

/**
 * Entity ids of a categorization looked up before the composer's first question: as many as the
 * indexing composer indexes (MAX_TAG_ENTITIES of src/content/variants.ts); the ids of the
 * entities it meets first, so every id it asks about is among them. Any other is looked up alone.
 */
const LOOKED_UP_TOGETHER = 1_000;
/** Entities deeper than this are not indexed, nor looked up (the composer's MAX_TAG_DEPTH). */
const MAX_DEPTH = 100;

/**
 * `hasTaxonomyContent` of the composers (`entityHasContent`) for one version, whose categorization
 * (`svcCategorization` of `aspects`) the indexing composer asks about one entity at a time: its
 * first question looks up the entity ids of the categorization together (up to
 * LOOKED_UP_TOGETHER, in the order the composer meets them: `resolveContentRefs` for the content
 * hierarchy's, the `_taxonomy` aliases of the others), and every question is answered from those.
 * Before, each was one call to Redis, one after the other: a read of content in the variant
 * `svcIndexing`, and every indexing of it, made as many calls as the categorization names ids.
 */
export function taxonomyContentOf(store: ContentStore, aspects: Aspects): (id: string, dimension: string) => Promise<boolean> {
  let known: Promise<Map<string, boolean>> | undefined;
  const keyOf = (dimension: string, id: string) => `${dimension === CONTENT_HIERARCHY_DIMENSION ? 'c' : 't'}/${id}`;
  const lookUp = async (): Promise<Map<string, boolean>> => {
    const asked = categorizationIds(aspects.svcCategorization, LOOKED_UP_TOGETHER);
    const refs = asked.filter(([dim]) => dim === CONTENT_HIERARCHY_DIMENSION).map(([, id]) => id);
    const defs = asked.filter(([dim]) => dim !== CONTENT_HIERARCHY_DIMENSION).map(([, id]): [string, string] => [TAXONOMY_NAMESPACE, id]);
    const [holders, targets] = await Promise.all([resolveContentRefs(store, refs), store.aliasTargets(defs)]);
    return new Map([
      ...refs.map((id, i): [string, boolean] => [keyOf(CONTENT_HIERARCHY_DIMENSION, id), holders[i] !== null]),
      ...defs.map(([, id], i): [string, boolean] => [keyOf('', id), targets[i] !== null]),
    ]);
  };
  return async (id, dimension) => {
    known ??= lookUp();
    return (await known).get(keyOf(dimension, id)) ?? entityHasContent(store, dimension, id);
  };
}

/** `[dimension, id]` of the first `max` entities with an id in a categorization, in the order of the indexing composer's walk. */
function categorizationIds(cat: Aspect | undefined, max: number): [string, string][] {
  const out: [string, string][] = [];
  const dims = Array.isArray(cat?.dimensions) ? (cat.dimensions as Json[]) : [];
  const walk = (dim: string, list: Json[], depth: number): boolean => {
    if (depth > MAX_DEPTH) return true;
    for (const e of list) {
      // as the composer: an entity with neither a name nor an id is passed over with its children
      if (!e || typeof e !== 'object' || Array.isArray(e) || (typeof e.name !== 'string' && typeof e.id !== 'string')) continue;
      if (typeof e.id === 'string' && out.push([dim, e.id]) >= max) return false;
      if (Array.isArray(e.entities) && !walk(dim, e.entities, depth + 1)) return false;
    }
    return true;
  };
  for (const d of dims) {
    if (!d || typeof d !== 'object' || Array.isArray(d) || typeof d.id !== 'string' || !Array.isArray(d.entities)) continue;
    if (!walk(d.id, d.entities, 1)) break;
  }
  return out;
}

/**
 * Checks the taxonomy aspects of a version about to be written to main (create, update,
 * promote, restore, bulk lines), 400 with nothing written when:
 * - a definition aspect or `svcContentHierarchy` passes a bound of what the taxonomy model keeps
 *   (`refuseOversizedDefinitions`: strings of MAX_TAXONOMY_TEXT_CHARS, MAX_TAXONOMY_LOCALIZATIONS,
 *   MAX_TAXONOMY_ATTRIBUTES, MAX_TAXONOMY_DIMENSIONS), checked before any parent is followed;
 * - `svcEntityDefinition.parent` (or `svcContentHierarchy.parent`) leads, through the parents
 *   of the stored definitions (contents), back to this entity (content): an entity has at most
 *   one parent and the hierarchy is a tree;
 * - `svcCategorization` carries `childrenOmitted`, which is only information about a taxonomy
 *   response and must not be sent back when categorizing.
 * Two writes racing to close one cycle through different contents can both pass; readers
 * never show entities on a cycle, so such a pair is hidden, not looped over.
 */
export async function checkTaxonomyAspects(store: ContentStore, cid: string, aspects: Aspects, mayRead: (head: Snapshot) => boolean): Promise<void> {
  refuseOversizedDefinitions(aspects);
  const categorization = aspects.svcCategorization;
  if (categorization !== undefined) {
    const at = childrenOmittedAt(categorization, 'svcCategorization', 0);
    if (at)
      throw new AppError('BAD_REQUEST', 'childrenOmitted is information about a taxonomy response and cannot be sent back when categorizing', { field: at });
  }
  const entity = aspects.svcEntityDefinition;
  if (entity && typeof entity.parent === 'string') {
    // Entity definitions are public (the taxonomy structure): the chain is shown.
    await refuseParentCycle(
      store,
      cid,
      str(entity.id),
      entity.parent,
      'svcEntityDefinition',
      (ref) => store.resolveAlias(TAXONOMY_NAMESPACE, ref),
      () => true,
    );
  }
  const node = aspects[CONTENT_HIERARCHY_ASPECT];
  if (node && typeof node.parent === 'string') {
    await refuseParentCycle(store, cid, mainAlias(cid), node.parent, CONTENT_HIERARCHY_ASPECT, (ref) => resolveContentRef(store, ref), mayRead);
  }
}

/**
 * Follows `parent` references from `first` through the stored contents that hold them (their
 * current `aspect`), and refuses the write when the chain comes back to this content (`cid`,
 * named `self` in references). Stops at a root, an unknown parent or a cycle elsewhere. The
 * refusal shows the chain only when the writer may read every content on it: the parents of
 * contents it may not read are theirs to know (found in a security review).
 */
async function refuseParentCycle(
  store: ContentStore,
  cid: string,
  self: string,
  first: string,
  aspect: string,
  holderOf: (ref: string) => Promise<string | null>,
  mayRead: (head: Snapshot) => boolean,
): Promise<void> {
  const field = `${aspect}.parent`;
  const chain = [self];
  const seen = new Set<string>([cid]);
  let hidden = false;
  const refuse = () =>
    hidden
      ? new AppError('BAD_REQUEST', `${field} makes a cycle through content you may not read`, { field })
      : new AppError('BAD_REQUEST', `${field} makes a cycle: ${chain.join(' -> ')}`, { field, cycle: chain });
  let parent: string | null = first;
  while (parent !== null) {
    chain.push(parent);
    if (parent === self) throw refuse();
    const holder = await holderOf(parent);
    if (holder === cid || chain.length > MAX_CHAIN) throw refuse();
    if (holder === null || seen.has(holder)) return; // a root's unknown parent, or a cycle elsewhere
    seen.add(holder);
    const head = await store.head(holder);
    if (!head || head.deleted) return;
    if (!mayRead(head)) hidden = true;
    const up = (await store.version(holder, head.head))?.aspects[aspect];
    parent = up && typeof up.parent === 'string' ? up.parent : null;
  }
}

/** The path of the first `childrenOmitted` key in a categorization, or null. */
function childrenOmittedAt(v: Json | Aspect | undefined, path: string, depth: number): string | null {
  if (depth > 200 || v === null || typeof v !== 'object') return null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const at = childrenOmittedAt(v[i], `${path}[${i}]`, depth + 1);
      if (at) return at;
    }
    return null;
  }
  for (const [k, x] of Object.entries(v)) {
    if (k === 'childrenOmitted') return `${path}.${k}`;
    const at = childrenOmittedAt(x, `${path}.${k}`, depth + 1);
    if (at) return at;
  }
  return null;
}
