import { expect } from 'chai';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';

/**
 * What one search may cost the engine (SECURITY.md "Search service"): the clauses and the
 * multi-term queries (wildcards, prefixes, regular expressions, ranges) of q, every fq and
 * facet.query together, the number of fq, and the facet values (a pivot's whole tree) are counted
 * and bounded before the engine is asked; every search carries a `timeAllowed`, the caller's
 * capped, and when it runs out the answer says so (`responseHeader.partialResults`) even to a
 * caller that asked `omitHeader`. Before, 10-40 fq of 1,000 wildcards cost the embedded Solr
 * 42-131 s of CPU, a three-level pivot at the default limit answered 115 MB, and `timeAllowed`
 * was sent only when the caller sent it.
 *
 * The documents are written straight into Solr (public, on svcPublic) under a type of this run,
 * and removed after; the platforms are web processes only (no indexer asks the engine anything),
 * so the engine's count of select requests shows which searches reached it.
 */

/** The npm solr-client (a client nobody here wrote), as much of it as the test uses. */
interface SolrClientType {
  searchAsync(q: string): Promise<{ responseHeader?: { partialResults?: boolean }; response: { numFound: number } }>;
}
const solrClient = createRequire(import.meta.url)('solr-client') as {
  createClient(o: { host: string; port: number; path: string; core: string }): SolrClientType;
};

interface Answer {
  status: number;
  bytes: number;
  json: {
    message?: string;
    statusCode?: string;
    extraInfo?: { parameter?: string };
    responseHeader?: { partialResults?: boolean };
    response?: { numFound: number; docs: { id: string; _content?: unknown }[] };
    facet_counts?: { facet_fields: Record<string, unknown[]>; facet_pivot?: Record<string, unknown[]> };
  };
}

/** A document as the indexer writes a public version (svcLatest and svcPublic, always on, not hidden) of type `type`. */
function publicDoc(id: string, type: string) {
  return {
    id,
    root: id,
    version: 1,
    svc_type_s: type,
    svc_views_ss: ['svcLatest', 'svcPublic'],
    svc_timestate_svcLatest_drange: ['[0000 TO 9999]'],
    svc_timestate_svcPublic_drange: ['[0000 TO 9999]'],
    svc_contentstate_hidden_b: false,
  };
}

