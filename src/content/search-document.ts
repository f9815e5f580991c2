import { AppError } from '../errors.js';
import type { Json } from './model.js';

/**
 * Search documents (spec "Categorization and search index documents", Events 2-4; CONTRACT §20
 * "Search documents"): which fields a content's own `svcSolrDocument` may hold, the check of
 * that aspect against the collection's schema, and the block the indexer sends. Pure: the
 * schema is a value here (src/adapters/index-schema.ts learns it from the engine, else reads
 * the bundled tools/solr/configsets/content/conf/schema.xml).
 */

type Doc = { [field: string]: Json };

/** Fields the indexer sets on every document; `svc_` fields are the system fields of the spec. */
const INDEXER_FIELDS = new Set(['id', 'root', 'version', '_version_', '_root_', '_nest_path_', '_nest_parent_']);
const SYSTEM_PREFIX = 'svc_';
/** Solr's key for unlabelled child documents (a list of documents). */
const ANONYMOUS_CHILDREN = '_childDocuments_';

/** Is this field the indexer's (a content's own svcSolrDocument cannot set it, at any depth)? */
export function isIndexerField(name: string): boolean {
  return INDEXER_FIELDS.has(name) || name.startsWith(SYSTEM_PREFIX);
}

const isDoc = (v: unknown): v is Doc => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The child documents a field value holds: one object, or a list of objects only. */
function childrenIn(v: Json): Doc[] | null {
  if (isDoc(v)) return [v];
  if (Array.isArray(v) && v.length > 0 && v.every(isDoc)) return v as Doc[];
  return null;
}

/**
 * The content's own fields of its svcSolrDocument aspect: `_type` and the indexer's fields left
 * out (child documents are cleaned by `searchBlock`). For the standard composer, which adds the
 * system fields to these.
 */
export function contentFields(aspect: { [field: string]: Json | undefined }): Doc {
  const out: Doc = {};
  for (const [k, v] of Object.entries(aspect)) if (k !== '_type' && v !== undefined && !isIndexerField(k)) out[k] = v;
  return out;
}

/**
 * A search document as the block the indexer sends: `id` and `root` are `id`; every child
 * document, at any depth, loses the indexer's fields, takes the id `<parent id>/<label>` (one
 * object) or `<parent id>/<label>/<index>` (in a list) whatever it said, and `root` = `id`. The
 * root document keeps its other fields (the system fields the composers set). Idempotent.
 */
export function searchBlock(doc: Doc, id: string): Doc {
  return { ...withChildBlocks(doc, id, id), id, root: id };
}

function withChildBlocks(doc: Doc, id: string, root: string): Doc {
  const out: Doc = {};
  for (const [k, v] of Object.entries(doc)) {
    if (isDoc(v)) out[k] = childBlock(v, `${id}/${k}`, root);
    // Every object in a list is a child document, also in a list that mixes in values (the
    // engine refuses such a list, but never with a content's own ids or system fields in it).
    else if (Array.isArray(v)) out[k] = v.map((e, i) => (isDoc(e) ? childBlock(e, `${id}/${k}/${i}`, root) : e));
    else out[k] = v;
  }
  return out;
}

function childBlock(doc: Doc, id: string, root: string): Doc {
  const own: Doc = {};
  for (const [k, v] of Object.entries(doc)) if (!isIndexerField(k)) own[k] = v;
  return { ...withChildBlocks(own, id, root), id, root };
}

// ---- the collection's schema ----------------------------------------------------------------

/** What a field takes, by its field type's class. `any`: a class this check does not know. */
export type ValueKind = 'text' | 'int' | 'long' | 'float' | 'boolean' | 'date' | 'daterange' | 'any';

export interface FieldRule {
  /** The field type's name in the schema (named in messages). */
  type: string;
  kind: ValueKind;
  multiValued: boolean;
  /** Is the field analyzed into many terms (full text: a TextField and its kin)? */
  tokenized: boolean;
  /** Does the field keep docValues (a column per document), which sorting, faceting, grouping and stats read? */
  docValues: boolean;
}

export interface IndexSchema {
  fields: Map<string, FieldRule>;
  /** Dynamic fields, longest pattern first (Solr's order of matching). */
  dynamicFields: { pattern: string; rule: FieldRule }[];
}

/** A schema as both sources give it: Solr's Schema API (`GET /schema`) and schema.xml. */
export interface RawSchema {
  fields: RawField[];
  dynamicFields: RawField[];
  fieldTypes: { name: string; class: string; multiValued?: boolean | string; docValues?: boolean | string }[];
}
interface RawField {
  name: string;
  type: string;
  multiValued?: boolean | string;
  docValues?: boolean | string;
}

