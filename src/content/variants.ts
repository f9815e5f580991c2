import { z } from 'zod';
import { contextsOf, isoTime, versionId, type Aspect, type Aspects, type Json, type Snapshot, type VersionRecord } from './model.js';
import { AppError } from '../errors.js';
import { indexableViews, MAX_VIEWS, timeWindow, viewsOfVersion } from './views.js';
import { taxonomyRepresentation } from './taxonomy.js';
import { contentFields, MAX_DATE_RANGES, searchBlock, withinDateRanges } from './search-document.js';

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
  /** Views kept first when a version is on more than MAX_VIEWS (the indexer's INDEXED_VIEWS, on which visibility depends). */
  preferredViews?: readonly string[];
  /** Told each time a composer holds a document to a bound it passed (content stored before the bound): what it left out. */
  trimmed?(note: string): void;
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
export const indexingStandard: Composer = (aspects, { snapshot, version, preferredViews, trimmed }) => {
  const vid = versionId(snapshot.cid, version.key);
  const allViews = viewsOfVersion(snapshot, version.key);
  const views = indexableViews(allViews, preferredViews);
  const notes: string[] = [];
  if (views.length < allViews.length) {
    notes.push('views');
    trimmed?.(`views: ${views.length} of the version's ${allViews.length} views indexed (at most ${MAX_VIEWS})`);
  }
  const own = withinDateRanges(contentFields(aspects.svcSolrDocument ?? {}));
  if (own.dropped) {
    notes.push('date-ranges');
    trimmed?.(`svcSolrDocument: ${own.dropped} *_drange values left out (at most ${MAX_DATE_RANGES} indexed)`);
  }
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
  if (notes.length) system[TRIMMED_FIELD] = notes;
  const doc = searchBlock({ ...own.doc, ...system }, vid);
  return { ...aspects, svcSolrDocument: { _type: 'svcSolrDocument', ...doc } };
};

/**
 * The system field that lists the bounds a composer held a document to (`views`, `date-ranges`,
 * `tags`): content stored before the bounds; `svc_index_trimmed_ss:*` finds them all.
 */
export const TRIMMED_FIELD = 'svc_index_trimmed_ss';

function noteTrimmed(doc: Record<string, Json>, note: string): void {
  const before = Array.isArray(doc[TRIMMED_FIELD]) ? (doc[TRIMMED_FIELD] as string[]) : [];
  doc[TRIMMED_FIELD] = [...before, note];
}

/**
 * Most entities of a content's svcCategorization, over all its dimensions (each is a value of
 * three fields; one with an id is a look-up of the indexer). A newsroom's categorization has
 * tens to hundreds.
 */
export const MAX_TAG_ENTITIES = 1_000;
/**
 * Most characters of the tag paths of a content's svcCategorization: every entity's name path
 * and id path together (the index holds the name paths twice). Each path repeats its parents'
 * names, so paths grow with the square of a deep categorization's size: 45 KB of body made
 * millions of characters and cost 4-5 s of Solr CPU; 194 KB made some 800 MB, a RangeError in
 * the indexer, which retried it for ever. 200,000 characters (1,000 entities of 100-character
 * name and id paths) cost the engine about 70-90 ms.
 */
export const MAX_TAG_PATH_CHARS = 200_000;
/** Entities deeper than this are not indexed (the taxonomy structure shows at most 100 levels). */
const MAX_TAG_DEPTH = 100;

interface EntityIn {
  id?: unknown;
  name?: unknown;
  entities?: unknown;
}

/** An entity of a categorization, as the walk meets it: its paths (built only when asked) and their lengths. */
interface TagEntity {
  /** Index of its dimension in `dimensions`. */
  dim: number;
  dimId: string;
  id?: string;
  namePath: string;
  idPath: string;
  chars: number;
}

/**
 * Walks the entities of a categorization, parents before children, dimension by dimension,
 * calling `visit` with each one's name path (`A/B/C`; an entity without a name is named by its
 * id) and id path (built from ids; an entity without one starts its children's again), until
 * `visit` answers false. `build` false: paths are not built, only their lengths counted (the
 * write-time check must not build what it refuses).
 */
