import { z } from 'zod';
import { tokenRequestSchema } from '../security/token-service.js';
import type { Router } from './router.js';
import { webhookBodySchema } from '../webhooks/webhook-store.js';
import { envelopeSchema, viewBodySchema } from './schemas.js';
import { bulkOpenApiPaths } from './bulk-service.js';

/** Request bodies by "METHOD prefix/pattern", from the same zod schemas that validate them. */
const BODIES: Record<string, z.ZodType> = {
  'POST content-service/security/token': tokenRequestSchema,
  'POST content-service/content': envelopeSchema,
  'PUT content-service/content/alias/:ns/:alias': envelopeSchema,
  'PUT content-service/view/:view': viewBodySchema,
  'POST content-service/content/workspace/:ws': envelopeSchema,
  'PUT content-service/content/workspace/:ws/alias/:ns/:alias': envelopeSchema,
  'POST content-service/webhooks': webhookBodySchema,
  'PUT content-service/webhooks/:id': webhookBodySchema,
};

const errorBody = {
  type: 'object',
  required: ['message', 'statusCode', 'extraInfo'],
  properties: { message: { type: 'string' }, statusCode: { type: 'string', pattern: '^[0-9]{5}$' }, extraInfo: { type: 'object' } },
};

/**
 * The OpenAPI 3.1 document of the gateway, served at GET /openapi.json: every route of every
 * service router, its path parameters, and the request bodies generated from the zod schemas.
 */
export function openApiDocument(version: string, routers: Record<string, Pick<Router, 'describe'>>): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [prefix, router] of Object.entries(routers)) {
    for (const { pattern, methods } of router.describe()) {
      const params: { name: string; in: 'path'; required: true; schema: Record<string, unknown> }[] = [];
      const path = `/${prefix}/${pattern
        .split('/')
        .map((seg) => {
          if (seg[0] !== ':' && seg[0] !== '#') return seg;
          const name = seg.slice(1);
          params.push({ name, in: 'path', required: true, schema: seg[0] === '#' ? { type: 'integer', minimum: 1 } : { type: 'string' } });
          return `{${name}}`;
        })
        .join('/')}`;
      paths[path] ??= {};
      const item: Record<string, unknown> = paths[path];
      for (const m of methods) {
        const body = BODIES[`${m} ${prefix}/${pattern}`];
        item[m.toLowerCase()] = {
          operationId: `${m.toLowerCase()}_${prefix}_${pattern}`.replace(/[^A-Za-z0-9_]+/g, '_'),
          parameters: params,
          ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: z.toJSONSchema(body, { unrepresentable: 'any' }) } } } } : {}),
          responses: {
            default: { description: 'The answer of the spec; errors carry the error body', content: { 'application/json': { schema: errorBody } } },
          },
        };
      }
    }
  }
  Object.assign(paths, changeFeedPaths());
  // NDJSON both ways: the bulk service describes its two operations itself.
  Object.assign(paths, bulkOpenApiPaths());
  return {
    openapi: '3.1.0',
    info: { title: 'Content platform', version },
    paths,
  };
}

/** The change feed (CONTRACT §13): its own uWS routes, outside the service routers. */
function changeFeedPaths(): Record<string, Record<string, unknown>> {
  const query = (name: string, schema: Record<string, unknown>, description: string) => ({ name, in: 'query', required: false, schema, description });
  const token = { name: 'X-Auth-Token', in: 'header', required: true, schema: { type: 'string' } };
  const error = { description: 'The error body', content: { 'application/json': { schema: errorBody } } };
  return {
    '/content-service/changes': {
      get: {
        operationId: 'get_content_service_changes',
        parameters: [
          token,
          query('since', { type: 'string', maxLength: 2048 }, 'A cursor, or `now`; absent: from the oldest event kept'),
          query('limit', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }, 'Events per page'),
          query('types', { type: 'string' }, 'Content types, comma-separated'),
          query('views', { type: 'string' }, 'Views, comma-separated'),
          query('kinds', { type: 'string' }, 'create, update, delete, view, timestate, comma-separated'),
          query('feed', { type: 'string', enum: ['longpoll', 'sse'] }, 'Long poll, or server-sent events (also with Accept: text/event-stream)'),
          query('timeout', { type: 'integer', minimum: 0, maximum: 60000, default: 30000 }, 'Long poll: ms to wait for a matching event'),
        ],
        responses: {
          200: {
            description: '`{"changes": [<event>...], "last": "<cursor>"}`, or a text/event-stream',
            content: { 'application/json': { schema: { type: 'object', required: ['changes', 'last'] } }, 'text/event-stream': {} },
          },
          400: error,
          401: error,
          410: error,
        },
      },
    },
    '/content-service/changes/ws': {
      get: {
        operationId: 'get_content_service_changes_ws',
        description:
          'WebSocket. First message `{"token", "since"?, "types"?, "views"?, "kinds"?}`, then one event per message. Closes 4401 (token), 4400 (first message), 4410 (cursor past the trim), 4429 (the subscriber did not read).',
        responses: { 101: { description: 'Switching protocols' } },
      },
    },
  };
}