describe('search cost: counted and bounded before the engine is asked; every search has a time (SECURITY.md "Search service")', function () {
  this.timeout(240_000);
  const T = `cost${Date.now().toString(36)}`;
  const DOCS = 1100;
  let solr: string;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  /** The same platform with SEARCH_TIME_ALLOWED_MS=1: any search that reaches the engine's collection runs out of time. */
  let slow: Awaited<ReturnType<typeof startTestPlatform>>;

  const solrPost = async (path: string, body: string, type: string) => {
    const r = await fetch(`${solr}/content/${path}`, { method: 'POST', headers: { 'Content-Type': type }, body });
    expect(r.status, await r.clone().text()).to.equal(200);
    return r.json();
  };

  before(async () => {
    solr = await ensureTestSolr();
    p = await startTestPlatform({ SOLR_URL: solr }, ['web']);
    slow = await startTestPlatform({ SOLR_URL: solr, SEARCH_TIME_ALLOWED_MS: '1' }, ['web']);
    // Public documents as the indexer writes them (svcPublic, always on, not hidden), with facet
    // fields of many values and some text for wildcards.
    const letters = 'abcdefghijklmnopqrstuvwxyz';
    const word = (i: number) => `${letters[i % 26]}${letters[(i * 7) % 26]}${letters[(i * 11) % 26]}${i % 97}`;
    const docs = Array.from({ length: DOCS }, (_, i) => {
      return {
        ...publicDoc(`c:${T}${i}:v1`, T),
        svc_text: Array.from({ length: 30 }, (_, k) => word(i * 31 + k)).join(' '),
        cost_n_s: `n${i}`,
        cost_a_ss: [word(i), word(i + 1)],
        cost_b_ss: [word(i * 3), word(i * 3 + 2)],
        cost_c_ss: [word(i * 5), word(i * 5 + 4)],
        cost_t: Array.from({ length: 10 }, (_, k) => word(i * 7 + k)).join(' '),
        cost_txt: [word(i * 2), word(i * 2 + 1)],
      };
    });
    await solrPost('update?commit=true', JSON.stringify(docs), 'application/json');
  });
  after(async () => {
    if (solr) await solrPost('update?commit=true', JSON.stringify({ delete: { query: `svc_type_s:${T}` } }), 'application/json').catch(() => undefined);
    await slow?.stop();
    await p?.stop();
  });

  /** An anonymous search by POST form (long queries), as the platform answers it. */
  const search = async (params: [string, string][] | Record<string, string>, on = p): Promise<Answer> => {
    const r = await fetch(`${on.url}/search-service/content/select`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(params).toString(),
    });
    const text = await r.text();
    return { status: r.status, bytes: text.length, json: JSON.parse(text) };
  };
  /** Select requests the engine has taken so far (its metrics, every core of the collection). */
  const selects = async (): Promise<number> => {
    const r = (await (await fetch(`${solr}/admin/metrics?group=core&prefix=QUERY./select.requests&wt=json`)).json()) as {
      metrics: Record<string, Record<string, number>>;
    };
    return Object.values(r.metrics).reduce((sum, m) => sum + (m['QUERY./select.requests'] ?? 0), 0);
  };
  const refused = (r: Answer, parameter: string, setting: string, what: string) => {
    expect(r.status, `${what}: ${JSON.stringify(r.json).slice(0, 300)}`).to.equal(400);
    expect(r.json.statusCode, what).to.equal('40000');
    expect(r.json.extraInfo?.parameter, what).to.equal(parameter);
    expect(r.json.message, what).to.match(new RegExp(`^Parameter '${parameter.replace(/\./g, '\\.')}': `));
    expect(r.json.message, what).to.contain(setting);
  };
  const scope: [string, string] = ['fq', `svc_type_s:${T}`];
  const infix = (n: number, salt = 0) => Array.from({ length: n }, (_, i) => `svc_text:*${'abcdefghijklmnopqrstuvwxyz'[(i + salt) % 26]}${i}*`).join(' OR ');

  it("the hunt's search (ten fq of 1,000 wildcards) and the bounds on clauses and fq answer 400 naming the parameter and the setting, without asking the engine", async () => {
    const before = await selects();
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `"c:${T}${i}:v1"`);
    for (const [params, parameter, setting] of <[[string, string][], string, string][]>[
      [[['q', '*:*'], ...Array.from({ length: 10 }, (_, k): [string, string] => ['fq', infix(1000, k)])], 'fq', 'SEARCH_MAX_MULTI_TERMS'],
      [[['q', infix(21)], scope], 'q', 'SEARCH_MAX_MULTI_TERMS'],
      [
        [
          ['q', `id:(${ids(600).join(' OR ')})`],
          ['fq', `cost_n_s:(${ids(500).join(' ')})`],
        ],
        'fq',
        'SEARCH_MAX_CLAUSES',
      ],
      [[['q', '*:*'], ...Array.from({ length: 21 }, (_, k): [string, string] => ['fq', `-version:${k + 2}`])], 'fq', 'SEARCH_MAX_FILTER_QUERIES'],
      [
        [['q', '*:*'], ['facet', 'true'], ...Array.from({ length: 21 }, (_, k): [string, string] => ['facet.query', `version:${k}`])],
        'facet.query',
        'SEARCH_MAX_FILTER_QUERIES',
      ],
    ])
      refused(await search(params), parameter, setting, `${parameter} ${setting}`);
    expect(await selects(), 'the engine was asked').to.equal(before);

    // what a newsroom or a pipeline sends is answered: a few wildcards, ranges and filters, 20 fq,
    // and the bench's poller (400 version ids in one query)
    const ok = await search([
      ['q', 'svc_text:ab* OR svc_text:*c1* OR (svc_text:"abc0 def" AND version:[1 TO 5])'],
      scope,
      ...Array.from({ length: 19 }, (_, k): [string, string] => ['fq', `-version:${k + 2}`]),
      ['rows', '0'],
    ]);
    expect(ok.status, JSON.stringify(ok.json).slice(0, 300)).to.equal(200);
    const poll = await search({ q: `id:(${ids(400).join(' OR ')})`, fl: 'id', rows: '400' });
    expect(poll.status, JSON.stringify(poll.json).slice(0, 300)).to.equal(200);
    expect(poll.json.response!.numFound).to.equal(400);
  });

  it('a regular expression too complex for the engine answers 400 (the engine says 500), never a 5xx for bad input', async () => {
    for (const q of ['svc_text:/(a|b)*a(a|b){24}/', 'cost_a_ss:/(x|y)*x(x|y){30}z/']) {
      const r = await search([['q', q], scope]);
      expect(r.status, `${q}: ${JSON.stringify(r.json).slice(0, 300)}`).to.equal(400);
      expect(r.json.statusCode).to.equal('40000');
      expect(JSON.stringify(r.json)).not.to.match(/Exception|org\.apache|trace/);
    }
  });

  it('facets: a three-level pivot at the default limit answers 400 naming facet.pivot; two levels, or three with smaller limits, are answered; facet.limit=-1 lists at most 1000 values', async () => {
    const before = await selects();
    const pivot = (fields: string, extra: [string, string][] = []): [string, string][] => [
      ['q', '*:*'],
      scope,
      ['rows', '0'],
      ['facet', 'true'],
      ['facet.pivot', fields],
      ...extra,
    ];
    refused(await search(pivot('cost_a_ss,cost_b_ss,cost_c_ss')), 'facet.pivot', 'SEARCH_MAX_FACET_VALUES', 'three levels at 100');
    refused(await search(pivot('cost_a_ss,cost_b_ss', [['facet.limit', '-1']])), 'facet.pivot', 'SEARCH_MAX_FACET_VALUES', 'two levels at -1');
    refused(
      await search(pivot('cost_a_ss,cost_b_ss,cost_c_ss,cost_n_s,svc_text', [['facet.limit', '1']])),
      'facet.pivot',
      'a pivot may have at most 4',
      'five levels',
    );
    expect(await selects(), 'the engine was asked').to.equal(before);

    const two = await search(pivot('cost_a_ss,cost_b_ss'));
    expect(two.status, JSON.stringify(two.json).slice(0, 300)).to.equal(200);
    expect(two.json.facet_counts!.facet_pivot!['cost_a_ss,cost_b_ss']).to.have.length(100);
    const three = await search(
      pivot('cost_a_ss,cost_b_ss,cost_c_ss', [
        ['f.cost_a_ss.facet.limit', '10'],
        ['f.cost_b_ss.facet.limit', '10'],
      ]),
    );
    expect(three.status, JSON.stringify(three.json).slice(0, 300)).to.equal(200);
    expect(three.json.facet_counts!.facet_pivot!['cost_a_ss,cost_b_ss,cost_c_ss']).to.have.length(10);

    // every value of a field of 1,100: 1000 of them (the JSON lists value, count, value, count...)
    const all = await search([['q', '*:*'], scope, ['rows', '0'], ['facet', 'true'], ['facet.field', 'cost_n_s'], ['facet.limit', '-1']]);
    expect(all.status, JSON.stringify(all.json).slice(0, 300)).to.equal(200);
    expect(all.json.response!.numFound).to.equal(DOCS);
    expect(all.json.facet_counts!.facet_fields.cost_n_s).to.have.length(2 * 1000);
  });

  it('a facet, sort, group or stats on a tokenized field (svc_text, *_t, *_txt) or one without docValues answers 400 naming the parameter and the field, without asking the engine', async () => {
    // Where the field type is uninvertible, a facet of svc_text made the engine un-invert every
    // term of every document (20,000 documents of 300 words: 1.1 s, 1.9 s of CPU, 34 MB of heap,
    // again after each commit); with the bundled schema it answered 200 with an empty facet or no
    // groups, and a sort or stats a 400 of the engine that named no parameter.
    const before = await selects();
    const base: [string, string][] = [['q', '*:*'], scope, ['rows', '1']];
    for (const [params, parameter, field] of <[[string, string][], string, string][]>[
      [
        [
          ['facet', 'true'],
          ['facet.field', 'svc_text'],
        ],
        'facet.field',
        'svc_text',
      ],
      [
        [
          ['facet', 'true'],
          ['facet.field', 'svc_text'],
          ['facet.prefix', 'ab'],
        ],
        'facet.field',
        'svc_text',
      ],
      [
        [
          ['facet', 'true'],
          ['facet.field', 'cost_t'],
        ],
        'facet.field',
        'cost_t',
      ],
      [
        [
          ['facet', 'true'],
          ['facet.field', 'cost_txt'],
        ],
        'facet.field',
        'cost_txt',
      ],
      [
        [
          ['facet', 'true'],
          ['facet.pivot', 'cost_a_ss,svc_text'],
          ['facet.limit', '10'],
        ],
        'facet.pivot',
        'svc_text',
      ],
      [[['sort', 'svc_text asc']], 'sort', 'svc_text'],
      [[['sort', 'cost_n_s asc,cost_t desc']], 'sort', 'cost_t'],
      [
        [
          ['group', 'true'],
          ['group.field', 'svc_text'],
        ],
        'group.field',
        'svc_text',
      ],
      [
        [
          ['stats', 'true'],
          ['stats.field', 'svc_text'],
        ],
        'stats.field',
        'svc_text',
      ],
      [
        [
          ['facet', 'true'],
          ['facet.field', '_root_'],
        ],
        'facet.field',
        '_root_',
      ],
    ]) {
      const t0 = Date.now();
      const r = await search([...base, ...params]);
      refused(r, parameter, `'${field}'`, `${new URLSearchParams(params)} (${Date.now() - t0} ms)`);
    }
    expect(await selects(), 'the engine was asked').to.equal(before);

    // the fields a search facets, sorts, groups and takes stats on are answered
    const ok = await search([
      ['q', 'svc_text:a*'],
      scope,
      ['rows', '1'],
      ['facet', 'true'],
      ['facet.field', 'cost_a_ss'],
      ['sort', 'cost_n_s asc,version desc,id asc'],
      ['stats', 'true'],
      ['stats.field', 'version'],
      ['hl', 'true'],
      ['hl.fl', 'svc_text'],
    ]);
    expect(ok.status, JSON.stringify(ok.json).slice(0, 300)).to.equal(200);
    expect(ok.json.response!.numFound).to.be.greaterThan(0);
    expect(ok.json.facet_counts!.facet_fields.cost_a_ss.length).to.be.greaterThan(0);
    const grouped = await search([...base, ['group', 'true'], ['group.field', 'cost_n_s']]);
    expect(grouped.status, JSON.stringify(grouped.json).slice(0, 300)).to.equal(200);
  });

  it('every search has a time (SEARCH_TIME_ALLOWED_MS, the caller’s capped to it); one that runs out answers 200 with responseHeader.partialResults, also when omitHeader was asked', async () => {
    let salt = 0;
    // wildcards to expand and 1,100 documents to collect: past 1 ms whatever the machine
    const heavy = (extra: [string, string][] = []): [string, string][] => [['q', infix(10, ++salt)], scope, ['rows', '5'], ['fl', 'id'], ...extra];
    for (const extra of <[string, string][][]>[[], [['timeAllowed', '600000']], [['timeAllowed', '0']]]) {
      const r = await search(heavy(extra), slow);
      expect(r.status, JSON.stringify(r.json).slice(0, 300)).to.equal(200);
      expect(r.json.responseHeader?.partialResults, JSON.stringify(extra)).to.equal(true);
    }
    // omitHeader: the header stays when the results are partial, and only then
    const partial = await search(heavy([['omitHeader', 'true']]), slow);
    expect(partial.status).to.equal(200);
    expect(partial.json.responseHeader?.partialResults, 'omitHeader hid that the results are partial').to.equal(true);
    const inlined = await search(
      heavy([
        ['omitHeader', 'true'],
        ['inlineData', 'true'],
      ]),
      slow,
    );
    expect(inlined.json.responseHeader?.partialResults, 'inlineData').to.equal(true);
    const whole = await search(heavy([['omitHeader', 'true']]), p);
    expect(whole.status).to.equal(200);
    expect(whole.json).to.not.have.property('responseHeader');
    expect(whole.json.response!.numFound).to.be.greaterThan(0);
    const timed = await search(heavy([['timeAllowed', '600000']]), p);
    expect(timed.json.responseHeader).to.not.have.property('partialResults');

    // a client nobody here wrote sees the flag where Solr puts it
    const u = new URL(slow.url);
    const client = solrClient.createClient({ host: u.hostname, port: Number(u.port), path: '/search-service', core: 'content' });
    const answer = await client.searchAsync(`q=${encodeURIComponent(infix(10, ++salt))}&fq=${encodeURIComponent(scope[1])}&omitHeader=true`);
    expect(answer.responseHeader?.partialResults).to.equal(true);
  });

  it('the second review of the eighteenth session: repeated parameters, deep groups, long sorts, repeated stats, highlighting of many rows and sloppy phrases answer 400 naming the bound, without asking the engine', async () => {
    const before = await selects();
    const times = (n: number, key: string, value: (i: number) => string): [string, string][] =>
      Array.from({ length: n }, (_, i): [string, string] => [key, value(i)]);
    // 20,000 facet.field of limit 0 in a form body: before, every check scanned every parameter
    // once per facet (80,000 stalled the gateway for 134 s, 20,000 about 7 s); since the third
    // review the raw body's 1,001st parameter is refused before it is parsed
    const t0 = Date.now();
    const facets = await search([['q', '*:*'], ['facet', 'true'], ['facet.limit', '0'], ...times(20_000, 'facet.field', () => 'id')]);
    const facetsMs = Date.now() - t0;
    refused(facets, 'facet.field', 'MAX_SEARCH_PARAMETERS', `20,000 facet.field (${facetsMs} ms)`);
    expect(facetsMs, '20,000 facet.field refused within').to.be.below(2000);
    for (const [params, parameter, bound] of <[[string, string][], string, string][]>[
      [[['q', '*:*'], ['facet', 'true'], ['facet.limit', '0'], ...times(101, 'facet.field', () => 'id')], 'facet.field', 'MAX_PARAMETER_REPEATS'],
      // per-field forms are parameters of their own: the one way past 1,000 without a repetition
      [times(1001, 'f', () => '1').map(([, v], i): [string, string] => [`f.x${i}_s.facet.limit`, v]), 'f.x1000_s.facet.limit', 'MAX_SEARCH_PARAMETERS'],
      // the engine's heap at 500 of its 512 MB for 86 bytes (group.offset 100,000), here 1,000,000 documents
      [
        [['q', '*:*'], scope, ['group', 'true'], ['group.field', 'cost_n_s'], ['rows', '1000'], ['group.limit', '0'], ['group.offset', '1000']],
        'group.offset',
        'MAX_GROUPED_DOCUMENTS',
      ],
      [[['q', '*:*'], scope, ['group', 'true'], ['rows', '1000'], ['group.limit', '0'], ...times(3, 'group.field', () => 'cost_n_s')], 'rows', 'MAX_GROUPS'],
      [[['q', '*:*'], scope, ['sort', Array(1000).fill('version asc').join(',')], ['fl', 'id']], 'sort', 'MAX_SORT_CLAUSES'],
      [[['q', '*:*'], scope, ['sort', 'cost_n_s asc,version desc'], ['start', '100000'], ['rows', '1000']], 'sort', 'MAX_SORT_VALUES'],
      [[['q', '*:*'], scope, ['rows', '0'], ['stats', 'true'], ...times(900, 'stats.field', () => 'version')], 'stats.field', 'MAX_STATS_FIELDS'],
      [[['q', '*:*'], scope, ['rows', '0'], ['stats', 'true'], ...times(2, 'stats.field', () => 'version')], 'stats.field', 'given twice'],
      [[['q', '*:*'], scope, ['hl', 'true'], ['rows', '1000']], 'rows', 'MAX_HIGHLIGHTED_ROWS'],
      [
        [
          ['q', '*:*'],
          ['fq', `svc_text:"${Array(10).fill('abc0').join(' ')}"~100000`],
          ['rows', '0'],
        ],
        'fq',
        'MAX_PHRASE_SLOP',
      ],
    ])
      refused(await search(params), parameter, bound, `${parameter} ${bound}`);
    expect(await selects(), 'the engine was asked').to.equal(before);

    // within the bounds, answered
    const ok = await search([
      ['q', 'svc_text:a* OR svc_text:"abc0 def"~100'],
      scope,
      ['rows', '100'],
      ['sort', 'cost_n_s asc,version desc,score desc'],
      ['hl', 'true'],
      ['hl.fl', 'svc_text'],
      ['stats', 'true'],
      ['stats.field', 'version'],
    ]);
    expect(ok.status, JSON.stringify(ok.json).slice(0, 300)).to.equal(200);
    expect(ok.json.response!.docs).to.have.length(100);
    const grouped = await search([['q', '*:*'], scope, ['group', 'true'], ['group.field', 'cost_n_s'], ['rows', '1000'], ['group.limit', '0'], ['fl', 'id']]);
    expect(grouped.status, JSON.stringify(grouped.json).slice(0, 300)).to.equal(200);
  });

  it('the third review of the eighteenth session: a grouped search highlighting its groups, long field lists, a deep facet.offset answer 400 naming the bound without asking the engine; a search body is at most SEARCH_MAX_BODY_BYTES', async () => {
    const before = await selects();
    const names = (n: number) => Array.from({ length: n }, () => 'id').join(',');
    for (const [params, parameter, bound] of <[[string, string][], string, string][]>[
      // every document of the groups was highlighted (up to 10,000), not rows
      [
        [['q', '*:*'], scope, ['rows', '100'], ['group', 'true'], ['group.field', 'cost_n_s'], ['group.limit', '100'], ['hl', 'true'], ['hl.fl', '*']],
        'group.limit',
        'MAX_HIGHLIGHTED_ROWS',
      ],
      [[['q', '*:*'], scope, ['rows', '0'], ['fl', names(1001)]], 'fl', 'MAX_FL_FIELDS'],
      [[['q', '*:*'], scope, ['rows', '0'], ['qf', names(101)]], 'qf', 'MAX_LISTED_FIELDS'],
      [
        [['q', '*:*'], scope, ['rows', '0'], ['facet', 'false'], ['facet.pivot', 'cost_a_ss,cost_b_ss,cost_c_ss,cost_n_s,id']],
        'facet.pivot',
        'MAX_PIVOT_LEVELS',
      ],
      // the engine threw NegativeArraySizeException and the platform answered 500
      [
        [['q', '*:*'], scope, ['rows', '0'], ['facet', 'true'], ['facet.field', 'cost_n_s'], ['facet.offset', '2147483647']],
        'facet.offset',
        'from 0 to 100000',
      ],
      [
        [['q', '*:*'], scope, ['rows', '0'], ['facet', 'true'], ['facet.field', 'cost_n_s'], ['f.cost_n_s.facet.offset', '2147483647']],
        'f.cost_n_s.facet.offset',
        'from 0 to 100000',
      ],
      [
        [['q', '*:*'], scope, ['rows', '0'], ['facet', 'true'], ['facet.pivot', 'cost_a_ss,cost_b_ss'], ['facet.limit', '5'], ['facet.offset', '2147483647']],
        'facet.offset',
        'from 0 to 100000',
      ],
    ])
      refused(await search(params), parameter, bound, `${parameter} ${bound}`);
    // a body of 2 MiB of `a&` (a million parameters) is counted before it is parsed; one byte more is refused whole
    const body = async (text: string) => {
      const r = await fetch(`${p.url}/search-service/content/select`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: text,
      });
      return { status: r.status, bytes: 0, json: (await r.json()) as Answer['json'] };
    };
    refused(await body('a&'.repeat(1024 * 1024)), 'a', 'MAX_SEARCH_PARAMETERS', '2 MiB of a&');
    const large = await body(`${'a&'.repeat(1024 * 1024)}b`);
    expect(large.status, JSON.stringify(large.json).slice(0, 300)).to.equal(413);
    expect(await selects(), 'the engine was asked').to.equal(before);

    // within the bounds, answered
    for (const params of <[string, string][][]>[
      [['q', '*:*'], scope, ['rows', '10'], ['group', 'true'], ['group.field', 'cost_n_s'], ['group.limit', '10'], ['hl', 'true'], ['hl.fl', 'svc_text']],
      [['q', '*:*'], scope, ['rows', '1'], ['fl', names(1000)]],
      [['q', '*:*'], scope, ['rows', '0'], ['facet', 'true'], ['facet.field', 'cost_n_s'], ['facet.offset', '100000']],
      [['q', '*:*'], scope, ['rows', '0'], ['facet', 'true'], ['facet.pivot', 'cost_a_ss,cost_b_ss'], ['facet.limit', '5'], ['facet.offset', '100000']],
    ]) {
      const ok = await search(params);
      expect(ok.status, JSON.stringify(ok.json).slice(0, 300)).to.equal(200);
    }
  });

  it('a client nobody here wrote (solr-client) gets the 400 of a search past a bound as an error, and the answer of one within it', async () => {
    const u = new URL(p.url);
    const client = solrClient.createClient({ host: u.hostname, port: Number(u.port), path: '/search-service', core: 'content' });
    const query = (pivot: string) => `q=*:*&fq=${encodeURIComponent(scope[1])}&rows=0&facet=true&facet.pivot=${pivot}`;
    const err = await client.searchAsync(query('cost_a_ss,cost_b_ss,cost_c_ss')).then(
      () => null,
      (e: Error) => e,
    );
    expect(err, 'refused').to.be.instanceOf(Error);
    // (solr-client keeps the status, not the body that names the parameter and the setting)
    expect((err as Error & { statusCode?: number }).statusCode).to.equal(400);
    expect((await client.searchAsync(query('cost_a_ss,cost_b_ss'))).response.numFound).to.equal(DOCS);
  });
});

