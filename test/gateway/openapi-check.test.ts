import { expect } from 'chai';
import { ApiDocumentCheck } from '../support/openapi-check.js';

/** The suite's answer check (test/support/openapi-check.ts) on a small document: what it lets through and what it refuses. */
describe('answer check against the OpenAPI document (CONTRACT §18)', () => {
  const error = { description: 'e', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorBody' } } } };
  const check = new ApiDocumentCheck({
    openapi: '3.1.0',
    paths: {
      '/things/{id}': {
        get: {
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } }],
          responses: {
            200: {
              description: 'ok',
              headers: { ETag: { $ref: '#/components/headers/ETag' } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } },
            },
            404: error,
          },
        },
        delete: { responses: { 204: { description: 'gone' } } },
      },
      '/things/special': { get: { responses: { 200: { description: 'ok', content: { 'text/plain': { schema: { type: 'string' } } } } } } },
      '/files/{path}': {
        get: {
          parameters: [{ name: 'path', in: 'path', required: true, 'x-multi-segment': true, schema: { type: 'string' } }],
          responses: { 200: { description: 'bytes', content: { '*/*': { schema: {} } } } },
        },
      },
    },
    components: {
      schemas: {
        Thing: { type: 'object', required: ['name', 'at'], properties: { name: { type: 'string' }, at: { type: 'string', format: 'date-time' } } },
        ErrorBody: { type: 'object', required: ['message', 'statusCode', 'extraInfo'] },
      },
      headers: { ETag: { required: true, schema: { type: 'string' } } },
    },
  });
  const json = { 'content-type': 'application/json' };
  const good = JSON.stringify({ name: 'a', at: '2026-11-23T10:00:00.000Z' });
  const err = JSON.stringify({ message: 'm', statusCode: '40400', extraInfo: {} });

  it('lets through answers that fit: status, headers, media type and body', () => {
    expect(check.check('GET', '/things/1', 200, { ...json, etag: 'x' }, good)).to.equal(null);
    expect(check.check('HEAD', '/things/1', 200, { ...json, etag: 'x' }, '')).to.equal(null);
    expect(check.check('GET', '/things/1?x=y', 404, json, err)).to.equal(null);
    expect(check.check('DELETE', '/things/1', 204, {}, '')).to.equal(null);
    expect(check.check('GET', '/things/special', 200, { 'content-type': 'text/plain; charset=utf-8' }, 'hi'), 'literal wins').to.equal(null);
    expect(check.check('GET', '/files/a/b/c.png', 200, { 'content-type': 'image/png' }, undefined), 'multi-segment').to.equal(null);
    expect(check.check('GET', '/nowhere', 404, json, err), 'unknown path, error body').to.equal(null);
    expect(check.check('PUT', '/things/1', 405, json, err), 'other method, error body').to.equal(null);
  });

  it('refuses each kind of mismatch, naming method, path and status', () => {
    const cases: [string, string | null][] = [
      ['undeclared status', check.check('GET', '/things/1', 500, json, err)],
      ['missing header', check.check('GET', '/things/1', 200, json, good)],
      ['wrong media type', check.check('GET', '/things/1', 200, { 'content-type': 'text/html', etag: 'x' }, '<p>')],
      ['body off schema', check.check('GET', '/things/1', 200, { ...json, etag: 'x' }, JSON.stringify({ name: 1 }))],
      ['bad format', check.check('GET', '/things/1', 200, { ...json, etag: 'x' }, JSON.stringify({ name: 'a', at: 'yesterday' }))],
      ['not JSON', check.check('GET', '/things/1', 200, { ...json, etag: 'x' }, '{')],
      ['body where none', check.check('DELETE', '/things/1', 204, json, '{}')],
      ['success on an unknown path', check.check('GET', '/nowhere', 200, json, '{}')],
      ['path parameter off its schema is no match', check.check('GET', '/things/zero', 200, { ...json, etag: 'x' }, good)],
      ['error without the error body', check.check('GET', '/nowhere', 404, json, '{}')],
    ];
    for (const [what, problem] of cases) {
      expect(problem, what).to.be.a('string');
      expect(problem, what).to.match(/^OpenAPI: [A-Z]+ \/\S* answered \d{3}, which does not fit the document: ./);
    }
  });
});
