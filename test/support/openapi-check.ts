import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';

/**
 * Checks answers of the platform against its own OpenAPI document (CONTRACT §18: "every answer
 * the platform gives validates against it"), with ajv (JSON Schema 2020-12, the dialect of
 * OpenAPI 3.1) and ajv-formats. Installed for the whole suite by test/support/global-setup.ts:
 * every `fetch` to a platform started by startTestPlatform (the typed client included), and
 * every answer of raw-http.ts and keepalive-http.ts, is checked; a mismatch fails the request
 * with method, path, status and what is wrong, and fails the test in the root afterEach hook
 * should the test have swallowed it.
 */

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

type Json = Record<string, unknown>;
interface Operation {
  parameters?: Json[];
  responses: Record<string, Json>;
  /** A route the document lists without its documentation (openapi.ts `undocumented`). */
  'x-undocumented'?: boolean;
}
interface Template {
  path: string;
  segs: string[];
  /** Segments that are parameters; a multi-segment one (the last) takes the rest of the path. */
  params: Set<number>;
  /** The schema check of each parameter segment: a value that does not fit is not this path (as `#rev` in the router). */
  checks: Map<number, (value: string) => boolean>;
  multi: number | null;
  literals: number;
  item: Record<string, Operation>;
}

/** JSON media types (`application/json`, `application/problem+json`); NDJSON is not one. */
const JSON_MEDIA = /^application\/([\w.-]+\+)?json$/;

/**
 * Whether an answer's body is read for the check: JSON and plain text (a file, an event stream
 * or an NDJSON stream is not), and every error.
 */
export function readsBody(contentType: string | undefined, status: number): boolean {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  return status >= 400 || JSON_MEDIA.test(type) || type === 'text/plain';
}

export class ApiDocumentCheck {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  private readonly templates: Template[] = [];
  private readonly compiled = new Map<string, ValidateFunction>();
  /** Operations (`METHOD /path/{template}`) that answered, whatever the status. */
  readonly covered = new Set<string>();

