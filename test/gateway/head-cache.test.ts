import { expect } from 'chai';
import type { HeadCache } from '../../src/gateway/head-cache.js';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

describe('gateway: cached heads follow changes made through any gateway (ARCHITECTURE principle 4)', function () {
  this.timeout(30000);
  let a: P;
  let b: P;
  let viaA: Client;
  let viaB: Client;

  before(async () => {
    a = await startTestPlatform({}, ['web', 'actors']);
    b = await startTestPlatform({}, ['web']);
    viaA = await new Client(a.base).login('editor');
    viaB = await new Client(b.base).login('editor');
  });
  after(async () => {
    await b.stop();
    await a.stop();
  });

  /**
   * The contents whose head gateway A's cache drops from now on. Only a write through A itself
   * or A's tail of the event streams drops a head; the writes below go through B, so a drop is
   * the event tail at work. (Without it the cache's 5 s TTL would hide a dead tail: a poll for
   * the new head alone cannot tell the two apart.) How soon it follows is a speed figure, not
   * checked here.
   */
  function dropsOf(p: P): Set<string> {
    const heads = (p.gateway as unknown as { heads: HeadCache }).heads;
    const dropped = new Set<string>();
    const drop = heads.drop.bind(heads);
    heads.drop = (cid: string) => {
      dropped.add(cid);
      drop(cid);
    };
    return dropped;
  }
  const cidOf = (id: string) => id.split('/')[1];

  it('an update through gateway B is seen by gateway A once its event arrives; atLeastRevision forces it', async () => {
    const dropped = dropsOf(a);
    const c = await viaA.create(article('v1'));
    const id = c.json.system.id;
    expect((await viaA.req('GET', `/content/alias/${id}`)).headers.get('location')).to.match(/\/1$/); // cached in A
    dropped.clear();
    const u = await viaB.req('PUT', `/content/alias/${id}`, { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
    expect(u.status).to.equal(200);
    expect((await viaA.req('GET', `/content/alias/${id}?atLeastRevision=2`)).headers.get('location')).to.match(/\/2\?|\/2$/);
    await until(async () => dropped.has(cidOf(id)), 15_000, "gateway A's event tail to drop the updated head");
    expect((await viaA.req('GET', `/content/alias/${id}`)).headers.get('location')).to.match(/\/2$/);
  });

  it('a delete through gateway B makes gateway A answer 404, also for versioned reads', async () => {
    const dropped = dropsOf(a);
    const c = await viaA.create(article('v1'));
    const id = c.json.system.id;
    expect((await viaA.req('GET', `/content/alias/${id}/1`)).status).to.equal(200);
    dropped.clear();
    expect((await viaB.req('DELETE', `/content/alias/${id}`, { headers: { 'If-Match': c.headers.get('etag')! } })).status).to.equal(204);
    await until(async () => dropped.has(cidOf(id)), 15_000, "gateway A's event tail to drop the deleted head");
    expect((await viaA.req('GET', `/content/alias/${id}/1`)).status).to.equal(404);
  });

  it('a head read after its last change is kept: the next read does not go to Redis', async () => {
    const dropped = dropsOf(a);
    const c = await viaA.create(article('v1'));
    const id = c.json.system.id;
    // The commit's own drop and the event tail's: after both, no change of this content is in flight.
    await until(async () => dropped.has(cidOf(id)), 15_000, "gateway A's event tail to drop the new head");
    await new Promise((r) => setTimeout(r, 200));
    const store = (a.gateway as unknown as { heads: { store: { head(cid: string): Promise<unknown> } } }).heads.store;
    const loads: string[] = [];
    const head = store.head.bind(store);
    store.head = (cid: string) => {
      loads.push(cid);
      return head(cid);
    };
    try {
      for (let i = 0; i < 3; i++) expect((await viaA.req('GET', `/content/alias/${id}/1`)).status).to.equal(200);
    } finally {
      store.head = head;
    }
    expect(loads.filter((x) => x === cidOf(id))).to.have.length(1);
  });

  it('a write through a gateway is seen by the same gateway at once', async () => {
    const c = await viaB.create(article('v1'));
    const id = c.json.system.id;
    expect((await viaB.req('GET', `/content/alias/${id}`)).headers.get('location')).to.match(/\/1$/);
    await viaB.req('PUT', `/content/alias/${id}`, { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
    expect((await viaB.req('GET', `/content/alias/${id}`)).headers.get('location')).to.match(/\/2$/);
  });
});
