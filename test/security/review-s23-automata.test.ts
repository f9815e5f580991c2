import { expect } from 'chai';
import { indexSchema } from '../../src/adapters/index-schema.js';
import { checkSearchParams, MAX_QUERY_NESTING, MAX_REGEX_SIZE, MAX_TERM_WILDCARDS, regexSize } from '../../src/gateway/search-params.js';
import { startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

const checked = (fq: string) => () => checkSearchParams(new URLSearchParams({ q: '*:*', fq }), undefined, indexSchema());

/**
 * The twenty-third session's review: the engine builds the automaton of a wildcard term or a
 * regular expression when it makes the query, before `cpuAllowed` or `timeAllowed` applies, and
 * the platform counted such terms (SEARCH_MAX_MULTI_TERMS) but not what each spells out. Measured
 * on the embedded Solr (512 MB heap), each one anonymous search of the old code:
 *
 * - `fq=` 5,000 `*` (a GET of 5 KB): OutOfMemoryError after 2-4.5 s, the platform answered 500;
 *   1,000 `*`: 0.85 s; 1,001 `?`: 500 (`input automaton is too large`);
 * - `fq=/(.*.*){100}{100}/` (18 characters): OutOfMemoryError after 3.8 s, 500;
 * - `fq=/(.*){2500}/`: 2.9 s; `/.{0,5000}/`: 500; 20 fq of `/.*.*…/` (2,500 `.*`): 15 s, 200;
 * - `fq=/(.*a.*)&(.*b.*)&…/` (16 intersections, 129 characters): 13 s, 200.
 *
 * - `q=` 10,000 nested parentheses around a term (20 KB): the engine's parser overflowed its stack,
 *   the engine cut the connection and the platform answered 503; 1,000 levels: 0.5 s.
 *
 * Now a term has at most MAX_TERM_WILDCARDS wildcard characters, a regular expression at most
 * MAX_REGEX_SIZE atoms, repetitions counted, and no intersection, and a query nests at most
 * MAX_QUERY_NESTING parentheses: past them 400 naming the parameter, before the engine is asked.
 */
describe('security: the automata of wildcard terms and regular expressions are bounded (review s23)', function () {
  this.timeout(300_000);

  it(`a term has at most ${MAX_TERM_WILDCARDS} wildcard characters`, () => {
    for (const fq of ['*'.repeat(5000), '?'.repeat(1001), `svc_text:${'*'.repeat(MAX_TERM_WILDCARDS + 1)}`, `a${'?*'.repeat(9)}`])
      expect(checked(fq), fq.slice(0, 30)).to.throw(/MAX_TERM_WILDCARDS/);
    for (const fq of ['vacc*n?', `svc_text:${'*'.repeat(MAX_TERM_WILDCARDS)}`, 'title_s:*', 'a\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*\\*b'])
      expect(checked(fq), fq).not.to.throw();
  });

  it(`a regular expression spells out at most ${MAX_REGEX_SIZE} atoms and does not intersect`, () => {
    for (const fq of [
      'svc_text:/(.*.*){100}{100}/',
      'svc_text:/(.*){2500}/',
      'svc_text:/.{0,5000}/',
      `svc_text:/${'.*'.repeat(200)}/`,
      'svc_text:/(.*a.*)&(.*b.*)/',
    ])
      expect(checked(fq), fq.slice(0, 40)).to.throw(/MAX_REGEX_SIZE|intersect/);
    for (const fq of ['svc_text:/[0-9]{4}-[0-9]{2}-[0-9]{2}/', 'svc_text:/(a|b)*a(a|b){24}/', 'svc_text:/colou?r/', 'svc_text:/a\\&b/'])
      expect(checked(fq), fq).not.to.throw();
    expect(regexSize('(.*){100}')).to.equal(100);
    expect(regexSize('[a-z]{3}[0-9]{2,4}')).to.equal(7);
    expect(regexSize('(x){2}{3}')).to.equal(6);
  });

  it(`a query nests at most ${MAX_QUERY_NESTING} parentheses`, () => {
    const nested = (k: number) => `${'('.repeat(k)}a${')'.repeat(k)}`;
    expect(checked(nested(MAX_QUERY_NESTING + 1))).to.throw(/MAX_QUERY_NESTING/);
    expect(checked(nested(MAX_QUERY_NESTING))).not.to.throw();
    expect(checked(`${'(a) '.repeat(500)}`), 'parentheses side by side').not.to.throw();
    expect(checked(`"${'('.repeat(100)}" [a TO b]`), 'inside a phrase').not.to.throw();
  });

  describe('end to end, with the engine', () => {
    let p: Awaited<ReturnType<typeof startTestPlatform>>;
    before(async () => {
      p = await startTestPlatform({ SOLR_URL: await ensureTestSolr() }, ['web']);
    });
    after(async () => p?.stop());

    const search = async (fq: string) => {
      const r = await fetch(`${p.url}/search-service/content/select?${new URLSearchParams({ q: '*:*', fq, rows: '0' })}`);
      return { status: r.status, body: await r.text() };
    };

    it('the reported searches answer 400 naming the bound; the engine is not asked', async () => {
      for (const fq of [
        '*'.repeat(5000),
        'svc_text:/(.*.*){100}{100}/',
        `svc_text:/${['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p'].map((c) => `(.*${c}.*)`).join('&')}/`,
      ]) {
        const r = await search(fq);
        // Old code: 500 (OutOfMemoryError) after 2-4.5 s, or 200 after 13 s.
        expect(r.status, `${fq.slice(0, 30)}: ${r.body.slice(0, 200)}`).to.equal(400);
        expect(r.body).to.match(/MAX_TERM_WILDCARDS|MAX_REGEX_SIZE|intersect/);
      }
      expect((await search('svc_text:/[0-9]{4}/')).status).to.equal(200);
    });

    it('a query of 10,000 nested parentheses answers 400 (503 on the old code: the engine overflowed its stack); 50 levels are answered', async () => {
      const r = await search(`${'('.repeat(10_000)}a${')'.repeat(10_000)}`);
      expect(r.status, r.body.slice(0, 200)).to.equal(400);
      expect(r.body).to.include('MAX_QUERY_NESTING');
      expect((await search(`${'('.repeat(MAX_QUERY_NESTING)}a${')'.repeat(MAX_QUERY_NESTING)}`)).status).to.equal(200);
    });
  });
});
