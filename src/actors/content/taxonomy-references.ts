import type { ContentStore } from '../../adapters/content-store.js';
import { AppError } from '../../errors.js';
import { MAIN_NAMESPACE, TAXONOMY_NAMESPACE, mainAlias, type Aspect, type Aspects, type Json, type Snapshot } from '../../content/model.js';
import { CONTENT_HIERARCHY_ASPECT, CONTENT_HIERARCHY_DIMENSION, MAX_TAXONOMY_DEPTH, refuseOversizedDefinitions, str } from '../../content/taxonomy.js';

/**
 * The taxonomy rules that read the store: content references resolved through aliases, whether
 * an entity has content, and the definition aspects of a write checked (parent references
 * without cycles). The pure rules are in src/content/taxonomy.ts.
 */

/**
 * What the parent check of one write reads at most, heads and versions together: less than half of
 * what the write may carry itself (MAX_BODY_BYTES, 10 MiB), so the check never costs more than a
 * large write does, whatever the chain above the parent holds.
 */
export const PARENT_CHECK_MAX_BYTES = 4 * 1024 * 1024;
/**
 * The most of one ancestor's head (its snapshot: metadata, views, aliases) the check reads. The head
 * of the first content the writer may not read is read to learn that it may not (its type and
 * owners), so this bounds what that content's size can change in a write's work; a head that is
 * larger (a few hundred bytes is usual) ends the check as such content does.
 */
export const PARENT_CHECK_MAX_HEAD_BYTES = 64 * 1024;

/** The content key a content reference (`contentid/<key>` or `<namespace>/<alias>`) names, or null. */
export async function resolveContentRef(store: ContentStore, ref: string): Promise<string | null> {
  const parts = splitRef(ref);
  if (!parts) return null;
  const [ns, rest] = parts;
  if (ns === MAIN_NAMESPACE) return (await store.liveContents([rest]))[0] ? rest : null;
  return store.resolveAlias(ns, rest);
}

/** A content reference's namespace and the rest (which may hold `/`); null when either is empty. */
function splitRef(ref: string): [namespace: string, rest: string] | null {
  const i = ref.indexOf('/');
  return i <= 0 || i === ref.length - 1 ? null : [ref.slice(0, i), ref.slice(i + 1)];
}

/**
 * `resolveContentRef` for many references, in a few calls to Redis whatever their number: whether
 * the contents of `contentid/<key>` references exist and are not deleted in one script call per
 * partition, the aliases of the others together (ContentStore.liveContents, aliasTargets); each
 * distinct reference is looked up once. One call per reference made a content hierarchy of 40,000
 * nodes cost 40,000 lookups of their parents at every full load of the taxonomy. The contents'
 * heads are not read: reading them (ContentStore.heads) made what a lookup costs grow with what
 * the named contents hold, and any content key can be named (SECURITY.md, the indexing variant).
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
  const [live, targets] = await Promise.all([store.liveContents(keys), store.aliasTargets(aliases)]);
  return refs.map((ref) => {
    const at = distinct.get(ref);
    if (!at) return null;
    if ('alias' in at) return targets[at.alias];
    return live[at.key] ? keys[at.key] : null;
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
 *   of the stored definitions (contents) the writer may read, back to this entity (content): an
 *   entity has at most one parent and the hierarchy is a tree (`refuseParentCycle`);
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
    // Definitions are public, the contents holding them are not: the check stops at one the writer may not read, as for nodes.
    await refuseParentCycle(store, cid, str(entity.id), entity.parent, 'svcEntityDefinition', (ref) => store.resolveAlias(TAXONOMY_NAMESPACE, ref), mayRead);
  }
  const node = aspects[CONTENT_HIERARCHY_ASPECT];
  if (node && typeof node.parent === 'string') {
    await refuseParentCycle(store, cid, mainAlias(cid), node.parent, CONTENT_HIERARCHY_ASPECT, contentKeyOf(store), mayRead);
  }
}

/**
 * The content key a content reference names, without reading the content: `contentid/<key>` is its
 * key, another alias is looked up (one GET). Whether the content exists is what reading its head
 * tells (`refuseParentCycle`).
 */
const contentKeyOf =
  (store: ContentStore) =>
  async (ref: string): Promise<string | null> => {
    const parts = splitRef(ref);
    if (!parts) return null;
    return parts[0] === MAIN_NAMESPACE ? parts[1] : store.resolveAlias(parts[0], parts[1]);
  };

/**
 * Follows `parent` references from `first` through the stored contents that hold them (their
 * current `aspect`), and refuses the write when the chain comes back to this content (`cid`,
 * named `self` in references), showing the chain. The check is the same work whatever content the
 * writer may not read holds, and answers the same whether or not such content exists: it stops
 *
 * - at a root, a parent that names nothing, a deleted content, or a cycle elsewhere;
 * - at the first content the writer may not read, taken as a root: its parent is never read. A
 *   cycle through content one may not read cannot be refused without telling of it (that the
 *   chain exists, and so its links), so it is stored, and readers cope as they do with two writes
 *   racing to close one: the taxonomy model leaves out the entities on a loop, and only them
 *   (`buildTaxonomyModel`), and an entity hangs under a parent only when both have the same
 *   contexts (`hangsUnder` in src/content/taxonomy.ts), so the loop moves or hides nothing of
 *   another context's;
 * - after MAX_TAXONOMY_DEPTH ancestors: the structure shows no deeper level, and a longer cycle is
 *   hidden by readers as above;
 * - where what it read would pass PARENT_CHECK_MAX_BYTES, or an ancestor's head is larger than
 *   PARENT_CHECK_MAX_HEAD_BYTES: sizes are asked before anything is read (`headWithin`,
 *   `versionWithin`), and only the versions of contents the writer may read are read.
 *
 * Before (the security review of the eighteenth session), every ancestor's whole head version was
 * read and decoded, up to 10,000 of them, through content the writer may not read: a
 * sportseditor's create of 200 bytes naming a culture node as its parent took 6-13 ms for a parent
 * naming nothing, 46 ms for a culture root of 8 MB and 193-441 ms for the leaf of a chain of 300
 * culture nodes, on the partition's one writer; a cycle through culture content was refused, which
 * told that the chain existed.
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
  const refuse = () => new AppError('BAD_REQUEST', `${field} makes a cycle: ${chain.join(' -> ')}`, { field, cycle: chain });
  let budget = PARENT_CHECK_MAX_BYTES;
  let parent: string | null = first;
  for (let depth = 0; parent !== null && depth < MAX_TAXONOMY_DEPTH; depth++) {
    chain.push(parent);
    if (parent === self) throw refuse();
    const holder = await holderOf(parent);
    if (holder === cid) throw refuse();
    if (holder === null || seen.has(holder)) return; // a root's unknown parent, or a cycle elsewhere
    seen.add(holder);
    const read = await store.headWithin(holder, Math.min(budget, PARENT_CHECK_MAX_HEAD_BYTES));
    if (!read || read.head.deleted || !mayRead(read.head)) return;
    budget -= read.bytes;
    const version = await store.versionWithin(holder, read.head.head, budget);
    if (!version) return;
    budget -= version.bytes;
    const up = version.record.aspects[aspect];
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
