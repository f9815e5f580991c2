import { expect } from 'chai';
import { type IndexingPlatform, startIndexingPlatform } from '../support/indexing-platform.js';
import type { Client } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * The index holds exactly a content's documents now, also when a write follows the last
 * indexing within the soft commit (`commitWithin`, 500 ms). Before, the indexer looked up a
 * content's documents with a search, which sees only what a soft commit made searchable: a
 * content deleted, taken off its view or given a new version within half a second kept its old
 * document in the index for good (found by the hunt "one read rule on every path": anonymous
 * searches found deleted content, and replaced public versions, by their text).
 */
describe('stale search documents: a write right after indexing leaves no old document behind (SECURITY.md "Index documents")', function () {
  this.timeout(120_000);
  let p: IndexingPlatform;
  let solr: string;
  let editor: Client;
  let anon: Client;
  const T = `stale${Date.now()}`;

  before(async () => {
    ({ p, solr, editor, anon } = await startIndexingPlatform());
  });
  after(async () => p?.stop());

  const solrIds = async (q: string): Promise<string[]> => {
    const r = await fetch(`${solr}/content/select?${new URLSearchParams({ q, fl: 'id', rows: '100', wt: 'json' })}`);
    return ((await r.json()) as { response: { docs: { id: string }[] } }).response.docs.map((d) => d.id);
  };
  const anonFinds = async (q: string): Promise<number> => {
    const r = await anon.req('GET', `${p.url}/search-service/content/select?${new URLSearchParams({ q, rows: '0' })}`, { token: null });
    expect(r.status, r.text).to.equal(200);
    return r.json.response.numFound as number;
  };
  const publicContent = (title: string) => ({
    system: { contentType: T },
    aspects: { body: { title }, svcSolrDocument: { title_s: title } },
    operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
  });

  it('contents deleted, and public versions replaced by a new public version, 0-300 ms after they were written: the index holds none of the old documents', async () => {
    const gone: string[] = [];
    const replaced: { old: string; now: string }[] = [];
    for (const gap of [0, 30, 100, 200, 300]) {
      const a = await editor.create(publicContent(`${T} deleted ${gap}`));
      expect(a.status, a.text).to.equal(201);
      const b = await editor.create(publicContent(`${T} old ${gap}`));
      expect(b.status, b.text).to.equal(201);
      // The first indexing of both, then the next write within the soft commit.
      await eventually(async () => expect(await solrIds(`title_s:"${T} old ${gap}" OR title_s:"${T} deleted ${gap}"`)).to.have.length(2), 20_000);
      await new Promise((r) => setTimeout(r, gap));
      expect((await editor.remove(a.json.system.id, a.headers.get('etag')!)).status).to.equal(204);
      const u = await editor.update(b.json.system.id, publicContent(`${T} new ${gap}`), b.headers.get('etag'));
      expect(u.status, u.text).to.equal(200);
      gone.push(`${T} deleted ${gap}`);
      replaced.push({ old: `${T} old ${gap}`, now: `${T} new ${gap}` });
    }
    // The new versions indexed, and a soft commit and more after them.
    for (const { now } of replaced) await eventually(async () => expect(await solrIds(`title_s:"${now}"`)).to.have.length(1), 20_000);
    await new Promise((r) => setTimeout(r, 1500));
    for (const title of gone) {
      expect(await solrIds(`title_s:"${title}"`), title).to.deep.equal([]);
      expect(await anonFinds(`title_s:"${title}"`), `anonymous search for ${title}`).to.equal(0);
    }
    for (const { old } of replaced) {
      expect(await solrIds(`title_s:"${old}"`), old).to.deep.equal([]);
      expect(await anonFinds(`title_s:"${old}"`), `anonymous search for ${old}`).to.equal(0);
    }
  });
});
