import { type IndexSchema, ruleOf } from '../content/search-document.js';
import { AppError } from '../errors.js';

/**
 * The search parameter allowlist (CONTRACT §20): every parameter a caller may send to the search
 * proxy, each with the rule its values must follow. Anything else answers 400 naming the
 * parameter. The rules keep out every way a request could read past the platform's filters:
 *
 * - local parameters (`{!join ...}`, `{!frange ...}`, `{!parent ...}`, ...) in any value, also
 *   escaped (`\{!`), with whitespace (`{ !`) or as unicode escapes (`\u007b!`); and Solr's
 *   parameter macros (`q=${facet.prefix}` is expanded to another parameter's value, or to the
 *   default in `${x:...}`, after our checks) in any value;
 * - the magic fields `_query_` and `_val_` (nested queries, function queries) in q, fq and
 *   facet.query, which both the lucene and the edismax parser honour, in any spelling; and fuzzy
 *   terms there (`term~`), whose expansion to the closest terms of the whole index lets terms of
 *   unreadable documents change which readable documents match;
 * - function queries in `sort` and `fl`, document transformers (`[value]`, `[subquery]`,
 *   `[child]`, `[docid]`, ...) and aliases (`x:func()`) in `fl`: only field names, `*` globs and
 *   `score`;
 * - field names that are really local parameters or functions (qf, pf, df, hl.fl, stats.field,
 *   group.field, facet.field, facet.pivot, facet.range): a field name is letters, digits, `_` and
 *   `-`, never a pseudo field;
 * - facets that list terms of documents outside the result (`facet.mincount` 0, the default):
 *   `facet.mincount` and its per-field forms are raised to at least 1;
 * - components that read the index past the filters: more-like-this, terms, spellcheck, suggest,
 *   debug and explain, expand, re-ranking, `json.facet`, `uf`, `hl.q`, `group.query`,
 *   `group.func`, and the handler, format, shard and stream switches (`qt`, `wt` other than json
 *   and javabin, `shards`, `stream.*`, `collection`, `distrib`), are simply not on the list.
 *
 * Formats: `wt=json` (the default) and `wt=javabin` (SolrJ's default, with its `version=2`). A
 * format changes only how the engine writes the answer of the same query, filters included; the
 * platform reads or rewrites no javabin answer, so `inlineData` needs json.
 *
 * Numbers are numbers within bounds (`rows` at most 1000), and the range facets of a search have
 * at most SEARCH_MAX_RANGE_BUCKETS buckets in all (checkRangeBuckets); single-valued parameters are
 * given once. Per-field forms (`f.<field>.facet.limit`, ...) follow their base parameter.
 *
 * What a search costs the engine is bounded before it is sent (each past its bound answers 400
 * naming the parameter that crosses it and the setting): first the parameters, at most
 * MAX_SEARCH_PARAMETERS (counted on the raw text before it is parsed: checkParameterCount) and
 * each repeatable one at most its bound (checkRepeats), read once into a map the checks look
 * them up in; the items of lists (fl MAX_FL_FIELDS in all; qf, pf, hl.fl MAX_LISTED_FIELDS; a
 * facet.pivot MAX_PIVOT_LEVELS) before the items are read; the clauses of q, every fq and facet.query together,
 * and among them the wildcard, prefix, regular expression and range terms (checkQueryCost), and
 * a phrase's slop (MAX_PHRASE_SLOP); the number of fq and of facet.query; the facet values asked
 * for, a pivot's whole tree counted (checkFacetValues); the groups and their documents
 * (checkGroupedDocuments); the sort's clauses and the values they keep (checkSort); the rows of a
 * highlighted search (checkHighlighting). Every search carries a `timeAllowed`, the caller's capped
 * to the default (SEARCH_TIME_ALLOWED_MS), and a `cpuAllowed`, the caller's capped to
 * SEARCH_CPU_ALLOWED_MS; they bound what matching costs (a sloppy phrase in q, fq or facet.query
 * included), not the filters' term expansion nor faceting, which the counts bound. Facets, sorts,
 * groups and stats take only fields of the collection's schema that keep docValues, never a
 * tokenized (full-text) field (checkFieldUses).
 */

/** A value rule: answers the value to send to the engine, or throws why the value is refused. */
type Rule = (value: string) => string;

interface Param {
  rule: Rule;
  /** May the parameter be given more than once? */
  repeatable?: boolean;
  /** Most times a repeatable parameter may be given, and the bound's name (MAX_PARAMETER_REPEATS unless said). */
  maxRepeats?: [number, string];
  /** Is a value given twice refused (the engine would do the same work again for each)? */
  unique?: boolean;
  /** A parameter of the platform (spec "Extra parameter"), not sent to the engine. */
  own?: boolean;
}

/** Why a value is refused (turned into the 400 naming the parameter). */
class Refused extends Error {}
const refuse = (why: string): never => {
  throw new Refused(why);
};

/**
 * Most characters a value may have: room for a pipeline's query of a few hundred ids
 * (`id:("c:..." OR ...)`, about 60 characters each; the bench's commit-to-searchable poller sends
 * 400), while the checks below stay linear and cheap.
 */
export const MAX_VALUE_LENGTH = 100_000;
/** Deepest `start`: deeper pages cost the engine memory; use cursorMark. */
const MAX_START = 100_000;
/** Most rows (CONTRACT §20) and documents per group. */
const MAX_ROWS = 1000;
/**
 * Most parameters of one search, every repetition counted, checked before anything else: the
 * checks below look parameters up by name, and 80,000 `facet.field` in a 1.2 MB form body (with
 * `facet.limit=0`, so that no facet value counted) stalled the gateway's one thread for 134 s
 * when each lookup scanned them all (the eighteenth session's second review).
 */
export const MAX_SEARCH_PARAMETERS = 1000;
/**
 * Most times a repeatable parameter may be given (`facet.field`, `facet.pivot`, `facet.range`,
 * `group.field`, `fl`; `fq` and `facet.query` have SEARCH_MAX_FILTER_QUERIES, `stats.field`
 * MAX_STATS_FIELDS): each `facet.field`, range facet and `group.field` is a pass of the engine
 * over the whole result.
 */
export const MAX_PARAMETER_REPEATS = 100;
/**
 * Most `stats.field` of one search, each named once: the engine computes each over the whole
 * result, as often as it is given (1,000 repetitions of one field cost it 2.5-4.9 s of CPU, 5,000
 * more than 16 s), and `timeAllowed` does not bound stats.
 */
export const MAX_STATS_FIELDS = 20;
/**
 * Most clauses of a sort, the `id asc` the platform adds to break ties (breakTiesById) counted:
 * the engine keeps a value per clause for each of the `start + rows` best documents, and a sort
 * of 1,000 clauses with start 19,000 and rows 1,000 ran the embedded Solr (512 MB) out of memory.
 */
export const MAX_SORT_CLAUSES = 10;
/**
 * Most sort values the engine keeps for one search, clauses × (start + rows): the deepest page of
 * the default sort (`score desc,id asc`, 2 × (100,000 + 1,000)). Deeper pages of longer sorts: cursorMark.
 */
export const MAX_SORT_VALUES = 2 * (MAX_START + MAX_ROWS);
/**
 * Deepest `group.offset`: the engine keeps `group.offset + group.limit` documents for each group
 * of the page, so `group.limit=0&group.offset=100000` with 1,000 groups (86 bytes) took the
 * embedded Solr's heap to 500 of its 512 MB, and two at once ran it out of memory.
 */
export const MAX_GROUP_OFFSET = 1000;
/**
 * Most rows of a highlighted search: the engine analyses the text of every highlighted field of
 * every row again; `rows=1000` cost it 1-2.4 s and answered up to 40 MB for a 77-byte request.
 */
export const MAX_HIGHLIGHTED_ROWS = 100;
/**
 * The `hl.maxAnalyzedChars` sent with every highlighted search (the caller cannot set it): the
 * characters of each field the highlighter analyses, instead of the engine's 51,200.
 */
export const HIGHLIGHT_MAX_ANALYZED_CHARS = 10_000;
/**
 * Most wildcard characters (`*`, `?`) in one term of q, fq or facet.query. The engine builds a
 * term's automaton from them before anything bounds its time (`cpuAllowed`, `timeAllowed`): before
 * (the twenty-third session's review), one anonymous GET of `fq=` 5,000 `*` (5 KB) made the
 * embedded Solr (512 MB heap) throw OutOfMemoryError after 2-4.5 s and the platform answer 500;
 * 1,000 cost it 0.85 s; 1,001 `?` answered 500 (`input automaton is too large`). A term of a few
 * wildcards (`vacc*n?`) costs it nothing of note.
 */
