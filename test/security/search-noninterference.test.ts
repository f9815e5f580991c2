import { createHash } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { INDEXER_GROUP } from '../../src/adapters/redis.js';
import { keys } from '../../src/adapters/redis.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { until } from '../support/wait.js';

/**
 * Non-interference of search and taxonomy completion (CONTRACT §20: "an answer to a caller is
 * the same whether or not content that caller may not read exists, relevance scores aside").
 *
 * Generated search requests (every allowed parameter with random values: facets with pivot,
 * prefix, range, query and per-field forms, sorts, highlighting, stats, grouping, `fl`,
 * `inlineData`, `cursorMark`, views, variants, and some parameters that must be refused) are
 * sent by three callers (anonymous; `sportseditor`, editor in context sports; a reader in
 * context sports) against state A, then the index is given content none of them may read
 * (owned by context culture or by no context, and only on svcLatest, hidden, before its onTime
 * or after its offTime; one with a child document), and the same requests are sent again:
 * every answer must be the same, status and body, ignoring QTime and score values. The global
 * `reader` may read every content of this configuration, so nothing is forbidden to it.
 *
 * Determinism: the platform's clock is frozen (time-state filters use it); generated sorts are
 * explicit field sorts ending with an `id` tiebreak, except relevance-sorted requests, which
 * are scoped to this test's documents with rows=1000 and compared as sets (term statistics
 * change with the index, so scores and their order may). The index must be quiet: a
 * fingerprint of every other document is taken before and after, and a change fails the test
 * as invalid rather than as a leak.
 *
 * NONINTERFERENCE_SEED reproduces a run; NONINTERFERENCE_RUNS sets the number of requests;
 * NONINTERFERENCE_VERBOSE=1 prints why the refused requests were refused.
 */

const RUNS = Number(process.env.NONINTERFERENCE_RUNS ?? 400);
const SEED = Number(process.env.NONINTERFERENCE_SEED ?? Math.floor(Math.random() * 2 ** 31));

type Caller = 'anonymous' | 'sportseditor' | 'sportsreader';
const CALLERS: Caller[] = ['anonymous', 'sportseditor', 'sportsreader'];

interface Spec {
  title: string;
  tags: string[];
  n: number;
  words: string;
  when: string;
  flag: boolean;
  /** Name paths of the test dimension (taxonomy completion). */
  categories: string[];
  owners?: string[];
  visibility: 'latest' | 'public' | 'hidden' | 'future' | 'expired';
  child?: boolean;
}

