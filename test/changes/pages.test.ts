import { expect } from 'chai';
import { article, Client, startTestPlatform } from '../support/platform.js';

/** CONTRACT §13: pages of the change feed, their cursors, filters and refusals. */
describe('change feed pages (CONTRACT §13)', () => {
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;

  before(async () => {
    p = await startTestPlatform();
    c = await new Client(p.base).login('editor');
  });
  after(async () => p.stop());

  it('answers 401 without a token, 400 for bad parameters and cursors', async () => {
    expect((await c.req('GET', '/changes', { token: null })).status).to.equal(401);
    for (const q of [
      'kinds=created',
      'limit=0',
      'limit=1001',
      'feed=poll',
      'since=!!',
      'since=AAAA',
      'bogus=1',
      'types=a%20b',
      'timeout=70000',
      'kinds=create&kinds=bogus',
      'since=now&since=x',
      'limit=5&limit=6',
    ]) {
      const r = await c.req('GET', `/changes?${q}`);
      expect(r.status, `${q}: ${r.text}`).to.equal(400);
      expect(r.json.statusCode).to.equal('40000');
    }
    expect((await c.req('POST', '/changes')).status).to.equal(405);
  });

  it('every commit once, in order, over pages; since=now; kinds, types and views filters', async () => {
    const now = await c.req('GET', '/changes?since=now');
    expect(now.status, now.text).to.equal(200);
    expect(now.json.changes).to.deep.equal([]);
    const start: string = now.json.last;
    const a = await c.create(article('a'));
    const id: string = a.json.system.id;
    const u = await c.update(id, { aspects: { body: { _type: 'body', title: 'a2' } } }, a.headers.get('etag'));
    expect(u.status, u.text).to.equal(200);
    const v = await c.putView('svcPublic', { version: u.json.system!.version }, u.headers.get('etag')!);
    expect(v.status, v.text).to.equal(200);
    const other = await c.create({ system: { contentType: 'gallery' }, aspects: {} });
    expect(other.status).to.equal(201);
    const d = await c.remove(id, v.headers.get('etag')!);
    expect(d.status).to.equal(204);

    const all: { kind: string; id: string; revision: number; cursor: string }[] = [];
    let since = start;
    for (let i = 0; i < 10; i++) {
      const r = await c.req('GET', `/changes?since=${since}&limit=2`);
      expect(r.status, r.text).to.equal(200);
      all.push(...r.json.changes);
      since = r.json.last;
      if (!r.json.changes.length) break;
    }
    const mine = all.filter((e) => e.id === id);
    expect(mine.map((e) => [e.kind, e.revision])).to.deep.equal([
      ['create', 1],
      ['update', 2],
      ['view', 3],
      ['delete', 4],
    ]);
    const view = mine[2] as unknown as Record<string, unknown>;
    expect(view.view).to.equal('svcPublic');
    expect(view.action).to.equal('set');
    expect(view.version).to.equal(u.json.system!.version);
    const del = mine[3] as unknown as Record<string, unknown>;
    expect(del.views).to.include('svcPublic');
    expect(del.committer).to.equal('editor');
    expect(Date.parse(del.time as string)).to.be.greaterThan(0);
    expect(all.every((e) => e.cursor.length <= 2048 && /^[A-Za-z0-9_-]+$/.test(e.cursor))).to.equal(true);

    const kinds = await c.req('GET', `/changes?since=${start}&kinds=delete,view`);
    expect(kinds.json.changes.map((e: { kind: string }) => e.kind)).to.deep.equal(['view', 'delete']);
    const types = await c.req('GET', `/changes?since=${start}&types=gallery`);
    expect(types.json.changes.map((e: { id: string }) => e.id)).to.deep.equal([other.json.system.id]);
    const views = await c.req('GET', `/changes?since=${start}&views=svcPublic`);
    expect(views.json.changes.map((e: { kind: string }) => e.kind)).to.deep.equal(['view', 'delete']);
    // Resuming from an event's own cursor gives what follows it.
    const resumed = await c.req('GET', `/changes?since=${mine[1].cursor}`);
    expect(resumed.json.changes.filter((e: { id: string }) => e.id === id).map((e: { kind: string }) => e.kind)).to.deep.equal(['view', 'delete']);
    // Absent since: from the oldest kept (other suites' events may come first).
    let found = false;
    let from = '';
    for (let i = 0; i < 100 && !found; i++) {
      const page = await c.req('GET', `/changes?limit=1000${from ? `&since=${from}` : ''}`);
      expect(page.status).to.equal(200);
      found = page.json.changes.some((e: { id: string }) => e.id === id);
      from = page.json.last;
      if (!page.json.changes.length) break;
    }
    expect(found).to.equal(true);
  });
});