  constructor(private readonly doc: Json) {
    addFormats(this.ajv);
    const components = (doc.components ?? {}) as Json;
    this.ajv.addSchema({ $id: 'api', components: { schemas: components.schemas ?? {} } });
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      const segs = path.split('/').slice(1);
      const params = new Set<number>();
      const checks = new Map<number, (value: string) => boolean>();
      let multi: number | null = null;
      const declared = Object.values(item).flatMap((op) => op.parameters ?? []);
      segs.forEach((s, i) => {
        if (!s.startsWith('{')) return;
        params.add(i);
        const p = declared.find((d) => d.in === 'path' && d.name === s.slice(1, -1));
        if (p?.['x-multi-segment'] === true) multi = i;
        if (p?.schema) checks.set(i, this.paramCheck(p.schema as Json));
      });
      this.templates.push({ path, segs, params, checks, multi, literals: segs.length - params.size, item });
    }
    // Literal segments win over parameters (`.../metadata` before `.../{rev}`), as in the router.
    this.templates.sort((a, b) => b.literals - a.literals);
  }

  /** Whether a path segment's text fits a parameter's schema (numbers from their digits). */
  private paramCheck(schema: Json): (value: string) => boolean {
    const validate = this.ajv.compile(schema);
    const numeric = schema.type === 'integer' || schema.type === 'number';
    return (value) => (numeric ? /^-?\d+(\.\d+)?$/.test(value) && validate(Number(value)) : validate(value));
  }

  private match(path: string): Template | null {
    let segs: string[];
    try {
      segs = path.split('/').slice(1).map(decodeURIComponent);
    } catch {
      return null;
    }
    for (const t of this.templates) {
      if (t.multi === null ? segs.length !== t.segs.length : segs.length < t.segs.length) continue;
      const value = (i: number) => (i === t.multi ? segs.slice(i).join('/') : segs[i]);
      if (t.segs.every((s, i) => (t.params.has(i) ? (t.checks.get(i)?.(value(i)) ?? true) : s === segs[i]))) return t;
    }
    return null;
  }

  /** Every operation of the document, as `METHOD /path/{template}`. */
  operations(): string[] {
    return this.templates.flatMap((t) => Object.keys(t.item).map((m) => `${m.toUpperCase()} ${t.path}`));
  }

  private resolve(obj: Json): Json {
    const r = obj.$ref;
    if (typeof r !== 'string') return obj;
    const [, kind, name] = /^#\/components\/([^/]+)\/(.+)$/.exec(r) ?? [];
    const found = ((this.doc.components as Json)?.[kind] as Record<string, Json> | undefined)?.[name];
    if (!found) throw new Error(`the document refers to ${r}, which it lacks`);
    return found;
  }

  private validator(key: string, schema: Json): ValidateFunction {
    let v = this.compiled.get(key);
    if (!v) {
      const rooted = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"api#/components/')) as Json;
      v = this.ajv.compile(rooted);
      this.compiled.set(key, v);
    }
    return v;
  }

  /**
   * What is wrong with an answer (null when it fits the document). `body` is the answer's text,
   * or undefined when it was not read (a file, a stream): then only its headers are checked.
   */
  check(method: string, target: string, status: number, headers: Record<string, string>, body: string | undefined): string | null {
    const path = target.split('?')[0];
    const problem = this.problem(method.toUpperCase(), path, status, headers, body);
    return problem && `OpenAPI: ${method.toUpperCase()} ${path} answered ${status}, which does not fit the document: ${problem}`;
  }

  private problem(method: string, path: string, status: number, headers: Record<string, string>, body: string | undefined): string | null {
    const t = this.match(path);
    const op = t && (t.item[method.toLowerCase()] ?? (method === 'HEAD' ? t.item.get : undefined));
    if (!t || !op) {
      // An unknown path (404), a known one with another method (405), or a path refused before
      // routing (400, 413, 503 shedding load): always the error body.
      if (status < 400) return `no operation ${method} ${t ? t.path : path} in the document, yet a ${status}`;
      return this.bodyProblem(`error ${status}`, { 'application/json': { schema: { $ref: '#/components/schemas/ErrorBody' } } }, headers, body, method);
    }
    this.covered.add(`${method === 'HEAD' && !t.item.head ? 'GET' : method} ${t.path}`);
    if (op['x-undocumented'] === true) return `the route ${method} ${t.path} is not documented: add its entry to OPERATIONS in src/gateway/api-operations.ts`;
    const declared = op.responses[String(status)];
    if (!declared) return `status ${status} is not among the answers of ${method} ${t.path} (${Object.keys(op.responses).join(', ')})`;
    const answer = this.resolve(declared);
    for (const [name, h] of Object.entries((answer.headers ?? {}) as Record<string, Json>)) {
      const header = this.resolve(h);
      if (header.required === true && headers[name.toLowerCase()] === undefined) return `header ${name} is missing`;
    }
    return this.bodyProblem(`${method} ${t.path} ${status}`, answer.content as Record<string, Json> | undefined, headers, body, method);
  }

  private bodyProblem(
    key: string,
    content: Record<string, Json> | undefined,
    headers: Record<string, string>,
    body: string | undefined,
    method: string,
  ): string | null {
    if (method === 'HEAD') return null;
    const type = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (!content) {
      if (body !== undefined ? body.length > 0 : Number(headers['content-length'] ?? 0) > 0)
        return `a body (${type || 'no Content-Type'}) where the document declares none`;
      return null;
    }
    const media = Object.keys(content).find((m) => m === type || m === '*/*' || (m.endsWith('/*') && type.startsWith(m.slice(0, -1))));
    if (!media) return `Content-Type ${type || '(none)'} is not among ${Object.keys(content).join(', ')}`;
    const schema = content[media].schema as Json | undefined;
    if (!schema || body === undefined || !JSON_MEDIA.test(media)) return null;
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch {
      return `the body is not JSON: ${body.slice(0, 200)}`;
    }
    const validate = this.validator(`${key} ${media}`, schema);
    if (validate(value)) return null;
    const errors = (validate.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath || '(body)'} ${e.message}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''}`)
      .join('; ');
    return `${errors} — body: ${body.slice(0, 300)}`;
  }
}

// ---- the suite's hook ----

interface CheckState {
  /** Origins (`http://127.0.0.1:<port>`) of platforms whose answers are checked, with their documents. */
  platforms: Map<string, Promise<ApiDocumentCheck>>;
  /** Mismatches seen since the last afterEach (a test may have caught the error thrown). */
  seen: string[];
  originalFetch?: typeof fetch;
}
/**
 * Kept on globalThis: mocha loads global-setup.ts (which installs the hook) as CommonJS and the
 * spec files import this module as ESM, which makes two copies of it.
 */
