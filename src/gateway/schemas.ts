import { z } from 'zod';
import { AppError } from '../errors.js';
import { UPDATE_MODES } from '../content/update-modes.js';
import { IF_MATCH_FORM, ifMatchWellFormed, LATEST_VIEW, MAIN_NAMESPACE, MAP_KEY_RESERVED, type Aspect, type Aspects } from '../content/model.js';
import type { Operation } from '../actors/content/content-actor.js';
import { checkSearchDocument, invalidSearchDocument } from '../content/search-document.js';
import { refuseOversizedDefinitions } from '../content/taxonomy.js';
import { refuseOversizedCategorization } from '../content/variants.js';
import { MAX_VIEWS } from '../content/views.js';
import { indexSchema } from '../adapters/index-schema.js';

/**
 * The request schemas of the content service. Names that end up in keys, paths and headers
 * (namespaces, aliases, views, types, aspects) are kept to a safe alphabet: no `/`, no `..`,
 * no control characters, no braces (they would change a Redis Cluster hash tag).
 */
const SAFE = /^[A-Za-z0-9_~@.-]+$/;
const NAME_MAX = 256;
const noDotDot = (s: string) => !s.includes('..') && s !== '.';
export const nameSchema = (what: string) =>
  z
    .string()
    .min(1, `${what} must not be empty`)
    .max(NAME_MAX, `${what} is longer than ${NAME_MAX} characters`)
    .regex(SAFE, `${what} may hold only letters, digits and _ ~ @ . -`)
    .refine(noDotDot, `${what} must not contain '..'`);

/** What `nameSchema` accepts (the same parts), without zod's cost: every read checks its path's names; zod words a refusal. */
export function isSafeName(s: string): boolean {
  return s.length >= 1 && s.length <= NAME_MAX && SAFE.test(s) && noDotDot(s);
}

/** Names refused where a view, alias namespace or metadata aspect is written (model.ts MAP_KEY_RESERVED); a read of one finds nothing. */
const storedAsKey = (what: string) => nameSchema(what).refine((n) => !MAP_KEY_RESERVED.has(n), `${what} must not be _type or __proto__`);

export const namespaceSchema = nameSchema('namespace');
export const aliasSchema = nameSchema('alias');
export const viewSchema = nameSchema('view');
const storedNamespaceSchema = storedAsKey('namespace');
const storedViewSchema = storedAsKey('view');
export const typeSchema = nameSchema('content type');
const aspectNameSchema = nameSchema('aspect name');

/**
 * Deepest nesting accepted in a body; deeper JSON is refused before any recursive work, with the
 * body (`checkStorable` in body-limits.ts, on every JSON body and bulk line).
 */
export const MAX_BODY_DEPTH = 64;

const aspectSchema = z.looseObject({ _type: z.string().max(256).optional() });

const operationSchema = z.discriminatedUnion('_type', [
  z.object({
    _type: z.literal('svcSetAlias'),
    namespace: storedNamespaceSchema.refine((n) => n !== MAIN_NAMESPACE, `namespace ${MAIN_NAMESPACE} is reserved for main aliases`),
    alias: aliasSchema,
  }),
  z.object({ _type: z.literal('svcAssignToViews'), views: z.array(storedViewSchema).min(1).max(100) }),
  z.object({
    _type: z.literal('svcAssignToSymbolicViews'),
    views: z.array(storedViewSchema).min(1).max(100),
    targetView: z.string().regex(/^@/, 'targetView must start with @').pipe(z.string().max(257)),
  }),
  z.object({ _type: z.literal('svcContentMetadata'), aspects: z.record(storedAsKey('metadata aspect name'), aspectSchema) }),
]);

export const envelopeSchema = z.object({
  system: z.looseObject({ contentType: typeSchema.optional(), id: z.string().optional(), version: z.string().optional() }).optional(),
  aspects: z.record(z.string(), z.unknown()).optional(),
  operations: z.array(operationSchema).max(100).optional(),
  origin: z.string().max(1024).optional(),
});

export interface ParsedEnvelope {
  contentType?: string;
  aspects: Record<string, Aspect | null>;
  operations: Operation[];
  origin?: string;
}

