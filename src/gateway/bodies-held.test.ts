import { expect } from 'chai';
import type { Principal } from '../content/permissions.js';
import { loadSettings } from '../../config/settings.js';
import { BodiesHeld } from './bodies-held.js';
import { ContentService } from './content-service.js';
import type { BodyAccounting } from './http.js';
import type { ContentServiceDeps } from './content-deps.js';
import { openApiDocument } from './openapi.js';
import { SearchService, type SearchServiceDeps } from './search-service.js';
import { bodyLimitOf, mountedRouters } from './server.js';
import { uwsExchange } from '../../test/support/uws-exchange.js';

describe('BodiesHeld: what the request bodies under way hold (SECURITY.md "Bodies and limits")', () => {
  it('refuses a caller past its share with 429 and the process past its bound with 503, taking nothing then', () => {
    const h = new BodiesHeld(100, 40, 10_000);
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
    const h = new BodiesHeld(100, 40, 10_000);
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
    const h = new BodiesHeld(100, 40, 10_000);
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
    const h = new BodiesHeld(100, 40, 10_000);
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

  it('moved, bytes are checked under the new caller as if they came now: past its share refused, and nothing held then (review 4)', () => {
    const h = new BodiesHeld(100, 40, 10_000);
    expect(h.take('unchecked address:x', 30, 0)).to.equal(undefined);
    expect(h.take('user:u', 40, 0)).to.equal(undefined);
    // Past the user's share: refused (before review 4 moved all the same, and a search's form body was never checked again).
    expect(h.move('unchecked address:x', 'user:u', 30)?.http).to.equal(429);
    expect(h.heldBy('unchecked address:x')).to.equal(0);
    expect(h.heldBy('user:u')).to.equal(40);
    expect(h.total).to.equal(40);
    // Within it: moved.
    expect(h.take('unchecked address:x', 30, 0)).to.equal(undefined);
    expect(h.move('unchecked address:x', 'user:v', 30)).to.equal(undefined);
    expect(h.heldBy('user:v')).to.equal(30);
    expect(h.move('user:v', 'user:v', 30)).to.equal(undefined);
    expect(h.heldBy('user:v')).to.equal(30);
    // Into the anonymous part (a signed-in caller's search), past a quarter of the bound: 503.
    expect(h.take('address:y', 20, 0)).to.equal(undefined);
    expect(h.move('user:v', 'search user:v', 30)?.http).to.equal(503);
    expect(h.total).to.equal(60);
    h.give('user:u', 40);
    h.give('address:y', 20);
    expect(h.total).to.equal(0);
  });
});

describe('BodiesHeld: review 4, a flood of anonymous logins', () => {
  const KiB = 1024;
  const MiB = 1024 * KiB;

  it('what of an anonymous body is held to the process bound only is a quarter of it shared by MAX_IN_FLIGHT requests, at most 64 KiB', () => {
    expect(new BodiesHeld(512 * MiB, 64 * MiB, 10_000).small).to.equal(13_421);
    expect(new BodiesHeld(MiB, MiB, 64).small).to.equal(4 * KiB);
    expect(new BodiesHeld(2 ** 40, 64 * MiB, 10).small).to.equal(64 * KiB);
    expect(new BodiesHeld(MiB, MiB, 1_000_000).small).to.equal(0);
  });

  for (const chunk of [4 * KiB, 60 * KiB, 1000])
    it(`logins of 64 KiB sent ${chunk} bytes at a time, MAX_IN_FLIGHT of them from as many addresses and sent again when refused, hold at most half of the bound: a writer's body and a login of 200 bytes still pass`, () => {
      const IN_FLIGHT = 64;
      const h = new BodiesHeld(MiB, MiB, IN_FLIGHT);
      // Each attacker's request: what it holds, -1 once refused (then sent again).
      const mine: number[] = Array(IN_FLIGHT - 2).fill(0);
      let most = 0;
      let refused = 0;
      for (let round = 0; round < 200; round++)
        for (let a = 0; a < mine.length; a++) {
          // Refused, or whole (then answered: given back): sent again.
          if (mine[a] + chunk > 64 * KiB) h.give(`address:198.51.100.${a}`, mine[a]);
          if (mine[a] < 0 || mine[a] + chunk > 64 * KiB) mine[a] = 0;
          const e = h.take(`address:198.51.100.${a}`, chunk, mine[a]);
          if (e) {
            expect(e.http).to.equal(503);
            h.give(`address:198.51.100.${a}`, mine[a]);
            mine[a] = -1;
            refused++;
          } else mine[a] += chunk;
          most = Math.max(most, h.total);
        }
      expect(refused).to.be.above(0);
      expect(most, 'the most the logins held').to.be.at.most(MiB / 2 + chunk);
      // The two requests in flight left: a signed-in writer's body of 400 KiB and a real login.
      expect(h.take('user:w', 400 * KiB, 0)).to.equal(undefined);
      expect(h.take('address:203.0.113.7', 200, 0)).to.equal(undefined);
    });
});

describe('BodiesHeld in the OpenAPI document', () => {
  /** Stands in for every dependency: the routers are built, never called. */
  const stub: unknown = new Proxy(() => undefined, {
    get: (_t, k) => (k === 'then' ? undefined : stub),
    apply: () => stub,
  });
  /** The OpenAPI document of the routers built on stubs. */
  const documentOfStubs = () => {
    const settings = loadSettings({});
    const deps = new Proxy({ settings } as Record<string, unknown>, { get: (t, k: string) => (k in t ? t[k] : stub) });
    const routers = mountedRouters(
      new ContentService(deps as unknown as ContentServiceDeps).router,
      new SearchService(deps as unknown as SearchServiceDeps).router,
    );
    return openApiDocument('1.0.0', 'http://127.0.0.1:8080', routers) as {
      paths: Record<string, Record<string, { responses: Record<string, { $ref?: string; description?: string }> }>>;
    };
  };

  it('every route with a collected body names the 429 of its bodies held, also one with a 429 of its own; a streamed one does not', () => {
    const doc = documentOfStubs();
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

  it("a login's 413 names its own bound, 64 KiB (LOGIN_MAX_BODY_BYTES), not MAX_BODY_BYTES's; a search's its SEARCH_MAX_BODY_BYTES", () => {
    const doc = documentOfStubs();
    const login = doc.paths['/content-service/security/token'].post.responses[413];
    expect(login.description ?? '').to.include('64 KiB');
    // The largest bodies a login takes fit: two fields of 4,096 characters, each escaped (6 bytes
    // a character), and a renewal's or an external JWT's token of 4,096.
    const field = '\u0001'.repeat(4096);
    for (const body of [{ username: field, password: field }, { username: field, token: 'x'.repeat(4096) }, { token: 'e'.repeat(4096) }])
      expect(Buffer.byteLength(JSON.stringify(body, null, 2))).to.be.below(bodyLimitOf('/content-service/security/token', loadSettings({}).MAX_BODY_BYTES));
    const search = doc.paths['/search-service/{collection}/select'].post.responses[413];
    expect(search.description ?? '').to.include('SEARCH_MAX_BODY_BYTES');
  });
});

describe('Exchange: what its collected body holds, and under whom (bodies-held.ts)', () => {
  const exchange = (bodies: BodyAccounting, token?: string) => uwsExchange(bodies, { headers: token ? { 'x-auth-token': token } : {} });
  const user = (userId: string) => ({ userId }) as unknown as Principal;
  const accounting = (held: BodiesHeld): BodyAccounting => ({ held, callerOf: (_x, u) => (u ? `user:${u.userId}` : 'address:192.0.2.1') });

  it('bodies whose token is not checked yet have a share of their own at their address: an anonymous body there does not fill it, nor one past it pass', async () => {
    const held = new BodiesHeld(1000, 100, 10_000);
    const b = accounting(held);
    const anonymous = exchange(b);
    anonymous.send(90);
    const writer = exchange(b, 'tok');
    writer.send(60); // not refused for the anonymous 90
    const other = exchange(b, 'tok2');
    other.send(30);
    other.send(30, true); // the unchecked share: 60 + 60 > 100
    await other.x.body().then(
      () => expect.fail('not refused'),
      (e: { http: number }) => expect(e.http).to.equal(429),
    );
    writer.x.countUnder(user('w'));
    expect(held.heldBy('user:w')).to.equal(60);
    writer.send(10, true);
    expect(held.heldBy('user:w')).to.equal(70);
    for (const e of [anonymous, writer, other]) e.x.release();
    expect(held.total).to.equal(0);
  });

  it('a handler that reads the body without checking a token holds it to the address share; parsed twice, it is counted once; chunks after the end are dropped', async () => {
    const held = new BodiesHeld(1000, 100, 10_000);
    const b = accounting(held);
    const anonymous = exchange(b);
    anonymous.send(90);
    const login = exchange(b, 'garbage');
    const body = login.x.body();
    login.send(20, true);
    await body.then(
      () => expect.fail('not refused'),
      (e: { http: number }) => expect(e.http).to.equal(429),
    );
    login.x.release();
    const w = exchange(b, 'tok');
    w.x.countUnder(user('w'));
    w.sendText('[1,2,3]');
    expect(await w.x.json(user('w'))).to.deep.equal([1, 2, 3]);
    const weighed = held.heldBy('user:w');
    expect(weighed).to.equal(7 + 64 * 4);
    expect(await w.x.json(user('w'))).to.deep.equal([1, 2, 3]);
    expect(held.heldBy('user:w')).to.equal(weighed);
    w.x.release();
    w.send(50);
    anonymous.x.release();
    expect(held.total).to.equal(0);
  });

  it('a body whose bytes came while its token was looked up is checked under its user when the token is: past its share, 429 from the body, nothing held, the rest dropped (review 4)', async () => {
    const held = new BodiesHeld(1000, 100, 10_000);
    const b = accounting(held);
    const first = exchange(b, 'tok');
    first.x.countUnder(user('w'));
    first.send(50);
    const second = exchange(b, 'tok');
    second.send(60, true); // whole, in the unchecked share, before its token is checked
    second.x.countUnder(user('w')); // 50 + 60 > 100
    expect(held.heldBy('user:w')).to.equal(50);
    await second.x.body().then(
      () => expect.fail('not refused'),
      (e: { http: number }) => expect(e.http).to.equal(429),
    );
    await second.x.json(user('w')).then(
      () => expect.fail('not refused'),
      (e: { http: number }) => expect(e.http).to.equal(429),
    );
    second.x.release();
    expect(held.total).to.equal(50);
    // One still arriving: refused alike, and what comes after is not held.
    const third = exchange(b, 'tok');
    third.send(60);
    third.x.countUnder(user('w'));
    third.send(30);
    third.send(10, true);
    await third.x.body().then(
      () => expect.fail('not refused'),
      (e: { http: number }) => expect(e.http).to.equal(429),
    );
    expect(held.total).to.equal(50);
    third.x.release();
    first.x.release();
    expect(held.total).to.equal(0);
  });

  it('a chunk that comes after the answer touches no uWS response (uWS throws then, and the process stops): the rest of the body is dropped', async () => {
    // As uWS does: data after a successful answer, and any use of the response then throws.
    const held = new BodiesHeld(1000, 100, 10_000);
    const { x, send } = uwsExchange(
      { held, callerOf: (e, u) => (u ? `user:${u.userId}` : `address:${e.clientAddress(null)}`) },
      { url: '/content-service/nothing' },
    );
    send(0); // uWS hands an empty chunk as the headers come
    x.sendJson(404, { message: 'no' });
    expect(() => send(5)).to.not.throw();
    send(5, true);
    await x.whole();
    expect(held.total).to.equal(0);
    x.release();
    expect(held.total).to.equal(0);
  });
});