const KIND_OF_CLASS: Record<string, ValueKind> = {
  StrField: 'text',
  TextField: 'text',
  SortableTextField: 'text',
  IntPointField: 'int',
  TrieIntField: 'int',
  LongPointField: 'long',
  TrieLongField: 'long',
  FloatPointField: 'float',
  DoublePointField: 'float',
  TrieFloatField: 'float',
  TrieDoubleField: 'float',
  BoolField: 'boolean',
  DatePointField: 'date',
  TrieDateField: 'date',
  DateRangeField: 'daterange',
};

/**
 * Field type classes whose values are analyzed into many terms (full text). Without docValues
 * (a TextField never has them), sorting, faceting, grouping or stats on such a field needs Solr
 * to un-invert every term of every document into its heap (SECURITY.md), and answers terms, not
 * values; SortableTextField and NestPathField keep docValues of the whole value.
 */
const TOKENIZED_CLASSES = new Set(['TextField', 'SortableTextField', 'NestPathField', 'PreAnalyzedField']);
/**
 * Field type classes that keep docValues unless the field or its type says `docValues="false"`:
 * Solr 9's default for schema version 1.7, the bundled schema's (the embedded Solr 9.7's
 * `showDefaults` says so of the string, boolean, point, Trie, UUID, sortable text, nest path,
 * collation and spatial classes; the Schema API leaves defaults out of its answer, and its version
 * is not read). TextField, DateRangeField and BinaryField have none; a class not listed here has
 * docValues only where the schema says so.
 */
const DOC_VALUES_BY_DEFAULT = new Set([
  'StrField',
  'UUIDField',
  'BoolField',
  'IntPointField',
  'LongPointField',
  'FloatPointField',
  'DoublePointField',
  'DatePointField',
  'TrieIntField',
  'TrieLongField',
  'TrieFloatField',
  'TrieDoubleField',
  'TrieDateField',
  'EnumFieldType',
  'SortableTextField',
  'NestPathField',
  'CollationField',
  'ICUCollationField',
  'LatLonPointSpatialField',
]);

const flag = (v: boolean | string | undefined): boolean | undefined => (v === undefined ? undefined : v === true || v === 'true');

/** The rules of a raw schema: each field's value kind, whether it is multi-valued, tokenized, and keeps docValues. */
export function indexSchemaOf(raw: RawSchema): IndexSchema {
  const types = new Map(raw.fieldTypes.map((t) => [t.name, t]));
  const rule = (f: RawField): FieldRule => {
    const t = types.get(f.type);
    const cls = t?.class.split('.').pop() ?? '';
    return {
      type: f.type,
      kind: KIND_OF_CLASS[cls] ?? 'any',
      multiValued: flag(f.multiValued) ?? flag(t?.multiValued) ?? false,
      tokenized: TOKENIZED_CLASSES.has(cls),
      docValues: flag(f.docValues) ?? flag(t?.docValues) ?? DOC_VALUES_BY_DEFAULT.has(cls),
    };
  };
  return {
    fields: new Map(raw.fields.map((f) => [f.name, rule(f)])),
    dynamicFields: raw.dynamicFields.map((f) => ({ pattern: f.name, rule: rule(f) })).sort((a, b) => b.pattern.length - a.pattern.length),
  };
}