describe('sloppy phrases of a word in every document cost the engine a bounded CPU time: every search carries cpuAllowed (SEARCH_CPU_ALLOWED_MS), the caller’s capped to it (SECURITY.md "Search service")', function () {
  this.timeout(240_000);
  const T = `slop${Date.now().toString(36)}`;
  /** Documents of 300 words, half of them "the": a phrase of 20 "the" at slop 5 costs the engine about 1 s over them (4-5 s over 20,000). */
  const DOCS = 4000;
  /** The engine's CPU for one search must stay below this: SEARCH_CPU_ALLOWED_MS (1000) and what the engine spends past it before it looks; the old code spent SEARCH_TIME_ALLOWED_MS (5000) of it. */
  const CPU_BOUND_MS = 3000;
  let solr: string;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;

  before(async () => {
    solr = await ensureTestSolr();
    p = await startTestPlatform({ SOLR_URL: solr }, ['web']);
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const word = () => (random() < 0.5 ? 'the' : `w${Math.floor(random() ** 3 * 200)}`);
    for (let at = 0; at < DOCS; at += 1000) {
      const docs = Array.from({ length: 1000 }, (_, k) => ({ ...publicDoc(`c:${T}${at + k}:v1`, T), svc_text: Array.from({ length: 300 }, word).join(' ') }));
      const r = await fetch(`${solr}/content/update`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(docs) });
      expect(r.status, await r.text()).to.equal(200);
    }
    const r = await fetch(`${solr}/content/update?commit=true`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(r.status).to.equal(200);
    // Warm the engine up (its first phrase search compiles code on threads of their own), then
    // wait for its merges of the new segments: the measures below read the whole JVM's CPU.
    await fetch(`${solr}/content/select`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ q: phrase(), fq: phrase(), facet: 'true', 'facet.query': phrase(), rows: '0', cpuAllowed: '1000', wt: 'json' }).toString(),
    });
    for (let i = 0; i < 40; i++) {
      const cpu = await engineCpuMs();
      await new Promise((resolve) => setTimeout(resolve, 250));
      if ((await engineCpuMs()) - cpu < 30) break;
    }
  });
  after(async () => {
    if (solr)
      await fetch(`${solr}/content/update?commit=true`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ delete: { query: `svc_type_s:${T}` } }),
      }).catch(() => undefined);
    await p?.stop();
  });

  /** The engine's CPU time so far (its JVM's, in ms; nothing else asks it anything meanwhile: the platform is a web process only). */
  const engineCpuMs = async (): Promise<number> => {
    const r = (await (await fetch(`${solr}/admin/metrics?group=jvm&prefix=os.processCpuTime&wt=json`)).json()) as {
      metrics: Record<string, Record<string, number>>;
    };
    return r.metrics['solr.jvm']['os.processCpuTime'] / 1e6;
  };
  /** An anonymous search by POST form, with the engine's CPU time it took and the time it took the platform to answer. */
  const search = async (params: [string, string][]) => {
    const cpu = await engineCpuMs();
    const t0 = Date.now();
    const r = await fetch(`${p.url}/search-service/content/select`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(params).toString(),
    });
    const json = (await r.json()) as {
      responseHeader?: { partialResults?: boolean; QTime?: number };
      response?: { numFound: number };
      facet_counts?: { facet_queries?: Record<string, number> };
    };
    const ms = Date.now() - t0;
    return { status: r.status, json, ms, cpuMs: (await engineCpuMs()) - cpu };
  };

  let salt = 0;
  /** A phrase of 20 "the" at slop 5 (MAX_PHRASE_SLOP is 100, and 20 words are 20 of SEARCH_MAX_CLAUSES), a new one each time: a filter the engine cached would cost nothing. */
  const phrase = () => `svc_text:"${Array(20).fill('the').join(' ')}"~5 -version:${++salt}`;
  const times = (n: number, key: string): [string, string][] => Array.from({ length: n }, (): [string, string] => [key, phrase()]);
  const heavy: Record<string, () => [string, string][]> = {
    '20 fq': () => [['q', '*:*'], ...times(20, 'fq'), ['rows', '10'], ['fl', 'id']],
    '20 facet.query': () => [['q', '*:*'], ['rows', '0'], ['facet', 'true'], ...times(20, 'facet.query')],
    'q, 20 fq and 20 facet.query': () => [['q', phrase()], ...times(20, 'fq'), ['facet', 'true'], ...times(20, 'facet.query'), ['fl', 'id']],
  };

  it('20 fq, 20 facet.query, or both with a phrase in q: each search costs the engine about SEARCH_CPU_ALLOWED_MS and answers 200 with responseHeader.partialResults (before: SEARCH_TIME_ALLOWED_MS, 5 s, each); a caller’s higher cpuAllowed and timeAllowed change nothing', async () => {
    const answers: (Awaited<ReturnType<typeof search>> & { label: string })[] = [];
    for (const [what, params] of Object.entries(heavy))
      for (const extra of <[string, string][][]>[
        [],
        [
          ['cpuAllowed', '600000'],
          ['timeAllowed', '600000'],
        ],
      ])
        answers.push({ label: `${what}${extra.length ? `, ${new URLSearchParams(extra)}` : ''}`, ...(await search([...params(), ...extra])) });
    // every measure in the message of any failure
    const measured = answers
      .map((a) => `${a.label}: ${a.status}, the engine's CPU ${a.cpuMs} ms, QTime ${a.json.responseHeader?.QTime}, answered in ${a.ms} ms`)
      .join('; ');
    for (const a of answers) {
      expect(a.status, `${a.label}: ${JSON.stringify(a.json).slice(0, 300)}`).to.equal(200);
      expect(a.json.responseHeader?.partialResults, `${a.label}: partialResults (${measured})`).to.equal(true);
      expect(a.cpuMs, `${a.label}: the engine's CPU in ms (${measured})`).to.be.below(CPU_BOUND_MS);
    }
  });

  it('ordinary searches over the same documents answer whole: phrases of a few words, facets, a caller’s lower cpuAllowed', async () => {
    for (const params of <[string, string][][]>[
      [
        ['q', 'svc_text:"the w1"~2 OR svc_text:"w2 the w3"'],
        ['fq', `svc_type_s:${T}`],
        ['facet', 'true'],
        ['facet.query', 'svc_text:"the the"'],
        ['facet.query', 'svc_text:"w1 w2"~3'],
        ['rows', '20'],
      ],
      [
        ['q', 'the'],
        ['fq', `svc_type_s:${T}`],
        ['fq', 'svc_text:"the w5"'],
        ['cpuAllowed', '800'],
      ],
    ]) {
      const r = await search(params);
      expect(r.status, JSON.stringify(r.json).slice(0, 300)).to.equal(200);
      expect(r.json.responseHeader, `${new URLSearchParams(params)}: partial (the engine's CPU ${r.cpuMs} ms)`).to.not.have.property('partialResults');
      expect(r.json.response!.numFound).to.be.greaterThan(0);
    }
  });
});