describe('search and completion: non-interference (CONTRACT §20)', function () {
  this.timeout(240_000);
  const T = `ni${Date.now().toString(36)}`;
  const dim = `${T}-tags`;
  const frozen = Date.now();
  const day = 86_400_000;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let solr: string;
  const clients = {} as Record<Caller, Client>;
  let editor: Client;
  const visible: string[] = [];
  const hiddenFromAll: string[] = [];

  async function make(spec: Spec, i: number, into: string[]): Promise<void> {
    const ops: unknown[] = [];
    const meta: Record<string, unknown> = {};
    if (spec.visibility !== 'latest') ops.push({ _type: 'svcAssignToViews', views: ['svcPublic'] });
    if (spec.visibility === 'hidden') meta.svcContentState = { hidden: true };
    if (spec.visibility === 'future') meta.svcTimeState = { views: { svcPublic: { onTime: new Date(frozen + day).toISOString() } } };
    if (spec.visibility === 'expired') meta.svcTimeState = { views: { svcPublic: { offTime: new Date(frozen - day).toISOString() } } };
    if (spec.owners) meta.svcSecurityContext = { owners: spec.owners };
    if (Object.keys(meta).length) ops.push({ _type: 'svcContentMetadata', aspects: meta });
    const doc: Record<string, unknown> = {
      title_s: spec.title,
      tags_ss: spec.tags,
      n_i: spec.n,
      words_lc: [spec.words],
      when_dt: spec.when,
      flag_b: spec.flag,
    };
    if (spec.child) doc.parts = [{ part_s: spec.title, n_i: spec.n }];
    const as = spec.owners?.includes('sports') ? clients.sportseditor : editor;
    const r = await as.create({
      system: { contentType: `${T}${i % 2 ? 'a' : 'b'}` },
      aspects: {
        body: { title: spec.title },
        svcSolrDocument: doc,
        svcCategorization: { dimensions: [{ id: dim, entities: spec.categories.map((path) => nested(path.split('/'))) }] },
      },
      operations: ops,
    });
    expect(r.status, r.text).to.equal(201);
    into.push(r.json.system.version as string);
  }

  /** Solr directly: how many of these versions (roots) it holds, searchable. */
  const indexed = async (versions: string[]) => {
    const q = `root:(${versions.map((v) => JSON.stringify(v)).join(' OR ')})`;
    const r = await fetch(`${solr}/content/select`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ q, rows: '0', wt: 'json', fq: '-_nest_path_:*' }),
    });
    return ((await r.json()) as { response: { numFound: number } }).response.numFound;
  };
  /** Every document but these roots: count, highest and sum of _version_ (any add or delete changes it). */
  /**
   * Every document's id and _version_, hashed: exact, unlike a stats sum of _version_, which
   * Solr adds up as doubles in segment order (a merge changed its last digits).
   */
  const fingerprint = async (except: string[]) => {
    const params = new URLSearchParams({ q: '*:*', rows: '1000000', wt: 'json', fl: 'id,_version_', sort: 'id asc' });
    if (except.length) params.set('fq', `-root:(${except.map((v) => JSON.stringify(v)).join(' OR ')})`);
    const text = await (
      await fetch(`${solr}/content/select`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: params })
    ).text();
    // _version_ is a long past 2^53: hashed as the engine spelled it, never parsed to a number.
    const docs = text.slice(text.indexOf('"docs"'));
    return `${(JSON.parse(text) as { response: { numFound: number } }).response.numFound}/${createHash('sha256').update(docs).digest('hex')}`;
  };

  /**
   * Has the indexer consumed every content event so far (nothing pending, nothing undelivered)?
   * Other suites leave events behind, which this platform's indexer takes over (pending ones
   * only after they have been idle a while): they must be indexed before state A is read.
   */
  const indexerIdle = async () => {
    const fields = (flat: unknown) => {
      const a = flat as unknown[];
      const o: Record<string, unknown> = {};
      for (let i = 0; i + 1 < a.length; i += 2) o[String(a[i])] = a[i + 1];
      return o;
    };
    for (let part = 0; part < p.settings.PARTITIONS; part++) {
      const key = keys.events(part);
      if (!(await p.redis.exists(key))) continue;
      const group = ((await p.redis.call('XINFO', 'GROUPS', key)) as unknown[]).map(fields).find((g) => g.name === INDEXER_GROUP);
      const stream = fields(await p.redis.call('XINFO', 'STREAM', key));
      if (!group || Number(group.pending) !== 0 || String(group['last-delivered-id']) !== String(stream['last-generated-id'])) return false;
    }
    return true;
  };
  /** The indexer idle and the index unchanged for 1.5 s (three soft commits). */
  const quiet = async () => {
    const deadline = Date.now() + 60_000;
    let last = '';
    let since = 0;
    for (;;) {
      if (Date.now() > deadline) throw new Error('the indexer and the index did not settle within 60 s');
      const now = (await indexerIdle()) ? await fingerprint([]) : 'busy';
      if (now !== last) [last, since] = [now, Date.now()];
      else if (now !== 'busy' && Date.now() - since >= 1500) return;
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  before(async () => {
    solr = await ensureTestSolr();
    // No re-indexer: a session left on the shared queue by another suite would rewrite documents mid-test.
    p = await startTestPlatform({ SOLR_URL: solr }, ['web', 'actors', 'indexer'], () => frozen);
    editor = await new Client(p.base).login('editor');
    clients.anonymous = new Client(p.base);
    clients.sportseditor = await new Client(p.base).login('sportseditor');
    await p.tokens!.createAccount(`${T}-sportsreader`, `${T}-password`, { sports: ['reader'] });
    clients.sportsreader = await new Client(p.base).login(`${T}-sportsreader`, `${T}-password`);
    const d = await editor.create({
      system: { contentType: 'svcDimensionDefinitionContent' },
      aspects: { svcDimensionDefinition: { id: dim, name: 'Tags', enumerable: false, localizations: {} } },
      operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: dim }],
    });
    expect(d.status, d.text).to.equal(201);
    // State A: every kind of owner and visibility, so that each caller reads some and not others.
    let i = 0;
    for (let round = 0; round < 2; round++) {
      for (const owners of [undefined, ['sports'], ['culture']]) {
        for (const visibility of ['latest', 'public', 'hidden', 'future', 'expired'] as const) {
          await make(baseSpec(i, owners, visibility), i, visible);
          i++;
        }
      }
    }
    await until(async () => (await indexed(visible)) === visible.length, 20_000, 'state A indexed');
  });
  after(async () => p?.stop());

  it(`answers every caller the same whether or not the index holds content it may not read (${RUNS} generated requests)`, async () => {
    console.log(`    non-interference seed ${SEED} (NONINTERFERENCE_SEED=${SEED} reproduces it)`);
    const requests = fc.sample(requestArb(T), { seed: SEED, numRuns: RUNS });
    const completions = fc.sample(completionArb(), { seed: SEED + 1, numRuns: 120 });
    await quiet();
    const before = await fingerprint([]);

    const stateA = await runAll(requests, completions);
    expect(await fingerprint([]), 'the index changed during state A (something else writes to it): the comparison would be invalid').to.equal(before);

    // State B: content that none of the three callers may read.
    let i = 100;
    for (const owners of [undefined, ['culture']]) {
      for (const visibility of ['latest', 'hidden', 'future', 'expired'] as const) {
        await make(forbiddenSpec(i, owners, visibility), i, hiddenFromAll);
        i++;
      }
    }
    await until(async () => (await indexed(hiddenFromAll)) === hiddenFromAll.length, 20_000, 'the forbidden content indexed');
    expect(await fingerprint(hiddenFromAll), 'documents other than the forbidden ones changed: the comparison would be invalid').to.equal(before);

    const stateB = await runAll(requests, completions);
    expect(await fingerprint(hiddenFromAll), 'the index changed during state B: the comparison would be invalid').to.equal(before);

    const statuses = new Map<number, number>();
    const problems: string[] = [];
    requests.forEach((r, k) => {
      statuses.set(stateA.search[k].status, (statuses.get(stateA.search[k].status) ?? 0) + 1);
      const a = normalize(stateA.search[k], r.scoreSorted);
      const b = normalize(stateB.search[k], r.scoreSorted);
      if (JSON.stringify(a) !== JSON.stringify(b))
        problems.push(
          `${r.caller} GET ?${new URLSearchParams(r.params)}\n      without: ${JSON.stringify(a).slice(0, 600)}\n      with:    ${JSON.stringify(b).slice(0, 600)}`,
        );
    });
    completions.forEach((c, k) => {
      const a = JSON.stringify(stateA.completion[k]);
      const b = JSON.stringify(stateB.completion[k]);
      if (a !== b) problems.push(`${c.caller} complete ${JSON.stringify(c.input)}\n      without: ${a.slice(0, 600)}\n      with:    ${b.slice(0, 600)}`);
    });
    const found = stateA.search.filter((r) => r.status === 200 && (r.body as { response?: { numFound?: number } }).response?.numFound).length;
    console.log(
      `    ${requests.length} searches (by status: ${[...statuses]
        .sort()
        .map(([s, n]) => `${s}×${n}`)
        .join(' ')}; ${found} found something) and ${completions.length} completions, twice each`,
    );
    if (process.env.NONINTERFERENCE_VERBOSE) {
      const why = new Map<string, number>();
      for (const o of stateA.search)
        if (o.status !== 200)
          why.set(
            String((o.body as { message?: string }).message).slice(0, 70),
            (why.get(String((o.body as { message?: string }).message).slice(0, 70)) ?? 0) + 1,
          );
      console.log(
        [...why]
          .sort((a, b) => b[1] - a[1])
          .map(([m, n]) => `      ${n} ${m}`)
          .join('\n'),
      );
    }
    if (problems.length)
      throw new Error(
        `${problems.length} answer(s) changed when content the caller may not read was added (seed ${SEED}):\n  ${problems.slice(0, 6).join('\n  ')}`,
      );
    // the property is not vacuous: callers see documents, and refusals happen
    expect(found).to.be.greaterThan(RUNS / 10);
    expect(statuses.get(400) ?? 0).to.be.greaterThan(0);
    expect(stateA.completion.some((c) => ((c.body as { entities?: unknown[] }).entities ?? []).length > 0)).to.equal(true);
  });

  async function runAll(requests: GenSearch[], completions: GenCompletion[]) {
    const search: Outcome[] = [];
    for (const r of requests) {
      const a = await clients[r.caller].req('GET', `${p.url}/search-service/content/select?${new URLSearchParams(r.params)}`);
      search.push({ status: a.status, body: a.json ?? a.text });
    }
    const completion: Outcome[] = [];
    for (const c of completions) {
      const a = await clients[c.caller].req('GET', `${p.url}/taxonomy-service/complete/${encodeURIComponent(dim)}/${encodeURIComponent(c.input)}`);
      completion.push({ status: a.status, body: a.json ?? a.text });
    }
    return { search, completion };
  }
});