/** The fields, dynamic fields and field types of a schema.xml (attributes only; comments ignored). */
export function parseSchemaXml(xml: string): RawSchema {
  const raw: RawSchema = { fields: [], dynamicFields: [], fieldTypes: [] };
  const body = xml.replace(/<!--[\s\S]*?-->/g, '');
  for (const m of body.matchAll(/<(field|dynamicField|fieldType)\s([^>]*?)\/?>/g)) {
    const attrs = Object.fromEntries([...m[2].matchAll(/([A-Za-z_]+)\s*=\s*"([^"]*)"/g)].map((a) => [a[1], a[2]]));
    if (!attrs.name) continue;
    if (m[1] === 'fieldType') raw.fieldTypes.push({ name: attrs.name, class: attrs.class ?? '', multiValued: attrs.multiValued, docValues: attrs.docValues });
    else
      (m[1] === 'field' ? raw.fields : raw.dynamicFields).push({
        name: attrs.name,
        type: attrs.type ?? '',
        multiValued: attrs.multiValued,
        docValues: attrs.docValues,
      });
  }
  return raw;
}

/** The rule of a field name: the field of that name, else the first dynamic field that matches. */
export function ruleOf(schema: IndexSchema, name: string): FieldRule | undefined {
  const own = schema.fields.get(name);
  if (own) return own;
  for (const { pattern, rule } of schema.dynamicFields) {
    if (pattern === '*') return rule;
    if (pattern.startsWith('*') ? name.endsWith(pattern.slice(1)) : pattern.endsWith('*') && name.startsWith(pattern.slice(0, -1))) return rule;
  }
  return undefined;
}

// ---- the write-time check -------------------------------------------------------------------

/** Why a svcSolrDocument cannot be indexed: the field (a dotted path in the document) and why. */
export interface DocumentProblem {
  field: string;
  message: string;
  /** For a bound passed: the bound and the figure the document has. */
  limit?: number;
  found?: number;
}

/**
 * Most date-range values (`*_drange`) a content's own svcSolrDocument may hold, over all its
 * fields and child documents. The engine indexes each value as up to about 2,000 prefix-tree
 * cells (a millisecond end alone is up to 999): 4,000 values in one content (223 KB) made the
 * embedded Solr (512 MB heap) run out of memory, and every index write failed until it
 * restarted; 1,000 cost 1.3-3.2 s of its CPU, 64 about 60-80 ms. An article has a handful.
 * The indexer's own time-state ranges (two a view) are bounded by MAX_VIEWS (views.ts).
 */
export const MAX_DATE_RANGES = 64;

/**
 * Most characters of a string value in a field the engine keeps whole (not analyzed: a StrField,
 * `*_s`, `*_ss`), whose value is one term: the term faceting, grouping and sorting repeat in their
 * answers. A pivot facet repeats each value of its second level under every value of its first
 * (SEARCH_MAX_FACET_VALUES counts the nodes, not what they weigh): three public articles with 300
 * values of 30 KB each in `big_ss` made one anonymous `facet.pivot=big_ss,big_ss&facet.limit=140`
 * (19,740 nodes) run the embedded Solr (512 MB heap) out of memory (review of the twenty-third
 * session); at this bound such a pivot weighs at most about 40 MB. Longer text belongs in an
 * analyzed field (`*_t`). Elasticsearch's dynamic keyword fields stop at 256 characters.
 */
export const MAX_TERM_CHARS = 1024;

/**
 * Checks a content's own svcSolrDocument aspect against the collection's schema: no field of
 * the indexer's (at any depth), every field name known to the schema (a field or a dynamic
 * field), every value of the field type's kind, no list for a single-valued field. An object
 * (or a list of objects) is a list of child documents under a label, which must not be a field
 * of the schema nor hold `/` or `#`; children are checked the same way. The first problem, or
 * null. What depends on the engine's analysis (a term over 32,766 bytes) or on a range's order
 * is left to the engine: the indexer sets such a document aside with the engine's reason.
 */
export function checkSearchDocument(aspect: { [field: string]: Json | undefined }, schema: IndexSchema): DocumentProblem | null {
  const fields: Doc = {};
  for (const [k, v] of Object.entries(aspect)) if (k !== '_type' && v !== undefined) fields[k] = v;
  return checkDoc(fields, schema, '') ?? dateRangeProblem(aspect, schema);
}

/** The 400 of a svcSolrDocument that cannot be indexed: the problem's field, and its bound and figure when it passed one. */
export function invalidSearchDocument(problem: DocumentProblem): AppError {
  return new AppError('BAD_REQUEST', `Invalid svcSolrDocument: ${problem.message}`, {
    field: problem.field,
    ...(problem.limit === undefined ? {} : { limit: problem.limit, found: problem.found }),
    issues: [{ path: `aspects.svcSolrDocument.${problem.field}`, message: problem.message }],
  });
}

/**
 * More than MAX_DATE_RANGES date-range values in a content's own svcSolrDocument (the fields
 * whose type is a date range in the schema, child documents included): the problem names the
 * field where the bound was passed, the bound and the count; else null. Also for the version a
 * merge makes (the actor's check), where lists of both are joined.
 */
export function dateRangeProblem(aspect: { [field: string]: Json | undefined }, schema: IndexSchema): DocumentProblem | null {
  let found = 0;
  let field = '';
  const walk = (doc: { [field: string]: Json | undefined }, prefix: string) => {
    for (const [name, value] of Object.entries(doc)) {
      if (name === '_type' || value === undefined || value === null) continue;
      const children = childrenIn(value);
      if (children) {
        for (let i = 0; i < children.length; i++) walk(children[i], Array.isArray(value) ? `${prefix}${name}.${i}.` : `${prefix}${name}.`);
        continue;
      }
      if (ruleOf(schema, name)?.kind !== 'daterange') continue;
      const before = found;
      found += Array.isArray(value) ? value.filter((v) => v !== null).length : 1;
      if (before <= MAX_DATE_RANGES && found > MAX_DATE_RANGES) field = prefix + name;
    }
  };
  walk(aspect, '');
  if (found <= MAX_DATE_RANGES) return null;
  return {
    field,
    limit: MAX_DATE_RANGES,
    found,
    message: `${field}: the document holds ${found} date-range values (*_drange fields, child documents included); at most ${MAX_DATE_RANGES} are allowed, each costs the search engine up to thousands of index terms`,
  };
}

/**
 * The document with at most MAX_DATE_RANGES date-range values (fields named `*_drange`, the
 * schema's date-range fields), the first ones in document order (children in place), and how
 * many it left out: for content stored before the write-time bound, so that the indexer never
 * sends the engine a document it cannot hold. Unchanged (the same object) when within it.
 */
export function withinDateRanges(doc: Doc): { doc: Doc; dropped: number } {
  let kept = 0;
  let dropped = 0;
  const trim = (d: Doc): Doc => {
    const out: Doc = {};
    for (const [name, value] of Object.entries(d)) {
      const children = childrenIn(value);
      if (children) out[name] = Array.isArray(value) ? children.map(trim) : trim(children[0]);
      // The indexer's fields are left out of every document anyway (contentFields, searchBlock).
      else if (!name.endsWith(DATE_RANGE_SUFFIX) || value === null || isIndexerField(name)) out[name] = value;
      else {
        const values = Array.isArray(value) ? value : [value];
        const room = Math.max(0, MAX_DATE_RANGES - kept);
        const take = values.slice(0, room);
        kept += take.length;
        dropped += values.length - take.length;
        if (take.length) out[name] = Array.isArray(value) ? take : take[0];
      }
    }
    return out;
  };
  const out = trim(doc);
  return dropped ? { doc: out, dropped } : { doc, dropped: 0 };
}

/** The schema's dynamic date-range fields (tools/solr/configsets/content/conf/schema.xml). */
const DATE_RANGE_SUFFIX = '_drange';

function checkDoc(doc: Doc, schema: IndexSchema, prefix: string): DocumentProblem | null {
  for (const [name, value] of Object.entries(doc)) {
    const field = prefix + name;
    const problem = (message: string): DocumentProblem => ({ field, message: `${field}: ${message}` });
    if (isIndexerField(name)) return problem(`set by the indexer; a content's svcSolrDocument cannot set ${name} or any svc_ field`);
    const rule = ruleOf(schema, name);
    const children = childrenIn(value);
    if (children) {
      if (rule) return problem(`takes ${KIND_WORDS[rule.kind]} (field type ${rule.type}), not ${describe(value)}`);
      if (/[/#]/.test(name)) return problem('a label of child documents must not contain / or #');
      if (name === ANONYMOUS_CHILDREN && !Array.isArray(value)) return problem(`${ANONYMOUS_CHILDREN} takes a list of child documents`);
      // A child's id is the version's id and this path (`searchBlock`): a term the engine keeps
      // whole (id, _nest_parent_: StrFields that facets and pivots take), held like the values.
      const path = Array.isArray(value) ? `${field}.${children.length - 1}` : field;
      if (path.length > MAX_TERM_CHARS) {
        const named = `${path.slice(0, 64)}…`;
        return {
          field: named,
          limit: MAX_TERM_CHARS,
          found: path.length,
          message: `${named}: a child document's path (its labels and list indexes, part of its id, one term the search engine keeps whole) may hold at most ${MAX_TERM_CHARS} characters (MAX_TERM_CHARS), not ${path.length}`,
        };
      }
      for (let i = 0; i < children.length; i++) {
        const inner = checkDoc(children[i], schema, Array.isArray(value) ? `${field}.${i}.` : `${field}.`);
        if (inner) return inner;
      }
      continue;
    }
    if (Array.isArray(value) && value.some(isDoc)) return problem('mixes child documents and values in one list');
    if (!rule) return problem(`the search collection's schema has no field or dynamic field for the name ${name}`);
    if (value === null) continue; // the engine ignores a null value
    const tooLong = (v: Json): DocumentProblem | null =>
      typeof v === 'string' && v.length > MAX_TERM_CHARS && !rule.tokenized
        ? {
            ...problem(
              `a value of ${rule.type} (kept whole, one term) may hold at most ${MAX_TERM_CHARS} characters (MAX_TERM_CHARS), not ${v.length}: longer text belongs in an analyzed field such as *_t`,
            ),
            limit: MAX_TERM_CHARS,
            found: v.length,
          }
        : null;
    if (Array.isArray(value)) {
      if (!rule.multiValued) return problem(`takes one value (field type ${rule.type} is single-valued), not a list`);
      for (const v of value) {
        if (v !== null && !fits(rule.kind, v)) return problem(`takes ${KIND_WORDS[rule.kind]} (field type ${rule.type}), not ${describe(v)} in the list`);
        const long = tooLong(v);
        if (long) return long;
      }
      continue;
    }
    if (!fits(rule.kind, value)) return problem(`takes ${KIND_WORDS[rule.kind]} (field type ${rule.type}), not ${describe(value)}`);
    const long = tooLong(value);
    if (long) return long;
  }
  return null;
}

const KIND_WORDS: Record<ValueKind, string> = {
  text: 'strings (or numbers, booleans)',
  int: 'integers from -2147483648 to 2147483647',
  long: 'integers from -9223372036854775808 to 9223372036854775807',
  float: 'numbers',
  boolean: 'true or false',
  date: 'ISO 8601 UTC date-times (2024-05-01T10:00:00Z)',
  daterange: 'date ranges (2024-05, 2024-05-01T10:00:00Z, [2024 TO 2025-06], [* TO 2025])',
  any: 'strings, numbers or booleans',
};

function describe(v: Json): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return v.length && v.every(isDoc) ? 'a list of objects' : 'a list';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  return `the ${typeof v} ${String(v)}`;
}

const INT32 = [-(2n ** 31n), 2n ** 31n - 1n] as const;
const INT64 = [-(2n ** 63n), 2n ** 63n - 1n] as const;

function integerIn(v: Json, [lo, hi]: readonly [bigint, bigint]): boolean {
  let n: bigint;
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) return false;
    n = BigInt(v);
  } else if (typeof v === 'string' && /^[+-]?\d{1,30}$/.test(v)) {
    n = BigInt(v);
  } else return false;
  return n >= lo && n <= hi;
}

