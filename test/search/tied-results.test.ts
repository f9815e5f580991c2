import { expect } from 'chai';
import { bulk } from '../bulk/ndjson.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { until } from '../support/wait.js';

/**
 * Results with equal sort values (every result of a constant-score query sorted by score, the
 * default; or ties of a field sort) come in Lucene's docid order. Docids follow the segments and
 * their merges, and TieredMergePolicy merges segments by size, not by position: segments of
 * content the caller may not read decide which merges happen, so they reorder the caller's own
 * results.
 */
describe('search: the order of tied search results does not depend on hidden documents', function () {
  this.timeout(240_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;
  const T = `st${Date.now().toString(36)}`;
  const owners = (o: string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: o } } });
  const line = (owner: string, i: number) =>
    `${JSON.stringify({ op: 'create', content: { system: { contentType: T }, aspects: { body: { title: `${owner} ${i}` } }, operations: [owners([owner])] } })}\n`;
  const count = async (c: Client) => {
    const r = await c.req('GET', `${p.url}/search-service/content/select?${new URLSearchParams({ q: `svc_type_s:${T}`, rows: '0' })}`);
    return r.json.response.numFound as number;
  };
  /** The sportseditor's answers: the default sort (score, all equal here) and a field sort whose values are all equal. */
  const order = async () => {
    const out: string[][] = [];
    for (const sort of [undefined, 'svc_type_s asc']) {
      const q = new URLSearchParams({ q: `svc_type_s:${T}`, rows: '1000', fl: 'id', ...(sort ? { sort } : {}) });
      const r = await sports.req('GET', `${p.url}/search-service/content/select?${q}`);
      expect(r.status, r.text).to.equal(200);
      out.push((r.json.response.docs as { id: string }[]).map((d) => d.id));
    }
    return out;
  };
  const soft = () => new Promise((r) => setTimeout(r, 800)); // past a soft commit: a new segment

  before(async () => {
    const solr = await ensureTestSolr();
    p = await startTestPlatform({ SOLR_URL: solr });
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => p?.stop());

  it('the sportseditor own results, tied on score, keep their order when culture documents are indexed', async () => {
    // The sportseditor's documents, in segments of their own.
    let mine = 0;
    for (let i = 0; i < 14; i++) {
      const n = 1 + (i % 3);
      const r = await bulk(
        p.base,
        sports.token!,
        Array.from({ length: n }, (_, k) => line('sports', i * 10 + k)),
      );
      expect(r.answers.filter((a) => a.status === 201)).to.have.length(n);
      mine += n;
      await soft();
    }
    await until(async () => (await count(sports)) === mine, 20_000, 'sports indexed');
    await soft();
    const before = await order();
    expect(before[0]).to.have.length(mine);
    // Nothing changed meanwhile: the answer is stable.
    for (let i = 0; i < 3; i++) {
      await soft();
      expect(await order()).to.deep.equal(before);
    }
    // Culture documents, in segments of many sizes.
    let theirs = 0;
    for (let i = 0; i < 30; i++) {
      const n = 1 + ((i * 7) % 23);
      const r = await bulk(
        p.base,
        editor.token!,
        Array.from({ length: n }, (_, k) => line('culture', i * 100 + k)),
      );
      expect(r.answers.filter((a) => a.status === 201)).to.have.length(n);
      theirs += n;
      await soft();
    }
    await until(async () => (await count(editor)) === mine + theirs, 20_000, 'culture indexed');
    await soft();
    expect(await order()).to.deep.equal(before);
  });
});
