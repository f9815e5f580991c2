import { expect } from 'chai';
import { startFakeSolr, type FakeSolr } from '../support/fake-solr.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * The seventeenth session's second review: `inlineData` read every result's head and version at
 * once, whatever their size, and answered them in one JSON string: 1,000 public contents of 9 MB
 * made one anonymous search hold gigabytes, and past V8's longest string the answer was a 500. A
 * search now reads at most SEARCH_INLINE_MAX_BYTES of stored content; the results past it carry
 * `_content: null` and `_contentOmitted: true`. The engine is the harness's fake Solr answering
 * the ids of the public versions, as Solr would answer an anonymous `q=*:*` over them (the gateway
 * reads only each document's `id`, and decides what the caller may read itself).
 */
describe('security: what one search with inlineData may read (review 17)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let fake: FakeSolr;
  let sports: Client;
  const ids: string[] = [];
  const BIG = 100 * 1024;

  before(async () => {
    fake = await startFakeSolr();
    // 10 contents of 100 KB: 1 MB stored; the budget takes about four of them.
    p = await startTestPlatform({ SOLR_URL: fake.url, SEARCH_INLINE_MAX_BYTES: String(450 * 1024) });
    sports = await new Client(p.base).login('sportseditor');
    for (let i = 0; i < 10; i++) {
      const r = await sports.req('POST', '/content', {
        body: {
          system: { contentType: 'article' },
          aspects: { body: { _type: 'body', title: `big ${i}`, text: 'x'.repeat(BIG) } },
          operations: [
            { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } },
            { _type: 'svcAssignToViews', views: ['svcPublic'] },
          ],
        },
      });
      expect(r.status, r.text.slice(0, 300)).to.equal(201);
      ids.push(r.json.system.version);
    }
  });
  after(async () => {
    await p?.stop();
    await fake?.close();
  });

  const search = async (token?: string) => {
    const res = await fetch(`${p.url}/search-service/content/select?q=*:*&rows=1000&fl=id&inlineData=true`, {
      headers: token ? { 'X-Auth-Token': token } : {},
    });
    const text = await res.text();
    return { status: res.status, text, docs: (JSON.parse(text) as { response: { docs: Record<string, unknown>[] } }).response.docs };
  };

  it('an anonymous search inlines results up to SEARCH_INLINE_MAX_BYTES, in order; the rest carry _contentOmitted (before: all ten, 1 MB)', async () => {
    fake.docs = ids.map((id) => ({ id }));
    const r = await search();
    expect(r.status).to.equal(200);
    const inlined = r.docs.filter((d) => d._content !== null);
    expect(inlined.length, 'results inlined').to.be.within(3, 4);
    // The first ones, in the engine's order; every one after them is omitted, none unaccounted for.
    expect(r.docs.slice(0, inlined.length).every((d) => d._content !== null && d._contentOmitted === undefined)).to.equal(true);
    expect(r.docs.slice(inlined.length).every((d) => d._content === null && d._contentOmitted === true)).to.equal(true);
    expect(r.text.length).to.be.below(450 * 1024 + 20 * 1024);
    const first = inlined[0]._content as { system: { id: string }; aspects: { body: { text: string } } };
    expect(first.aspects.body.text).to.have.length(BIG);
  });

  it('a result the caller may not read is null without _contentOmitted and its version costs nothing of the budget', async () => {
    const culture = await new Client(p.base).login('editor');
    const hidden = await culture.req('POST', '/content', {
      body: {
        system: { contentType: 'article' },
        aspects: { body: { _type: 'body', title: 'not public', text: 'y'.repeat(BIG) } },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }],
      },
    });
    expect(hidden.status, hidden.text.slice(0, 300)).to.equal(201);
    // A stale index answers it first to an anonymous caller, then the public ones.
    fake.docs = [{ id: hidden.json.system.version }, ...ids.map((id) => ({ id }))];
    const r = await search();
    expect(r.docs[0]._content).to.equal(null);
    expect(r.docs[0]._contentOmitted).to.equal(undefined);
    fake.docs = ids.map((id) => ({ id }));
    const without = await search();
    expect(r.docs.slice(1).map((d) => d._content !== null)).to.deep.equal(without.docs.map((d) => d._content !== null));
  });
});