function walkTags(cat: Aspect | undefined, build: boolean, visit: (e: TagEntity) => boolean): void {
  const dims = Array.isArray(cat?.dimensions) ? (cat.dimensions as { id?: unknown; entities?: unknown }[]) : [];
  for (let dim = 0; dim < dims.length; dim++) {
    const d = dims[dim];
    if (typeof d?.id !== 'string' || !Array.isArray(d.entities)) continue;
    const dimId = d.id;
    const walk = (list: EntityIn[], np: string, npLength: number, ip: string, ipLength: number, depth: number): boolean => {
      if (depth > MAX_TAG_DEPTH) return true;
      for (const e of list) {
        if (!e || typeof e !== 'object') continue;
        const name = typeof e.name === 'string' ? e.name : typeof e.id === 'string' ? e.id : null;
        if (name === null) continue;
        const id = typeof e.id === 'string' ? e.id : undefined;
        const nameLength = npLength ? npLength + 1 + name.length : name.length;
        const idLength = id === undefined ? 0 : ipLength ? ipLength + 1 + id.length : id.length;
        const namePath = build ? (np ? `${np}/${name}` : name) : '';
        const idPath = build && id !== undefined ? (ip ? `${ip}/${id}` : id) : '';
        if (!visit({ dim, dimId, id, namePath, idPath, chars: nameLength + idLength })) return false;
        if (Array.isArray(e.entities) && !walk(e.entities as EntityIn[], namePath, nameLength, idPath, idLength, depth + 1)) return false;
      }
      return true;
    };
    if (!walk(d.entities as EntityIn[], '', 0, '', 0, 1)) return;
  }
}

/** How many entities a categorization has and how many characters its tag paths hold (what MAX_TAG_* bound). */
export function categorizationSize(cat: Aspect | undefined): { entities: number; pathChars: number } {
  let entities = 0;
  let pathChars = 0;
  walkTags(cat, false, (e) => {
    entities++;
    pathChars += e.chars;
    return true;
  });
  return { entities, pathChars };
}

/** 400 naming the bound and the figure when a svcCategorization passes MAX_TAG_ENTITIES or MAX_TAG_PATH_CHARS. */
export function refuseOversizedCategorization(cat: Aspect | undefined): void {
  const { entities, pathChars } = categorizationSize(cat);
  if (entities > MAX_TAG_ENTITIES) {
    throw new AppError('BAD_REQUEST', `svcCategorization has ${entities} entities; at most ${MAX_TAG_ENTITIES} are allowed`, {
      field: 'svcCategorization',
      limit: MAX_TAG_ENTITIES,
      found: entities,
    });
  }
  if (pathChars > MAX_TAG_PATH_CHARS) {
    throw new AppError(
      'BAD_REQUEST',
      `svcCategorization's tag paths hold ${pathChars} characters (each entity's path repeats its parents' names and ids); at most ${MAX_TAG_PATH_CHARS} are allowed`,
      { field: 'svcCategorization', limit: MAX_TAG_PATH_CHARS, found: pathChars },
    );
  }
}

/**
 * svcIndexing.categorization: for each dimension of svcCategorization, the full path of each
 * entity and every prefix of it, segments separated by `/`: names into
 * `svc_tag_<dim>_ss` and `svc_tag_autocomplete_<dim>_lc`, ids (for entities that have content
 * in the taxonomy namespace) into `svc_tag_id_<dim>_ss`. At most MAX_TAG_ENTITIES entities and
 * MAX_TAG_PATH_CHARS characters of paths, the first ones in walk order: a categorization stored
 * before the write-time bound is indexed in part (noted in TRIMMED_FIELD), never built whole.
 */
export const indexingCategorization: Composer = async (aspects, ctx) => {
  const cat = ctx.version.aspects.svcCategorization;
  const doc = { ...(aspects.svcSolrDocument ?? { _type: 'svcSolrDocument' }) } as Record<string, Json>;
  const kept: TagEntity[] = [];
  let chars = 0;
  let whole = true;
  walkTags(cat, true, (e) => {
    if (kept.length >= MAX_TAG_ENTITIES || chars + e.chars > MAX_TAG_PATH_CHARS) {
      whole = false;
      return false;
    }
    chars += e.chars;
    kept.push(e);
    return true;
  });
  if (!whole) {
    const size = categorizationSize(cat);
    noteTrimmed(doc, 'tags');
    ctx.trimmed?.(
      `svcCategorization: ${kept.length} of ${size.entities} entities indexed, ${chars} of ${size.pathChars} characters of tag paths (at most ${MAX_TAG_ENTITIES} entities, ${MAX_TAG_PATH_CHARS} characters)`,
    );
  }
  const byDim = new Map<number, { dimId: string; names: Set<string>; ids: Set<string> }>();
  for (const e of kept) {
    const d = byDim.get(e.dim) ?? { dimId: e.dimId, names: new Set<string>(), ids: new Set<string>() };
    byDim.set(e.dim, d);
    d.names.add(e.namePath);
    if (e.id !== undefined && (await ctx.hasTaxonomyContent(e.id, e.dimId))) d.ids.add(e.idPath);
  }
  for (const { dimId, names, ids } of [...byDim.entries()].sort(([a], [b]) => a - b).map(([, d]) => d)) {
    const d = fieldSafe(dimId);
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