export const MAX_TERM_WILDCARDS = 16;
/**
 * Deepest nesting of parentheses in q, fq or facet.query. The engine's query parser descends once
 * per level: before (the twenty-third session's review), one anonymous search of 10,000 nested
 * parentheses around a term (20 KB) overflowed its stack, the engine cut the connection and the
 * platform answered 503; 1,000 levels cost it 0.5 s.
 */
export const MAX_QUERY_NESTING = 50;
/**
 * Largest size of a regular expression of q, fq or facet.query (`regexSize`: its atoms, each
 * repetition `{n}`, `{n,}`, `{n,m}` counting what it repeats that many times), and no intersection
 * (`&`). The engine builds the expression's automaton before anything bounds its time: before
 * (the twenty-third session's review), one anonymous fq of `/(.*.*){100}{100}/` (18 characters)
 * made the embedded Solr throw OutOfMemoryError; `/(.*){2500}/` cost it 2.9 s, `/.{0,5000}/`
 * answered 500 (`input automaton is too large`), 20 fq of `/.*.*…/` (2,500 `.*`) 15 s for one
 * search, and one of 16 intersections `/(.*a.*)&(.*b.*)&…/` (129 characters) 13 s. At this size
 * `/(.*){128}/` costs it about 50 ms; `/[0-9]{4}-[0-9]{2}-[0-9]{2}/` is 10.
 */
export const MAX_REGEX_SIZE = 128;

/**
 * The size of a regular expression's automaton as the engine spells it out, roughly: one for each
 * atom (a character, an escape, `.`, `@`, a class `[…]`, a quoted string or interval `<…>` by its
 * length), a group the sum of what it holds (alternatives added), a repetition `{n}`, `{n,}` or
 * `{n,m}` multiplying what it repeats by its largest count (`{n,}` by n + 1). Infinity with an
 * intersection (`&`), which multiplies the states of its operands.
 */
export function regexSize(body: string): number {
  const groups: number[] = [0];
  let last = 0;
  const add = (n: number) => {
    groups[groups.length - 1] += n;
    last = n;
  };
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '&') return Number.POSITIVE_INFINITY;
    if (c === '\\') {
      i++;
      add(1);
    } else if (c === '[' || c === '"' || c === '<') {
      const close = c === '[' ? ']' : c === '"' ? '"' : '>';
      let j = i + 1;
      for (; j < body.length && body[j] !== close; j++) if (body[j] === '\\') j++;
      add(c === '[' ? 1 : Math.max(1, j - i - 1));
      i = j;
    } else if (c === '(') groups.push(0);
    else if (c === ')') {
      const g = groups.length > 1 ? (groups.pop() as number) : 0;
      add(g);
    } else if (c === '{') {
      const m = /^\{(\d{1,9})(,(\d{0,9}))?\}/.exec(body.slice(i, i + 22));
      if (!m) {
        add(1);
        continue;
      }
      const times = m[2] === undefined ? Number(m[1]) : m[3] ? Math.max(Number(m[1]), Number(m[3])) : Number(m[1]) + 1;
      groups[groups.length - 1] += last * (times - 1);
      last *= times;
      i += m[0].length - 1;
    } else if (c !== '*' && c !== '+' && c !== '?' && c !== '|') add(1);
  }
  return groups.reduce((a, b) => a + b, 0);
}
/**
 * Largest slop of a phrase (`"a b"~N`): the engine tries every way the phrase's words fit in a
 * window of N positions, and `"the the … (10×)"~100000` on documents of 300 words cost it
 * 1.4-3.4 s for one fq. Within it, what a phrase costs depends on how often its words occur, not
 * on its slop: SEARCH_CPU_ALLOWED_MS bounds that.
 */
export const MAX_PHRASE_SLOP = 100;
/**
 * The `cpuAllowed` of every search (Solr 9.7's limit of the CPU time the engine's thread spends on
 * one request, checked while it matches documents: the main query, each fq and each facet.query),
 * and the most a caller's may be. A sloppy phrase of a word in every document
 * (`"the the … (20×)"~5`) costs the engine about 1 s per 4,000 documents of 300 words whatever the
 * counts above allow, and a search may have SEARCH_MAX_FILTER_QUERIES fq and as many facet.query:
 * before, one such search ran until its `timeAllowed` (SEARCH_TIME_ALLOWED_MS, 5 s of wall time,
 * 4.6-4.8 s of the engine's CPU on an idle engine); with it, 1.0-1.3 s, answered as partial
 * (`responseHeader.partialResults`). Not (yet) a setting: `SearchLimits.cpuAllowedMs` takes
 * another.
 */
export const SEARCH_CPU_ALLOWED_MS = 1000;
/**
 * `facet.limit=-1` (every value) is sent as this limit: a facet of `id` listed every document of
 * the result (549 KB for 20,000 documents, so hundreds of MB for a newsroom's index).
 */
export const ALL_FACET_VALUES = 1000;
/** Solr's default `facet.limit`. */
const DEFAULT_FACET_LIMIT = 100;
/** The rows of a search that sends none (the select handler's default, solrconfig.xml). */
const DEFAULT_ROWS = 10;
/**
 * Most levels (fields) of one `facet.pivot`: each node of a level is a facet count of the next
 * field. Checked by the parameter's own rule, whether or not faceting is on: the gateway reads
 * every field of a list (the eighteenth session's third review: 100 `facet.pivot` of 33,000
 * fields each, faceting off, passed after seconds of the gateway's thread).
 */
export const MAX_PIVOT_LEVELS = 4;
/**
 * Most field names of `fl`, all its values together. Each name is read by the gateway's checks
 * and by the engine's field list; the eighteenth session's third review sent `fl=id,id,…` of
 * 33,000 names 100 times (10 MB): 3 s of the gateway's thread, and it passed.
 */
export const MAX_FL_FIELDS = 1000;
/** Most fields of one `qf`, `pf` or `hl.fl`: each is a query (qf, pf) or a highlighted field (hl.fl) of every search. */
export const MAX_LISTED_FIELDS = 100;
/**
 * Largest `facet.offset` (global or per field): the engine adds it to the facet's limit in a
 * 32-bit integer, so `facet.offset=2147483647` made it throw NegativeArraySizeException and the
 * platform answer 500 (the eighteenth session's third review). With facet.limit at most
 * SEARCH_MAX_FACET_VALUES the sum stays far below 2^31.
 */
export const MAX_FACET_OFFSET = 100_000;
const INT32_MAX = 2_147_483_647;

/** The items of a list of fields (commas and/or whitespace between them). */
const fieldCount = (v: string | null): number => (v ?? '').split(/[\s,]+/).filter(Boolean).length;

/** A field name as the schema's fields and dynamic fields have them. */
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,255}$/;
/**
 * Names that look like fields but are not a caller's to use: magic fields (nested and function
 * queries), Lucene's document number, and Solr's `_version_`, whose low bits count the index
 * operations of the same millisecond, those of content the caller may not read included (its
 * documents also leave it out of `*`: useDocValuesAsStored="false" in the schema).
 */
const PSEUDO_FIELDS = new Set(['_query_', '_val_', '_docid_', '_version_']);

/**
 * The text a query parser sees once it has read escapes: unicode escapes (`\u005f`) decoded,
 * other backslashes dropped, repeated until nothing changes (so escapes of escapes are seen too).
 */
export function unescapedForParser(value: string): string {
  let cur = value;
  for (let i = 0; i < 8; i++) {
    const next = cur.replace(/\\u([0-9a-fA-F]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))).replace(/\\(.)/gs, '$1');
    if (next === cur) return cur;
    cur = next;
  }
  return refuse('too many levels of escapes');
}