interface Outcome {
  status: number;
  body: unknown;
}

/** An entity path `A/B` in the svcCategorization shape. */
function nested(path: string[]): Record<string, unknown> {
  const [name, ...rest] = path;
  return { name, entities: rest.length ? [nested(rest)] : [] };
}

const TITLES = ['alpha', 'beta', 'gamma', 'delta'];
const TAGS = ['red', 'green', 'blue'];
const WORDS = ['quick brown fox', 'lazy dog sleeps', 'quick plan ahead', 'brown dog barks loudly'];
const CATEGORIES = ['Alpha Team', 'Beta Squad', 'Alpha Team/Gamma Group', 'Delta Force'];

function baseSpec(i: number, owners: string[] | undefined, visibility: Spec['visibility']): Spec {
  return {
    title: TITLES[i % TITLES.length],
    tags: [TAGS[i % 3], TAGS[(i + 1) % 3]].slice(0, 1 + (i % 2)),
    n: 1 + (i % 5),
    words: WORDS[i % WORDS.length],
    when: new Date(Date.UTC(2020, i % 12, 1 + i)).toISOString(),
    flag: i % 3 === 0,
    categories: [CATEGORIES[i % CATEGORIES.length]],
    owners,
    visibility,
  };
}

/** Forbidden content: values shared with state A and values of its own, so either kind of leak shows. */
function forbiddenSpec(i: number, owners: string[] | undefined, visibility: Spec['visibility']): Spec {
  const own = i % 2 === 0;
  return {
    title: own ? 'omega' : TITLES[i % TITLES.length],
    tags: own ? ['black', TAGS[i % 3]] : [TAGS[i % 3]],
    n: own ? 99 : 1 + (i % 5),
    words: own ? 'secret plan omega' : WORDS[i % WORDS.length],
    when: new Date(Date.UTC(own ? 2021 : 2020, i % 12, 1)).toISOString(),
    flag: !own,
    categories: own ? ['Omega Secret', 'Alpha Team/Omega Cell'] : [CATEGORIES[i % CATEGORIES.length]],
    owners,
    visibility,
    child: i === 100,
  };
}

