import { expect } from 'chai';
import { bulk } from '../bulk/ndjson.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';

/**
 * The fifteenth session's second review: a feed page resolves every entry it examines (the
 * revision's snapshot, with the content's aliases, and its events' JSON) before it asks whether
 * the caller may read it. A page that delivers nothing, over entries of content with 50 KB of
 * aliases, made Redis send 17-69 MB for a 136-byte answer, again for every page; and any number of
 * pages of one user could be made at once (24: 1.8 GB of heap). A page now ends once what it
 * examined weighs PAGE_EXAMINE_BYTES (src/gateway/change-source.test.ts), and a user has at most
 * CHANGES_PAGES_PER_USER pages made at once (here).
 */
describe('security: what a feed page that delivers nothing may cost (review 15)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let sports: Client;
  let since: string;

  before(async () => {
    p = await startIsolatedPlatform();
    const editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    since = ((await sports.req('GET', '/changes?since=now')).json as { last: string }).last;
    // 100 aliases of about 500 characters: 50 KB on every event of the content.
    const ops = Array.from({ length: 100 }, (_, i) => ({ _type: 'svcSetAlias', namespace: `cost${'n'.repeat(230)}`, alias: `${'a'.repeat(240)}-${i}` }));
    const created = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', n: -1 } }, operations: ops });
    expect(created.status, created.text.slice(0, 300)).to.equal(201);
    const id: string = created.json.system.id;
    const lines = Array.from({ length: 300 }, (_, i) => `${JSON.stringify({ op: 'update', id, content: { aspects: { t: { n: i } } } })}\n`);
    const r = await bulk(p.base, editor.token!, lines);
    expect(r.answers.every((a) => a.status === 200)).to.equal(true);
  });
  after(async () => p?.stop());

  it('a user has at most CHANGES_PAGES_PER_USER (4) pages made at once: past it 429 with Retry-After', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, () => sports.req('GET', `/changes?since=${since}&limit=1000`)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200).length, statuses.join(',')).to.be.within(4, 11);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused.length, statuses.join(',')).to.be.above(0);
    expect(refused[0].json.statusCode).to.equal('42900');
    expect(refused[0].headers.get('retry-after')).to.match(/^\d+$/);
    // Another user is not held back.
    const reader = await new Client(p.base).login('reader');
    expect((await reader.req('GET', `/changes?since=${since}&limit=10`)).status).to.equal(200);
  });
});
