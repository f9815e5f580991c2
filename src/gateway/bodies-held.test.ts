import { expect } from 'chai';
import { loadSettings } from '../../config/settings.js';
import { BodiesHeld } from './bodies-held.js';
import { ContentService } from './content-service.js';
import type { ContentServiceDeps } from './content-deps.js';
import { openApiDocument } from './openapi.js';
import { SearchService, type SearchServiceDeps } from './search-service.js';
import { mountedRouters } from './server.js';

describe('BodiesHeld: what the request bodies under way hold (SECURITY.md "Bodies and limits")', () => {
  it('refuses a caller past its share with 429 and the process past its bound with 503, taking nothing then', () => {
    const h = new BodiesHeld(100, 40);
    expect(h.take('a', 30, 0)).to.equal(undefined);
    expect(h.take('a', 20, 0)?.http).to.equal(429);
    expect(h.heldBy('a')).to.equal(30);
    expect(h.take('b', 40, 0)).to.equal(undefined);
    expect(h.take('c', 25, 0)).to.equal(undefined);
    expect(h.take('d', 10, 0)?.http).to.equal(503);
    expect(h.total).to.equal(95);
    expect(h.heldBy('d')).to.equal(0);
  });

  it('never refuses a request for what it holds itself: one body larger than both bounds passes while nothing else is held', () => {
    const h = new BodiesHeld(100, 40);
    let mine = 0;
    for (let i = 0; i < 10; i++) {
      expect(h.take('a', 30, mine)).to.equal(undefined);
      mine += 30;
    }
    expect(h.total).to.equal(300);
    // Anything else now waits for it.
    expect(h.take('a', 1, 0)?.http).to.equal(429);
    expect(h.take('b', 1, 0)?.http).to.equal(503);
    h.give('a', mine);
    expect(h.total).to.equal(0);
    expect(h.take('b', 1, 0)).to.equal(undefined);
  });

  it('gives back to zero and forgets the caller', () => {
    const h = new BodiesHeld(100, 40);
    h.take('a', 10, 0);
    h.take('a', 5, 0);
    h.give('a', 10);
    expect(h.heldBy('a')).to.equal(5);
    h.give('a', 5);
    h.give('a', 0);
    expect(h.heldBy('a')).to.equal(0);
    expect(h.total).to.equal(0);
  });
});

describe('BodiesHeld: review', () => {
  it('never refuses nothing more: the empty last chunk of a body, a parsed weight already held', () => {
    const h = new BodiesHeld(100, 40);
    // One request alone past the share (it is never refused for what it holds itself).
    let mine = 0;
    for (let i = 0; i < 3; i++) {
      expect(h.take('a', 30, mine)).to.equal(undefined);
      mine += 30;
    }
    expect(h.take('a', 0, 0)).to.equal(undefined);
    expect(h.take('b', 0, 0)).to.equal(undefined);
    expect(h.total).to.equal(90);
    expect(h.heldBy('b')).to.equal(0);
  });

  it('a caller not known yet is held to the process bound only; moved, its bytes count under its user, refused for nothing', () => {
    const h = new BodiesHeld(100, 40);
    expect(h.take('address:x', 40, 0)).to.equal(undefined);
    // Another request at the address whose token is not checked yet: not refused for the address's share.
    expect(h.take('address:x', 30, 0, true)).to.equal(undefined);
    expect(h.take('address:x', 40, 30, true)?.http).to.equal(503);
    h.move('address:x', 'user:u', 30);
    expect(h.heldBy('address:x')).to.equal(40);
    expect(h.heldBy('user:u')).to.equal(30);
    expect(h.total).to.equal(70);
    h.move('user:u', 'user:u', 30);
    expect(h.heldBy('user:u')).to.equal(30);
    h.give('user:u', 30);
    h.give('address:x', 40);
    expect(h.total).to.equal(0);
  });
});

describe('BodiesHeld in the OpenAPI document', () => {
  /** Stands in for every dependency: the routers are built, never called. */
  const stub: unknown = new Proxy(() => undefined, {
    get: (_t, k) => (k === 'then' ? undefined : stub),
    apply: () => stub,
  });

  it('every route with a collected body names the 429 of its bodies held, also one with a 429 of its own; a streamed one does not', () => {
    const settings = loadSettings({});
    const deps = new Proxy({ settings } as Record<string, unknown>, { get: (t, k: string) => (k in t ? t[k] : stub) });
    const routers = mountedRouters(
      new ContentService(deps as unknown as ContentServiceDeps).router,
      new SearchService(deps as unknown as SearchServiceDeps).router,
    );
    const doc = openApiDocument('1.0.0', 'http://127.0.0.1:8080', routers) as {
      paths: Record<string, Record<string, { responses: Record<string, { $ref?: string; description?: string }> }>>;
    };
    const named: string[] = [];
    const unnamed: string[] = [];
    for (const [path, item] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(item)) {
        if (method === 'get' || method === 'head' || !op.responses) continue;
        const a = op.responses[429];
        const says = a?.$ref === '#/components/responses/BodiesHeld' || (a?.description ?? '').includes('BODIES_HELD_PER_CALLER_BYTES');
        (says ? named : unnamed).push(`${method} ${path}`);
      }
    expect(named).to.include.members(['post /content-service/security/token', 'post /search-service/{collection}/select', 'post /content-service/content']);
    expect(unnamed.sort()).to.deep.equal(
      [
        'post /content-service/bulk',
        'post /file-service/file/{space}',
        'post /file-service/file/{space}/{host}',
        'post /file-service/file/{space}/{host}/{path}',
      ].sort(),
    );
  });
});