describe('a javabin search the engine fails is asked again in JSON for its error, its query alone (SECURITY.md "Search service")', function () {
  this.timeout(60_000);
  /** An engine that fails every search (javabin: an opaque body; JSON: the error), and records what it was asked. */
  const asked: URLSearchParams[] = [];
  let engine: http.Server;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  before(async () => {
    engine = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        const json = (status: number, body: unknown) => {
          res.writeHead(status, { 'Content-Type': 'application/json;charset=utf-8' });
          res.end(JSON.stringify(body));
        };
        if (path.endsWith('/admin/ping')) return json(200, { status: 'OK' });
        if (!path.endsWith('/select')) return json(404, { error: { msg: 'not found', code: 404 } });
        const params = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
        asked.push(params);
        if (params.get('wt') === 'javabin') {
          res.writeHead(500, { 'Content-Type': 'application/octet-stream' });
          return void res.end(Buffer.from([2, 0xa2, 0xe0]));
        }
        json(500, { responseHeader: { status: 500, QTime: 1 }, error: { msg: 'java.lang.OutOfMemoryError: Java heap space', code: 500 } });
      });
    });
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
    p = await startTestPlatform({ SOLR_URL: `http://127.0.0.1:${(engine.address() as AddressInfo).port}/solr` }, ['web']);
  });
  after(async () => {
    await p?.stop();
    engine?.closeAllConnections();
    await new Promise((resolve) => engine?.close(resolve));
  });

  it('no rows, facets, stats, groups or highlighting: before, the whole search was asked again, so one that ran the engine out of memory ran twice', async () => {
    const r = await fetch(`${p.url}/search-service/content/select`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams([
        ['q', 'svc_text:election'],
        ['fq', 'svc_type_s:article'],
        ['sort', 'version desc'],
        ['start', '100'],
        ['rows', '10'],
        ['facet', 'true'],
        ['facet.field', 'svc_type_s'],
        ['stats', 'true'],
        ['stats.field', 'version'],
        ['group', 'true'],
        ['group.field', 'svc_type_s'],
        ['group.limit', '10'],
        ['hl', 'true'],
        ['wt', 'javabin'],
        ['version', '2'],
      ]).toString(),
    });
    const body = (await r.json()) as { message?: string };
    expect(r.status).to.equal(500);
    expect(body.message).to.equal('Java heap space');
    expect(asked, 'requests to the engine').to.have.length(2);
    const [first, again] = asked;
    expect(first.get('wt')).to.equal('javabin');
    expect(first.get('group.limit')).to.equal('10');
    expect([...again.keys()].filter((k, i, all) => all.indexOf(k) === i)).to.have.members(['q', 'fq', 'sort', 'timeAllowed', 'cpuAllowed', 'rows', 'wt']);
    // both searches carry the platform's bounds of the engine's time and CPU
    for (const asked of [first, again]) expect([asked.get('timeAllowed'), asked.get('cpuAllowed')]).to.deep.equal(['5000', '1000']);
    expect(again.get('rows')).to.equal('0');
    expect(again.get('wt')).to.equal('json');
    expect(again.get('q')).to.equal(first.get('q'));
    // the caller's and the platform's filters and the sort, as the engine parsed them the first time
    expect(again.getAll('fq')).to.deep.equal(first.getAll('fq')).and.to.have.length.above(1);
    expect(again.get('sort')).to.equal('version desc,id asc');
  });
});