const STATE = Symbol.for('content-platform.openapi-check');
const holder = globalThis as Record<symbol, CheckState | undefined>;
holder[STATE] ??= { platforms: new Map(), seen: [] };
const state: CheckState = holder[STATE];
const { platforms, seen } = state;

/** `OPENAPI_CHECK=off` turns the check off (to tell whether it is what changes a test's outcome). */
const OFF = process.env.OPENAPI_CHECK === 'off';

/** Checks the answers of the platform at `url` from now on (startTestPlatform calls this). */
export function checkAnswersOf(url: string): void {
  if (OFF) return;
  const origin = new URL(url).origin;
  const f = state.originalFetch ?? fetch;
  platforms.set(
    origin,
    f(`${origin}/openapi.json`).then(async (r) => {
      if (r.status !== 200) throw new Error(`GET ${origin}/openapi.json answered ${r.status}`);
      return new ApiDocumentCheck((await r.json()) as Json);
    }),
  );
}

/** The checker of the platform at `url` (its operations, and those that answered so far). */
export function checkerOf(url: string): Promise<ApiDocumentCheck> {
  const c = platforms.get(new URL(url).origin);
  if (!c) throw new Error(`answers of ${url} are not checked`);
  return c;
}

/**
 * For tests that start the platform with startPlatform themselves: its answers are checked from
 * now on, until it stops.
 */
export function checked<T extends { url?: string; stop(): Promise<void> }>(platform: T): T {
  const url = platform.url;
  if (!url) return platform;
  checkAnswersOf(url);
  const stop = platform.stop.bind(platform);
  platform.stop = async () => {
    stopCheckingAnswersOf(url);
    await stop();
  };
  return platform;
}

/** Stops checking `url` (the platform stopped; its port may be reused by another server). */
export function stopCheckingAnswersOf(url: string): void {
  platforms.delete(new URL(url).origin);
}

/** Checks one answer of a platform on `port` (raw-http.ts, keepalive-http.ts); throws on a mismatch. */
export async function checkRawAnswer(
  port: number,
  method: string,
  target: string,
  status: number,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<void> {
  const checker = platforms.get(`http://127.0.0.1:${port}`);
  if (!checker) return;
  report((await checker).check(method, target, status, headers, body));
}

function report(problem: string | null): void {
  if (!problem) return;
  seen.push(problem);
  throw new Error(problem);
}

/** Wraps the global fetch: answers of checked platforms are validated before the caller sees them. */
export function installFetchCheck(): void {
  if (state.originalFetch) return;
  const f = globalThis.fetch;
  state.originalFetch = f;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await f(input, init);
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const checker = platforms.get(url.origin);
    if (!checker) return res;
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      headers[k] = v;
    });
    const body = readsBody(headers['content-type'], res.status) ? await res.clone().text() : undefined;
    report((await checker).check(method, url.pathname, res.status, headers, body));
    return res;
  };
}

/** The mismatches since the last call (for the root afterEach hook). */
export function takeMismatches(): string[] {
  return seen.splice(0);
}
