import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

/**
 * Review s23c of f75746f (MAX_TERM_CHARS): the bound holds the values of a content's own
 * `svcSolrDocument`, not the labels of its child documents, and a child's `id` (a StrField with
 * docValues: facets and pivots take it) is the version's id followed by the labels of every child
 * above it: 29 nested labels of 1,000 characters over 140 leaves make 140 ids of 30 KB, in a body
 * of 300 KB. A sportseditor writes one such article; children carry no visibility fields, so every
 * caller who may read all content (Read on * in __global__: the reader account) sees them, and one
 * `facet.pivot=lvl_ss,id&facet.limit=140` is the review's pivot of 19,740 nodes over 30 KB terms.
 * Now a child document's path (its labels and list indexes below the content) holds at most
 * MAX_TERM_CHARS characters.
 */
describe('security: a child document path is held to MAX_TERM_CHARS (review s23c)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  const tag = `kids${Date.now()}`;
  const leaf = () => ({ lvl_ss: Array.from({ length: 140 }, (_, i) => `v${i}`), tag_s: tag });
  /** `depth` nested labels of `length` characters above 140 leaves labelled alike. */
  const nested = (depth: number, length: number) => {
    let doc: Record<string, unknown> = {};
    for (let i = 0; i < 140; i++) doc[`leaf${i}-`.padEnd(length, 'x')] = leaf();
    for (let d = depth - 1; d >= 0; d--) doc = { [`n${d}-`.padEnd(length, 'x')]: doc };
    return doc;
  };
  const article = (doc: Record<string, unknown>) => ({
    system: { contentType: 'article' },
    aspects: { body: { _type: 'body', title: 'kids' }, svcSolrDocument: { _type: 'svcSolrDocument', tag_s: tag, ...doc } },
    operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
  });

  before(async () => {
    p = await startTestPlatform({ SOLR_URL: await ensureTestSolr() });
  });
  after(async () => p?.stop());

  it('a child document whose path passes MAX_TERM_CHARS is refused 400 naming it; a reader of everything pivots over child ids within it', async () => {
    const sports = await new Client(p.base).login('sportseditor');
    const deep = await sports.create(article(nested(29, 1000)));
    expect(deep.status, `child ids of 30 KB: ${deep.text.slice(0, 300)}`).to.equal(400);
    expect(deep.json.message).to.contain('MAX_TERM_CHARS');
    // a single label past the bound, too
    expect((await sports.create(article({ ['k'.repeat(1100)]: leaf() }))).status).to.equal(400);
    // within it: 140 leaves under labels of 400 characters (paths of about 810)
    const ok = await sports.create(article(nested(1, 400)));
    expect(ok.status, ok.text.slice(0, 300)).to.equal(201);
    const reader = await new Client(p.base).login('reader');
    for (let i = 0; ; i++) {
      const t = await reader.search({ q: `tag_s:${tag}`, rows: '0' });
      if (t.text.includes('"numFound":141')) break;
      if (i > 240) throw new Error(`not indexed: ${t.text.slice(0, 300)}`);
      await new Promise((done) => setTimeout(done, 500));
    }
    const r = await reader.search({ q: `tag_s:${tag}`, rows: '0', facet: 'true', 'facet.limit': '140', 'facet.pivot': 'lvl_ss,id' });
    expect(r.status, r.text.slice(0, 300)).to.equal(200);
  });
});
