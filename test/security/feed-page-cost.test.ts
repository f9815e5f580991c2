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
/**
 * A platform on a Redis of its own with one content of 100 aliases of about 500 characters (50 KB
 * on every event) and 300 updates of it: a page over them examines megabytes, so pages asked at
 * once are made at once.
 */
async function costlyFeed(overrides: Record<string, string> = {}) {
  const p = await startIsolatedPlatform(overrides);
  const editor = await new Client(p.base).login('editor');
  const sports = await new Client(p.base).login('sportseditor');
  const since = ((await sports.req('GET', '/changes?since=now')).json as { last: string }).last;
  const ops = Array.from({ length: 100 }, (_, i) => ({ _type: 'svcSetAlias', namespace: `cost${'n'.repeat(230)}`, alias: `${'a'.repeat(240)}-${i}` }));
  const created = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', n: -1 } }, operations: ops });
  expect(created.status, created.text.slice(0, 300)).to.equal(201);
  const id: string = created.json.system.id;
  const lines = Array.from({ length: 300 }, (_, i) => `${JSON.stringify({ op: 'update', id, content: { aspects: { t: { n: i } } } })}\n`);
  const r = await bulk(p.base, editor.token!, lines);
  expect(r.answers.every((a) => a.status === 200)).to.equal(true);
  return { p, editor, sports, since };
}

describe('security: what a feed page that delivers nothing may cost (review 15)', function () {
  this.timeout(300_000);
  let feed: Awaited<ReturnType<typeof costlyFeed>>;

  before(async () => {
    feed = await costlyFeed();
  });
  after(async () => feed?.p.stop());

  it('a user has at most CHANGES_PAGES_PER_USER (4) pages made at once: past it 429 with Retry-After', async () => {
    const { p, sports, since } = feed;
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

describe('security: the process makes at most CHANGES_PAGES_AT_ONCE feed pages at once (review 15)', function () {
  this.timeout(300_000);
  let feed: Awaited<ReturnType<typeof costlyFeed>>;

  before(async () => {
    feed = await costlyFeed({ CHANGES_PAGES_AT_ONCE: '3' });
  });
  after(async () => feed?.p.stop());

  it('past it, pages of users each within their own bound answer 503 with Retry-After; once they are made, a page is made again', async () => {
    const { p, editor, sports, since } = feed;
    const reader = await new Client(p.base).login('reader');
    // Three users, two pages each: each user within CHANGES_PAGES_PER_USER (4), six in all.
    const users = [sports, reader, editor, sports, reader, editor];
    const answers = await Promise.all(users.map((u) => u.req('GET', `/changes?since=${since}&limit=1000`)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200).length, statuses.join(',')).to.be.within(3, 5);
    const refused = answers.filter((a) => a.status === 503);
    expect(refused.length, statuses.join(',')).to.be.above(0);
    expect(
      statuses.every((s) => s === 200 || s === 503),
      statuses.join(','),
    ).to.equal(true);
    expect(refused[0].json.statusCode).to.equal('50300');
    expect(refused[0].headers.get('retry-after')).to.match(/^\d+$/);
    // The bound counts pages being made, not made: the next page of any of them is made.
    expect((await sports.req('GET', `/changes?since=${since}&limit=10`)).status).to.equal(200);
  });
});
