import type { ContentStore } from '../../adapters/content-store.js';
import { AppError } from '../../errors.js';
import { MAIN_NAMESPACE, TAXONOMY_NAMESPACE, mainAlias, type Aspect, type Aspects, type Json, type Snapshot } from '../../content/model.js';
import { CONTENT_HIERARCHY_ASPECT, CONTENT_HIERARCHY_DIMENSION, str } from '../../content/taxonomy.js';

/**
 * The taxonomy rules that read the store: content references resolved through aliases, whether
 * an entity has content, and the definition aspects of a write checked (parent references
 * without cycles). The pure rules are in src/content/taxonomy.ts.
 */

/** A parent chain longer than this is refused (the structure shows at most 100 levels anyway). */
const MAX_CHAIN = 10_000;

/** The content key a content reference (`contentid/<key>` or `<namespace>/<alias>`) names, or null. */
export async function resolveContentRef(store: ContentStore, ref: string): Promise<string | null> {
  const i = ref.indexOf('/');
  if (i <= 0 || i === ref.length - 1) return null;
  const ns = ref.slice(0, i);
  const rest = ref.slice(i + 1);
  if (ns === MAIN_NAMESPACE) {
    const head = await store.head(rest);
    return head && !head.deleted ? rest : null;
  }
  return store.resolveAlias(ns, rest);
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
 * Checks the taxonomy aspects of a version about to be written to main (create, update,
 * promote), 400 with nothing written when:
 * - `svcEntityDefinition.parent` (or `svcContentHierarchy.parent`) leads, through the parents
 *   of the stored definitions (contents), back to this entity (content): an entity has at most
 *   one parent and the hierarchy is a tree;
 * - `svcCategorization` carries `childrenOmitted`, which is only information about a taxonomy
 *   response and must not be sent back when categorizing.
 * Two writes racing to close one cycle through different contents can both pass; readers
 * never show entities on a cycle, so such a pair is hidden, not looped over.
 */
export async function checkTaxonomyAspects(store: ContentStore, cid: string, aspects: Aspects, mayRead: (head: Snapshot) => boolean): Promise<void> {
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