interface GenSearch {
  caller: Caller;
  params: [string, string][];
  /** Relevance order: compared as a set (the whole result is on the page). */
  scoreSorted: boolean;
}
interface GenCompletion {
  caller: Caller;
  input: string;
}

const SORT_FIELDS = ['title_s', 'n_i', 'when_dt', 'version', 'svc_type_s'];
const FACET_FIELDS = ['title_s', 'tags_ss', 'n_i', 'id', 'svc_type_s', 'svc_views_ss', 'svc_security_context_ss', 'svc_contentstate_hidden_b', 'root'];
const QUERY_FIELDS = ['words_lc', 'title_s', 'tags_ss', 'id'];

function requestArb(T: string): fc.Arbitrary<GenSearch> {
  const scope = `svc_type_s:${T}*`;
  const specific = fc.constantFrom(
    'title_s:alpha',
    'title_s:(alpha OR omega)',
    'tags_ss:black',
    'tags_ss:red AND n_i:[2 TO 4]',
    'words_lc:sec*',
    'words_lc:"secret plan"',
    'words_lc:quick',
    '-flag_b:true',
    'n_i:99',
    'when_dt:[2020-01-01T00:00:00Z TO 2020-07-01T00:00:00Z]',
    'id:c\\:*',
    'svc_views_ss:svcLatest',
    'svc_security_context_ss:culture',
    '(title_s:beta OR tags_ss:green) AND -n_i:3',
    'part_s:*',
    'n_i:[3 TO *]',
  );
  const queries = fc.oneof({ weight: 2, arbitrary: fc.constantFrom('*:*', scope) }, { weight: 3, arbitrary: specific });
  const refusedQueries = fc.constantFrom(
    '{!join from=root to=id}*:*',
    `_val_:"docfreq(tags_ss,'black')"`,
    '_query_:"{!lucene}tags_ss:black"',
    '\\_query\\_:"\\{!join from=id to=root}*:*"',
    '{!parent which="svc_type_s:*"}part_s:*',
    'title_s:omegx~1',
    '${x:tags_ss:black}',
  );
  const words = fc.constantFrom('secret', 'quick fox', 'alpha omega', 'plan', 'dog', 'black red');
  const field = (list: string[]) => fc.constantFrom(...list);
  const intIn = (min: number, max: number) => fc.integer({ min, max }).map(String);

  // The query part: lucene (default or named), edismax or dismax with their parameters.
  const lucene = fc
    .record({
      q: fc.oneof({ weight: 30, arbitrary: queries }, { weight: 1, arbitrary: refusedQueries }),
      defType: maybe(fc.constant('lucene')),
      op: maybe(fc.constantFrom('AND', 'OR')),
    })
    .map(({ q, defType, op }) => {
      const out: [string, string][] = [['q', q]];
      if (defType) out.push(['defType', defType]);
      if (op) out.push(['q.op', op]);
      return out;
    });
  const dismax = fc
    .record({
      defType: fc.constantFrom('edismax', 'dismax'),
      q: words,
      qf: fc.uniqueArray(fc.tuple(field(QUERY_FIELDS), maybe(fc.constantFrom('2', '0.5', '10'))), { minLength: 1, maxLength: 3, selector: ([f]) => f }),
      pf: maybe(field(['words_lc', 'title_s'])),
      mm: maybe(fc.constantFrom('1', '100%', '2<-1', '50%', '0')),
    })
    .map(({ defType, q, qf, pf, mm }) => {
      const out: [string, string][] = [
        ['defType', defType],
        ['q', q],
        ['qf', qf.map(([f, b]) => (b ? `${f}^${b}` : f)).join(' ')],
      ];
      if (pf) out.push(['pf', pf]);
      if (mm) out.push(['mm', mm]);
      return out;
    });
  const query = fc.oneof({ weight: 3, arbitrary: lucene }, { weight: 1, arbitrary: dismax });

  const fq = fc
    .array(fc.oneof({ weight: 30, arbitrary: specific }, { weight: 1, arbitrary: refusedQueries }), { maxLength: 1 })
    .map((l) => l.map((v): [string, string] => ['fq', v]));
  const fieldSort = fc.uniqueArray(fc.tuple(field(SORT_FIELDS), fc.constantFrom('asc', 'desc')), { maxLength: 2, selector: ([f]) => f });
  const fl = maybe(
    fc.oneof(
      { weight: 30, arbitrary: fc.constantFrom('id', 'id,title_s,score', '*', 'svc_*,id', 'id n_i tags_ss', '*,score') },
      { weight: 1, arbitrary: fc.constantFrom('id,[docid]', 'id,x:docfreq(tags_ss,black)', 'id,[child]') },
    ),
  );

  const facets = fc
    .record({
      fields: fc.uniqueArray(field(FACET_FIELDS), { maxLength: 2 }),
      limit: maybe(intIn(-1, 6)),
      offset: maybe(intIn(0, 3)),
      sort: maybe(fc.constantFrom('count', 'index')),
      prefix: maybe(fc.constantFrom('a', 'c:', 'b', 'o', 'sec')),
      mincount: maybe(intIn(-1, 2)),
      perField: maybe(
        fc.tuple(
          field(FACET_FIELDS),
          fc.constantFrom<[string, string]>(
            ['facet.mincount', '0'],
            ['facet.mincount', '2'],
            ['facet.limit', '-1'],
            ['facet.limit', '1'],
            ['facet.prefix', 'o'],
            ['facet.prefix', 'g'],
            ['facet.sort', 'index'],
            ['facet.offset', '1'],
            ['facet.mincount', 'zero'],
          ),
        ),
      ),
      query: fc.array(queries, { maxLength: 2 }),
      range: maybe(
        fc.constantFrom<[string, string, string, string][]>(
          [['n_i', '0', '100', '10']],
          [['when_dt', '2020-01-01T00:00:00Z', '2022-01-01T00:00:00Z', '+3MONTHS']],
          [['version', '0', '10', '1']],
        ),
      ),
      pivot: maybe(fc.constantFrom('tags_ss,title_s', 'svc_security_context_ss,n_i', 'title_s,id')),
      refused: maybe(
        fc.constantFrom<[string, string]>(
          ['facet.method', 'enum'],
          ['facet.missing', 'true'],
          ['facet.field', '{!key=k}id'],
          ['facet.pivot.mincount', '0'],
          ['facet.range.other', 'all'],
          // a tokenized field: no facet (checkFieldUses)
          ['facet.field', 'words_lc'],
        ),
        1 / 30,
      ),
    })
    .map((f) => {
      const out: [string, string][] = [['facet', 'true']];
      // A pivot counts every node of its tree (SEARCH_MAX_FACET_VALUES): every value (-1, sent as
      // 1000) at each level would be refused, so a pivot's levels take a limit of their own.
      const pivotLevel = (field: string) => f.pivot?.split(',').includes(field);
      const limit = f.pivot && f.limit === '-1' ? '6' : f.limit;
      const perField = f.perField && pivotLevel(f.perField[0]) && f.perField[1][0] === 'facet.limit' && f.perField[1][1] === '-1' ? null : f.perField;
      for (const x of f.fields) out.push(['facet.field', x]);
      if (limit) out.push(['facet.limit', limit]);
      if (f.offset) out.push(['facet.offset', f.offset]);
      if (f.sort) out.push(['facet.sort', f.sort]);
      if (f.prefix) out.push(['facet.prefix', f.prefix]);
      if (f.mincount) out.push(['facet.mincount', f.mincount]);
      if (perField) out.push([`f.${perField[0]}.${perField[1][0]}`, perField[1][1]]);
      for (const q of f.query) out.push(['facet.query', q]);
      for (const [name, start, end, gap] of f.range ?? [])
        out.push(['facet.range', name], ['facet.range.start', start], ['facet.range.end', end], ['facet.range.gap', gap]);
      if (f.pivot) out.push(['facet.pivot', f.pivot]);
      if (f.refused) out.push(f.refused);
      return out;
    });
  const stats = fc
    .uniqueArray(field(['n_i', 'version']), { minLength: 1, maxLength: 2 })
    .map((l): [string, string][] => [['stats', 'true'], ...l.map((f): [string, string] => ['stats.field', f])]);
  const group = fc
    .record({ field: field(['title_s', 'n_i', 'svc_type_s']), limit: maybe(intIn(0, 3)), offset: maybe(intIn(0, 2)) })
    .map(({ field: f, limit, offset }) => {
      const out: [string, string][] = [
        ['group', 'true'],
        ['group.field', f],
      ];
      if (limit) out.push(['group.limit', limit]);
      if (offset) out.push(['group.offset', offset]);
      return out;
    });
  const hl = fc
    .record({ fl: maybe(fc.constantFrom('words_lc', 'title_s', 'words_lc,title_s', '*')), snippets: maybe(intIn(1, 3)), fragsize: maybe(intIn(0, 60)) })
    .map(({ fl: f, snippets, fragsize }) => {
      const out: [string, string][] = [['hl', 'true']];
      if (f) out.push(['hl.fl', f]);
      if (snippets) out.push(['hl.snippets', snippets]);
      if (fragsize) out.push(['hl.fragsize', fragsize]);
      return out;
    });
  const extras = fc.record({
    inline: maybe(fc.constant<[string, string]>(['inlineData', 'true']), 1 / 3),
    variant: maybe(fc.constantFrom<[string, string]>(['variant', 'svcIndexing'], ['variant', 'teaser']), 1 / 5),
    view: maybe(fc.constantFrom<[string, string]>(['view', 'svcPublic'], ['view', 'svcLatest'], ['view', 'nosuchview']), 1 / 4),
    timeAllowed: maybe(fc.constant<[string, string]>(['timeAllowed', '60000']), 1 / 5),
    omitHeader: maybe(fc.constant<[string, string]>(['omitHeader', 'true']), 1 / 4),
    refused: maybe(
      fc.constantFrom<[string, string]>(
        ['mlt', 'true'],
        ['debugQuery', 'true'],
        ['terms', 'true'],
        ['qt', '/terms'],
        ['rows', '1001'],
        ['start', '-1'],
        ['sort', 'docfreq(tags_ss,black) asc'],
      ),
      1 / 30,
    ),
  });

  return fc
    .record({
      caller: fc.constantFrom(...CALLERS),
      query,
      scoped: fc.boolean(),
      fq,
      relevance: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
      sort: fieldSort,
      idDir: fc.constantFrom('asc', 'desc'),
      start: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 8 }) }),
      rows: fc.oneof(fc.integer({ min: 0, max: 12 }), fc.constant(1000)),
      fl,
      facets: maybe(facets, 1 / 2),
      stats: maybe(stats, 1 / 5),
      group: maybe(group, 1 / 5),
      hl: maybe(hl, 1 / 4),
      cursor: maybe(fc.constant(true), 1 / 6),
      extras,
    })
    .map((g) => {
      const params: [string, string][] = [...g.query];
      // Relevance-sorted requests fit on one page (scoped, rows 1000, from the start, ungrouped).
      const scoreSorted = g.relevance && g.group === null && g.cursor === null;
      if (g.scoped || scoreSorted) params.push(['fq', scope]);
      params.push(...g.fq);
      if (scoreSorted) {
        params.push(['sort', 'score desc'], ['rows', '1000']);
      } else {
        params.push(['sort', [...g.sort.map(([f, d]) => `${f} ${d}`), `id ${g.idDir}`].join(',')]);
        if (g.cursor) params.push(['cursorMark', '*']);
        else if (g.start) params.push(['start', String(g.start)]);
        params.push(['rows', String(g.rows)]);
      }
      if (g.fl) params.push(['fl', g.fl]);
      for (const part of [g.facets, g.stats, scoreSorted || g.cursor ? null : g.group, g.hl]) if (part) params.push(...part);
      for (const e of Object.values(g.extras)) if (e) params.push(e);
      return { caller: g.caller, params, scoreSorted };
    });
}

