import http from 'node:http';
import { expect } from 'chai';
import { SEARCH_MAX_ANSWER_BYTES } from '../../src/adapters/search-engine.js';
import { type Client, Client as PlatformClient, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

/** An anonymous GET through node:http, its body counted and dropped (no parse here). */
function rawGet(url: string): Promise<{ status: number; bytes: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let bytes = 0;
        let head = '';
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          if (head.length < 1000) head += c.toString('utf8', 0, Math.min(c.length, 1000));
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, body: head }));
      })
      .on('error', reject);
  });
}

/**
 * The twenty-third session's review: the gateway held a search's whole answer from the engine, and
 * nothing bounded its size but `rows` (1,000) and what the documents store: a grouped search
 * repeats a document once per `group.field` (up to MAX_PARAMETER_REPEATS, 100), and
 * MAX_GROUPED_DOCUMENTS (10,000) let ten times `rows` documents through. Measured on the old code
 * with one public article of the sportseditor whose own `svcSolrDocument` holds a 4 MB `big_t`
 * (any writer may publish its own content; `svc_text` alone holds up to 100,000 characters of
 * any article): an anonymous GET of 1.9 KB, `q=…&rows=1&fl=big_t&group=true&group.limit=1` with
 * 100 `group.field=g<i>_s`, answered 405 MB in 4.8 s (50 fields: 203 MB); with 20 such articles,
 * four anonymous `rows=20&fl=big_t` searches at once answered 81 MB each and added 950 MB to the
 * gateway's RSS; past V8's longest string (512 Mi characters) the answer fails. Now an answer is
 * read up to SEARCH_MAX_ANSWER_BYTES (64 MiB); past it the engine's answer is cancelled and the
 * search answers 413.
 */
describe('security: what one search may make the gateway hold of the engine’s answer (review s23)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let sports: Client;
  const tag = `answer${Date.now()}`;

  before(async () => {
    const solr = await ensureTestSolr();
    p = await startTestPlatform({ SOLR_URL: solr });
    sports = await new PlatformClient(p.base).login('sportseditor');
    const r = await sports.create({
      system: { contentType: 'article' },
      aspects: {
        body: { _type: 'body', title: 'big' },
        // 2 MB stored in the search document, words the text field takes
        svcSolrDocument: { _type: 'svcSolrDocument', big_t: 'lorem ipsum dolor sit amet '.repeat(75_000), tag_s: tag },
      },
      operations: [
        { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } },
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
      ],
    });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    for (let i = 0; i < 120; i++) {
      const s = await rawGet(`${p.url}/search-service/content/select?q=tag_s:${tag}&rows=0`);
      if (s.body.includes('"numFound":1')) return;
      await new Promise((done) => setTimeout(done, 250));
    }
    throw new Error('the article was not indexed');
  });
  after(async () => p?.stop());

  const grouped = (fields: number) => {
    const q = new URLSearchParams({ q: `tag_s:${tag}`, rows: '1', fl: 'big_t', group: 'true', 'group.limit': '1' });
    for (let i = 0; i < fields; i++) q.append('group.field', `g${i}_s`);
    return rawGet(`${p.url}/search-service/content/select?${q}`);
  };

  it(`an anonymous grouped search repeating one 2 MB document 50 times answers 413, not 100 MB (SEARCH_MAX_ANSWER_BYTES ${SEARCH_MAX_ANSWER_BYTES})`, async () => {
    const r = await grouped(50);
    // Old code: 200 with 101 MB.
    expect(r.status, `${r.bytes} bytes answered`).to.equal(413);
    expect(r.bytes).to.be.below(10_000);
    expect(r.body).to.include('SEARCH_MAX_ANSWER_BYTES');
  });

  it('answers within the bound are whole, as before', async () => {
    const one = await rawGet(`${p.url}/search-service/content/select?q=tag_s:${tag}&fl=big_t`);
    expect(one.status).to.equal(200);
    expect(one.bytes).to.be.above(2_000_000);
    const twenty = await grouped(20);
    expect(twenty.status).to.equal(200);
    expect(twenty.bytes).to.be.above(40_000_000);
  });
});
