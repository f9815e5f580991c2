import { z } from 'zod';
import { ANSWER_SCHEMAS, REQUEST_SCHEMAS } from './api-schemas.js';
import {
  type AnswerDoc,
  type AnswerHeader,
  type BodyDoc,
  type MediaSchema,
  OPERATIONS,
  type OperationDoc,
  PATH_PARAMS,
  type ParamDoc,
} from './api-operations.js';

/** What the document is made of: a router's routes (Router.describe, or a static list of the same shape). */
export interface Describable {
  describe(): { pattern: string; methods: string[] }[];
}

/** A router and the service prefix it is mounted under ('' for the gateway's own routes). */
export type MountedRouter = [prefix: string, router: Describable];

type Json = Record<string, unknown>;

/** The key of an operation in OPERATIONS: `METHOD /<prefix>/<pattern>`. */
export const operationKey = (method: string, prefix: string, pattern: string): string => `${method} /${prefix ? `${prefix}/` : ''}${pattern}`;

/** The OpenAPI path of a router pattern: `:name` and `#name` become `{name}`. */
export const openApiPath = (prefix: string, pattern: string): string =>
  `/${prefix ? `${prefix}/` : ''}${pattern
    .split('/')
    .map((s) => (s[0] === ':' || s[0] === '#' ? `{${s.slice(1)}}` : s))
    .join('/')}`;

