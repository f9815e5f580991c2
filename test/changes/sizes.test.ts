import { expect } from 'chai';
import http from 'node:http';
import { MAX_ALIAS_CHARS } from '../../src/content/aliases.js';
import { PAGE_MAX_CHARS } from '../../src/gateway/change-source.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * What one content's events may weigh (the fourteenth session's review): every feed event carries
 * the content's aliases (CONTRACT §13), and a view change fans out to every symbolic view that
 * follows it. A content's aliases hold at most MAX_ALIAS_CHARS characters; a page ends once its
 * JSON passes PAGE_MAX_CHARS, whatever `limit` allows, and the next page goes on without a gap.
 */
describe('change feed: the size of what one content makes', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;
  before(async () => {
    p = await startTestPlatform();
    c = await new Client(p.base).login('editor');
  });
  after(async () => p?.stop());

  /** 100 alias operations of about 500 characters each (50 KB a write). */
  const aliasOps = (run: string, write: number) =>
    Array.from({ length: 100 }, (_, i) => ({ _type: 'svcSetAlias', namespace: `big${run}${'n'.repeat(230)}`, alias: `${'a'.repeat(240)}-${write}-${i}` }));

  it("a write that would take a content's aliases past MAX_ALIAS_CHARS answers 400 and changes nothing; a page ends past PAGE_MAX_CHARS, and paging goes on without a gap", async () => {
    const run = Date.now().toString(36);
    const since = ((await c.req('GET', '/changes?since=now')).json as { last: string }).last;
    const created = await c.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', n: -1 } }, operations: aliasOps(run, 0) });
    expect(created.status, created.text).to.equal(201);
    const id: string = created.json.system.id;
    // 50 KB of aliases now; another 50 KB would pass 64 KiB.
    const refused = await c.update(id, { aspects: { body: { _type: 'body', n: -2 } }, operations: aliasOps(run, 1) }, created.headers.get('etag'));
    expect(refused.status, refused.text).to.equal(400);
    expect((refused.json as unknown as { extraInfo: { limit: number } }).extraInfo.limit).to.equal(MAX_ALIAS_CHARS);
    const after = await c.readContent(id);
    expect(after.headers.get('etag'), 'nothing changed').to.equal(created.headers.get('etag'));
    // A taken alias of the refused write is free: another content may take it.
    const other = await c.create({ system: { contentType: 'article' }, aspects: {}, operations: [aliasOps(run, 1)[0]] });
    expect(other.status, other.text).to.equal(201);

    // 180 updates: 181 events of about 51 KB each (9 MB), more than one page may hold.
    let etag = created.headers.get('etag');
    for (let n = 0; n < 180; n++) {
      const u = await c.update(id, { aspects: { body: { _type: 'body', n } } }, etag);
      expect(u.status, u.text).to.equal(200);
      etag = u.headers.get('etag');
    }
    const revisions: number[] = [];
    let cursor = since;
    let pages = 0;
    for (;;) {
      const page = await c.req('GET', `/changes?since=${cursor}&limit=1000&types=article`);
      expect(page.status).to.equal(200);
      expect(page.text.length, 'a page ends once it passes PAGE_MAX_CHARS').to.be.below(PAGE_MAX_CHARS + 200_000);
      const body = page.json as { changes: { id: string; revision: number }[]; last: string };
      for (const e of body.changes) if (e.id === id) revisions.push(e.revision);
      cursor = body.last;
      pages++;
      if (!body.changes.length) break;
    }
    expect(pages, 'more than one page with events').to.be.greaterThan(2);
    expect(revisions, 'every event once, in order').to.deep.equal(Array.from({ length: 181 }, (_, i) => i + 1));
  });

  // A page's JSON is written into one buffer that the next page reuses (`pageBody`): what uWS has
  // not sent yet must be its own copy. A client that reads a page of 7 MB slowly, while other
  // pages are made and sent, still gets its own page whole.
  it('a page read slowly is not overwritten by the pages after it: a paused reader gets the same events as a prompt one', async () => {
    const run = `s${Date.now().toString(36)}`;
    const since = ((await c.req('GET', '/changes?since=now')).json as { last: string }).last;
    const ops = Array.from({ length: 100 }, (_, i) => ({ _type: 'svcSetAlias', namespace: `${run}${'n'.repeat(230)}`, alias: `${'a'.repeat(240)}-${i}` }));
    const created = await c.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', n: -1 } }, operations: ops });
    expect(created.status, created.text).to.equal(201);
    const id: string = created.json.system.id;
    let etag = created.headers.get('etag');
    for (let n = 0; n < 140; n++) {
      const u = await c.update(id, { aspects: { body: { _type: 'body', n } } }, etag);
      expect(u.status, u.text).to.equal(200);
      etag = u.headers.get('etag');
    }
    const url = new URL(`${p.base}/changes?since=${since}&limit=1000`);
    const revisionsOf = (text: string) => (JSON.parse(text) as { changes: { revision: number }[] }).changes.map((e) => e.revision);
    // Asked first, read last.
    const slow = new Promise<string>((resolve, reject) => {
      const req = http.get(url, { headers: { 'X-Auth-Token': c.token! } }, (res) => {
        res.pause();
        setTimeout(() => {
          const parts: Buffer[] = [];
          res.on('data', (b: Buffer) => parts.push(b));
          res.on('end', () => resolve(Buffer.concat(parts).toString()));
          res.resume();
        }, 1500);
      });
      req.on('error', reject);
    });
    await new Promise((r) => setTimeout(r, 300));
    // Other pages meanwhile, of other lengths and content.
    for (const q of ['limit=7', 'limit=1000&kinds=create', 'limit=1000']) {
      const other = await c.req('GET', `/changes?since=${since}&${q}`);
      expect(other.status).to.equal(200);
    }
    const prompt = await c.req('GET', `/changes?since=${since}&limit=1000`);
    const text = await slow;
    expect(text.length, 'a page of several megabytes').to.be.above(4_000_000);
    expect(revisionsOf(text)).to.deep.equal(revisionsOf(prompt.text));
  });
});
