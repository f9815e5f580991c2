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
  // stack frames and causes, should a message carry them
  [/\s*\n\s*(at |Caused by:|\.\.\. \d+ more).*/g, ''],
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

/** An engine message without trace, Java class names, addresses, paths or versions. */
export function scrubEngineMessage(msg: string): string {
  let out = msg;
  for (const [re, by] of SCRUB) out = out.replace(re, by);
  return out.trim();
}

/** The message of a 404 for a collection: the engine's own, and the proxy's for any collection but SOLR_COLLECTION, are one answer. */
export const noCollection = (collection: string): string => `The search engine has no collection ${collection}`;

/** The proxy's answer to an engine answer that is not a success. */
export function engineErrorAnswer(collection: string, res: EngineAnswer): { status: number; body: Record<string, unknown> } {
  const status = res.status;
  const statusCode = statusCodeOf(status);
  let parsed: { responseHeader?: { status?: unknown; QTime?: unknown }; error?: { msg?: unknown; code?: unknown } } | undefined;
  if (/json/i.test(res.contentType)) {
    try {
      parsed = JSON.parse(res.body) as typeof parsed;
    } catch {
      parsed = undefined;
    }
  }
  if (!parsed || typeof parsed.error !== 'object' || parsed.error === null) {
    const message = status === 404 ? noCollection(collection) : `The search engine answered ${status}`;
    return { status, body: { message, statusCode, extraInfo: {} } };
  }
  const msg = typeof parsed.error.msg === 'string' && parsed.error.msg ? scrubEngineMessage(parsed.error.msg) : `The search engine answered ${status}`;
  const code = typeof parsed.error.code === 'number' ? parsed.error.code : status;
  const header = parsed.responseHeader;
  const responseHeader =
    header && typeof header === 'object'
      ? { status: typeof header.status === 'number' ? header.status : status, QTime: typeof header.QTime === 'number' ? header.QTime : 0 }
      : undefined;
  return { status, body: { message: msg, statusCode, extraInfo: {}, ...(responseHeader ? { responseHeader } : {}), error: { msg, code } } };
}