function fits(kind: ValueKind, v: Json): boolean {
  switch (kind) {
    case 'text':
    case 'any':
      return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
    case 'int':
      return integerIn(v, INT32);
    case 'long':
      return integerIn(v, INT64);
    case 'float':
      return (typeof v === 'number' && Number.isFinite(v)) || (typeof v === 'string' && /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(v));
    case 'boolean':
      return typeof v === 'boolean' || v === 'true' || v === 'false';
    case 'date':
      return typeof v === 'string' && isIsoDateTime(v);
    case 'daterange':
      return typeof v === 'string' && isDateRange(v);
  }
}

const DATE_TIME = /^(-?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,9})?Z$/;
/** A date truncated to any unit (DateRangeField): `2024`, `2024-05`, ... `2024-05-01T10:00:00.5`, `Z` only after seconds. */
const TRUNCATED = /^([+-]?\d{4,})(?:-(\d\d)(?:-(\d\d)(?:T(\d\d)(?::(\d\d)(?::(\d\d)(?:\.\d{1,9})?Z?)?)?)?)?)?$/;

/** `YYYY-MM-DDThh:mm:ss[.f]Z` with a real calendar day (what Solr's date fields take, date math aside). */
export function isIsoDateTime(s: string): boolean {
  const m = DATE_TIME.exec(s);
  return !!m && validParts(m.slice(1, 7));
}

