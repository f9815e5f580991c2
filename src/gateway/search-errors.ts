import { ERRORS } from '../errors.js';

/**
 * Engine errors through the search proxy (CONTRACT §12 last row, §20 "Error bodies"): the
 * engine's HTTP status and its JSON error (`error.msg`, `error.code`, `responseHeader`) with
 * the stack trace (`trace`), the Java class names (`metadata`, `org.apache...Exception:`
 * prefixes) and any address, path or server version removed, plus the platform's error body
 * (`message`, `statusCode`, `extraInfo`, CONTRACT §11). An answer that is not JSON (Jetty's HTML
 * page for an unknown collection) becomes the platform's error body alone.
 */

/** The engine's answer as the adapter gives it. */
export interface EngineAnswer {
  status: number;
  contentType: string;
  body: string;
}

/** The spec's five-digit statusCode of an HTTP status (the registry's, else `<status>00`). */
function statusCodeOf(http: number): string {
  return Object.values(ERRORS).find((e) => e.http === http)?.statusCode ?? `${http}00`;
}

const SCRUB: [RegExp, string][] = [
  // stack frames and causes, should a message carry them (with the blank before them: spaces, then
  // the first line break, then any blank; `\s*\n\s*` split a run of line breaks every way, cubic in
  // it: 1,000 characters of them took 0.46 s)
  [/[^\S\n]*\n\s*(at |Caused by:|\.\.\. \d+ more).*/g, ''],
  // Java class names, with the colon that follows one heading a message
  [/\b(?:java|javax|jdk|sun|org|com|net|io)\.(?:[\w$]+\.)*[A-Z][\w$]*(?::\s*)?/g, ''],
  // URLs, IP addresses (v6 in brackets) and host:port
  [/\b[a-z][a-z0-9+.-]*:\/\/[^\s'"<>]*[^\s'"<>:;,.)]/gi, '[address]'],
  [/\[(?:[0-9a-f]{0,4}:){2,}[0-9a-f]{0,4}\](?::\d+)?/gi, '[address]'],
  [/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g, '[address]'],
  [/\b(?:localhost|[a-z0-9-]+(?:\.[a-z0-9-]+)+):\d{2,5}\b/gi, '[address]'],
  // absolute file paths of two or more segments
  [/(^|[\s'"(=])\/(?:[\w.-]+\/)+[\w.-]*/g, '$1[path]'],
  // server names with versions
  [/\b(?:Jetty|Solr|Lucene|Apache|Java)[\s/(:-]*v?\d+(?:\.\d+)+\)?/gi, ''],
];

/**
 * The most of an engine message the scrub reads and answers (MAX_ENGINE_MESSAGE_CHARS). The engine
 * echoes the caller's query in its messages ("Cannot parse '<q>'", "undefined field <name>"), and
 * several SCRUB patterns cost time quadratic in a run of characters they do not match in the end
 * (each start within `a.a.a…` scans to its end): before (the twenty-third session's review), an
 * anonymous search of `q=a.a.a…a (` (98,000 characters, within MAX_VALUE_LENGTH) held the
 * gateway's event loop 24.7 s for its 400 (20,000 characters: 0.9 s).
 */
export const MAX_ENGINE_MESSAGE_CHARS = 1000;

/**
 * An engine message without trace, Java class names, addresses, paths or versions. A message
 * longer than MAX_ENGINE_MESSAGE_CHARS is cut at the last whitespace within it, before the scrub
 * (so a token cut in two, an address among them, is dropped whole rather than scrubbed in part),
 * and ends with `…`.
 */
export function scrubEngineMessage(msg: string): string {
  let out = msg;
  let cut = false;
  if (out.length > MAX_ENGINE_MESSAGE_CHARS) {
    let at = MAX_ENGINE_MESSAGE_CHARS;
    while (at > 0 && !/\s/.test(out[at])) at--;
    out = out.slice(0, at);
    cut = true;
  }
  for (const [re, by] of SCRUB) out = out.replace(re, by);
  out = out.trim();
  return cut ? `${out} …`.trim() : out;
}

/** The message of a 404 for a collection: the engine's own, and the proxy's for any collection but SOLR_COLLECTION, are one answer. */
export const noCollection = (collection: string): string => `The search engine has no collection ${collection}`;

/**
 * Exceptions by which the engine refuses what a search asked rather than fails: it answers 500
 * for them (a wildcard or regular expression too complex to determinize, a prefix or wildcard term
 * whose automaton is too large, `input automaton is too large`, an IllegalArgumentException: a
 * 98,000-character prefix answered 500 before the twenty-third session's review; too many clauses
 * after analysis, a number that does not parse in a boost), and the proxy answers 400, since the same
 * request would fail the same way every time (bad input never answers 5xx, SECURITY.md).
 */
const CALLER_ERRORS = /\b(?:TooComplexToDeterminizeException|TooManyClauses|TooManyNestedClauses|NumberFormatException|SyntaxError|ParseException)\b/;

/**
 * Does an engine message name a refusal of the query? Linear in the message, which may echo the
 * caller's query: `\bDeterminizing\b.*\beffort\b` as one pattern scanned to the end of the line from
 * every `Determinizing` (100,000 characters of them: 0.9 s).
 */
function refusalMessage(msg: string): boolean {
  const determinizing = (line: string) => {
    const at = line.search(/\bDeterminizing\b/i);
    return at >= 0 && /\beffort\b/i.test(line.slice(at));
  };
  // `.` matches no line terminator: Determinizing and effort on one line, as the pattern was.
  return msg.split(/[\n\r\u2028\u2029]/).some(determinizing) || /too many (?:boolean|nested) clauses|maxClauseCount|input automaton is too large/i.test(msg);
}

/**
 * Unchecked exceptions by which the engine refuses what a query spells, answered without metadata
 * (only the `trace`, whose first line names the class): a negative boost (`"a b"^-1`), a regular
 * expression that does not parse (`/(/`, `/a{5,2}/`), a date range in the wrong order
 * (`x_drange:[NOW TO NOW-1DAY]`), date math past a long (`[NOW-1000000000YEARS TO NOW]`,
 * ArithmeticException). Each answered 500 to an anonymous search before the twenty-third
 * session's review (a fuzz of 800 searches of such tokens: 84 answers 5xx).
 */
const CALLER_TRACES = /^(?:java\.lang\.)?(?:IllegalArgumentException|ArithmeticException)\b/;

/** Does the engine's 500 refuse the caller's query (its error classes, or a message that names one)? */
function refusesQuery(error: { metadata?: unknown; msg?: unknown; trace?: unknown }): boolean {
  const classes = Array.isArray(error.metadata) ? error.metadata.filter((m): m is string => typeof m === 'string') : [];
  return (
    classes.some((c) => CALLER_ERRORS.test(c)) ||
    (typeof error.trace === 'string' && CALLER_TRACES.test(error.trace)) ||
    (typeof error.msg === 'string' && refusalMessage(error.msg))
  );
}

/** The proxy's answer to an engine answer that is not a success. */
export function engineErrorAnswer(collection: string, res: EngineAnswer): { status: number; body: Record<string, unknown> } {
  let status = res.status;
  let parsed:
    | { responseHeader?: { status?: unknown; QTime?: unknown }; error?: { msg?: unknown; code?: unknown; metadata?: unknown; trace?: unknown } }
    | undefined;
  if (/json/i.test(res.contentType)) {
    try {
      parsed = JSON.parse(res.body) as typeof parsed;
    } catch {
      parsed = undefined;
    }
  }
  if (!parsed || typeof parsed.error !== 'object' || parsed.error === null) {
    const message = status === 404 ? noCollection(collection) : `The search engine answered ${status}`;
    return { status, body: { message, statusCode: statusCodeOf(status), extraInfo: {} } };
  }
  if (status === 500 && refusesQuery(parsed.error)) status = 400;
  const statusCode = statusCodeOf(status);
  const msg = typeof parsed.error.msg === 'string' && parsed.error.msg ? scrubEngineMessage(parsed.error.msg) : `The search engine answered ${status}`;
  const code = status === 400 && res.status === 500 ? 400 : typeof parsed.error.code === 'number' ? parsed.error.code : status;
  const header = parsed.responseHeader;
  const responseHeader =
    header && typeof header === 'object'
      ? {
          status: typeof header.status === 'number' && status === res.status ? header.status : status,
          QTime: typeof header.QTime === 'number' ? header.QTime : 0,
        }
      : undefined;
  return { status, body: { message: msg, statusCode, extraInfo: {}, ...(responseHeader ? { responseHeader } : {}), error: { msg, code } } };
}
