import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

/**
 * Left open by the twenty-third session's review (skipped: the bound is a design choice). A pivot
 * facet's nodes repeat the terms of its levels: each value of the second level appears once under
 * every value of the first. SEARCH_MAX_FACET_VALUES (20,000) counts the nodes, not what they
 * weigh, and a string term may hold up to 32 KB (Lucene's limit), in a writer's own
 * `svcSolrDocument` (`*_ss`) or in the tag paths the platform builds from a categorization.
 *
 * Measured: a sportseditor publishes 3 articles, each with 300 distinct values of 30 KB in `big_ss`
 * (9 MB a create, 27 MB in all). One anonymous GET of
 * `q=…&rows=0&facet=true&facet.pivot=big_ss,big_ss&facet.limit=140` (140 + 140 × 140 = 19,740
 * nodes, within the bound) made the embedded Solr (512 MB heap) throw OutOfMemoryError after 6.6 s
 * and the platform answer 500; at `facet.limit=60` Solr answered 110 MB (the gateway now answers
 * 413, SEARCH_MAX_ANSWER_BYTES, but Solr still builds it). What would bound it: fewer pivot nodes
 * past the first level (a bound of their own, about 2,000: 64 MB at 32 KB a term), or a bound on
 * the length of string values at the write (the writer's own fields and the tag paths).
 */
describe.skip('security: a pivot facet of long terms does not run the engine out of memory (review s23, open)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  const tag = `pivot${Date.now()}`;

  before(async () => {
    p = await startTestPlatform({ SOLR_URL: await ensureTestSolr() });
    const sports = await new Client(p.base).login('sportseditor');
    for (let d = 0; d < 3; d++) {
      const r = await sports.create({
        system: { contentType: 'article' },
        aspects: {
          body: { _type: 'body', title: 'pivot' },
          svcSolrDocument: { _type: 'svcSolrDocument', big_ss: Array.from({ length: 300 }, (_, i) => `${d}-${i}-${'x'.repeat(30_000)}`), tag_s: tag },
        },
        operations: [
          { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } },
          { _type: 'svcAssignToViews', views: ['svcPublic'] },
        ],
      });
      expect(r.status, r.text.slice(0, 200)).to.equal(201);
    }
    for (let i = 0; i < 120; i++) {
      const t = await (await fetch(`${p.url}/search-service/content/select?q=tag_s:${tag}&rows=0`)).text();
      if (t.includes('"numFound":3')) return;
      await new Promise((done) => setTimeout(done, 500));
    }
    throw new Error('not indexed');
  });
  after(async () => p?.stop());

  it('an anonymous two-level pivot of 19,740 nodes over 27 MB of terms never answers 5xx', async () => {
    const q = new URLSearchParams({ q: `tag_s:${tag}`, rows: '0', facet: 'true', 'facet.limit': '140', 'facet.pivot': 'big_ss,big_ss' });
    const r = await fetch(`${p.url}/search-service/content/select?${q}`);
    await r.arrayBuffer();
    // Current code: 500 after 6.6 s, the engine's OutOfMemoryError.
    expect(r.status).to.be.below(500);
  });
});