/** A zod schema as a JSON Schema (2020-12, the dialect of OpenAPI 3.1) for the document. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output' = 'output'): Json {
  const out = z.toJSONSchema(schema, { unrepresentable: 'any', io }) as Json;
  delete out.$schema;
  return out;
}

/** Named schemas as components; references between them as `#/components/schemas/<name>`. */
function components(schemas: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, Json> {
  const registry = z.registry<{ id: string }>();
  for (const [id, s] of Object.entries(schemas)) registry.add(s, { id });
  const out = z.toJSONSchema(registry, { unrepresentable: 'any', io, uri: (id) => `#/components/schemas/${id}` }) as { schemas: Record<string, Json> };
  for (const s of Object.values(out.schemas)) {
    delete s.$schema;
    delete s.$id;
  }
  return out.schemas;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

function mediaSchema(m: MediaSchema): Json {
  if (m === 'string') return { type: 'string' };
  if (m === 'binary') return { type: 'string', format: 'binary' };
  if (m === 'any') return {};
  if (typeof m === 'object') return { type: 'array', items: ref(m.list) };
  return ref(m);
}

function content(body: BodyDoc): Json {
  const media = typeof body === 'object' && 'media' in body ? body.media : { 'application/json': body };
  return Object.fromEntries(Object.entries(media).map(([type, m]) => [type, { schema: mediaSchema(m) }]));
}

const HEADER_SCHEMAS: Record<AnswerHeader, { description: string; schema: Json }> = {
  Location: { description: 'Absolute URL of the resource', schema: { type: 'string', format: 'uri' } },
  ETag: { description: 'Entity tag; content: `W/"<content key>/<revision>"`', schema: { type: 'string' } },
  'Cache-Control': { description: 'Caching rules of the answer', schema: { type: 'string' } },
  Vary: { description: 'Request headers that select the answer (`Accept`)', schema: { type: 'string' } },
  'Content-Range': { description: 'The range sent, or `bytes */<length>`', schema: { type: 'string' } },
  'Accept-Ranges': { description: '`bytes`', schema: { type: 'string' } },
  'X-Original-Path': { description: 'The path of the upload, percent-encoded', schema: { type: 'string' } },
  'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'integer', minimum: 0 } },
  'Svc-Response-Origin': { description: '`content-service` or `file-service`', schema: { type: 'string' } },
};

/** Headers every answer carries (CONTRACT §2; X-Request-Id: the client's when sane, else a new one). */
const EVERY_ANSWER: Record<string, { description: string; schema: Json }> = {
  'Svc-Api-Version': { description: 'The API version, dotted', schema: { type: 'string', pattern: '^[0-9]+(\\.[0-9]+)*$' } },
  'X-Request-Id': { description: 'The request id: the client’s X-Request-Id when sane, else a new one', schema: { type: 'string' } },
};

const headerRefs = (names: string[]) => Object.fromEntries(names.map((h) => [h, { $ref: `#/components/headers/${h}` }]));

function answer(a: AnswerDoc): Json {
  return {
    description: a.description,
    headers: headerRefs([...Object.keys(EVERY_ANSWER), ...(a.headers ?? [])]),
    ...(a.body ? { content: content(a.body) } : {}),
  };
}

/** The 429 of a collected body past its caller's share (bodies-held.ts). */
const BODIES_HELD_429 = "the caller's request bodies under way on this web process hold BODIES_HELD_PER_CALLER_BYTES (42900)";

/** Answers every operation may give; `auth` and methods with a body add their own. */
const COMMON: Record<string, Json> = {
  BadRequest: answer({ description: 'Bad request: malformed path, parameter, header or body (40000); the message names it', body: 'ErrorBody' }),
  Unauthorized: answer({ description: 'No valid X-Auth-Token (40100)', body: 'ErrorBody' }),
  PayloadTooLarge: answer({ description: 'The body is larger than the limit (41300)', body: 'ErrorBody' }),
  BodiesHeld: answer({
    description: `${BODIES_HELD_429[0].toUpperCase()}${BODIES_HELD_429.slice(1)}; nothing was done`,
    body: 'ErrorBody',
    headers: ['Retry-After'],
  }),
  InternalError: answer({ description: 'Server fault (50000), without a stack trace', body: 'ErrorBody' }),
  Unavailable: {
    description: 'Overloaded, or a store does not answer (50300); Retry-After says when to try again where the platform knows',
    headers: {
      ...headerRefs(Object.keys(EVERY_ANSWER)),
      'Retry-After': { description: HEADER_SCHEMAS['Retry-After'].description, schema: HEADER_SCHEMAS['Retry-After'].schema },
    },
    content: content('ErrorBody'),
  },
};

function parameter(name: string, where: 'path' | 'query' | 'header', p: ParamDoc): Json {
  const schema = jsonSchema(p.schema);
  return {
    name,
    in: where,
    description: p.description,
    required: where === 'path' ? true : p.required === true,
    ...(p.multiSegment ? { 'x-multi-segment': true } : {}),
    ...(p.repeated ? { schema: { type: 'array', items: schema }, style: 'form', explode: true } : { schema }),
  };
}

function operation(key: string, method: string, prefix: string, pattern: string, doc: OperationDoc): Json {
  const params: Json[] = [];
  for (const seg of pattern.split('/')) {
    if (seg[0] !== ':' && seg[0] !== '#') continue;
    const name = seg.slice(1);
    const p = doc.path?.[name] ?? PATH_PARAMS[name];
    if (!p) throw new Error(`${key}: path parameter ${name} is not described (PATH_PARAMS or the operation's path in src/gateway/api-operations.ts)`);
    params.push(parameter(name, 'path', p));
  }
  for (const [name, p] of Object.entries(doc.query ?? {})) params.push(parameter(name, 'query', p));
  for (const [name, p] of Object.entries(doc.headers ?? {})) params.push(parameter(name, 'header', p));
  params.push({ $ref: '#/components/parameters/XRequestId' });
  const responses: Json = {};
  // Answers of the content and file services name their origin (CONTRACT §2).
  const origin: AnswerHeader[] = prefix === 'content-service' || prefix === 'file-service' ? ['Svc-Response-Origin'] : [];
  for (const [status, a] of Object.entries(doc.responses)) responses[status] = answer({ ...a, headers: [...origin, ...(a.headers ?? [])] });
  const common = (status: number, name: string) => {
    responses[status] ??= { $ref: `#/components/responses/${name}` };
  };
  common(400, 'BadRequest');
  if (doc.auth !== 'none') common(401, 'Unauthorized');
  // A request body is read (and limited) for every method but GET, even where none is expected.
  if (method !== 'GET') common(413, 'PayloadTooLarge');
  // A collected body counts in BODIES_HELD_PER_CALLER_BYTES (bodies-held.ts); a streamed one
  // (binary: uploads, bulk imports) does not. A route with a 429 of its own (a login, a search)
  // answers this one too.
  const streamed = doc.body !== undefined && 'mediaType' in doc.body && doc.body.schema === 'binary';
  if (method !== 'GET' && method !== 'HEAD' && !streamed) {
    const own = responses[429] as { description?: string } | undefined;
    if (own?.description) own.description += `; or ${BODIES_HELD_429}`;
    else common(429, 'BodiesHeld');
  }
  common(500, 'InternalError');
  common(503, 'Unavailable');
  const sorted = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)));
  let requestBody: Json | undefined;
  if (doc.body) {
    const b = doc.body;
    requestBody =
      'mediaType' in b
        ? {
            required: b.required === true,
            content: { [b.mediaType]: { schema: b.schema === 'binary' ? { type: 'string', format: 'binary' } : jsonSchema(b.schema, 'input') } },
          }
        : { required: b.required === true, content: { 'application/json': { schema: ref(b.schema) } } };
  }
  return {
    operationId: `${method.toLowerCase()}_${prefix}_${pattern}`.replace(/[^A-Za-z0-9_]+/g, '_').replace(/_+$/, ''),
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [prefix || 'gateway'],
    security: doc.auth === 'required' ? [{ XAuthToken: [] }] : doc.auth === 'optional' ? [{}, { XAuthToken: [] }] : [],
    parameters: params,
    ...(requestBody ? { requestBody } : {}),
    responses: sorted,
  };
}

