import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

/**
 * Review s23c of f75746f (MAX_TERM_CHARS): the bound holds a content's own `svcSolrDocument`, but
 * the owners of its `svcSecurityContext` go to the engine as `svc_security_context_ss`, a field kept
 * whole (a StrField with docValues: pivot facets take it), and an owner is any string: only the
 * aspect's JSON is bounded (MAX_OWN_ASPECT_CHARS, 64 Ki characters), so two owners of 30,000
 * characters fit. A sportseditor's 70 public articles, each with owners `sports` and two of 30 KB
 * and the same 140 short values of `lvl_ss`, make the pivot `lvl_ss,svc_security_context_ss` of the
 * review's 19,740 nodes, whose second level is again 30 KB terms.
 */
describe('security: owners are terms the engine keeps whole, held to MAX_TERM_CHARS (review s23c)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  const tag = `owners${Date.now()}`;
  const article = (d: number, length: number) => ({
    system: { contentType: 'article' },
    aspects: {
      body: { _type: 'body', title: 'owners' },
      svcSolrDocument: { _type: 'svcSolrDocument', lvl_ss: Array.from({ length: 140 }, (_, i) => `v${i}`), tag_s: tag },
    },
    operations: [
      { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports', `${d}-a-`.padEnd(length, 'x'), `${d}-b-`.padEnd(length, 'x')] } } },
      { _type: 'svcAssignToViews', views: ['svcPublic'] },
    ],
  });

  before(async () => {
    p = await startTestPlatform({ SOLR_URL: await ensureTestSolr() });
  });
  after(async () => p?.stop());

  it('an owner past MAX_TERM_CHARS is refused 400; an anonymous pivot over owners at the bound is answered', async () => {
    const sports = await new Client(p.base).login('sportseditor');
    const long = await sports.create(article(999, 30_000));
    expect(long.status, `a create with owners of 30,000 characters: ${long.text.slice(0, 300)}`).to.equal(400);
    for (let d = 0; d < 70; d++) {
      const r = await sports.create(article(d, 1024));
      expect(r.status, r.text.slice(0, 200)).to.equal(201);
    }
    for (let i = 0; ; i++) {
      const t = await (await fetch(`${p.url}/search-service/content/select?q=tag_s:${tag}&rows=0`)).text();
      if (t.includes('"numFound":70')) break;
      if (i > 240) throw new Error(`not indexed: ${t.slice(0, 300)}`);
      await new Promise((done) => setTimeout(done, 500));
    }
    const q = new URLSearchParams({ q: `tag_s:${tag}`, rows: '0', facet: 'true', 'facet.limit': '140', 'facet.pivot': 'lvl_ss,svc_security_context_ss' });
    const r = await fetch(`${p.url}/search-service/content/select?${q}`);
    const body = await r.text();
    expect(r.status, body.slice(0, 300)).to.equal(200);
  });
});
