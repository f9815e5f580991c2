import type { ContentStore } from '../adapters/content-store.js';
import { taxonomyContentOf } from '../actors/content/taxonomy-references.js';
import type { Aspects, Snapshot, VersionRecord } from '../content/model.js';
import type { Variants } from '../content/variants.js';
import { AppError } from '../errors.js';

export interface VariantDeps {
  variants: Variants;
  /** Answers the composers' taxonomy lookups (does an entity have content?). */
  store: ContentStore;
}

/**
 * The aspects of `version` in `variant` (content `snapshot`), as every read path composes them:
 * content and workspace reads, inlined search results, file delivery. Null when the variant
 * leaves nothing of the version.
 */
export function composeVariant(d: VariantDeps, variant: string, snapshot: Snapshot, version: VersionRecord): Promise<Aspects | null> {
  return d.variants.apply(variant, { snapshot, version, hasTaxonomyContent: taxonomyContentOf(d.store, version.aspects) });
}

/** `composeVariant` for a read that asked for the variant: 404 when the variant leaves nothing. */
export async function variantAspects(d: VariantDeps, variant: string, snapshot: Snapshot, version: VersionRecord): Promise<Aspects> {
  const aspects = await composeVariant(d, variant, snapshot, version);
  if (aspects === null) throw new AppError('NOT_FOUND', `Content is not available in variant ${variant}`);
  return aspects;
}