/** Local parameters: `{!` with optional whitespace between, in the text as any parser would read it. */
const LOCAL_PARAMS = /\{\s*!/;
/** The magic fields of the lucene and edismax parsers, as whole field names (`my_val_s` is a field). */
const MAGIC_FIELDS = /(^|[^A-Za-z0-9_])_(query|val)_(?![A-Za-z0-9_])/i;
/** Solr's `_version_` (PSEUDO_FIELDS), as a whole field name in query text. */
const VERSION_FIELD = /(^|[^A-Za-z0-9_])_version_(?![A-Za-z0-9_])/i;

/** Solr's parameter macros: `${name}` or `${name:default}` is replaced by another parameter's value before any check of ours would see it. */
const MACRO = /\$\s*\{/;

/** Every value: bounded, no control characters, no local parameters, no macros. */
function checkAnyValue(value: string): void {
  if (value.length > MAX_VALUE_LENGTH) refuse(`longer than ${MAX_VALUE_LENGTH} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(value)) refuse('control characters');
  const unescaped = unescapedForParser(value);
  if (LOCAL_PARAMS.test(value) || LOCAL_PARAMS.test(unescaped)) refuse('local parameters ({!...}) are not allowed');
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the message names Solr's parameter macro syntax `${...}` to the caller; it is no template.
  if (MACRO.test(value) || MACRO.test(unescaped)) refuse('parameter macros (${...}) are not allowed');
}

const query: Rule = (v) => {
  const unescaped = unescapedForParser(v);
  if (MAGIC_FIELDS.test(unescaped)) refuse('the magic fields _query_ and _val_ (nested and function queries) are not allowed');
  if (VERSION_FIELD.test(unescaped)) refuse("'_version_' is the engine's own field and cannot be searched");
  const { fuzzy, slop } = tildesOf(v);
  if (fuzzy)
    refuse(
      'fuzzy terms (term~) are not allowed: they expand to the closest terms of the whole index, so content the caller may not read could change which documents match',
    );
  if (slop > MAX_PHRASE_SLOP)
    refuse(
      `a phrase's slop ("a b"~${slop}) may be at most ${MAX_PHRASE_SLOP} (MAX_PHRASE_SLOP): the engine tries every way its words fit in so many positions`,
    );
  return v;
};

/**
 * What the `~`s of a query do. `fuzzy`: it holds a fuzzy term (`term~`, `term~1`). A fuzzy query
 * keeps only the closest 50 terms of the whole index, so terms of documents outside the filters
 * could push out those of documents inside them. Every unescaped `~` counts but one right after
 * a `"` (a phrase's slop, `"a b"~2`). Quotes are not followed: inside a regular expression a `"`
 * is no quote to the parser, so `svc_text:/["]/ OR word~1` hid its fuzzy term from a check that
 * thought the rest a phrase, and told whether content the caller may not read holds a word
 * (security review of the thirteenth session). A `~` inside a phrase is refused too: rare, and a
 * refusal is safe. `slop`: the largest slop of a phrase (N read as the parser reads it: its
 * digits, a fraction dropped; none is the default 0; more digits than a number holds are
 * Infinity).
 */
function tildesOf(v: string): { fuzzy: boolean; slop: number } {
  let slop = 0;
  let prev = '';
  for (let i = 0; i < v.length; i++) {
    const c = v[i];
    if (c === '\\') {
      i++;
      prev = 'escaped';
      continue;
    }
    if (c === '~') {
      if (prev !== '"') return { fuzzy: true, slop };
      SLOP_DIGITS.lastIndex = i + 1;
      const digits = SLOP_DIGITS.exec(v)![0];
      if (digits) slop = Math.max(slop, Number(digits));
      i += digits.length;
      prev = 'slop';
      continue;
    }
    prev = c;
  }
  return { fuzzy: false, slop };
}

const SLOP_DIGITS = /\d*/y;

const fieldName = (v: string): string => {
  if (!FIELD_NAME.test(v)) refuse(`'${v}' is not a field name (letters, digits, _ and -)`);
  if (PSEUDO_FIELDS.has(v)) refuse(`'${v}' is not a field`);
  return v;
};
const field: Rule = (v) => fieldName(v.trim());

/**
 * A list of items separated by commas and/or whitespace, each checked by `item`; at most
 * `max[0]` items (the bound's name `max[1]`), counted before any item is checked.
 */
const list =
  (item: (s: string) => void, what: string, max?: [number, string]): Rule =>
  (v) => {
    const items = v.split(/[\s,]+/).filter(Boolean);
    if (!items.length) refuse(`a list of ${what} is required`);
    if (max && items.length > max[0]) refuse(`${items.length} ${what}; at most ${max[0]} (${max[1]})`);
    items.forEach(item);
    return v;
  };

const FIELD_GLOB = /^[A-Za-z0-9_*-]{1,256}$/;
/** A field name, or a `*` glob of field names. */
const fieldOrGlob = (s: string): void => {
  if (s.includes('*')) {
    if (!FIELD_GLOB.test(s)) refuse(`'${s}' is not a field name glob`);
  } else fieldName(s);
};
const BOOST = /^\d{1,6}(\.\d{1,6})?$/;
/** `field` or `field^boost`. */
const boostedField = (s: string): void => {
  const [name, boost, ...rest] = s.split('^');
  fieldName(name);
  if (rest.length || (boost !== undefined && !BOOST.test(boost))) refuse(`'${s}': a boost is a number (field^2)`);
};

const integer =
  (min: number, max: number): Rule =>
  (v) => {
    if (!/^-?\d{1,10}$/.test(v)) refuse('an integer is required');
    const n = Number(v);
    if (n < min || n > max) refuse(`must be from ${min} to ${max}`);
    return String(n);
  };
const oneOf =
  (...values: string[]): Rule =>
  (v) => {
    if (!values.includes(v)) refuse(`must be one of ${values.join(', ')}`);
    return v;
  };
const bool = oneOf('true', 'false', 'on', 'off');
const anyText: Rule = (v) => v;
const name: Rule = (v) => {
  if (!/^[A-Za-z0-9_~@.-]{1,256}$/.test(v)) refuse('a name of letters, digits and _~@.- is required');
  return v;
};

/** `field asc|desc` or `score asc|desc`, comma-separated: no functions. */
const sort: Rule = (v) => {
  const clauses = v.split(',').map((c) => c.trim());
  for (const c of clauses) {
    const m = /^(\S+)\s+(asc|desc)$/i.exec(c);
    if (!m) refuse(`'${c}' is not 'field asc' or 'field desc'`);
    if (m![1] !== 'score') fieldName(m![1]);
  }
  return v;
};

/** fl: field names, `*` globs and `score`; no transformers, functions or aliases; at most MAX_FL_FIELDS (all fl together: checkFieldLists). */
const fl = list(
  (s) => {
    if (s !== 'score') fieldOrGlob(s);
  },
  'field names',
  [MAX_FL_FIELDS, 'MAX_FL_FIELDS'],
);
/** facet.pivot: field names, at most MAX_PIVOT_LEVELS of them, whether or not faceting is on. */
const pivot: Rule = (v) => {
  const levels = fieldCount(v);
  if (levels > MAX_PIVOT_LEVELS) refuse(`the pivot has ${levels} levels; a pivot may have at most ${MAX_PIVOT_LEVELS} (MAX_PIVOT_LEVELS)`);
  return list(fieldName, 'fields')(v);
};
/** qf, pf, hl.fl: at most MAX_LISTED_FIELDS fields each. */
const LISTED_FIELDS: [number, string] = [MAX_LISTED_FIELDS, 'MAX_LISTED_FIELDS'];

/** Minimum should match: `2`, `75%`, `-1`, `3<90%`, `2<-25% 9<-3`. */
const mm: Rule = (v) => {
  const parts = v.trim().split(/\s+/);
  if (!parts.every((p) => /^(\d{1,4}<)?-?\d{1,4}%?$/.test(p))) refuse(`'${v}' is not a minimum-should-match expression`);
  return v;
};

const NUMBER = /^[+-]?\d{1,18}(\.\d{1,18})?([eE][+-]?\d{1,3})?$/;
const DATE_UNIT = '(YEAR|MONTH|DAY|DATE|HOUR|MINUTE|SECOND|MILLI|MILLISECOND)S?';
const DATE_MATH = new RegExp(`^(NOW|\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,3})?Z)((/${DATE_UNIT})|([+-]\\d{1,6}${DATE_UNIT}))*$`);
const DATE_GAP = new RegExp(`^((/${DATE_UNIT})|([+-]\\d{1,6}${DATE_UNIT}))+$`);
/** A range facet bound: a number or a date (with date math). */
const rangeBound: Rule = (v) => {
  if (!NUMBER.test(v) && !DATE_MATH.test(v)) refuse(`'${v}' is not a number or a date`);
  return v;
};
const rangeGap: Rule = (v) => {
  if (!NUMBER.test(v) && !DATE_GAP.test(v)) refuse(`'${v}' is not a number or a date gap (+1DAY)`);
  return v;
};
/** Default of SEARCH_MAX_RANGE_BUCKETS: range facet buckets of one search. */
export const DEFAULT_MAX_RANGE_BUCKETS = 1000;

/** Bounds of a search that come from the settings (those left out take the settings' defaults). */
export interface SearchLimits {
  /** Most range facet buckets of one search, over all its range facets (SEARCH_MAX_RANGE_BUCKETS). */
  maxRangeBuckets: number;
  /** The `timeAllowed` sent when the caller sends none, and the most a caller's may be (SEARCH_TIME_ALLOWED_MS). */
  timeAllowedMs?: number;
  /** The `cpuAllowed` sent when the caller sends none, and the most a caller's may be (SEARCH_CPU_ALLOWED_MS by default). */
  cpuAllowedMs?: number;
  /** Most clauses of q, fq and facet.query together (SEARCH_MAX_CLAUSES). */
  maxClauses?: number;
  /** Most wildcard, prefix, regular expression and range terms of q, fq and facet.query together (SEARCH_MAX_MULTI_TERMS). */
  maxMultiTerms?: number;
  /** Most fq, and most facet.query, of one search (SEARCH_MAX_FILTER_QUERIES). */
  maxFilterQueries?: number;
  /** Most facet values one search asks for (SEARCH_MAX_FACET_VALUES). */
  maxFacetValues?: number;
  /** The time `NOW` stands for in date math (the engine reads its own clock a moment later); Date.now by default. */
  now?: () => number;
}

/** The settings' defaults of the bounds (config/settings.ts). */
const DEFAULT_LIMITS: Required<Omit<SearchLimits, 'now'>> = {
  maxRangeBuckets: DEFAULT_MAX_RANGE_BUCKETS,
  timeAllowedMs: 5000,
  cpuAllowedMs: SEARCH_CPU_ALLOWED_MS,
  maxClauses: 1024,
  maxMultiTerms: 20,
  maxFilterQueries: 20,
  maxFacetValues: 20_000,
};

/** 400 naming a parameter and why it is refused (the one form of every refusal here). */
const parameterRefused = (key: string, why: string): AppError => new AppError('BAD_REQUEST', `Parameter '${key}': ${why}`, { parameter: key });

/**
 * The parameters for the engine by name, read once (checkSearchParams): every check below looks
 * them up here. URLSearchParams.get scans every parameter, so a lookup per repeated value made
 * the checks quadratic in the repetitions (the eighteenth session's second review).
 */
type Values = ReadonlyMap<string, readonly string[]>;
/** A parameter's (first) value, or null. */
const first = (values: Values, key: string): string | null => values.get(key)?.[0] ?? null;
/** Is a switch (`facet`, `group`, `hl`...) on? */
const switchedOn = (values: Values, key: string): boolean => ['true', 'on'].includes(first(values, key) ?? '');

/**
 * Range facets cost the engine a counted range per bucket, whatever the index holds: one anonymous
 * `facet.range.start=0&facet.range.end=10000000&facet.range.gap=1` made the embedded Solr (512 MB)
 * run out of memory, and `timeAllowed` does not bound it. So the buckets of every range facet
 * (each `facet.range`, as often as it is given; the per-field `f.<field>.facet.range.*` before the
 * global ones, as the engine reads them) are counted here, and past `maxRangeBuckets` in all the
 * search answers 400 naming the gap that crosses it, before anything reaches the engine. A range
 * facet without start, end or gap is left to the engine, which refuses it. Numbers are counted
 * exactly ((end - start) / gap, rounded up; a float field's rounding may add one); dates by
 * running the engine's loop with its date math (UTC, months and years of the calendar, a month
 * added to Jan 31 clamped to Feb 28/29 as Java's calendar does), `NOW` being read here a few
 * milliseconds before the engine reads it. A gap that does not move forward, bounds of another
 * kind than the gap (the engine refuses them too) and dates past what can be computed are refused.
 */
function checkRangeBuckets(values: Values, limits: SearchLimits): void {
  const fields = values.get('facet.range') ?? [];
  if (!fields.length) return;
  const max = limits.maxRangeBuckets;
  const now = (limits.now ?? Date.now)();
  /** The parameter the engine reads for a field: the per-field form first. */
  const param = (f: string, base: string): [string, string] | null => {
    for (const key of [`f.${f}.${base}`, base]) {
      const v = first(values, key);
      if (v !== null) return [key, v];
    }
    return null;
  };
  const fail = (key: string, why: string): never => {
    throw parameterRefused(key, why);
  };
  let total = 0n;
  for (const f of fields) {
    const start = param(f, 'facet.range.start');
    const end = param(f, 'facet.range.end');
    const gap = param(f, 'facet.range.gap');
    if (!start || !end || !gap) continue;
    const numeric = NUMBER.test(gap[1]);
    const isNumber = (v: string) => NUMBER.test(v);
    // Bounds of another kind than the gap: name the one at fault (both, if they agree: the gap).
    const startOk = isNumber(start[1]) === numeric;
    const endOk = isNumber(end[1]) === numeric;
    if (!startOk && !endOk) fail(gap[0], `range facet '${f}': the gap is ${numeric ? 'a number' : 'a date gap'} and its start and end are not`);
    if (!startOk) fail(start[0], `range facet '${f}': the start must be ${numeric ? 'a number' : 'a date'}, as the gap is`);
    if (!endOk) fail(end[0], `range facet '${f}': the end must be ${numeric ? 'a number' : 'a date'}, as the gap is`);
    const left = BigInt(max) - total;
    let n: bigint;
    if (numeric) {
      const [a, b, g] = exactDecimals([start[1], end[1], gap[1]]);
      if (g <= 0n) fail(gap[0], `range facet '${f}': the gap must be more than 0`);
      n = b > a ? (b - a + g - 1n) / g : 0n;
    } else {
      const a = dateMath(start[1], now);
      if (a === null) fail(start[0], `range facet '${f}': '${start[1]}' is not a date that can be computed`);
      const b = dateMath(end[1], now);
      if (b === null) fail(end[0], `range facet '${f}': '${end[1]}' is not a date that can be computed`);
      n = BigInt(
        dateBuckets(a!, b!, gap[1], left < 0n ? 0 : Number(left), () => fail(gap[0], `range facet '${f}': the gap '${gap[1]}' does not move forward`)),
      );
    }
    total += n;
    if (total > BigInt(max)) {
      const count = numeric ? (n > 10n ** 18n ? 'more than 10^18' : String(n)) : `more than ${n - 1n}`;
      fail(
        gap[0],
        `range facet '${f}' would have ${count} buckets; a search may have at most ${max} range facet buckets in all (SEARCH_MAX_RANGE_BUCKETS): take a larger gap or a shorter range`,
      );
    }
  }
}

/** Decimal numbers (NUMBER) as integers of one common scale, exactly. */
function exactDecimals(values: string[]): bigint[] {
  const parsed = values.map((v) => {
    const m = /^([+-]?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(v)!;
    const digits = BigInt(m[2] + (m[3] ?? ''));
    return { mantissa: m[1] === '-' ? -digits : digits, exp: Number(m[4] ?? 0) - (m[3]?.length ?? 0) };
  });
  const scale = Math.min(...parsed.map((p) => p.exp));
  return parsed.map((p) => p.mantissa * 10n ** BigInt(p.exp - scale));
}

/** Dates Solr's date math can stand for and JavaScript can compute with. */
const DATE_LIMIT = 8.64e15;
const UNIT_MS: Record<string, number> = { HOUR: 3_600_000, MINUTE: 60_000, SECOND: 1000, MILLI: 1, MILLISECOND: 1 };
/** A date math unit's canonical name: `DAYS` and `DATE` are `DAY`, `HOURS` is `HOUR`... */
const unitOf = (u: string): string => (u === 'DATE' || u === 'DATES' ? 'DAY' : u.replace(/S$/, ''));

/** The UTC time of a calendar date plus a time of day (ms); years 0-99 are years, not 1900-1999. */
function utc(year: number, month: number, day: number, timeOfDay: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  return d.getTime() + timeOfDay;
}
const daysInMonth = (year: number, month: number): number => new Date(utc(year, month + 1, 0, 0)).getUTCDate();

/**
 * Solr's DateMathParser on a time: `+n`/`-n` UNIT adds (months and years as Java's LocalDateTime
 * adds them, the day clamped to the month's last), `/UNIT` rounds down, in UTC. Null past what
 * a date can be.
 */
function applyDateMath(t: number, ops: string): number | null {
  for (const m of ops.matchAll(/([/+-])(\d*)([A-Z]+)/g)) {
    const unit = unitOf(m[3]);
    const d = new Date(t);
    const [y, mo, day] = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()];
    const timeOfDay = t - utc(y, mo, day, 0);
    if (m[1] === '/') {
      if (unit === 'YEAR') t = utc(y, 0, 1, 0);
      else if (unit === 'MONTH') t = utc(y, mo, 1, 0);
      else if (unit === 'DAY') t = utc(y, mo, day, 0);
      else t = Math.floor(t / UNIT_MS[unit]) * UNIT_MS[unit];
    } else {
      const n = (m[1] === '-' ? -1 : 1) * Number(m[2]);
      if (unit === 'YEAR' || unit === 'MONTH') {
        const months = y * 12 + mo + (unit === 'YEAR' ? 12 * n : n);
        const [ny, nmo] = [Math.floor(months / 12), ((months % 12) + 12) % 12];
        if (Math.abs(ny) > 300_000) return null;
        t = utc(ny, nmo, Math.min(day, daysInMonth(ny, nmo)), timeOfDay);
      } else t += n * (unit === 'DAY' ? 86_400_000 : UNIT_MS[unit]);
    }
    if (!(Math.abs(t) <= DATE_LIMIT)) return null;
  }
  return t;
}

/** A range bound (DATE_MATH) as a time; null for a date that does not exist or cannot be computed. */
function dateMath(v: string, now: number): number | null {
  const m = /^(NOW|(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?Z)(.*)$/.exec(v);
  if (!m) return null;
  let t = now;
  if (m[1] !== 'NOW') {
    const [y, mo, d, h, mi, sec] = m.slice(2, 8).map(Number);
    if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo - 1) || h > 23 || mi > 59 || sec > 59) return null;
    t = utc(y, mo - 1, d, ((h * 60 + mi) * 60 + sec) * 1000 + Number((m[8] ?? '0').padEnd(3, '0')));
  }
  return applyDateMath(t, m[9]);
}

/**
 * The buckets of a date range facet, as the engine makes them: from the start, the gap's date
 * math on each bucket's start gives the next, until the end is reached (the last bucket may go
 * past it). Counts up to `max + 1` only; `stuck` throws for a gap that does not move forward.
 */
function dateBuckets(start: number, end: number, gap: string, max: number, stuck: () => never): number {
  let n = 0;
  for (let low = start; low < end && n <= max; n++) {
    const high = applyDateMath(low, gap);
    if (high === null || high <= low) stuck();
    low = high!;
  }
  return n;
}

/** What a query asks of the engine, as counted before it is sent. */
export interface QueryCost {
  /** Terms, words of phrases, ranges, regular expressions: the leaves of the parsed query. */
  clauses: number;
  /** Of them, those the engine expands over the terms of the index: wildcard and prefix terms (`*`, `?`), `field:*`, regular expressions, ranges. */
  multiTerms: number;
  /** The most wildcard characters (`*`, `?`, unescaped) in one term (MAX_TERM_WILDCARDS). */
  termWildcards: number;
  /** The largest `regexSize` of its regular expressions (MAX_REGEX_SIZE). */
  regexSize: number;
  /** The deepest nesting of its parentheses (MAX_QUERY_NESTING). */
  nesting: number;
}

/** Words the lucene parser reads as operators, not terms. */
const OPERATORS = new Set(['AND', 'OR', 'NOT', '&&', '||']);
/** Characters that end a term in the lucene parser's syntax (whitespace aside). */
const TERM_END = new Set(['(', ')', '"', '[', ']', '{', '}', '^', '~', '/', ':']);
const SPACE = /\s/;

/**
 * Counts the clauses of a query in the lucene (and edismax) syntax without parsing it in full,
 * never fewer than the parser makes of the text: each term, each word of a phrase, each range
 * and each regular expression is a clause; operators (`AND`, `OR`, `NOT`, `&&`, `||`, `+`, `-`,
 * `!`), parentheses, field names, boosts (`^2`) and proximities (`~3`) are not. A term with an
 * unescaped `*` or `?` (a wildcard or prefix, `field:*` too), a regular expression (`/.../`) and a
 * range (`[a TO b]`, `{a TO *]`: on a text or string field it enumerates terms) are multi-term
 * queries; `*:*` is not (it matches every document). Escaped characters (`\*`, `\:`) are text. An
 * analyzer may split a term further (`wi-fi`): the engine's own maxBooleanClauses still bounds
 * each query after analysis; this count bounds all the queries of a search together.
 */
export function queryCost(v: string): QueryCost {
  let clauses = 0;
  let multiTerms = 0;
  let termWildcards = 0;
  let largestRegex = 0;
  let depth = 0;
  let nesting = 0;
  const n = v.length;
  let i = 0;
  while (i < n) {
    const c = v[i];
    if (SPACE.test(c) || c === '(' || c === ')' || c === '+' || c === '-' || c === '!') {
      if (c === '(') nesting = Math.max(nesting, ++depth);
      else if (c === ')') depth = Math.max(0, depth - 1);
      i++;
    } else if (c === '^' || c === '~') {
      // a boost or a proximity: its number is no term
      i++;
      while (i < n && /[0-9.]/.test(v[i])) i++;
    } else if (c === '"') {
      // a phrase: one clause per word (at least one)
      let words = 0;
      let inWord = false;
      let j = i + 1;
      for (; j < n && v[j] !== '"'; j++) {
        if (SPACE.test(v[j])) inWord = false;
        else if (!inWord) [inWord, words] = [true, words + 1];
        if (v[j] === '\\') j++;
      }
      clauses += Math.max(1, words);
      i = j + 1;
    } else if (c === '[' || c === '{') {
      // a range, to its closing bracket (either kind, as the parser takes them)
      let j = i + 1;
      let quoted = false;
      for (; j < n; j++) {
        if (v[j] === '\\') j++;
        else if (v[j] === '"') quoted = !quoted;
        else if (!quoted && (v[j] === ']' || v[j] === '}')) break;
      }
      clauses++;
      multiTerms++;
      i = j + 1;
    } else if (c === '/') {
      // a regular expression, to its closing slash
      let j = i + 1;
      for (; j < n && v[j] !== '/'; j++) if (v[j] === '\\') j++;
      largestRegex = Math.max(largestRegex, regexSize(v.slice(i + 1, j)));
      clauses++;
      multiTerms++;
      i = j + 1;
    } else {
      // a term, or a field name before `:`
      let j = i;
      let wild = 0;
      for (; j < n && !SPACE.test(v[j]) && !TERM_END.has(v[j]); j++) {
        if (v[j] === '\\') j++;
        else if (v[j] === '*' || v[j] === '?') wild++;
      }
      const text = v.slice(i, j);
      if (v[j] === ':') {
        if (text === '*' && v[j + 1] === '*' && (j + 2 >= n || SPACE.test(v[j + 2]) || TERM_END.has(v[j + 2]))) {
          clauses++; // *:*, every document
          i = j + 2;
        } else i = j + 1;
        continue;
      }
      if (j === i) {
        i++; // a stray closing bracket
        continue;
      }
      if (!OPERATORS.has(text)) {
        clauses++;
        if (wild) multiTerms++;
        termWildcards = Math.max(termWildcards, wild);
      }
      i = j;
    }
  }
  return { clauses, multiTerms, termWildcards, regexSize: largestRegex, nesting };
}

const QUERY_PARAMS = new Set(['q', 'fq', 'facet.query']);

/**
 * The queries of a search (q, every fq and facet.query) together have at most `maxClauses`
 * clauses and `maxMultiTerms` multi-term queries (queryCost); past either, 400 naming the
 * parameter that crosses it. Each fq and facet.query is a query of its own to the engine, and its
 * maxBooleanClauses bounds only one query: 10 to 40 fq of 1,000 wildcards each cost the embedded
 * Solr 42 to 131 s of CPU, and `timeAllowed` does not bound a filter's term expansion. With
 * edismax or dismax, each term of q is asked of every qf field, and pf adds a phrase per field.
 */
function checkQueryCost(engine: URLSearchParams, values: Values, limits: Required<Omit<SearchLimits, 'now'>>): void {
  const dismax = ['edismax', 'dismax'].includes(first(values, 'defType') ?? '');
  const qf = Math.max(1, fieldCount(first(values, 'qf')));
  const pf = fieldCount(first(values, 'pf'));
  let clauses = 0;
  let multiTerms = 0;
  for (const [key, value] of engine) {
    if (!QUERY_PARAMS.has(key)) continue;
    const cost = queryCost(value);
    if (cost.termWildcards > MAX_TERM_WILDCARDS)
      throw parameterRefused(
        key,
        `a term has ${cost.termWildcards} wildcard characters (* and ?); a term may have at most ${MAX_TERM_WILDCARDS} (MAX_TERM_WILDCARDS): the engine builds its automaton before any time bound applies`,
      );
    if (cost.nesting > MAX_QUERY_NESTING)
      throw parameterRefused(
        key,
        `the query nests ${cost.nesting} levels of parentheses; at most ${MAX_QUERY_NESTING} (MAX_QUERY_NESTING): the engine's parser descends once per level`,
      );
    if (cost.regexSize > MAX_REGEX_SIZE)
      throw parameterRefused(
        key,
        cost.regexSize === Number.POSITIVE_INFINITY
          ? 'a regular expression may not intersect (&): the engine multiplies the states of its operands before any time bound applies'
          : `a regular expression spells out ${cost.regexSize} atoms (repetitions counted); at most ${MAX_REGEX_SIZE} (MAX_REGEX_SIZE): the engine builds its automaton before any time bound applies`,
      );
    const [perClause, perMultiTerm] = key === 'q' && dismax ? [qf + pf, qf] : [1, 1];
    clauses += cost.clauses * perClause;
    multiTerms += cost.multiTerms * perMultiTerm;
    if (multiTerms > limits.maxMultiTerms)
      throw parameterRefused(
        key,
        `the search has ${multiTerms} wildcard, prefix, regular expression and range terms with this ${key}; a search may have at most ${limits.maxMultiTerms} in q, fq and facet.query together (SEARCH_MAX_MULTI_TERMS): each is expanded over the terms of the whole index`,
      );
    if (clauses > limits.maxClauses)
      throw parameterRefused(
        key,
        `the search has ${clauses} clauses with this ${key}; a search may have at most ${limits.maxClauses} in q, fq and facet.query together (SEARCH_MAX_CLAUSES)`,
      );
  }
}

/**
 * The facet values a search asks for are at most `maxFacetValues`: each facet.field counts its
 * limit (`f.<field>.facet.limit`, else `facet.limit`, else the engine's 100; `-1` was made
 * ALL_FACET_VALUES), each facet.pivot every node of its tree (the first level's limit, plus that
 * times the second's, and so on: each node but the last level's is a facet count of its own) and
 * has at most MAX_PIVOT_LEVELS levels. A limit of 0 counts as 1: the engine still counts the
 * field over the whole result (80,000 facets of limit 0 counted nothing). Past it, 400 naming the
 * facet.field or facet.pivot that crosses it. A three-level pivot at the default limit answered
 * 115 MB, and `timeAllowed` does not bound faceting. Nothing is counted when faceting is off (the
 * engine reads no facet.* then).
 */
function checkFacetValues(engine: URLSearchParams, values: Values, limits: Required<Omit<SearchLimits, 'now'>>): void {
  if (!switchedOn(values, 'facet')) return;
  const max = limits.maxFacetValues;
  const limitOf = (field: string): number =>
    Math.max(1, Number(first(values, `f.${field}.facet.limit`) ?? first(values, 'facet.limit') ?? DEFAULT_FACET_LIMIT));
  let total = 0;
  for (const [key, value] of engine) {
    let count: number;
    let what: string;
    if (key === 'facet.field') {
      count = limitOf(value);
      what = `facet '${value}' asks for ${count} values (its facet.limit, at least 1)`;
    } else if (key === 'facet.pivot') {
      // at most MAX_PIVOT_LEVELS fields: the parameter's rule
      const fields = value.split(/[\s,]+/).filter(Boolean);
      const levels = fields.map(limitOf);
      let width = 1;
      count = 0;
      for (const limit of levels) count += width *= limit;
      what = `pivot '${value}' asks for up to ${count} values (facet.limit ${levels.join(', ')} at its levels, each at least 1)`;
    } else continue;
    total += count;
    if (total > max)
      throw parameterRefused(
        key,
        `the ${what}; a search may ask for at most ${max} facet values in all (SEARCH_MAX_FACET_VALUES): set a smaller facet.limit (per field: f.<field>.facet.limit)`,
      );
  }
}

/**
 * Most documents in the groups one grouped search makes the engine keep: each group.field keeps
 * its `start + rows` best groups, and in each of them its `group.offset + group.limit` best
 * documents, so rows 1000 with group.limit 1000 asked for up to a million (rows 1000 and
 * group.limit 10, or 100 and 100, fit), and `group.limit=0` with a deep `group.offset` ran the
 * engine out of memory answering nothing. A group counts at least one document: the engine
 * collects each group's documents whatever the limit. Past it, 400 naming the parameter.
 */
export const MAX_GROUPED_DOCUMENTS = 10_000;
/**
 * Most groups one grouped search makes the engine keep, `start + rows` per group.field: each
 * costs it a collector of its own, whatever its documents (200 group.field with group.limit 0 and
 * rows 1000 answered 26 MB for 12.7 s of its CPU; 10,000 groups, which the documents' bound let
 * through with group.limit 1, took 3-5 s on 20,000 documents, 1,000 groups 0.5 s). A page of
 * 1,000 groups of two fields, or the second page of 1,000 groups of one, fits.
 */
export const MAX_GROUPS = 2000;

function checkGroupedDocuments(values: Values): void {
  if (!switchedOn(values, 'group')) return;
  const fields = Math.max(1, values.get('group.field')?.length ?? 0);
  const start = Number(first(values, 'start') ?? 0);
  const rows = Number(first(values, 'rows') ?? DEFAULT_ROWS);
  const offset = Number(first(values, 'group.offset') ?? 0);
  const limit = Number(first(values, 'group.limit') ?? 1);
  const groups = fields * (start + rows);
  const perGroup = offset + Math.max(1, limit);
  const page = `${fields} group.field × (start ${start} + rows ${rows})`;
  if (groups > MAX_GROUPS)
    throw parameterRefused(start > rows ? 'start' : 'rows', `the grouped search asks for up to ${groups} groups (${page}); at most ${MAX_GROUPS} (MAX_GROUPS)`);
  const documents = groups * perGroup;
  if (documents > MAX_GROUPED_DOCUMENTS)
    throw parameterRefused(
      offset > limit ? 'group.offset' : 'group.limit',
      `the grouped search asks for up to ${documents} documents (${page} × (group.offset ${offset} + group.limit ${limit}, at least 1)); at most ${MAX_GROUPED_DOCUMENTS} (MAX_GROUPED_DOCUMENTS)`,
    );
}

/**
 * A sort has at most MAX_SORT_CLAUSES clauses, the platform's tie-breaker counted, and keeps at
 * most MAX_SORT_VALUES values, clauses × (start + rows) (with cursorMark, start is 0): the
 * engine keeps every clause's value of each of the `start + rows` best documents. Past either,
 * 400 naming sort.
 */
function checkSort(sort: string, values: Values): void {
  const clauses = sort.split(',').length;
  const added = first(values, 'sort') === sort ? '' : ' (with the id asc the platform adds to break ties)';
  if (clauses > MAX_SORT_CLAUSES)
    throw parameterRefused('sort', `the sort has ${clauses} clauses${added}; a sort may have at most ${MAX_SORT_CLAUSES} (MAX_SORT_CLAUSES)`);
  const start = Number(first(values, 'start') ?? 0);
  const rows = Number(first(values, 'rows') ?? DEFAULT_ROWS);
  const kept = clauses * (start + rows);
  if (kept > MAX_SORT_VALUES)
    throw parameterRefused(
      'sort',
      `the sort keeps ${kept} values (${clauses} clauses${added} × (start ${start} + rows ${rows})); at most ${MAX_SORT_VALUES} (MAX_SORT_VALUES): sort on fewer fields, or page with cursorMark`,
    );
}

/**
 * A highlighted search has at most MAX_HIGHLIGHTED_ROWS rows (400 naming rows), and the
 * highlighter analyses HIGHLIGHT_MAX_ANALYZED_CHARS of each field. A grouped one highlights every
 * document of the groups it answers, not `rows`: group.field × rows × group.limit (at least 1)
 * documents, bounded the same (400 naming group.limit, or rows when group.limit is 1 or less).
 * Before (the eighteenth session's third review), `rows=100&group.limit=100` with `hl.fl=*` passed
 * and the engine highlighted up to 10,000 documents (MAX_GROUPED_DOCUMENTS).
 */
function checkHighlighting(engine: URLSearchParams, values: Values): void {
  if (!switchedOn(values, 'hl')) return;
  const rows = Number(first(values, 'rows') ?? DEFAULT_ROWS);
  if (switchedOn(values, 'group')) {
    const fields = Math.max(1, values.get('group.field')?.length ?? 0);
    const limit = Number(first(values, 'group.limit') ?? 1);
    const documents = fields * rows * Math.max(1, limit);
    if (documents > MAX_HIGHLIGHTED_ROWS)
      throw parameterRefused(
        limit > 1 ? 'group.limit' : 'rows',
        `a highlighted grouped search (hl=${first(values, 'hl')}, group=${first(values, 'group')}) highlights every document of its groups, up to ${documents} (${fields} group.field × rows ${rows} × group.limit ${limit}, at least 1); at most ${MAX_HIGHLIGHTED_ROWS} (MAX_HIGHLIGHTED_ROWS)`,
      );
  }
  if (rows > MAX_HIGHLIGHTED_ROWS)
    throw parameterRefused(
      'rows',
      `a highlighted search (hl=${first(values, 'hl')}) may have at most ${MAX_HIGHLIGHTED_ROWS} rows (MAX_HIGHLIGHTED_ROWS): the engine analyses the text of every row again`,
    );
  engine.set('hl.maxAnalyzedChars', String(HIGHLIGHT_MAX_ANALYZED_CHARS));
}

/** `fl` names at most MAX_FL_FIELDS fields, all its values together (each value's own rule counts one). */
function checkFieldLists(values: Values): void {
  let names = 0;
  for (const value of values.get('fl') ?? []) {
    names += fieldCount(value);
    if (names > MAX_FL_FIELDS)
      throw parameterRefused('fl', `the search names more than ${MAX_FL_FIELDS} fields in fl; at most ${MAX_FL_FIELDS} in all its values (MAX_FL_FIELDS)`);
  }
}

/** What each parameter that names fields for their values does with them (named in its refusal). */
const FIELD_USES: Readonly<Record<string, string>> = {
  'facet.field': 'faceted',
  'facet.pivot': 'faceted',
  sort: 'sorted on',
  'group.field': 'grouped on',
  'stats.field': 'a stats field',
};

/**
 * Results that tie on the sort (every result of a constant-score query, equal values of a field)
 * come in the engine's document order, which follows its segments and their merges; the merge
 * policy merges by size, so segments of content the caller may not read reordered the caller's
 * own results. Every sort, and the order within a group, therefore ends with the document's id.
 */
function breakTiesById(engine: URLSearchParams): void {
  const sort = engine.get('sort');
  if (!sort) engine.set('sort', 'score desc,id asc');
  else if (!namedFields('sort', sort).includes('id')) engine.set('sort', `${sort},id asc`);
  if (['true', 'on'].includes(engine.get('group') ?? '')) engine.set('group.sort', 'score desc,id asc');
}

/** The field names a facet.field, facet.pivot, facet.range, sort, group.field or stats.field value names (`score` is no field). */
function namedFields(key: string, value: string): string[] {
  if (key === 'sort')
    return value
      .split(',')
      .map((c) => c.trim().split(/\s+/)[0])
      .filter((f) => f !== 'score');
  return value.split(/[\s,]+/).filter(Boolean);
}

/**
 * Facets (facet.field, each level of a facet.pivot), sorts, groups and stats read a field's
 * values per document: from its docValues, or else the engine un-inverts the field, every term
 * of every document, into its heap. Where the field type is uninvertible, `facet.field=svc_text`
 * on 20,000 documents of 300 words took 1.1 s and 1.9 s of the engine's CPU and 34 MB of heap,
 * and again after each commit (every 500 ms while content is written); with the bundled schema
 * (uninvertible="false") the engine answered 200 with an empty facet, no groups or a 500 for
 * group.field, and its own 400 for sort and stats. So each field named there must be a field of
 * the collection's schema (a field, or a dynamic field by its pattern; any other name is refused:
 * the engine would refuse an undefined field too, and a field this process does not know cannot be
 * judged) that keeps docValues: never a tokenized (full-text) field, `_root_` or a date range.
 * A range facet (`facet.range`) counts with range queries, so it only needs a field that is not
 * tokenized. Checked whether or not the component is switched on (a handler's defaults could
 * switch it on). Past it, 400 naming the parameter and the field, before the engine is asked.
 */
function checkFieldUses(engine: URLSearchParams, schema: IndexSchema): void {
  for (const [key, value] of engine) {
    const use = FIELD_USES[key];
    if (!use && key !== 'facet.range') continue;
    for (const field of namedFields(key, value)) {
      const rule = ruleOf(schema, field);
      if (!rule) throw parameterRefused(key, `'${field}' is not a field of the search collection's schema`);
      const tokenized = `'${field}' is a tokenized (full-text) field (type ${rule.type})`;
      if (!use) {
        if (rule.tokenized) throw parameterRefused(key, `${tokenized}: a range facet needs a number or a date field`);
      } else if (!rule.docValues)
        throw parameterRefused(
          key,
          `${rule.tokenized ? `${tokenized} without docValues` : `'${field}' has no docValues (type ${rule.type})`}: it cannot be ${use}; facets, sorts, groups and stats take fields with docValues (strings *_s and *_ss, numbers, dates, booleans)`,
        );
    }
  }
}

/** facet.mincount: at least 1, so that no facet lists terms of documents outside the result. */
const mincount: Rule = (v) => String(Math.max(1, Number(integer(-INT32_MAX, INT32_MAX)(v))));
/** facet.limit: `-1` (every value) is sent as ALL_FACET_VALUES. */
const facetLimit: Rule = (v) => {
  const n = integer(-1, INT32_MAX)(v);
  return n === '-1' ? String(ALL_FACET_VALUES) : n;
};
const cursorMark: Rule = (v) => {
  if (v !== '*' && !/^[A-Za-z0-9+/=_-]{1,4096}$/.test(v)) refuse('not a cursor mark');
  return v;
};

export const SEARCH_PARAMETER_ALLOWLIST: Readonly<Record<string, Param>> = {
  q: { rule: query },
  fq: { rule: query, repeatable: true },
  defType: { rule: oneOf('lucene', 'edismax', 'dismax') },
  qf: { rule: list(boostedField, 'fields', LISTED_FIELDS) },
  pf: { rule: list(boostedField, 'fields', LISTED_FIELDS) },
  mm: { rule: mm },
  'q.op': { rule: oneOf('AND', 'OR') },
  df: { rule: field },
  sort: { rule: sort },
  start: { rule: integer(0, MAX_START) },
  rows: { rule: integer(0, MAX_ROWS) },
  fl: { rule: fl, repeatable: true },
  facet: { rule: bool },
  'facet.field': { rule: field, repeatable: true },
  'facet.query': { rule: query, repeatable: true },
  'facet.range': { rule: field, repeatable: true },
  'facet.range.start': { rule: rangeBound },
  'facet.range.end': { rule: rangeBound },
  'facet.range.gap': { rule: rangeGap },
  'facet.pivot': { rule: pivot, repeatable: true },
  'facet.limit': { rule: facetLimit },
  'facet.offset': { rule: integer(0, MAX_FACET_OFFSET) },
  'facet.sort': { rule: oneOf('count', 'index') },
  'facet.prefix': { rule: anyText },
  'facet.mincount': { rule: mincount },
  stats: { rule: bool },
  'stats.field': { rule: field, repeatable: true, maxRepeats: [MAX_STATS_FIELDS, 'MAX_STATS_FIELDS'], unique: true },
  group: { rule: bool },
  'group.field': { rule: field, repeatable: true },
  'group.limit': { rule: integer(0, MAX_ROWS) },
  'group.offset': { rule: integer(0, MAX_GROUP_OFFSET) },
  hl: { rule: bool },
  'hl.fl': { rule: list(fieldOrGlob, 'fields', LISTED_FIELDS) },
  'hl.snippets': { rule: integer(0, 100) },
  'hl.fragsize': { rule: integer(0, 100_000) },
  cursorMark: { rule: cursorMark },
  timeAllowed: { rule: integer(0, INT32_MAX) },
  cpuAllowed: { rule: integer(0, INT32_MAX) },
  omitHeader: { rule: bool },
  wt: { rule: oneOf('json', 'javabin'), own: true },
  /** The response format's version; SolrJ sends 2 with javabin (2.2 with its XML parser, which wt refuses). */
  version: { rule: oneOf('2', '2.2'), own: true },
  view: { rule: name, own: true },
  variant: { rule: name, own: true },
  inlineData: { rule: anyText, own: true },
};

/** Base parameters that also have a per-field form `f.<field>.<base>`. */
const PER_FIELD = new Set([
  'facet.limit',
  'facet.offset',
  'facet.sort',
  'facet.prefix',
  'facet.mincount',
  'facet.range.start',
  'facet.range.end',
  'facet.range.gap',
  'hl.snippets',
  'hl.fragsize',
]);

/** The allowlist entry of a parameter name, per-field forms included. */
function entryOf(key: string): Param | undefined {
  if (Object.hasOwn(SEARCH_PARAMETER_ALLOWLIST, key)) return SEARCH_PARAMETER_ALLOWLIST[key];
  const m = /^f\.([^.]+)\.(.+)$/.exec(key);
  if (m && PER_FIELD.has(m[2]) && FIELD_NAME.test(m[1]) && !PSEUDO_FIELDS.has(m[1])) return SEARCH_PARAMETER_ALLOWLIST[m[2]];
  return undefined;
}

/** Is the parameter on the allowlist (per-field forms included)? */
export function isAllowedSearchParameter(key: string): boolean {
  return entryOf(key) !== undefined;
}

/**
 * Before any other check: at most MAX_SEARCH_PARAMETERS parameters, and each repeatable one at
 * most its bound (fq and facet.query SEARCH_MAX_FILTER_QUERIES, stats.field MAX_STATS_FIELDS, any
 * other MAX_PARAMETER_REPEATS); past one, 400 naming the parameter that crosses it and the bound.
 * Counted in one pass, so what the checks after it cost grows with these bounds, not with the body.
 */
function checkRepeats(params: URLSearchParams, limits: Required<Omit<SearchLimits, 'now'>>): void {
  const given = new Map<string, number>();
  let count = 0;
  for (const [key] of params) {
    if (++count > MAX_SEARCH_PARAMETERS) throw parameterRefused(key, TOO_MANY_PARAMETERS);
    const times = (given.get(key) ?? 0) + 1;
    given.set(key, times);
    const entry = entryOf(key);
    if (!entry?.repeatable) continue;
    // Each fq and facet.query is a query the engine runs on its own (a filter is a set of every
    // matching document, kept in its filter cache): so many, and no more, per search.
    const [max, bound] =
      key === 'fq' || key === 'facet.query'
        ? [limits.maxFilterQueries, 'SEARCH_MAX_FILTER_QUERIES']
        : (entry.maxRepeats ?? [MAX_PARAMETER_REPEATS, 'MAX_PARAMETER_REPEATS']);
    if (times > max) throw parameterRefused(key, `given more than ${max} times; a search may have at most ${max} (${bound})`);
  }
}

/** The message of a search of more than MAX_SEARCH_PARAMETERS parameters (checkRepeats, checkParameterCount). */
const TOO_MANY_PARAMETERS = `the search has more than ${MAX_SEARCH_PARAMETERS} parameters (each repetition counted); a search may have at most ${MAX_SEARCH_PARAMETERS} (MAX_SEARCH_PARAMETERS)`;

/**
 * MAX_SEARCH_PARAMETERS on the raw text of a search (its query string, then its form body),
 * before it is parsed: the parameters are its `&`-separated pieces that are not empty, as
 * URLSearchParams reads them. Past the bound, 400 naming the first parameter past it (decoded
 * from its piece) and MAX_SEARCH_PARAMETERS, as checkRepeats would. One pass over the bytes up
 * to that piece, no string or object made per parameter: before (the eighteenth session's third
 * review), a 10 MiB anonymous form body of `a&a&…` (5 million parameters) was parsed and copied
 * first, 1.4-1.9 s of the gateway's thread and 0.5-1 GB more memory before its 400.
 */
export function checkParameterCount(...parts: (string | Uint8Array)[]): void {
  let count = 0;
  for (const part of parts) {
    const text = typeof part === 'string';
    const len = part.length;
    let start = -1;
    for (let i = 0; i <= len; i++) {
      const amp = i === len || (text ? (part as string).charCodeAt(i) : (part as Uint8Array)[i]) === 0x26;
      if (!amp) {
        if (start < 0) start = i;
        continue;
      }
      if (start >= 0 && ++count > MAX_SEARCH_PARAMETERS) {
        const piece = text ? (part as string).slice(start, i) : Buffer.from((part as Uint8Array).subarray(start, i)).toString('utf8');
        const key = new URLSearchParams(piece).keys().next().value ?? '';
        throw parameterRefused(key.length > 256 ? `${key.slice(0, 256)}...` : key, TOO_MANY_PARAMETERS);
      }
      start = -1;
    }
  }
}

/** The parameters that decide whether the engine takes a search's query (its parse errors, its refusals). */
const QUERY_ONLY = ['q', 'fq', 'defType', 'qf', 'pf', 'mm', 'q.op', 'df', 'sort', 'cursorMark', 'timeAllowed', 'cpuAllowed'];

/**
 * The JSON search that asks the engine why a javabin search failed (SearchService.passBinary: a
 * javabin error cannot be cleaned without a decoder): the query's parameters only (the caller's
 * and the platform's filters among them), no rows, and no facets, stats, grouping or
 * highlighting. Before, the whole search was asked again, so one that had run the engine out of
 * memory ran twice (the eighteenth session's second review). The engine parses and runs the
 * query as before, so its refusal (a syntax error, a query too complex) answers the same; an
 * error of the rest answers with the first status alone.
 */
export function engineErrorQuery(engine: URLSearchParams): URLSearchParams {
  const out = new URLSearchParams();
  for (const [key, value] of engine) if (QUERY_ONLY.includes(key)) out.append(key, value);
  out.set('rows', '0');
  out.set('wt', 'json');
  return out;
}

/** The answer formats of the search proxy. */
export type SearchFormat = 'json' | 'javabin';

/** The checked request: what goes to the engine, and the platform's own parameters. */
export interface SearchRequest {
  engine: URLSearchParams;
  /** The answer's format: the engine writes it (wt), the proxy passes javabin through unread. */
  format: SearchFormat;
  view: string | null;
  variant: string | null;
  inlineData: boolean;
  /**
   * The caller asked for `omitHeader`: it is not sent to the engine, whose header says whether the
   * results are partial (`timeAllowed` ran out); the proxy leaves the header out of a JSON answer
   * unless they are. A javabin answer keeps its header.
   */
  omitHeader: boolean;
}

/**
 * Checks a request's parameters against the allowlist, in request order; the first one refused
 * answers 400 naming it. Answers the parameters for the engine (values as the rules answer them,
 * `facet.mincount` raised, `facet.limit=-1` bounded, `timeAllowed` and `cpuAllowed` set and
 * capped, `wt` json or javabin) and the platform's own. With the collection's `schema` (the
 * search service passes indexSchema(): the engine's, or the bundled one until the engine has
 * answered), the fields of facets, sorts, groups and stats are checked against it (checkFieldUses).
 */
export function checkSearchParams(
  params: URLSearchParams,
  searchLimits: SearchLimits = { maxRangeBuckets: DEFAULT_MAX_RANGE_BUCKETS },
  schema?: IndexSchema,
): SearchRequest {
  const limits = { ...DEFAULT_LIMITS, ...searchLimits };
  checkRepeats(params, limits);
  const engine = new URLSearchParams();
  const values = new Map<string, string[]>();
  const seen = new Set<string>();
  for (const [key, value] of params) {
    const entry = entryOf(key);
    if (!entry) throw new AppError('BAD_REQUEST', `Parameter '${key}' is not allowed through the search service`, { parameter: key });
    if (seen.has(key) && !entry.repeatable) throw new AppError('BAD_REQUEST', `Parameter '${key}' may be given once`, { parameter: key });
    seen.add(key);
    let checked: string;
    try {
      checkAnyValue(value);
      checked = entry.rule(value);
    } catch (e) {
      if (!(e instanceof Refused)) throw e;
      throw parameterRefused(key, e.message);
    }
    if (entry.own) continue;
    const given = values.get(key);
    if (entry.unique && given?.includes(checked)) throw parameterRefused(key, `'${checked}' is given twice: the engine would do the same work again for each`);
    if (given) given.push(checked);
    else values.set(key, [checked]);
    engine.append(key, checked);
  }
  // The select handler's default field (svc_text, solrconfig.xml) would satisfy the engine, but
  // the rule stays: it does not depend on how a given collection is configured (a SolrCloud
  // collection made from another configset answered 500 with a stack trace), and the fix is one
  // parameter the message names.
  if (['edismax', 'dismax'].includes(params.get('defType') ?? '') && !params.has('qf') && !params.has('df')) {
    throw new AppError(
      'BAD_REQUEST',
      `Parameter 'qf': defType=${params.get('defType')} needs qf (or df) naming the fields to search, e.g. qf=svc_text for the full text`,
      { parameter: 'qf' },
    );
  }
  const format = (params.get('wt') ?? 'json') as SearchFormat;
  if (format !== 'json' && params.has('inlineData'))
    throw new AppError('BAD_REQUEST', `Parameter 'inlineData' needs wt=json: the platform adds the content to a JSON answer only`, {
      parameter: 'inlineData',
    });
  checkFieldLists(values);
  checkRangeBuckets(values, limits);
  checkQueryCost(engine, values, limits);
  checkFacetValues(engine, values, limits);
  checkGroupedDocuments(values);
  checkHighlighting(engine, values);
  if (schema) checkFieldUses(engine, schema);
  // Facets count only the result: a term with no document in it is never listed.
  if (!engine.has('facet.mincount')) engine.set('facet.mincount', '1');
  breakTiesById(engine);
  checkSort(engine.get('sort')!, values);
  // Every search has a time: the caller's, at most the default (0 would be none to the engine).
  const asked = Number(engine.get('timeAllowed') ?? 0);
  engine.set('timeAllowed', String(asked > 0 ? Math.min(asked, limits.timeAllowedMs) : limits.timeAllowedMs));
  // And a CPU time, which bounds what matching costs the engine however busy it is (SEARCH_CPU_ALLOWED_MS).
  const cpu = Number(engine.get('cpuAllowed') ?? 0);
  engine.set('cpuAllowed', String(cpu > 0 ? Math.min(cpu, limits.cpuAllowedMs) : limits.cpuAllowedMs));
  // The engine's header says whether the time ran out: the proxy omits it itself (SearchRequest.omitHeader).
  const omitHeader = ['true', 'on'].includes(engine.get('omitHeader') ?? '');
  engine.delete('omitHeader');
  engine.set('wt', format);
  if (format === 'javabin') engine.set('version', '2');
  return { engine, format, view: params.get('view'), variant: params.get('variant'), inlineData: params.has('inlineData'), omitHeader };
}
