import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';

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

  async function within<T>(ms: number, f: () => Promise<T>, ok: (v: T) => boolean): Promise<number> {
    const start = Date.now();
    for (;;) {
      if (ok(await f())) return Date.now() - start;
      if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  it('an update through gateway B is seen by gateway A within the event latency; atLeastRevision forces it', async () => {
    const c = await viaA.create(article('v1'));
    const id = c.json.system.id;
    expect((await viaA.req('GET', `/content/alias/${id}`)).headers.get('location')).to.match(/\/1$/); // cached in A
    const u = await viaB.req('PUT', `/content/alias/${id}`, { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
    expect(u.status).to.equal(200);
    expect((await viaA.req('GET', `/content/alias/${id}?atLeastRevision=2`)).headers.get('location')).to.match(/\/2\?|\/2$/);
    const ms = await within(1000, () => viaA.req('GET', `/content/alias/${id}`), (r) => /\/2$/.test(r.headers.get('location') ?? ''));
    expect(ms).to.be.below(1000);
  });

  it('a delete through gateway B makes gateway A answer 404, also for versioned reads', async () => {
    const c = await viaA.create(article('v1'));
    const id = c.json.system.id;
    expect((await viaA.req('GET', `/content/alias/${id}/1`)).status).to.equal(200);
    expect((await viaB.req('DELETE', `/content/alias/${id}`, { headers: { 'If-Match': c.headers.get('etag')! } })).status).to.equal(204);
    await within(1000, () => viaA.req('GET', `/content/alias/${id}/1`), (r) => r.status === 404);
  });

  it('a write through a gateway is seen by the same gateway at once', async () => {
    const c = await viaB.create(article('v1'));
    const id = c.json.system.id;
    expect((await viaB.req('GET', `/content/alias/${id}`)).headers.get('location')).to.match(/\/1$/);
    await viaB.req('PUT', `/content/alias/${id}`, { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
    expect((await viaB.req('GET', `/content/alias/${id}`)).headers.get('location')).to.match(/\/2$/);
  });
});