/** A DateRangeField value: a truncated date, `*`, or `[<date or *> TO <date or *>]`. */
export function isDateRange(s: string): boolean {
  const end = (e: string) => e === '*' || validTruncated(e);
  const range = /^\[(\S+) TO (\S+)\]$/.exec(s);
  return range ? end(range[1]) && end(range[2]) : end(s);
}

function validTruncated(s: string): boolean {
  const m = TRUNCATED.exec(s);
  return !!m && validParts(m.slice(1, 7));
}

function validParts([y, mo, d, h, mi, sec]: (string | undefined)[]): boolean {
  const year = Number(y);
  if (mo !== undefined && (Number(mo) < 1 || Number(mo) > 12)) return false;
  if (d !== undefined) {
    const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
    const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][Number(mo) - 1];
    if (Number(d) < 1 || Number(d) > days) return false;
  }
  return (h === undefined || Number(h) < 24) && (mi === undefined || Number(mi) < 60) && (sec === undefined || Number(sec) < 60);
}

/** Escapes a term for the standard query parser (every special character). */
export function escapeTerm(s: string): string {
  return s.replace(/[+\-!(){}[\]^"~*?:\\/&|\s]/g, '\\$&');
}

/** Escapes the inside of a quoted phrase. */
export function escapePhrase(s: string): string {
  return s.replace(/["\\]/g, '\\$&');
}