/**
 * Validates a content envelope; 400 (40000) with the zod issues in extraInfo. `body` is a JSON
 * body as the gateway read it (Exchange.json, a bulk line), so its depth is already checked.
 */
export function parseEnvelope(body: unknown): ParsedEnvelope {
  const env = plainEnvelope(body) ?? envelopeBySchema(body);
  const aspects = env.aspects;
  if (aspects.svcSolrDocument) checkIndexable(aspects.svcSolrDocument);
  if (aspects.svcCategorization) refuseOversizedCategorization(aspects.svcCategorization);
  refuseOversizedDefinitions(aspects);
  refuseManyViews(env.operations);
  return env;
}

/** `parseEnvelope` up to its bounds, by the schemas: every envelope may go this way; 400 with zod's issues. */
export function envelopeBySchema(body: unknown): ParsedEnvelope {
  const parsed = envelopeSchema.safeParse(body);
  if (!parsed.success) throw invalid(parsed.error);
  const aspects: Record<string, Aspect | null> = {};
  for (const [name, value] of Object.entries(parsed.data.aspects ?? {})) {
    if (name === '_type') continue; // the content type marker of responses
    const n = aspectNameSchema.safeParse(name);
    if (!n.success) throw invalid(n.error, ['aspects', name]);
    if (value === null) {
      aspects[name] = null;
      continue;
    }
    const a = aspectSchema.safeParse(value);
    if (!a.success) throw invalid(a.error, ['aspects', name]);
    aspects[name] = { ...(a.data as Aspect), _type: a.data._type ?? name };
  }
  const operations = (parsed.data.operations ?? []).map((op) =>
    op._type === 'svcContentMetadata' ? { ...op, aspects: withTypes(op.aspects as Aspects) } : op,
  ) as Operation[];
  return { contentType: parsed.data.system?.contentType, aspects, operations, origin: parsed.data.origin };
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype && !Array.isArray(v);

/**
 * `envelopeBySchema`'s answer without zod, for the envelope of almost every write: JSON objects
 * (of Object's prototype) for the envelope, `system` and each aspect, names `isSafeName` accepts,
 * `_type` a string of at most 256 characters where given, `origin` a string of at most 1,024, no
 * operations. The same value, keys in the same order: an aspect's `_type` first when it has one
 * (zod's loose object puts it there), else last. Null for anything else (operations, a name or
 * value the schemas refuse, a key `__proto__`, which zod leaves out): the schemas look at it
 * then, and word any refusal. Zod's parse was a third of the CPU a bulk line spent outside the
 * commit (src/gateway/schemas.test.ts checks that both ways answer alike).
 */
export function plainEnvelope(body: unknown): ParsedEnvelope | null {
  if (!isPlainObject(body) || body.operations !== undefined) return null;
  const { system, aspects: given, origin } = body;
  if (origin !== undefined && (typeof origin !== 'string' || origin.length > 1024)) return null;
  let contentType: string | undefined;
  if (system !== undefined) {
    if (!isPlainObject(system)) return null;
    const { contentType: t, id, version } = system;
    if ((t !== undefined && (typeof t !== 'string' || !isSafeName(t))) || (id !== undefined && typeof id !== 'string')) return null;
    if (version !== undefined && typeof version !== 'string') return null;
    contentType = t;
  }
  const aspects: Record<string, Aspect | null> = {};
  if (given !== undefined) {
    if (!isPlainObject(given)) return null;
    for (const name of Object.keys(given)) {
      if (name === '_type') continue;
      if (name === '__proto__' || !isSafeName(name)) return null;
      const value = given[name];
      if (value === null) {
        aspects[name] = null;
        continue;
      }
      if (!isPlainObject(value)) return null;
      const typed = value._type;
      if (typed === undefined ? Object.hasOwn(value, '_type') : typeof typed !== 'string' || typed.length > 256) return null;
      const type = typed as string | undefined;
      const aspect: Aspect = type === undefined ? {} : { _type: type };
      for (const k of Object.keys(value)) {
        if (k === '__proto__') return null;
        if (k !== '_type') aspect[k] = value[k] as Aspect[string];
      }
      if (type === undefined) aspect._type = name;
      aspects[name] = aspect;
    }
  }
  return { contentType, aspects, operations: [], origin };
}

/** 400 naming the field when a svcSolrDocument does not fit the search collection's schema or passes a bound (CONTRACT §20). */
function checkIndexable(aspect: Aspect): void {
  const problem = checkSearchDocument(aspect, indexSchema());
  if (problem) throw invalidSearchDocument(problem);
}

/**
 * 400 when the operations of one write name more than MAX_VIEWS views (the content actor bounds
 * the views a content is on after the write; this refuses an oversized request before it).
 */
function refuseManyViews(operations: Operation[]): void {
  const views = new Set<string>([LATEST_VIEW]);
  for (const op of operations) if (op._type === 'svcAssignToViews' || op._type === 'svcAssignToSymbolicViews') for (const v of op.views) views.add(v);
  if (views.size > MAX_VIEWS) {
    throw new AppError(
      'BAD_REQUEST',
      `The operations put the content on ${views.size} views (${LATEST_VIEW} included); a content may be on at most ${MAX_VIEWS}`,
      {
        limit: MAX_VIEWS,
        found: views.size,
      },
    );
  }
}

function withTypes(aspects: Aspects): Aspects {
  const out: Aspects = {};
  for (const [k, v] of Object.entries(aspects)) out[k] = { ...v, _type: v._type ?? k };
  return out;
}

export function updateModeOf(q: string | null): (typeof UPDATE_MODES)[number] {
  if (q === null || q === '') return 'update';
  if ((UPDATE_MODES as readonly string[]).includes(q)) return q as (typeof UPDATE_MODES)[number];
  throw new AppError('BAD_REQUEST', `Unknown updateMode '${q}': use update, replace or merge`);
}

/** Validates a path's namespace and alias. */
export function checkAlias(namespace: string, alias: string): void {
  if (isSafeName(namespace) && isSafeName(alias)) return;
  const n = namespaceSchema.safeParse(namespace);
  if (!n.success) throw invalid(n.error, ['namespace']);
  const a = aliasSchema.safeParse(alias);
  if (!a.success) throw invalid(a.error, ['alias']);
}

export function invalid(err: z.ZodError, prefix: (string | number)[] = []): AppError {
  const issues = err.issues.slice(0, 20).map((i) => ({ path: [...prefix, ...i.path.map(String)].join('.'), message: i.message }));
  return new AppError('BAD_REQUEST', `Invalid request: ${issues[0]?.path ? `${issues[0].path}: ` : ''}${issues[0]?.message ?? 'invalid'}`, { issues });
}

export const viewBodySchema = z.union([
  z.strictObject({ version: z.string().min(1).max(1024) }),
  z.strictObject({
    symbolic: z.strictObject({
      alias: z.string().regex(/^[^/]+\/[^/]+$/, 'alias must be <namespace>/<alias>'),
      targetView: z.string().regex(/^@/, 'targetView must start with @'),
    }),
  }),
]);

/** The body of PUT view: `{version}` or `{symbolic: {alias, targetView}}`. */
export function parseViewBody(body: unknown): { version?: string; symbolic?: { alias: string; targetView: string } } {
  const parsed = viewBodySchema.safeParse(body);
  if (!parsed.success) throw invalid(parsed.error);
  return parsed.data;
}

/** Where the value of If-Match comes from, for the errors about it. */
export const IF_MATCH_SOURCE = `the ETag header of a read of the content (or of its last write), ${IF_MATCH_FORM}`;

/**
 * The If-Match header of a conditional write: required (400 saying what to send), and well
 * formed (400 naming the form: a value without `W/"..."` is a syntax error, not a conflict).
 */
export function requiredIfMatch(ifMatch: string | undefined, what: string): string {
  if (ifMatch === undefined)
    throw new AppError('BAD_REQUEST', `${what} requires If-Match: ${IF_MATCH_SOURCE}`, { header: 'If-Match', expected: IF_MATCH_FORM });
  checkIfMatchSyntax(ifMatch);
  return ifMatch;
}

export function checkIfMatchSyntax(ifMatch: string): void {
  if (!ifMatchWellFormed(ifMatch)) {
    throw new AppError('BAD_REQUEST', `If-Match is not an entity tag: send ${IF_MATCH_SOURCE}, with W/ and the quotes`, {
      header: 'If-Match',
      expected: IF_MATCH_FORM,
    });
  }
}
