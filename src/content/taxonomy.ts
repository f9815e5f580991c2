import type { Aspect, Aspects, Json } from './model.js';

/**
 * The taxonomy rules of the spec ("Taxonomy resources", "Categorization"; CONTRACT §10) that
 * hold for every write and every reader: the definition aspects and their `svcTaxonomy`
 * representation, the special `contentHierarchy` taxonomy, parent references without cycles,
 * and `childrenOmitted` never accepted back in a categorization.
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
