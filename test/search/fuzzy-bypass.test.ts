import { expect } from 'chai';
import { checkSearchParams } from '../../src/gateway/search-params.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { until } from '../support/wait.js';

/**
 * Security review of the thirteenth session: the fuzzy-term refusal (`tildesOf` in
 * search-params.ts) followed quotes, but the lucene parser does not read a `"` inside a regular
 * expression (`/["]/`) as a quote. So `q=probe_ss:/["]/ OR probe_ss:<term>~2` passed the check
 * ("inside a phrase") while the engine ran a FuzzyQuery, which keeps the 50 closest terms of the
 * whole index: terms of content the caller may not read pushed the terms of its own content out
 * (its own content stopped matching), and 50 words of its own one edit from a guessed word told
 * whether hidden content holds that word. On the old code both answered 200 with a different
 * numFound once culture content existed (1 → 0, 50 → 49). Now they are refused, the same before
 * and after (CONTRACT §20: the answer is the same whether or not forbidden content exists).
 */
describe('search: fuzzy terms behind a quote inside a regular expression are refused (CONTRACT §20)', function () {
  this.timeout(240_000);
  const T = `fz${Date.now().toString(36)}`;
  const type = `${T}type`;
  // The term searched for, fuzzily; the sportseditor's own value is 2 edits from it.
  const Q = `${T}qzxw`;
  const own = `${Q.slice(0, -2)}00`;
  // 61 values 1 edit from Q: content of culture, which the sportseditor may not read.
  const hidden = [
    ...'abcdefghijklmnopqrstuvwxyz0123456789'.split('').map((c) => `${Q}${c}`),
    ...'abcdefghijklmnopqrstuvyz'.split('').map((c) => `${Q.slice(0, -1)}${c}`),
  ];
  // A word of an embargoed culture article, and 50 words 1 edit from it (the fuzzy query's 50 expansions).
  const SECRET = `${T}merger`;
  const oracleWords = 'abcdefghijklmnopqrstuvwxyz0123456789'
    .split('')
    .map((c) => `${SECRET}${c}`)
    .concat('abcdefghijklmnoq'.split('').map((c) => `${SECRET.slice(0, -1)}${c}`))
    .slice(0, 50);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;
  const search = (c: Client, params: Record<string, string>) =>
    c.req('GET', `${p.url}/search-service/content/select?${new URLSearchParams({ fq: `svc_type_s:${type}`, fl: 'id', ...params })}`);
  const attacks: Record<string, Record<string, string>> = {
    'lucene: a regex holding a quote hides the fuzzy term': { q: `probe_ss:/["]/ OR probe_ss:${Q}~2` },
    'full text: does any content the caller may not read hold the secret word?': { q: `svc_text:/["]/ OR svc_text:${SECRET}~1` },
    'edismax: an unbalanced quote hides the fuzzy term': { defType: 'edismax', qf: 'probe_ss', q: `"zz ${Q}~2` },
  };
  const stateA: Record<string, { status: number; numFound: number | undefined; text: string }> = {};

  before(async () => {
    const solr = await ensureTestSolr();
    p = await startTestPlatform({ SOLR_URL: solr });
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    const mine = await sports.create({
      system: { contentType: type },
      aspects: { body: { title: 'own' }, svcSolrDocument: { probe_ss: [own] } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
    });
    expect(mine.status, mine.text).to.equal(201);
    // The oracle: 50 contents of the sportseditor, each with one word 1 edit from a secret word.
    for (const w of oracleWords) {
      const r = await sports.create({
        system: { contentType: type },
        aspects: { body: { title: `note ${w}` } },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
      });
      expect(r.status, r.text).to.equal(201);
    }
    await until(async () => (await search(sports, { q: '*:*' })).json?.response?.numFound === 51, 30_000, 'own content indexed');
    // State A: what the sportseditor gets.
    for (const [name, params] of Object.entries(attacks)) {
      const r = await search(sports, params);
      stateA[name] = { status: r.status, numFound: r.json?.response?.numFound, text: r.text };
    }
    // State B: culture content the sportseditor may not read.
    const c = await editor.create({
      system: { contentType: type },
      aspects: { body: { title: 'culture' }, svcSolrDocument: { probe_ss: hidden } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }],
    });
    expect(c.status, c.text).to.equal(201);
    const secret = await editor.create({
      system: { contentType: type },
      aspects: { body: { title: `embargoed: the ${SECRET} is off` } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }],
    });
    expect(secret.status, secret.text).to.equal(201);
    await until(async () => (await search(editor, { q: '*:*' })).json?.response?.numFound === 53, 30_000, 'culture content indexed');
    expect((await search(sports, { q: '*:*' })).json.response.numFound, 'the sportseditor does not see culture content').to.equal(51);
    expect((await search(sports, { q: `svc_text:${SECRET}` })).json.response.numFound, 'nor find the secret word directly').to.equal(0);
  });
  after(async () => p?.stop());

  it('the proxy check refuses each of them, as it refuses a plain fuzzy term', () => {
    expect(() => checkSearchParams(new URLSearchParams({ q: `probe_ss:${Q}~2` }))).to.throw(/fuzzy/);
    for (const params of Object.values(attacks)) expect(() => checkSearchParams(new URLSearchParams(params))).to.throw(/fuzzy/);
  });

  for (const name of Object.keys(attacks)) {
    it(`${name}: the sportseditor's answer is the same whether or not culture content exists`, async () => {
      const r = await search(sports, attacks[name]);
      expect(stateA[name].status, stateA[name].text).to.equal(400);
      expect(r.status, r.text).to.equal(stateA[name].status);
      expect(r.json?.response?.numFound, 'numFound changed because content the caller may not read exists').to.equal(stateA[name].numFound);
      expect(r.text).to.equal(stateA[name].text);
    });
  }
});