/** A route missing from OPERATIONS, in the served document: named, answers unknown. */
function undocumented(key: string, method: string, prefix: string, pattern: string): Json {
  const params = pattern
    .split('/')
    .filter((seg) => seg[0] === ':' || seg[0] === '#')
    .map((seg) => ({ name: seg.slice(1), in: 'path', required: true, schema: { type: 'string' } }));
  return {
    operationId: `${method.toLowerCase()}_${prefix}_${pattern}`.replace(/[^A-Za-z0-9_]+/g, '_').replace(/_+$/, ''),
    summary: `Undocumented: ${key}`,
    'x-undocumented': true,
    tags: [prefix || 'gateway'],
    parameters: params,
    responses: { 400: { $ref: '#/components/responses/BadRequest' } },
  };
}

const TAGS: Record<string, string> = {
  gateway: 'Readiness, metrics and this document',
  'content-service': 'Tokens, content, views, workspaces, revisions, re-indexing, webhooks and the change feed',
  'search-service': 'Permission-filtered search',
  'file-service': 'File upload, download, info and delete',
  'file-delivery-service': 'Files of content by version or alias, and image renditions',
  'taxonomy-service': 'Taxonomy structure and completion',
};

/**
 * The OpenAPI 3.1 document of the gateway, served at GET /openapi.json: every route of every
 * router, documented by src/gateway/api-operations.ts (parameters, security, bodies, every
 * answer), with the schemas of src/gateway/api-schemas.ts (request bodies: the zod schemas
 * that validate them). A route without an entry there is an error with `strict` (the unit test,
 * src/gateway/openapi.test.ts); the served document lists it as `x-undocumented`, with no
 * answers but the error body, so that the gateway still serves its document and every test
 * answer from that route fails the suite's check, naming it.
 */
export function openApiDocument(version: string, serverUrl: string, routers: MountedRouter[], opts: { strict?: boolean } = {}): Json {
  const paths: Record<string, Json> = {};
  for (const [prefix, router] of routers) {
    for (const { pattern, methods } of router.describe()) {
      const path = openApiPath(prefix, pattern);
      paths[path] ??= {};
      const item = paths[path];
      for (const m of methods) {
        const key = operationKey(m, prefix, pattern);
        const doc = OPERATIONS[key];
        if (doc) item[m.toLowerCase()] = operation(key, m, prefix, pattern, doc);
        else if (opts.strict) throw new Error(`Route ${key} is not documented: add its entry to OPERATIONS in src/gateway/api-operations.ts`);
        else item[m.toLowerCase()] = undocumented(key, m, prefix, pattern);
      }
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Content platform',
      version,
      description:
        'A content repository for newsrooms. Every answer carries `Svc-Api-Version` and `X-Request-Id`; answers of the content and file services carry `Svc-Response-Origin`. ' +
        'Every error is `{message, statusCode, extraInfo}` (CONTRACT §11); an unknown path answers 404 and a known path with another method 405 with `Allow`. ' +
        'HEAD is answered wherever GET is. Path parameters named `path` (files) and taxonomy ids and inputs may hold `/`.',
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: serverUrl, description: 'This gateway' }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        XAuthToken: { type: 'apiKey', in: 'header', name: 'X-Auth-Token', description: 'A token of POST /content-service/security/token' },
      },
      schemas: { ...components(REQUEST_SCHEMAS, 'input'), ...components(ANSWER_SCHEMAS, 'output') },
      responses: COMMON,
      parameters: {
        XRequestId: {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description: 'Your request id (letters, digits, `._:-`, at most 128), carried to the actors and logs and answered back',
          schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
        },
      },
      // Each answer that names a header always carries it.
      headers: Object.fromEntries(Object.entries({ ...EVERY_ANSWER, ...HEADER_SCHEMAS }).map(([name, h]) => [name, { ...h, required: true }])),
    },
  };
}
