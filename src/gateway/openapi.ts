import { z } from 'zod';
import { tokenRequestSchema } from '../security/token-service.js';
import type { Router } from './router.js';
import { envelopeSchema, viewBodySchema } from './schemas.js';

/** Request bodies by "METHOD prefix/pattern", from the same zod schemas that validate them. */
const BODIES: Record<string, z.ZodType> = {
  'POST content-service/security/token': tokenRequestSchema,
  'POST content-service/content': envelopeSchema,
  'PUT content-service/content/alias/:ns/:alias': envelopeSchema,
  'PUT content-service/view/:view': viewBodySchema,
  'POST content-service/content/workspace/:ws': envelopeSchema,
  'PUT content-service/content/workspace/:ws/alias/:ns/:alias': envelopeSchema,
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
  return {
    openapi: '3.1.0',
    info: { title: 'Content platform', version },
    paths,
  };
}