/** `arb` with probability `p`, else null. */
function maybe<T>(arb: fc.Arbitrary<T>, p = 0.5): fc.Arbitrary<T | null> {
  const n = Math.round(1 / p);
  return fc.oneof({ weight: n - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
}

function completionArb(): fc.Arbitrary<GenCompletion> {
  const token = fc.constantFrom(
    'a',
    'al',
    'alpha',
    'alpha t',
    'o',
    'om',
    'omega',
    'omega s',
    'b',
    'b s',
    'g',
    'd f',
    'team',
    'secret',
    'c',
    'x',
    'alpha team/g',
    'a/o',
    'a t/omega c',
    'sq',
  );
  return fc.record({ caller: fc.constantFrom(...CALLERS), input: token });
}

/** The answer without what may differ legitimately: timing, scores, and relevance order. */
function normalize(o: Outcome, scoreSorted: boolean): unknown {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) if (k !== 'QTime' && k !== 'score' && k !== 'maxScore') out[k] = strip(x);
      return out;
    }
    return v;
  };
  const body = strip(o.body) as { response?: { docs?: { id?: string }[] } };
  if (scoreSorted && body.response?.docs) body.response.docs = [...body.response.docs].sort((a, b) => String(a.id).localeCompare(String(b.id)));
  return { status: o.status, body };
}
