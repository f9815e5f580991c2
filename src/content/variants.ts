import { z } from 'zod';
import { contextsOf, isoTime, versionId, type Aspect, type Aspects, type Json, type Snapshot, type VersionRecord } from './model.js';
import { timeWindow, viewsOfVersion } from './views.js';
import { taxonomyRepresentation } from './taxonomy.js';
import { contentFields, searchBlock } from './search-document.js';

/**
 * Variants: alternative representations of a content, selected with `variant` on reads.
 * config/variants.json says, per content type, which aspects a variant keeps and which
 * composers build it. A composer is a function registered here by name.
 */

export interface ComposeContext {
  snapshot: Snapshot;
  version: VersionRecord;
  /** Does the entity with this id, of this dimension, have content (see `entityHasContent`)? */
  hasTaxonomyContent(id: string, dimension: string): Promise<boolean>;
}

/** Builds (or rewrites) the aspects of a variant; null when the content is not available in it. */
export type Composer = (aspects: Aspects, ctx: ComposeContext) => Promise<Aspects | null> | Aspects | null;

const variantSchema = z.strictObject({ aspects: z.array(z.string()).optional(), composers: z.array(z.string()).optional() });
const configSchema = z.strictObject({ $comment: z.string().optional(), types: z.record(z.string(), z.record(z.string(), variantSchema)) });
export type VariantsConfig = z.infer<typeof configSchema>;
type VariantDef = z.infer<typeof variantSchema>;

export const INDEXING_VARIANT = 'svcIndexing';

