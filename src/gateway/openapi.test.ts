import { expect } from 'chai';
import { loadSettings } from '../../config/settings.js';
import { OPERATIONS } from './api-operations.js';
import { ContentService } from './content-service.js';
import type { ContentServiceDeps } from './content-deps.js';
import { type MountedRouter, openApiDocument, operationKey } from './openapi.js';
import { SearchService, type SearchServiceDeps } from './search-service.js';
import { mountedRouters } from './server.js';

/** Stands in for every dependency: the routers are built, never called. */
const stub: unknown = new Proxy(() => undefined, {
  get: (_t, k) => (k === 'then' ? undefined : stub),
  apply: () => stub,
});

/** The gateway's routers, as Gateway mounts them, built with stub dependencies. */
function gatewayRouters(): MountedRouter[] {
  const settings = loadSettings({});
  const deps = new Proxy({ settings } as Record<string, unknown>, { get: (t, k: string) => (k in t ? t[k] : stub) });
  const content = new ContentService(deps as unknown as ContentServiceDeps);
  const search = new SearchService(deps as unknown as SearchServiceDeps);
  return mountedRouters(content.router, search.router);
}

describe('OpenAPI document (CONTRACT §18): every route documented', () => {
  const routers = gatewayRouters();
  const routeKeys = routers.flatMap(([prefix, r]) => r.describe().flatMap(({ pattern, methods }) => methods.map((m) => operationKey(m, prefix, pattern))));

  it('every route of every router has an entry with documented answers in api-operations.ts', () => {
    const missing = routeKeys.filter((k) => !OPERATIONS[k] || !Object.keys(OPERATIONS[k].responses).length);
    expect(missing, 'routes without documentation: add them to OPERATIONS in src/gateway/api-operations.ts').to.deep.equal([]);
    // The routers are really read: the content service alone has dozens of routes.
    expect(routeKeys.length).to.be.greaterThan(50);
  });

  it('every entry of api-operations.ts is a route (no documentation of what is not served)', () => {
    const stale = Object.keys(OPERATIONS).filter((k) => !routeKeys.includes(k));
    expect(stale).to.deep.equal([]);
  });

  it('a router route without documentation makes the document fail, naming it', () => {
    const extra: MountedRouter = ['content-service', { describe: () => [{ pattern: 'undocumented/:x', methods: ['GET'] }] }];
    expect(() => openApiDocument('1.0.0', 'http://127.0.0.1:8080', [...routers, extra], { strict: true })).to.throw(
      /GET \/content-service\/undocumented\/:x is not documented/,
    );
    // Served, the document still comes out (the gateway keeps answering), the route marked.
    const served = openApiDocument('1.0.0', 'http://127.0.0.1:8080', [...routers, extra]) as { paths: Record<string, Record<string, Record<string, unknown>>> };
    expect(served.paths['/content-service/undocumented/{x}'].get['x-undocumented']).to.equal(true);
  });

  it('every operation declares a success or redirect answer, its errors, and security', () => {
    const doc = openApiDocument('1.0.0', 'http://127.0.0.1:8080', routers, { strict: true }) as {
      paths: Record<string, Record<string, { responses: Record<string, unknown>; security: unknown[] }>>;
    };
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const statuses = Object.keys(op.responses).map(Number);
        expect(
          statuses.some((s) => s < 400),
          `${method} ${path}`,
        ).to.equal(true);
        expect(statuses, `${method} ${path}`).to.include.members([400, 500, 503]);
        expect(op.security, `${method} ${path}`).to.be.an('array');
      }
    }
  });
});
