import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

/**
 * The twenty-third session's review: a pivot facet's nodes repeat the terms of its levels, each
 * value of the second level once under every value of the first. SEARCH_MAX_FACET_VALUES (20,000)
 * counts the nodes, not what they weigh, and a string term could hold up to 32 KB (Lucene's
 * limit) in a writer's own `svcSolrDocument` (`*_ss`).
 *
 * Measured on the old code: a sportseditor publishes 3 articles, each with 300 distinct values of
 * 30 KB in `big_ss` (9 MB a create, 27 MB in all). One anonymous GET of
 * `q=…&rows=0&facet=true&facet.pivot=big_ss,big_ss&facet.limit=140` (140 + 140 × 140 = 19,740
 * nodes, within the bound) made the embedded Solr (512 MB heap) throw OutOfMemoryError after 6.6 s
 * and the platform answer 500. Now a value of a field kept whole holds at most MAX_TERM_CHARS
 * (1,024) characters: such a create answers 400 naming the field, and the same pivot over values
 * at the bound is answered.
 */
describe('security: a pivot facet of long terms does not run the engine out of memory (review s23)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  const tag = `pivot${Date.now()}`;
  const article = (d: number, length: number) => ({
    system: { contentType: 'article' },
    aspects: {
      body: { _type: 'body', title: 'pivot' },
      svcSolrDocument: { _type: 'svcSolrDocument', big_ss: Array.from({ length: 300 }, (_, i) => `${d}-${i}-`.padEnd(length, 'x')), tag_s: tag },
    },
    operations: [
      { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } },
      { _type: 'svcAssignToViews', views: ['svcPublic'] },
    ],
  });

  before(async () => {
    p = await startTestPlatform({ SOLR_URL: await ensureTestSolr() });
  });
  after(async () => p?.stop());

  it('a value of a field kept whole past MAX_TERM_CHARS is refused 400 naming the field; nothing is stored', async () => {
    const sports = await new Client(p.base).login('sportseditor');
    const r = await sports.create(article(9, 30_000));
    expect(r.status, r.text.slice(0, 300)).to.equal(400);
    expect(r.json.message).to.contain('big_ss').and.to.contain('MAX_TERM_CHARS');
    const one = await sports.create(article(9, 1025));
    expect(one.status).to.equal(400);
  });

  it('an anonymous two-level pivot of 19,740 nodes over values at the bound is answered', async () => {
    const sports = await new Client(p.base).login('sportseditor');
    for (let d = 0; d < 3; d++) {
      const r = await sports.create(article(d, 1024));
      expect(r.status, r.text.slice(0, 200)).to.equal(201);
    }
    for (let i = 0; ; i++) {
      const t = await (await fetch(`${p.url}/search-service/content/select?q=tag_s:${tag}&rows=0`)).text();
      if (t.includes('"numFound":3')) break;
      if (i > 120) throw new Error('not indexed');
      await new Promise((done) => setTimeout(done, 500));
    }
    const q = new URLSearchParams({ q: `tag_s:${tag}`, rows: '0', facet: 'true', 'facet.limit': '140', 'facet.pivot': 'big_ss,big_ss' });
    const r = await fetch(`${p.url}/search-service/content/select?${q}`);
    const body = await r.text();
    expect(r.status, body.slice(0, 300)).to.equal(200);
    const pivot = (JSON.parse(body) as { facet_counts: { facet_pivot: Record<string, { pivot?: unknown[] }[]> } }).facet_counts.facet_pivot['big_ss,big_ss'];
    expect(pivot).to.have.length(140);
    expect(pivot[0].pivot).to.have.length(140);
  });
});