/** Checks a variants configuration (config/variants.json, read by config/variants.ts); `source` names it in errors. */
export function parseVariantsConfig(json: unknown, source: string): VariantsConfig {
  const parsed = configSchema.safeParse(json);
  if (!parsed.success) throw new Error(`Invalid ${source}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

export class Variants {
  constructor(
    private readonly config: VariantsConfig,
    private readonly composers: Record<string, Composer> = COMPOSERS,
  ) {
    for (const defs of Object.values(config.types)) {
      for (const [name, def] of Object.entries(defs)) {
        for (const c of def.composers ?? []) if (!composers[c]) throw new Error(`Variant ${name} names unknown composer ${c}`);
      }
    }
  }

  private def(type: string, variant: string): VariantDef | undefined {
    // Own keys only: a content type such as `constructor` must not find Object.prototype's members.
    const own = Object.hasOwn(this.config.types, type) ? this.config.types[type] : undefined;
    if (own && Object.hasOwn(own, variant)) return own[variant];
    const all = this.config.types['*'];
    return all && Object.hasOwn(all, variant) ? all[variant] : undefined;
  }

  /** Does the content type have this variant at all? */
  has(type: string, variant: string): boolean {
    return this.def(type, variant) !== undefined;
  }

  /** The content types that have a variant: '*' when every type has it. */
  typesWith(variant: string): string[] | '*' {
    if (this.has('*', variant)) return '*';
    return Object.entries(this.config.types)
      .filter(([t, defs]) => t !== '*' && Object.hasOwn(defs, variant))
      .map(([t]) => t);
  }

  /** The aspects of the content in the variant, or null when it is not available in it. */
  async apply(variant: string, ctx: ComposeContext): Promise<Aspects | null> {
    const def = this.def(ctx.version.type, variant);
    if (!def) return null;
    let aspects: Aspects = ctx.version.aspects;
    if (def.aspects) aspects = Object.fromEntries(def.aspects.filter((a) => a in aspects).map((a) => [a, aspects[a]]));
    for (const name of def.composers ?? []) {
      const next = await this.composers[name](aspects, ctx);
      if (next === null) return null;
      aspects = next;
    }
    return aspects;
  }
}

/** A name as a part of an index field name: anything but letters, digits, `_` and `-` becomes `_`. */
export const fieldSafe = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');

/**
 * A `*_drange` value: `[on TO off]`, an open end written as the year 0000 or 9999. Solr's
 * DateRangeField indexes `*` ends as many prefix-tree cells: measured here, documents with
 * `[* TO *]` windows indexed at 4,700/s and with `[0000 TO 9999]` at 18,000-20,000/s (and
 * half-open windows 2.2 times faster), while every search by date finds the same documents.
 */
export function dateRange(on?: number, off?: number): string {
  // The engine refuses an end before the start and years outside 0000-9999, and a refused
  // document would leave the content's previous one, with its previous views and owners, in the
  // index. svcTimeState is the writer's: a window that can never hold (onTime at or after
  // offTime, as inTimeWindow reads it) becomes one in the year 0000, which no search by a date
  // of ours reaches; years beyond the bounds are taken to them.
  if (on !== undefined && off !== undefined && on >= off) return NEVER;
  return `[${on === undefined ? '0000' : isoTime(clampYear(on))} TO ${off === undefined ? '9999' : isoTime(clampYear(off))}]`;
}

/** The window that holds at no time of ours (see dateRange). */
const NEVER = '[0000-01-01T00:00:00.000Z TO 0000-01-01T00:00:00.000Z]';
const FIRST_MS = Date.parse('0000-01-01T00:00:00.000Z');
const LAST_MS = Date.parse('9999-12-31T23:59:59.999Z');
const clampYear = (ms: number) => Math.min(LAST_MS, Math.max(FIRST_MS, ms));

/** The catch-all text field (schema.xml): the select handler's default field, so a query needs no field name. */
export const FULL_TEXT_FIELD = 'svc_text';
/** Most characters of the catch-all text: a long article fits; a content cannot make a document the engine chokes on. */
export const MAX_FULL_TEXT = 100_000;

/**
 * The text of a content for the catch-all field: every string value of its own aspects, at any
 * depth, one per line, in aspect order, at most MAX_FULL_TEXT characters. The platform's aspects
 * (names starting `svc`) are left out: they hold file keys, ids, paths and the search document,
 * not prose, and their terms would match queries no one meant (categorization is searchable in
 * its own `svc_tag_` fields). Keys starting `_` (`_type`) are not text either.
 */
export function fullText(aspects: Aspects): string {
  const parts: string[] = [];
  let size = 0;
  const walk = (v: unknown): boolean => {
    if (size >= MAX_FULL_TEXT) return false;
    if (typeof v === 'string') {
      const t = v.trim();
      if (t) {
        const part = t.slice(0, MAX_FULL_TEXT - size);
        parts.push(part);
        size += part.length + 1;
      }
    } else if (Array.isArray(v)) {
      for (const e of v) if (!walk(e)) return false;
    } else if (v !== null && typeof v === 'object') {
      for (const [k, e] of Object.entries(v)) if (!k.startsWith('_') && !walk(e)) return false;
    }
    return size < MAX_FULL_TEXT;
  };
  for (const [name, aspect] of Object.entries(aspects)) if (!name.startsWith('svc') && !walk(aspect)) break;
  return parts.join('\n');
}

/**
 * svcIndexing.standard: the search document (`svcSolrDocument` aspect) with the required
 * fields (id, root, version), the system fields of the spec, and the content's own
 * svcSolrDocument fields, and the catch-all text field (`fullText`). The indexer's fields are the indexer's alone (CONTRACT §20): the
 * content's `id`, `root`, `version`, Solr's `_..._` fields and every `svc_` field are left out,
 * on the document and on its child documents, whose ids are derived from this document's
 * (`searchBlock`). The write-time check refuses such fields; this holds for content stored
 * before it.
 */
export const indexingStandard: Composer = (aspects, { snapshot, version }) => {
  const vid = versionId(snapshot.cid, version.key);
  const views = viewsOfVersion(snapshot, version.key);
  const system: Record<string, Json> = {
    id: vid,
    root: vid,
    version: snapshot.rev,
    svc_type_s: version.type,
    svc_modificationTime_dt: isoTime(version.created),
    svc_views_ss: views,
    svc_security_context_ss: contextsOf(snapshot.meta),
    svc_timestate__drange: views.map((v) => {
      const w = timeWindow(snapshot, v);
      return dateRange(w.on, w.off);
    }),
    svc_contentstate_hidden_b: snapshot.meta.svcContentState?.hidden === true,
  };
  const text = fullText(aspects);
  if (text) system[FULL_TEXT_FIELD] = text;
  for (const v of views) {
    const w = timeWindow(snapshot, v);
    system[`svc_timestate_${fieldSafe(v)}_drange`] = dateRange(w.on, w.off);
  }
  const doc = searchBlock({ ...contentFields(aspects.svcSolrDocument ?? {}), ...system }, vid);
  return { ...aspects, svcSolrDocument: { _type: 'svcSolrDocument', ...doc } };
};

interface EntityIn {
  id?: unknown;
  name?: unknown;
  entities?: unknown;
}

/**
 * svcIndexing.categorization: for each dimension of svcCategorization, the full path of each
 * entity and every prefix of it, segments separated by `/`: names into
 * `svc_tag_<dim>_ss` and `svc_tag_autocomplete_<dim>_lc`, ids (for entities that have content
 * in the taxonomy namespace) into `svc_tag_id_<dim>_ss`.
 */
export const indexingCategorization: Composer = async (aspects, ctx) => {
  const cat = ctx.version.aspects.svcCategorization;
  const doc = { ...(aspects.svcSolrDocument ?? { _type: 'svcSolrDocument' }) } as Record<string, Json>;
  const dims = Array.isArray(cat?.dimensions) ? (cat.dimensions as { id?: unknown; entities?: unknown }[]) : [];
  for (const dim of dims) {
    if (typeof dim?.id !== 'string' || !Array.isArray(dim.entities)) continue;
    const dimId = dim.id;
    const d = fieldSafe(dimId);
    const names = new Set<string>();
    const ids = new Set<string>();
    const walk = async (list: EntityIn[], namePath: string, idPath: string, depth: number) => {
      if (depth > 100) return;
      for (const e of list) {
        if (!e || typeof e !== 'object') continue;
        const name = typeof e.name === 'string' ? e.name : typeof e.id === 'string' ? e.id : null;
        if (name === null) continue;
        const np = namePath ? `${namePath}/${name}` : name;
        names.add(np);
        let ip = '';
        if (typeof e.id === 'string') {
          ip = idPath ? `${idPath}/${e.id}` : e.id;
          if (await ctx.hasTaxonomyContent(e.id, dimId)) ids.add(ip);
        }
        if (Array.isArray(e.entities)) await walk(e.entities as EntityIn[], np, ip, depth + 1);
      }
    };
    await walk(dim.entities as EntityIn[], '', '', 1);
    if (names.size) {
      doc[`svc_tag_${d}_ss`] = [...names];
      doc[`svc_tag_autocomplete_${d}_lc`] = [...names];
    }
    if (ids.size) doc[`svc_tag_id_${d}_ss`] = [...ids];
  }
  return { ...aspects, svcSolrDocument: doc as Aspect };
};

/** The composers that config/variants.json may name. */
export const COMPOSERS: Record<string, Composer> = {
  'svcIndexing.standard': indexingStandard,
  'svcIndexing.categorization': indexingCategorization,
  'svcTaxonomy.default': (aspects) => taxonomyRepresentation(aspects),
};
