import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type IndexSchema, indexSchemaOf, parseSchemaXml } from '../content/search-document.js';
import { AppError } from '../errors.js';
import { loadSettings } from '../../config/settings.js';
import type { Exchange } from './http.js';
import { SearchService, type SearchServiceDeps } from './search-service.js';
import {
  checkParameterCount,
  checkSearchParams,
  engineErrorQuery,
  HIGHLIGHT_MAX_ANALYZED_CHARS,
  isAllowedSearchParameter,
  MAX_FACET_OFFSET,
  MAX_FL_FIELDS,
  MAX_GROUP_OFFSET,
  MAX_GROUPED_DOCUMENTS,
  MAX_GROUPS,
  MAX_HIGHLIGHTED_ROWS,
  MAX_LISTED_FIELDS,
  MAX_PARAMETER_REPEATS,
  MAX_PHRASE_SLOP,
  MAX_PIVOT_LEVELS,
  MAX_SEARCH_PARAMETERS,
  MAX_SORT_CLAUSES,
  MAX_SORT_VALUES,
  MAX_STATS_FIELDS,
  MAX_VALUE_LENGTH,
  SEARCH_PARAMETER_ALLOWLIST,
  type SearchLimits,
  unescapedForParser,
} from './search-params.js';

/** The 400 a request gets, or null when it passes. */
function refusal(
  params: Record<string, string> | [string, string][],
  limits?: SearchLimits,
  schema?: IndexSchema,
): { parameter: unknown; message: string } | null {
  try {
    checkSearchParams(new URLSearchParams(params), limits, schema);
    return null;
  } catch (e) {
    expect(e).to.be.instanceOf(AppError);
    const err = e as AppError;
    expect(err.http).to.equal(400);
    return { parameter: err.extraInfo.parameter, message: err.message };
  }
}

describe('search parameter allowlist (CONTRACT §20)', () => {
  it('lets every allowed parameter through with a valid value', () => {
    const ok: [string, string][] = [
      ['q', 'title_s:"a b" AND (n_i:[1 TO 5] OR -flag_b:true) my_val_s:x _val_s:y'],
      ['fq', 'svc_type_s:article'],
      ['fq', 'when_dt:[NOW-1DAY TO *]'],
      ['defType', 'edismax'],
      ['qf', 'title_s^2 body_lc^0.5 id'],
      ['pf', 'title_s'],
      ['mm', '2<-25% 9<-3'],
      ['q.op', 'AND'],
      ['df', 'title_s'],
      ['sort', 'n_i desc, score desc,id asc'],
      ['start', '100'],
      ['rows', '30'],
      ['fl', 'id,title_s score svc_*'],
      ['fl', '*'],
      ['facet', 'true'],
      ['facet.field', 'tags_ss'],
      ['facet.query', 'n_i:[1 TO 3]'],
      ['facet.range', 'when_dt'],
      ['facet.range.start', 'NOW/DAY-1YEAR'],
      ['facet.range.end', '2030-01-01T00:00:00Z'],
      ['facet.range.gap', '+1MONTH'],
      ['f.n_i.facet.range.start', '-10.5'],
      ['f.n_i.facet.range.gap', '2'],
      ['facet.pivot', 'tags_ss,title_s'],
      ['facet.limit', '-1'],
      ['facet.offset', '10'],
      ['facet.sort', 'index'],
      ['facet.prefix', 'ab c'],
      ['facet.mincount', '3'],
      ['f.tags_ss.facet.limit', '5'],
      ['stats', 'true'],
      ['stats.field', 'n_i'],
      ['group', 'true'],
      ['group.field', 'title_s'],
      ['group.limit', '3'],
      ['group.offset', '1'],
      ['hl', 'on'],
      ['hl.fl', 'body_lc,*_s'],
      ['hl.snippets', '3'],
      ['hl.fragsize', '0'],
      ['cursorMark', 'AoE/Zm9v+bar='],
      ['timeAllowed', '5000'],
      ['cpuAllowed', '1000'],
      ['omitHeader', 'true'],
      ['wt', 'json'],
      ['view', 'svcPublic'],
      ['variant', 'teaser'],
      ['inlineData', ''],
    ];
    expect(refusal(ok)).to.equal(null);
    const r = checkSearchParams(new URLSearchParams(ok));
    expect(r).to.include({ view: 'svcPublic', variant: 'teaser', inlineData: true });
    expect([...r.engine.keys()]).to.not.include.members(['view', 'variant', 'inlineData']);
    expect(r.engine.getAll('wt')).to.deep.equal(['json']);
    expect(r.engine.getAll('fq')).to.deep.equal(['svc_type_s:article', 'when_dt:[NOW-1DAY TO *]']);
  });

  it('takes a query of 1,000 version ids; refuses a value longer than MAX_VALUE_LENGTH', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `"c:01M84HJBPR7FF3CE6KMQGP${String(i).padStart(4, '0')}:01M84HJBPR7FF3CE6KMQGP0F92"`);
    expect(refusal({ q: `id:(${ids.join(' OR ')})`, rows: '1000' })).to.equal(null);
    expect(refusal({ q: 'a'.repeat(MAX_VALUE_LENGTH + 1) })).to.deep.equal({
      parameter: 'q',
      message: `Parameter 'q': longer than ${MAX_VALUE_LENGTH} characters`,
    });
  });

  it('refuses any other parameter, naming it (handlers, shards, streams, components that read past the filters)', () => {
    for (const name of [
      'qt',
      'shards',
      'shards.qt',
      'stream.body',
      'stream.url',
      'collection',
      'distrib',
      'json',
      'json.facet',
      'json.query',
      'echoParams',
      'debug',
      'debugQuery',
      'explainOther',
      'expand',
      'expand.q',
      'mlt',
      'mlt.fl',
      'terms',
      'terms.fl',
      'spellcheck',
      'suggest',
      'rq',
      'uf',
      'q.alt',
      'bq',
      'bf',
      'boost',
      'pf2',
      'hl.q',
      'hl.qparser',
      'hl.method',
      'group.query',
      'group.func',
      'group.main',
      'group.ngroups',
      'stats.facet',
      'stats.calcdistinct',
      'facet.method',
      'facet.missing',
      'facet.pivot.mincount',
      'facet.range.other',
      'facet.range.include',
      'facet.interval',
      'facet.heatmap',
      'facet.contains',
      'facet.matches',
      'facet.excludeTerms',
      'sub.q',
      'x.fq',
      'f.id.qf',
      'f.id.facet.method',
      'f.{!x}.facet.limit',
      'f._val_.facet.limit',
      'indent',
      'sow',
      'cache',
      'minExactCount',
      'segmentTerminateEarly',
      'constructor',
      '__proto__',
      'toString',
      '',
    ]) {
      const r = refusal({ q: '*:*', [name]: 'x' });
      expect(r, name).to.not.equal(null);
      expect(r!.parameter, name).to.equal(name);
      expect(r!.message, name).to.equal(`Parameter '${name}' is not allowed through the search service`);
      expect(isAllowedSearchParameter(name), name).to.equal(false);
    }
  });

  it('refuses local parameters in every parameter, in every spelling', () => {
    const spellings = [
      '{!join from=id to=id}x',
      '{ !join from=id to=id}x',
      '{\t!lucene}x',
      'x AND {!lucene}y',
      '\\{!join}x',
      '\\u007b!join}x',
      '\\u007B\\u0021join}x',
      '\\\\u007b!join}x',
      'a:"\\{!x}"',
    ];
    for (const name of Object.keys(SEARCH_PARAMETER_ALLOWLIST)) {
      for (const value of spellings) {
        const r = refusal([[name, value]]);
        expect(r, `${name}=${value}`).to.not.equal(null);
        expect(r!.parameter, `${name}=${value}`).to.equal(name);
      }
    }
    expect(refusal({ q: '{!join from=id to=id}x' })!.message).to.equal("Parameter 'q': local parameters ({!...}) are not allowed");
    expect(refusal({ 'f.id.facet.prefix': '{!x}' })!.parameter).to.equal('f.id.facet.prefix');
  });

  it("refuses Solr's parameter macros in every parameter (q=${facet.prefix} would run a value no rule of q checked)", () => {
    for (const name of Object.keys(SEARCH_PARAMETER_ALLOWLIST)) {
      for (const value of ['${facet.prefix}', 'a ${x:_val_:1}', '$ {x}', '\\${x}', '\\u0024{x}']) {
        expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
      }
    }
    expect(refusal({ q: '${facet.prefix}', 'facet.prefix': 'x' })!.message).to.equal("Parameter 'q': parameter macros (${...}) are not allowed");
    expect(refusal({ q: 'price_s:$5 AND {a TO b}' }), 'a $ or a { alone is text').to.equal(null);
  });

  it('refuses the magic fields _query_ and _val_ in q, fq and facet.query, escaped or not', () => {
    for (const name of ['q', 'fq', 'facet.query']) {
      for (const value of [
        '_query_:"x"',
        '*:* AND _val_:"docfreq(id,x)"',
        '+_val_:1',
        '-_query_:x',
        '(_val_:1)',
        '\\_val\\_:1',
        '\\u005fval\\u005f:1',
        '\\u005Fquery\\u005F:x',
        '_VAL_:1',
      ]) {
        expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
      }
      // fields that merely contain the words are fields
      expect(refusal([[name, 'my_val_s:1 AND _val_s:2 AND x_query_ss:3']]), name).to.equal(null);
    }
  });

  it("refuses Solr's _version_ everywhere (its low bits count index operations of the same millisecond, content the caller may not read included)", () => {
    for (const name of ['q', 'fq', 'facet.query']) {
      for (const value of ['_version_:[0 TO *]', 'x AND _version_:1', '\\_version\\_:1', '\\u005fversion\\u005f:1', '(_VERSION_:1)']) {
        expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
      }
      expect(refusal([[name, 'my_version_s:1 AND _version_s:2']]), name).to.equal(null);
    }
    for (const [name, value] of [
      ['fl', '_version_'],
      ['fl', 'id,_version_'],
      ['sort', '_version_ asc'],
      ['facet.field', '_version_'],
      ['stats.field', '_version_'],
      ['group.field', '_version_'],
    ]) {
      expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
    }
  });

  it('refuses fuzzy terms in q, fq and facet.query (their expansion reads the whole index); phrase proximity stays', () => {
    for (const name of ['q', 'fq', 'facet.query']) {
      // A quote inside a regular expression is no quote to the parser: `/["]/ OR w~1` hid its fuzzy
      // term from a check that followed quotes (security review of the thirteenth session). A `~`
      // inside a phrase is refused too, and one after a space (the parser skips the space).
      for (const value of ['foo~', 'title_s:abc~2', 'a AND b~0.5', '"x" y~', 'a\\"~1', 'svc_text:/["]/ OR svc_text:word~1', '/"/ w~2 /"/', '"a~b"', 'w ~1'])
        expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
      for (const value of ['"a b"~2', 'a\\~b', 'svc_views_ss:my\\~view', '"a \\" b"~3']) expect(refusal([[name, value]]), `${name}=${value}`).to.equal(null);
    }
  });

  it('fl: field names, * globs and score only; no transformers, functions or aliases', () => {
    for (const fl of ['id', 'id,title_s', 'id title_s', '*', 'svc_*', '*_s,score', ' id , score ']) expect(refusal({ fl }), fl).to.equal(null);
    for (const fl of [
      'id,[value v=1]',
      '[docid]',
      'id,[child]',
      '[subquery]',
      'id,[explain]',
      'id,[json]',
      'x:id',
      'df:docfreq(id,x)',
      'docfreq(id,x)',
      'numdocs()',
      'id,$x',
      "'x'",
      'id,"x"',
      '_val_',
      'id;x',
      '',
    ]) {
      expect(refusal({ fl })?.parameter, fl).to.equal('fl');
    }
  });

  it('sort: fields and score with asc or desc; no functions', () => {
    for (const sort of ['id asc', 'score desc', 'n_i desc,id asc', 'title_s  ASC']) expect(refusal({ sort }), sort).to.equal(null);
    for (const sort of [
      'docfreq(id,x) asc',
      'id',
      'id up',
      'if(exists(id),1,0) desc',
      'query({!v=x}) desc',
      '_docid_ asc',
      '$s asc',
      'id asc,',
      'field(id) asc',
      'id asc;x',
    ]) {
      expect(refusal({ sort })?.parameter, sort).to.equal('sort');
    }
  });

  it('field-name parameters take field names, never local params, functions or pseudo fields', () => {
    for (const name of ['df', 'facet.field', 'facet.range', 'stats.field', 'group.field']) {
      expect(refusal([[name, 'tags_ss']]), name).to.equal(null);
      for (const value of ['{!ex=t}tags_ss', 'docfreq(id,x)', 'a b', 'a:b', '_val_', '_query_', '_docid_', '1abc', 'a.b', '$x', '']) {
        expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
      }
    }
    for (const name of ['qf', 'pf']) {
      expect(refusal([[name, 'a^2 b^0.5,c']]), name).to.equal(null);
      for (const value of ['a^x', 'a^2^3', 'a~2', '{!x}a', 'a:b', '']) expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
    }
    expect(refusal({ 'facet.pivot': 'a,b' })).to.equal(null);
    expect(refusal({ 'facet.pivot': 'a,{!stats=s}b' })?.parameter).to.equal('facet.pivot');
    expect(refusal({ 'hl.fl': 'a,b*' })).to.equal(null);
    expect(refusal({ 'hl.fl': 'a,b(x)' })?.parameter).to.equal('hl.fl');
  });

  it('numbers are numbers within bounds; enumerations are exact', () => {
    const bad: [string, string][] = [
      ['rows', '1001'],
      ['rows', '-1'],
      ['rows', '10abc'],
      ['rows', '1e3'],
      ['rows', ''],
      ['start', '-1'],
      ['start', '100001'],
      ['start', '2147483647'],
      ['facet.limit', '-2'],
      ['facet.offset', '-1'],
      ['facet.mincount', 'x'],
      ['group.limit', '-1'],
      ['group.limit', '1001'],
      ['group.offset', '100001'],
      ['hl.snippets', '101'],
      ['hl.fragsize', '-1'],
      ['timeAllowed', '-1'],
      ['timeAllowed', '99999999999'],
      ['defType', 'func'],
      ['defType', 'join'],
      ['defType', 'Lucene'],
      ['q.op', 'NOT'],
      ['facet.sort', 'count desc'],
      ['facet', 'yes'],
      ['wt', 'xml'],
      ['wt', 'csv'],
      ['wt', 'velocity'],
      ['mm', 'abc'],
      ['mm', '1<'],
      ['facet.range.start', 'yesterday'],
      ['facet.range.gap', '+1FORTNIGHT'],
      ['facet.range.end', 'NOW+1DAY{!x}'],
      ['cursorMark', 'a b'],
      ['view', 'a/b'],
      ['variant', ''],
      ['f.id.facet.limit', 'x'],
    ];
    for (const [k, v] of bad) expect(refusal([[k, v]])?.parameter, `${k}=${v}`).to.equal(k);
    // SolrJ's binary format passes (issue 22 part 5), with the version it sends
    expect(
      refusal([
        ['wt', 'javabin'],
        ['version', '2'],
      ]),
    ).to.equal(null);
    expect(refusal({ rows: '0', start: '0', 'facet.limit': '-1', 'facet.range.start': '-1.5e3', 'facet.range.gap': '/DAY+1HOUR', timeAllowed: '0' })).to.equal(
      null,
    );
  });

  it('single-valued parameters are given once; fq, fl and the facet, stats and group fields may repeat', () => {
    expect(
      refusal([
        ['rows', '1'],
        ['rows', '2'],
      ])?.message,
    ).to.equal("Parameter 'rows' may be given once");
    expect(
      refusal([
        ['defType', 'lucene'],
        ['defType', 'lucene'],
      ])?.parameter,
    ).to.equal('defType');
    expect(
      refusal([
        ['fq', 'a:1'],
        ['fq', 'b:2'],
        ['fl', 'id'],
        ['fl', 'x'],
        ['facet.field', 'a'],
        ['facet.field', 'b'],
        ['facet.query', 'a:1'],
        ['facet.query', 'b:1'],
        ['facet.pivot', 'a,b'],
        ['facet.pivot', 'b,a'],
        ['facet.range', 'n_i'],
        ['facet.range', 'm_i'],
        ['stats.field', 'a'],
        ['stats.field', 'b'],
        ['group.field', 'a'],
        ['group.field', 'b'],
      ]),
    ).to.equal(null);
  });

  it('facet.mincount, global and per field, is raised to at least 1 (no facet lists terms outside the result)', () => {
    const r = checkSearchParams(
      new URLSearchParams([
        ['facet', 'true'],
        ['facet.field', 'id'],
        ['facet.mincount', '0'],
        ['f.id.facet.mincount', '-5'],
        ['f.a.facet.mincount', '7'],
      ]),
    );
    expect(r.engine.getAll('facet.mincount')).to.deep.equal(['1']);
    expect(r.engine.getAll('f.id.facet.mincount')).to.deep.equal(['1']);
    expect(r.engine.getAll('f.a.facet.mincount')).to.deep.equal(['7']);
    expect(checkSearchParams(new URLSearchParams({ facet: 'true', 'facet.field': 'id' })).engine.getAll('facet.mincount')).to.deep.equal(['1']);
  });

  it('breaks every tie of the sort, and of the order within a group, by the document id (SECURITY.md: tied results)', () => {
    const engine = (params: Record<string, string>) => checkSearchParams(new URLSearchParams(params)).engine;
    expect(engine({ q: 'x' }).getAll('sort')).to.deep.equal(['score desc,id asc']);
    expect(engine({ q: 'x', sort: 'n_i desc' }).getAll('sort')).to.deep.equal(['n_i desc,id asc']);
    expect(engine({ q: 'x', sort: 'score asc, n_i desc' }).getAll('sort')).to.deep.equal(['score asc, n_i desc,id asc']);
    // An id already in the sort decides every tie after it.
    expect(engine({ q: 'x', sort: 'id desc,n_i asc' }).getAll('sort')).to.deep.equal(['id desc,n_i asc']);
    expect(engine({ q: 'x', group: 'true', 'group.field': 'a_s' }).getAll('group.sort')).to.deep.equal(['score desc,id asc']);
    expect(engine({ q: 'x' }).has('group.sort')).to.equal(false);
  });

  describe('range facets: at most SEARCH_MAX_RANGE_BUCKETS buckets a request, counted before anything reaches the engine', () => {
    // A fixed NOW, so that date math counts the same whenever the test runs.
    const NOW = Date.UTC(2024, 0, 15, 12, 30, 0);
    const at = (maxRangeBuckets: number): SearchLimits => ({ maxRangeBuckets, now: () => NOW });
    /** The largest bound a request passes: refused at n - 1, passes at n (n buckets). */
    const buckets = (params: Record<string, string> | [string, string][], n: number) => {
      expect(refusal(params, at(n)), `passes at ${n}`).to.equal(null);
      expect(refusal(params, at(n - 1))?.parameter, `refused at ${n - 1}`).to.be.a('string');
    };
    const range = (field: string, start: string, end: string, gap: string) => ({
      facet: 'true',
      'facet.range': field,
      'facet.range.start': start,
      'facet.range.end': end,
      'facet.range.gap': gap,
    });

    it("the reported search (10,000,000 buckets of 'version', anonymous) answers 400 naming the gap, by default", () => {
      const r = refusal({ q: '*:*', rows: '0', ...range('version', '0', '10000000', '1') });
      expect(r?.parameter).to.equal('facet.range.gap');
      expect(r?.message).to.match(/^Parameter 'facet.range.gap': /);
      expect(r?.message).to.contain('10000000').and.contain('1000');
      expect(refusal(range('version', '0', '1000', '1'))).to.equal(null);
      expect(refusal(range('version', '0', '1001', '1'))?.parameter).to.equal('facet.range.gap');
    });

    it('numbers: (end - start) / gap, rounded up, exact for 18-digit values and exponents', () => {
      buckets(range('n_i', '0', '10', '3'), 4);
      buckets(range('n_i', '-1.5e3', '1.5e3', '0.5'), 6000);
      buckets(range('n_l', '100000000000000000', '100000000000000010', '1'), 10);
      buckets(range('n_l', '0', '999999999999999999', '999999999999999'), 1001);
      expect(refusal(range('n_d', '0', '1', '1e-300'))?.parameter).to.equal('facet.range.gap');
      expect(refusal(range('n_d', '0', '1e999', '1'))?.parameter).to.equal('facet.range.gap');
      // an end at or before the start: no bucket (the engine refuses end < start itself)
      expect(refusal(range('n_i', '10', '10', '1'), at(0))).to.equal(null);
      expect(refusal(range('n_i', '10', '0', '1'), at(0))).to.equal(null);
      // a gap that does not move forward is refused: the engine would loop until it noticed
      for (const gap of ['0', '-1', '0.0', '-0']) expect(refusal(range('n_i', '0', '10', gap))?.parameter, gap).to.equal('facet.range.gap');
    });

    it('per-field forms count, and override the global ones; those of fields without a range facet do nothing', () => {
      expect(
        refusal({
          facet: 'true',
          'facet.range': 'version',
          'f.version.facet.range.start': '0',
          'f.version.facet.range.end': '10000000',
          'f.version.facet.range.gap': '1',
        })?.parameter,
      ).to.equal('f.version.facet.range.gap');
      expect(refusal({ ...range('version', '0', '10000000', '1'), 'f.version.facet.range.gap': '100000' })).to.equal(null);
      expect(refusal({ ...range('version', '0', '10000000', '100000'), 'f.version.facet.range.gap': '1' })?.parameter).to.equal('f.version.facet.range.gap');
      expect(refusal({ ...range('version', '0', '100', '1'), 'f.version.facet.range.end': '10000000' })?.parameter).to.equal('facet.range.gap');
      expect(refusal({ ...range('version', '0', '100', '1'), 'f.other.facet.range.end': '10000000' })).to.equal(null);
      // no start, end or gap for the field: the engine refuses it itself, nothing to count
      expect(refusal({ facet: 'true', 'facet.range': 'version', 'facet.range.end': '10000000', 'facet.range.gap': '1' })).to.equal(null);
    });

    it('the bound is for the whole request: every range facet counts, a repeated one as often as it is given', () => {
      const two = (end: string): [string, string][] => [
        ['facet', 'true'],
        ['facet.range', 'a_i'],
        ['facet.range', 'b_i'],
        ['facet.range.start', '0'],
        ['facet.range.end', end],
        ['facet.range.gap', '1'],
      ];
      expect(refusal(two('500'))).to.equal(null);
      expect(refusal(two('501'))?.parameter).to.equal('facet.range.gap');
      buckets(two('300'), 600);
      buckets([...two('300'), ['facet.range', 'a_i']], 900);
      buckets([...two('300'), ['f.b_i.facet.range.gap', '3']], 400);
    });

    it('dates: Solr date math in UTC (months and years as the calendar has them), gaps with rounding', () => {
      buckets(range('when_dt', '2024-01-01T00:00:00Z', '2025-01-01T00:00:00Z', '+1MONTH'), 12);
      buckets(range('when_dt', '2024-01-01T00:00:00Z', '2025-01-01T00:00:00Z', '+1DAY'), 366);
      buckets(range('when_dt', '2023-01-01T00:00:00Z', '2024-01-01T00:00:00.000Z', '+1DAYS'), 365);
      buckets(range('when_dt', '2024-01-01T00:00:00Z', '2034-01-01T00:00:00Z', '+1YEAR'), 10);
      // Jan 31 + 1 month is Feb 29 (clamped, as Java's calendar), then Mar 29, ..., Dec 29 < Dec 31
      buckets(range('when_dt', '2024-01-31T00:00:00Z', '2024-12-31T00:00:00Z', '+1MONTH'), 12);
      // rounding in the gap: 10:00, then midnights
      buckets(range('when_dt', '2024-01-01T10:00:00Z', '2024-01-11T00:00:00Z', '+1DAY/DAY'), 10);
      buckets(range('when_dt', 'NOW/DAY', 'NOW/DAY+1DAY', '+1HOUR'), 24);
      buckets(range('when_dt', 'NOW/YEAR-10YEARS', 'NOW/YEAR', '+1MONTH'), 120);
      buckets(range('when_dt', 'NOW-1DAY', 'NOW', '+1MINUTE'), 1440);
      buckets(range('when_dt', 'NOW-1SECOND', 'NOW', '+1MILLI'), 1000);
      expect(refusal(range('when_dt', 'NOW-10YEARS', 'NOW', '+1SECOND'))?.parameter).to.equal('facet.range.gap');
      expect(refusal(range('when_dt', 'NOW-10YEARS', 'NOW', '+1DAY'))?.parameter).to.equal('facet.range.gap');
      expect(refusal(range('when_dt', 'NOW-10YEARS', 'NOW', '+1MONTH'))).to.equal(null);
      // gaps that do not move forward
      for (const gap of ['/DAY', '+1HOUR/DAY', '-1DAY', '+0DAY', '/DAY+1HOUR'])
        expect(refusal(range('when_dt', '2024-01-01T00:00:00Z', '2024-02-01T00:00:00Z', gap))?.parameter, gap).to.equal('facet.range.gap');
    });

    it('start, end and gap that cannot be counted are refused, naming the one at fault', () => {
      expect(refusal(range('when_dt', '0', 'NOW', '+1DAY'))?.parameter).to.equal('facet.range.start');
      expect(refusal(range('when_dt', 'NOW', '100', '+1DAY'))?.parameter).to.equal('facet.range.end');
      expect(refusal(range('n_i', '0', '100', '+1DAY'))?.parameter).to.equal('facet.range.gap');
      expect(refusal(range('when_dt', 'NOW-1DAY', 'NOW', '1'))?.parameter).to.equal('facet.range.gap');
      expect(refusal(range('when_dt', 'NOW', 'NOW+999999YEARS', '+999999YEARS'))?.parameter).to.equal('facet.range.end');
      expect(refusal(range('when_dt', '2024-13-01T00:00:00Z', 'NOW', '+1YEAR'))?.parameter).to.equal('facet.range.start');
      expect(refusal({ ...range('when_dt', 'NOW-1DAY', 'NOW', '+1DAY'), 'f.when_dt.facet.range.start': '2024-02-30T00:00:00Z' })?.parameter).to.equal(
        'f.when_dt.facet.range.start',
      );
    });
  });

  it('edismax and dismax need qf or df (else the engine answers 500)', () => {
    expect(refusal({ defType: 'edismax', q: 'x' })?.parameter).to.equal('qf');
    expect(refusal({ defType: 'dismax', q: 'x' })?.parameter).to.equal('qf');
    expect(refusal({ defType: 'edismax', q: 'x', qf: 'a' })).to.equal(null);
    expect(refusal({ defType: 'dismax', q: 'x', df: 'a' })).to.equal(null);
  });

  it('the first parameter refused, in request order, is the one named', () => {
    expect(
      refusal([
        ['q', '*:*'],
        ['mlt', 'true'],
        ['rows', '5000'],
      ])?.parameter,
    ).to.equal('mlt');
    expect(
      refusal([
        ['rows', '5000'],
        ['mlt', 'true'],
      ])?.parameter,
    ).to.equal('rows');
  });

  it('unescapedForParser reads escapes as the query parser does, escapes of escapes included', () => {
    expect(unescapedForParser('\\_val\\_')).to.equal('_val_');
    expect(unescapedForParser('\\u005fval\\u005F')).to.equal('_val_');
    expect(unescapedForParser('\\\\u007b!')).to.equal('{!');
    expect(unescapedForParser('plain')).to.equal('plain');
  });

  it('values are bounded and hold no control characters', () => {
    expect(refusal({ q: 'a\u0000b' })?.parameter).to.equal('q');
    expect(refusal({ 'facet.prefix': 'a\u001bb' })?.parameter).to.equal('facet.prefix');
    expect(refusal({ q: 'a\tb\nc' })).to.equal(null);
  });

  // What a search costs the engine is bounded before it is sent. These tests use the settings'
  // defaults as numbers (1024 clauses, 20 multi-term queries, 20 fq, 20,000 facet values, 5000 ms).
  describe('what a search costs the engine: counted and bounded before it is sent', () => {
    const engineOf = (params: Record<string, string> | [string, string][], limits?: SearchLimits) =>
      checkSearchParams(new URLSearchParams(params), limits).engine;
    const words = (n: number, prefix = 'w') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
    const wildcards = (n: number) => words(n, 'svc_text:*ab').map((w) => `${w}*`);

    it('every search carries a timeAllowed: the default when the caller sends none or 0 (none, to the engine), the caller’s when lower, the default when higher', () => {
      expect(engineOf({ q: 'x' }).get('timeAllowed')).to.equal('5000');
      expect(engineOf({ q: 'x', timeAllowed: '1200' }).get('timeAllowed')).to.equal('1200');
      expect(engineOf({ q: 'x', timeAllowed: '60000' }).get('timeAllowed')).to.equal('5000');
      expect(engineOf({ q: 'x', timeAllowed: '0' }).get('timeAllowed')).to.equal('5000');
      const at = { maxRangeBuckets: 1000, timeAllowedMs: 250 };
      expect(engineOf({ q: 'x' }, at).get('timeAllowed')).to.equal('250');
      expect(engineOf({ q: 'x', timeAllowed: '100' }, at).get('timeAllowed')).to.equal('100');
      expect(engineOf({ q: 'x', timeAllowed: '2147483647' }, at).getAll('timeAllowed')).to.deep.equal(['250']);
      expect(engineOf({ q: 'x', wt: 'javabin' }, at).get('timeAllowed')).to.equal('250');
    });

    it('every search carries a cpuAllowed (SEARCH_CPU_ALLOWED_MS, 1000 ms of the engine’s CPU): the default when the caller sends none or 0, the caller’s when lower, the default when higher; it bounds what sloppy phrases in q, fq and facet.query cost, which no count does', () => {
      // 20 fq and 20 facet.query of a phrase of a word in every document: each cost the engine
      // seconds on 20,000 documents, and every count above lets them through
      const phrase = `svc_text:"${Array(20).fill('the').join(' ')}"~5`;
      const phrases: [string, string][] = [
        ['q', phrase],
        ...Array.from({ length: 20 }, (_, i): [string, string] => ['fq', `${phrase} -version:${i}`]),
        ['facet', 'true'],
        ...Array.from({ length: 20 }, (_, i): [string, string] => ['facet.query', `${phrase} -version:${i}`]),
      ];
      expect(refusal(phrases)).to.equal(null);
      expect(engineOf(phrases).getAll('cpuAllowed')).to.deep.equal(['1000']);
      expect(engineOf({ q: 'x' }).get('cpuAllowed')).to.equal('1000');
      expect(engineOf({ q: 'x', cpuAllowed: '300' }).get('cpuAllowed')).to.equal('300');
      expect(engineOf({ q: 'x', cpuAllowed: '600000' }).getAll('cpuAllowed')).to.deep.equal(['1000']);
      expect(engineOf({ q: 'x', cpuAllowed: '0' }).get('cpuAllowed')).to.equal('1000');
      // its own bound, whatever timeAllowed's
      expect(engineOf({ q: 'x', timeAllowed: '600000', cpuAllowed: '2147483647' })).to.satisfy(
        (e: URLSearchParams) => e.get('timeAllowed') === '5000' && e.get('cpuAllowed') === '1000',
      );
      const at = { maxRangeBuckets: 1000, cpuAllowedMs: 250 };
      expect(engineOf({ q: 'x' }, at).get('cpuAllowed')).to.equal('250');
      expect(engineOf({ q: 'x', cpuAllowed: '100' }, at).get('cpuAllowed')).to.equal('100');
      expect(engineOf({ q: 'x', cpuAllowed: '2147483647', wt: 'javabin' }, at).getAll('cpuAllowed')).to.deep.equal(['250']);
      for (const bad of ['-1', '1.5', 'x', '99999999999', ''])
        expect(refusal({ q: 'x', cpuAllowed: bad })?.parameter, `cpuAllowed=${bad}`).to.equal('cpuAllowed');
      expect(
        refusal([
          ['q', 'x'],
          ['cpuAllowed', '100'],
          ['cpuAllowed', '100'],
        ])?.message,
      ).to.contain('given once');
    });

    it('omitHeader is not sent to the engine, whose header says whether the time ran out; the proxy omits the header itself', () => {
      for (const [value, omitted] of <[string, boolean][]>[
        ['true', true],
        ['on', true],
        ['false', false],
        ['off', false],
      ]) {
        const r = checkSearchParams(new URLSearchParams({ q: 'x', omitHeader: value }));
        expect(r.engine.has('omitHeader'), value).to.equal(false);
        expect(r.omitHeader, value).to.equal(omitted);
      }
      expect(checkSearchParams(new URLSearchParams({ q: 'x' })).omitHeader).to.equal(false);
    });

    it("the hunt's search (fq of 1,000 wildcards, 10 times) answers 400 naming fq and SEARCH_MAX_MULTI_TERMS; a newsroom search passes", () => {
      const hunt = Array.from({ length: 10 }, (): [string, string] => ['fq', wildcards(1000).join(' OR ')]);
      const r = refusal([['q', '*:*'], ...hunt]);
      expect(r?.parameter).to.equal('fq');
      expect(r?.message).to.match(/^Parameter 'fq': /);
      expect(r?.message).to.contain('SEARCH_MAX_MULTI_TERMS').and.contain('at most 20');
      expect(
        refusal([
          ['q', 'elect* AND (trump OR biden OR "white house") AND -svc_contentstate_hidden_b:true'],
          ['fq', 'svc_type_s:(article OR gallery OR video)'],
          ['fq', 'svc_modificationTime_dt:[NOW/DAY-7DAYS TO NOW]'],
          ['fq', 'svc_tag_section_ss:(politics OR world OR "us election") AND tags_ss:camp?ign*'],
          ['fq', 'id:c\\:01M84*'],
          ['facet', 'true'],
          ['facet.field', 'svc_type_s'],
          ['facet.query', 'svc_modificationTime_dt:[NOW-1DAY TO NOW]'],
          ['facet.query', 'svc_modificationTime_dt:[NOW-7DAYS TO NOW]'],
        ]),
      ).to.equal(null);
    });

    it('multi-term queries of q, fq and facet.query count together: wildcards, prefixes, field:*, regular expressions, ranges; not *:*, escapes or phrases', () => {
      // 20 in all pass, the 21st is refused where it is given
      const spread: [string, string][] = [
        ['q', 'a* OR b? OR title_s:*c OR part_s:*'],
        ['fq', '/re.*x/ OR n_i:[1 TO 5] OR when_dt:{* TO NOW]'],
        ['fq', wildcards(10).join(' ')],
        ['facet.query', 'x* y* w*'],
        ['facet', 'true'],
      ];
      expect(refusal([...spread, ['q.op', 'OR']])).to.equal(null);
      expect(refusal([...spread, ['facet.query', 'z*']])?.parameter).to.equal('facet.query');
      expect(refusal([['q', wildcards(21).join(' ')]])?.parameter).to.equal('q');
      // not multi-term: match-all, escaped wildcards, wildcards inside a phrase, operators
      const plain = Array.from({ length: 30 }, (_, i) => `(*:* AND a\\*${i} AND "b*${i}" AND c\\?${i})`).join(' OR ');
      expect(refusal({ q: plain })).to.equal(null);
      // the bound comes from the settings
      expect(refusal({ q: 'a* b*' }, { maxRangeBuckets: 1000, maxMultiTerms: 1 })?.parameter).to.equal('q');
      expect(refusal({ q: 'a* b' }, { maxRangeBuckets: 1000, maxMultiTerms: 1 })).to.equal(null);
      // edismax and dismax ask each term of every qf field
      const qf = words(10, 'f').join(' ');
      expect(refusal({ defType: 'edismax', qf, q: 'a* b*' })).to.equal(null);
      expect(refusal({ defType: 'edismax', qf, q: 'a* b* c*' })?.parameter).to.equal('q');
    });

    it('clauses of q, fq and facet.query count together (terms, words of phrases, ranges): at most SEARCH_MAX_CLAUSES', () => {
      // each query alone is within the engine's maxBooleanClauses (1024), together they are not
      const r = refusal({ q: `id:(${words(600).join(' OR ')})`, fq: `tags_ss:(${words(500).join(' ')})` });
      expect(r?.parameter).to.equal('fq');
      expect(r?.message).to.contain('SEARCH_MAX_CLAUSES').and.contain('at most 1024');
      expect(refusal({ q: `id:(${words(600).join(' OR ')})`, fq: `tags_ss:(${words(424).join(' ')})` })).to.equal(null);
      // operators, field names, parentheses, boosts and proximities are not clauses; the words of a phrase are
      const terms = Array.from({ length: 256 }, (_, i) => `+(title_s:a${i}^2 AND -b${i}) || !"c${i} d${i}"~3`).join(' AND ');
      expect(refusal({ q: terms })).to.equal(null);
      expect(refusal({ q: `${terms} e` })?.parameter).to.equal('q');
      expect(
        refusal([...words(11).map((w): [string, string] => ['facet.query', `n_i:${w}`]), ['facet', 'true']], { maxRangeBuckets: 1000, maxClauses: 10 })
          ?.parameter,
      ).to.equal('facet.query');
      // edismax: every term of q in every qf field, and pf's phrase per field
      const qf = words(10, 'f').join(',');
      expect(refusal({ defType: 'edismax', qf, pf: 'title_s', q: words(93).join(' ') })).to.equal(null);
      expect(refusal({ defType: 'edismax', qf, pf: 'title_s', q: words(94).join(' ') })?.parameter).to.equal('q');
    });

    it('fq and facet.query are each given at most SEARCH_MAX_FILTER_QUERIES (20) times', () => {
      const many = (key: string, n: number) => Array.from({ length: n }, (_, i): [string, string] => [key, `n_i:${i}`]);
      expect(refusal([['q', '*:*'], ...many('fq', 20), ['facet', 'true'], ...many('facet.query', 20)])).to.equal(null);
      const r = refusal([['q', '*:*'], ...many('fq', 21)]);
      expect(r?.parameter).to.equal('fq');
      expect(r?.message).to.contain('SEARCH_MAX_FILTER_QUERIES').and.contain('at most 20');
      expect(refusal([['facet', 'true'], ...many('facet.query', 21)])?.parameter).to.equal('facet.query');
      expect(refusal(many('fq', 4), { maxRangeBuckets: 1000, maxFilterQueries: 3 })?.parameter).to.equal('fq');
    });

    it('grouped searches answer at most MAX_GROUPED_DOCUMENTS documents: rows × group.limit per group.field (rows 1000 × group.limit 1000 asked for a million)', () => {
      const group = (extra: Record<string, string> | [string, string][]) =>
        [['group', 'true'], ['group.field', 'svc_type_s'], ...(Array.isArray(extra) ? extra : Object.entries(extra))] as [string, string][];
      const r = refusal(group({ rows: '1000', 'group.limit': '1000' }));
      expect(r?.parameter).to.equal('group.limit');
      expect(r?.message).to.contain('1000000').and.contain(`at most ${MAX_GROUPED_DOCUMENTS}`);
      expect(refusal(group({ rows: '1000', 'group.limit': '10' }))).to.equal(null);
      expect(refusal(group({ rows: '100', 'group.limit': '100' }))).to.equal(null);
      expect(refusal(group({ rows: '100', 'group.limit': '101' }))?.parameter).to.equal('group.limit');
      expect(
        refusal(
          group([
            ['rows', '100'],
            ['group.limit', '100'],
            ['group.field', 'svc_views_ss'],
          ]),
        )?.parameter,
      ).to.equal('group.limit');
      // not grouped: group.limit means nothing to the engine
      expect(refusal({ rows: '1000', 'group.limit': '1000' })).to.equal(null);
    });

    it('facet values: a pivot counts every node of its tree (the reported three levels at the default limit answered 115 MB), each facet.field its limit; at most SEARCH_MAX_FACET_VALUES', () => {
      const pivot = (fields: string, extra: Record<string, string> = {}) => ({ facet: 'true', 'facet.pivot': fields, ...extra });
      const r = refusal(pivot('a_ss,b_ss,c_ss'));
      expect(r?.parameter).to.equal('facet.pivot');
      expect(r?.message).to.contain('1010100').and.contain('SEARCH_MAX_FACET_VALUES').and.contain('at most 20000');
      expect(refusal(pivot('a_ss,b_ss'))).to.equal(null);
      expect(refusal(pivot('a_ss,b_ss,c_ss', { 'f.a_ss.facet.limit': '10', 'f.b_ss.facet.limit': '10' }))).to.equal(null);
      expect(refusal(pivot('a_ss b_ss c_ss', { 'facet.limit': '26' }))).to.equal(null); // 26 + 676 + 17,576 = 18,278
      expect(refusal(pivot('a_ss b_ss c_ss', { 'facet.limit': '27' }))?.parameter).to.equal('facet.pivot'); // 27 + 729 + 19,683 = 20,439
      expect(refusal(pivot('a_ss b_ss c_ss', { 'facet.limit': '26' }), { maxRangeBuckets: 1000, maxFacetValues: 18_277 })?.parameter).to.equal('facet.pivot');
      // every value of a level: -1 counts as 1000
      expect(refusal(pivot('a_ss,b_ss', { 'f.b_ss.facet.limit': '-1', 'f.a_ss.facet.limit': '19' }))).to.equal(null);
      expect(refusal(pivot('a_ss,b_ss', { 'f.b_ss.facet.limit': '-1', 'f.a_ss.facet.limit': '20' }))?.parameter).to.equal('facet.pivot');
      // at most 4 levels, whatever their limits
      expect(refusal(pivot('a,b,c,d', { 'facet.limit': '1' }))).to.equal(null);
      expect(refusal(pivot('a,b,c,d,e', { 'facet.limit': '1' }))?.parameter).to.equal('facet.pivot');
      // facet fields count their limits, with the pivots, in request order
      const fields = (n: number) => Array.from({ length: n }, (_, i): [string, string] => ['facet.field', `f${i}_s`]);
      expect(refusal([['facet', 'true'], ['facet.limit', '-1'], ...fields(20)])).to.equal(null);
      expect(refusal([['facet', 'true'], ['facet.limit', '-1'], ...fields(21)])?.parameter).to.equal('facet.field');
      expect(refusal([['facet', 'true'], ['facet.pivot', 'a_ss,b_ss'], ...fields(99)])).to.equal(null); // 10,100 + 9,900
      expect(refusal([['facet', 'true'], ...fields(99), ['facet.pivot', 'a_ss,b_ss'], ['facet.field', 'x_s']])?.parameter).to.equal('facet.field');
      expect(refusal([['facet', 'true'], ...fields(100), ['facet.pivot', 'a_ss,b_ss']])?.parameter).to.equal('facet.pivot');
      // without facet=true the engine reads no facet parameter
      expect(refusal({ 'facet.pivot': 'a_ss,b_ss,c_ss' })).to.equal(null);
    });

    it('facet.limit=-1 (every value) is sent as 1000: a facet of id listed every document of the result', () => {
      const engine = engineOf({ facet: 'true', 'facet.field': 'id', 'facet.limit': '-1', 'f.id.facet.limit': '-1', 'f.x_s.facet.limit': '7' });
      expect(engine.getAll('facet.limit')).to.deep.equal(['1000']);
      expect(engine.getAll('f.id.facet.limit')).to.deep.equal(['1000']);
      expect(engine.getAll('f.x_s.facet.limit')).to.deep.equal(['7']);
    });

    // The eighteenth session's second review: each check looked parameters up with
    // URLSearchParams.get (a scan of all of them) once per repeated value, and nothing bounded
    // the repetitions but the body (10 MiB).
    const repeated = (key: string, n: number, value: (i: number) => string = () => 'id'): [string, string][] =>
      Array.from({ length: n }, (_, i): [string, string] => [key, value(i)]);
    const timed = <T>(f: () => T): [T, number] => {
      const t0 = performance.now();
      const r = f();
      return [r, performance.now() - t0];
    };

    it('the reported bodies (80,000 facet.field with facet.limit=0: 134 s; 40,000 empty facet.range: 24.7 s) answer 400 naming MAX_PARAMETER_REPEATS in milliseconds', () => {
      const [fields, fieldMs] = timed(() => refusal([['q', '*:*'], ['facet', 'true'], ['facet.limit', '0'], ...repeated('facet.field', 80_000)]));
      expect(fields?.parameter).to.equal('facet.field');
      expect(fields?.message).to.contain('MAX_PARAMETER_REPEATS').and.contain(`at most ${MAX_PARAMETER_REPEATS}`);
      const range: [string, string][] = [
        ['q', '*:*'],
        ['facet', 'true'],
        ['facet.range.start', '0'],
        ['facet.range.end', '0'],
        ['facet.range.gap', '1'],
      ];
      const [ranges, rangeMs] = timed(() => refusal([...range, ...repeated('facet.range', 40_000, () => 'version')]));
      expect(ranges?.parameter).to.equal('facet.range');
      expect(ranges?.message).to.contain('MAX_PARAMETER_REPEATS');
      expect(fieldMs + rangeMs, 'milliseconds to refuse both').to.be.below(1000);
    });

    it('every repeatable parameter is given at most MAX_PARAMETER_REPEATS (100) times, stats.field MAX_STATS_FIELDS (20); a search has at most MAX_SEARCH_PARAMETERS (1000) parameters; all counted before any other check', () => {
      for (const [key, value] of <[string, (i: number) => string][]>[
        ['facet.field', (i) => `f${i}_s`],
        ['facet.pivot', (i) => `a${i}_s,b_s`],
        ['facet.range', () => 'n_i'],
        ['group.field', (i) => `g${i}_s`],
        ['fl', (i) => `f${i}_s`],
      ]) {
        expect(refusal(repeated(key, MAX_PARAMETER_REPEATS, value)), `${key} × ${MAX_PARAMETER_REPEATS}`).to.equal(null);
        const r = refusal(repeated(key, MAX_PARAMETER_REPEATS + 1, value));
        expect(r?.parameter, key).to.equal(key);
        expect(r?.message, key).to.equal(`Parameter '${key}': given more than 100 times; a search may have at most 100 (MAX_PARAMETER_REPEATS)`);
      }
      expect(refusal(repeated('stats.field', MAX_STATS_FIELDS, (i) => `s${i}_i`))).to.equal(null);
      const stats = refusal(repeated('stats.field', MAX_STATS_FIELDS + 1, (i) => `s${i}_i`));
      expect(stats?.parameter).to.equal('stats.field');
      expect(stats?.message).to.contain('MAX_STATS_FIELDS').and.contain('at most 20');
      // per-field forms are parameters of their own: the only way past 1000 without a repetition
      const perField = (n: number) => Array.from({ length: n }, (_, i): [string, string] => [`f.x${i}_s.facet.limit`, '1']);
      expect(refusal(perField(MAX_SEARCH_PARAMETERS))).to.equal(null);
      const many = refusal(perField(MAX_SEARCH_PARAMETERS + 1));
      expect(many?.parameter).to.equal(`f.x${MAX_SEARCH_PARAMETERS}_s.facet.limit`);
      expect(many?.message).to.contain('MAX_SEARCH_PARAMETERS').and.contain('at most 1000');
      // before any other check: a parameter off the allowlist, or a bad value, given first is not the one named
      expect(refusal([['mlt', 'true'], ...repeated('facet.field', 101)])?.parameter).to.equal('facet.field');
      expect(refusal([['rows', 'x'], ...perField(1001)])?.message).to.contain('MAX_SEARCH_PARAMETERS');
    });

    it('stats.field names a field once (the engine computed every repetition: 1,000 of one field cost it 2.5-4.9 s of CPU)', () => {
      const r = refusal([
        ['stats', 'true'],
        ['stats.field', 'version'],
        ['stats.field', 'n_i'],
        ['stats.field', ' version'],
      ]);
      expect(r?.parameter).to.equal('stats.field');
      expect(r?.message).to.contain("'version' is given twice");
      expect(refusal([['stats', 'true'], ...repeated('stats.field', 1000, () => 'version')])?.parameter).to.equal('stats.field');
    });

    it('a facet of limit 0 counts as 1 value: the engine counts the field over the whole result all the same', () => {
      const at = { maxRangeBuckets: 1000, maxFacetValues: 5 };
      expect(refusal([['facet', 'true'], ['facet.limit', '0'], ...repeated('facet.field', 5, (i) => `f${i}_s`)], at)).to.equal(null);
      expect(refusal([['facet', 'true'], ['facet.limit', '0'], ...repeated('facet.field', 6, (i) => `f${i}_s`)], at)?.parameter).to.equal('facet.field');
      // a pivot of limit 0: 1 + 1 × 1 + 1 × 1 × 1
      expect(refusal({ facet: 'true', 'facet.limit': '0', 'facet.pivot': 'a_s,b_s,c_s' }, { maxRangeBuckets: 1000, maxFacetValues: 2 })?.parameter).to.equal(
        'facet.pivot',
      );
      expect(refusal({ facet: 'true', 'facet.limit': '0', 'facet.pivot': 'a_s,b_s,c_s' }, { maxRangeBuckets: 1000, maxFacetValues: 3 })).to.equal(null);
    });

    it('grouped searches keep at most MAX_GROUPS groups, (start + rows) × group.field, and MAX_GROUPED_DOCUMENTS documents in them, × (group.offset + group.limit, at least 1); group.offset is at most MAX_GROUP_OFFSET', () => {
      const group = (extra: [string, string][]) => [['group', 'true'], ['group.field', 'p_n_s'], ['fl', 'id'], ...extra] as [string, string][];
      // the reported search (86 bytes): the engine's heap at 500 of its 512 MB, two at once out of memory
      const reported = refusal(
        group([
          ['q', '*:*'],
          ['rows', '1000'],
          ['group.limit', '0'],
          ['group.offset', '100000'],
        ]),
      );
      expect(reported?.parameter).to.equal('group.offset');
      expect(reported?.message).to.contain(`from 0 to ${MAX_GROUP_OFFSET}`);
      const offset = refusal(
        group([
          ['rows', '1000'],
          ['group.limit', '0'],
          ['group.offset', '1000'],
        ]),
      );
      expect(offset?.parameter).to.equal('group.offset');
      expect(offset?.message).to.contain('1001000 documents').and.contain(`at most ${MAX_GROUPED_DOCUMENTS} (MAX_GROUPED_DOCUMENTS)`);
      expect(
        refusal(
          group([
            ['rows', '1000'],
            ['group.limit', '0'],
          ]),
        ),
      ).to.equal(null);
      expect(
        refusal(
          group([
            ['rows', '1000'],
            ['group.limit', '9'],
            ['group.offset', '1'],
          ]),
        ),
      ).to.equal(null);
      expect(
        refusal(
          group([
            ['rows', '1000'],
            ['group.limit', '1'],
            ['group.offset', '10'],
          ]),
        )?.parameter,
      ).to.equal('group.offset');
      expect(
        refusal(
          group([
            ['rows', '1000'],
            ['group.limit', '9'],
            ['group.offset', '2'],
          ]),
        )?.parameter,
      ).to.equal('group.limit');
      expect(
        refusal(
          group([
            ['rows', '10'],
            ['group.offset', '999'],
          ]),
        ),
      ).to.equal(null);
      // groups: 200 group.field with group.limit 0 and rows 1000 answered 26 MB for 12.7 s of the engine's CPU
      const fields = (n: number) => repeated('group.field', n, (i) => `g${i}_s`);
      const groups = refusal([['group', 'true'], ['rows', '1000'], ['group.limit', '0'], ...fields(100)]);
      expect(groups?.parameter).to.equal('rows');
      expect(groups?.message).to.contain('100000 groups').and.contain(`at most ${MAX_GROUPS} (MAX_GROUPS)`);
      expect(refusal([['group', 'true'], ['rows', '1000'], ['group.limit', '0'], ...fields(2)])).to.equal(null);
      expect(refusal([['group', 'true'], ['rows', '1000'], ['group.limit', '0'], ...fields(3)])?.parameter).to.equal('rows');
      expect(refusal([['group', 'true'], ['rows', '20'], ...fields(100)])).to.equal(null);
      // start counts: its groups are made and kept, then skipped
      expect(
        refusal(
          group([
            ['start', '1000'],
            ['rows', '1000'],
          ]),
        ),
      ).to.equal(null);
      expect(
        refusal(
          group([
            ['start', '1001'],
            ['rows', '1000'],
          ]),
        )?.parameter,
      ).to.equal('start');
      expect(refusal(group([['start', '100000']]))?.parameter).to.equal('start');
      expect(
        refusal(
          group([
            ['start', '1000'],
            ['rows', '1000'],
            ['group.limit', '5'],
          ]),
        ),
      ).to.equal(null);
      expect(
        refusal(
          group([
            ['start', '1000'],
            ['rows', '1000'],
            ['group.limit', '6'],
          ]),
        )?.parameter,
      ).to.equal('group.limit');
    });

    it('a sort has at most MAX_SORT_CLAUSES clauses, the id the platform adds counted, and keeps at most MAX_SORT_VALUES values, clauses × (start + rows)', () => {
      const clauses = (n: number) => Array.from({ length: n }, (_, i) => `f${i}_i asc`).join(',');
      // the reported sort (1,000 clauses, start 19,000, rows 1,000: the engine out of memory, index writes failing meanwhile)
      const reported = refusal({ q: '*:*', sort: Array(1000).fill('version asc').join(','), start: '19000', rows: '1000', fl: 'id' });
      expect(reported?.parameter).to.equal('sort');
      expect(reported?.message).to.contain('1001 clauses').and.contain('MAX_SORT_CLAUSES').and.contain(`at most ${MAX_SORT_CLAUSES}`);
      expect(refusal({ sort: clauses(9) })).to.equal(null);
      expect(refusal({ sort: clauses(10) })?.message).to.contain('11 clauses (with the id asc the platform adds');
      expect(refusal({ sort: `${clauses(9)},id desc` })).to.equal(null);
      expect(refusal({ sort: `${clauses(10)},id desc` })?.parameter).to.equal('sort');
      // the deepest page of the default sort (score desc,id asc) is the bound
      expect(MAX_SORT_VALUES).to.equal(2 * 101_000);
      expect(refusal({ start: '100000', rows: '1000' })).to.equal(null);
      expect(refusal({ sort: 'version desc', start: '100000', rows: '1000' })).to.equal(null);
      const deep = refusal({ sort: 'score desc,version desc', start: '100000', rows: '1000' });
      expect(deep?.parameter).to.equal('sort');
      expect(deep?.message).to.contain('303000 values').and.contain('MAX_SORT_VALUES').and.contain('cursorMark');
      expect(refusal({ sort: `${clauses(9)},id asc`, start: '19200', rows: '1000' })).to.equal(null);
      expect(refusal({ sort: `${clauses(9)},id asc`, start: '19201', rows: '1000' })?.parameter).to.equal('sort');
      // a cursor starts at 0: its rows count
      expect(refusal({ sort: `${clauses(9)},id asc`, cursorMark: '*', rows: '1000' })).to.equal(null);
    });

    it('a highlighted search has at most MAX_HIGHLIGHTED_ROWS rows, and the highlighter analyses HIGHLIGHT_MAX_ANALYZED_CHARS of each field', () => {
      // rows 1000 cost the engine 1-2.4 s and answered up to 40 MB for 77 bytes
      for (const hl of ['true', 'on']) {
        const r = refusal({ q: '*:*', hl, 'hl.fl': '*', rows: '1000' });
        expect(r?.parameter, hl).to.equal('rows');
        expect(r?.message, hl).to.contain('MAX_HIGHLIGHTED_ROWS').and.contain(`at most ${MAX_HIGHLIGHTED_ROWS}`);
      }
      expect(refusal({ hl: 'true', rows: '100' })).to.equal(null);
      expect(refusal({ hl: 'false', rows: '1000' })).to.equal(null);
      expect(engineOf({ hl: 'true' }).getAll('hl.maxAnalyzedChars')).to.deep.equal([String(HIGHLIGHT_MAX_ANALYZED_CHARS)]);
      expect(HIGHLIGHT_MAX_ANALYZED_CHARS).to.be.below(51_200); // the engine's own default
      expect(engineOf({ hl: 'off' }).has('hl.maxAnalyzedChars')).to.equal(false);
      expect(refusal({ hl: 'true', 'hl.maxAnalyzedChars': '1000000' })?.parameter).to.equal('hl.maxAnalyzedChars');
    });

    it('a phrase has a slop of at most MAX_PHRASE_SLOP in q, fq and facet.query ("the the … (10×)"~100000 cost the engine 1.4-3.4 s each)', () => {
      const the = `svc_text:"${Array(10).fill('the').join(' ')}"`;
      for (const name of ['q', 'fq', 'facet.query']) {
        const r = refusal([[name, `${the}~100000`]]);
        expect(r?.parameter, name).to.equal(name);
        expect(r?.message, name).to.contain('MAX_PHRASE_SLOP').and.contain(`at most ${MAX_PHRASE_SLOP}`);
        for (const value of [`${the}~100`, `${the}~0100`, `${the}~100.9`, `${the}~`, '"a b"~2 AND "c d"~100', '"a b"\\~1000'])
          expect(refusal([[name, value]]), `${name}=${value}`).to.equal(null);
        for (const value of [`${the}~101`, '"a b"~2 AND "c d"~101', `"a"~${'9'.repeat(400)}`, '"a \\" b"~1000'])
          expect(refusal([[name, value]])?.parameter, `${name}=${value}`).to.equal(name);
      }
    });

    it('a javabin search the engine fails is asked again in JSON for its error with its query only: no rows, facets, stats, groups or highlighting', () => {
      const { engine } = checkSearchParams(
        new URLSearchParams([
          ['q', 'svc_text:x'],
          ['fq', 'svc_type_s:a'],
          ['defType', 'edismax'],
          ['qf', 'svc_text'],
          ['sort', 'version desc'],
          ['start', '500'],
          ['rows', '10'],
          ['fl', 'id'],
          ['facet', 'true'],
          ['facet.field', 'id'],
          ['f.id.facet.limit', '5'],
          ['stats', 'true'],
          ['stats.field', 'version'],
          ['group', 'true'],
          ['group.field', 'p_s'],
          ['group.limit', '10'],
          ['hl', 'true'],
          ['wt', 'javabin'],
          ['version', '2'],
        ]),
      );
      engine.append('fq', '{!lucene}svc_views_ss:svcPublic');
      expect([...engineErrorQuery(engine)]).to.deep.equal([
        ['q', 'svc_text:x'],
        ['fq', 'svc_type_s:a'],
        ['defType', 'edismax'],
        ['qf', 'svc_text'],
        ['sort', 'version desc,id asc'],
        ['timeAllowed', '5000'],
        ['cpuAllowed', '1000'],
        ['fq', '{!lucene}svc_views_ss:svcPublic'],
        ['rows', '0'],
        ['wt', 'json'],
      ]);
    });

    // The eighteenth session's third review.
    it('a highlighted grouped search highlights every document of its groups: group.field × rows × group.limit (at least 1) is at most MAX_HIGHLIGHTED_ROWS', () => {
      // the reported search: rows 100 of groups of 100, hl.fl=*: up to 10,000 documents highlighted
      const reported = refusal({ q: '*:*', rows: '100', group: 'true', 'group.field': 'p_s', 'group.limit': '100', hl: 'true', 'hl.fl': '*' });
      expect(reported?.parameter).to.equal('group.limit');
      expect(reported?.message)
        .to.contain('up to 10000 (1 group.field × rows 100 × group.limit 100')
        .and.contain(`at most ${MAX_HIGHLIGHTED_ROWS} (MAX_HIGHLIGHTED_ROWS)`);
      const grouped = (extra: Record<string, string>) => ({ q: '*:*', group: 'true', 'group.field': 'p_s', hl: 'on', ...extra });
      expect(refusal(grouped({ rows: '10', 'group.limit': '10' }))).to.equal(null);
      expect(refusal(grouped({ rows: '10', 'group.limit': '11' }))?.parameter).to.equal('group.limit');
      expect(refusal(grouped({ rows: '100' }))).to.equal(null); // group.limit 1 by default
      expect(refusal(grouped({ rows: '100', 'group.limit': '0' }))).to.equal(null); // counted as 1
      expect(refusal(grouped({ rows: '51', 'group.field': 'p_s', 'group.limit': '2' }))?.parameter).to.equal('group.limit');
      const twoFields: [string, string][] = [
        ['q', '*:*'],
        ['group', 'true'],
        ['group.field', 'p_s'],
        ['group.field', 'q_s'],
        ['hl', 'true'],
      ];
      expect(refusal([...twoFields, ['rows', '50']])).to.equal(null);
      expect(refusal([...twoFields, ['rows', '51']])?.parameter).to.equal('rows');
      // not highlighted, or not grouped: as before
      expect(refusal(grouped({ rows: '100', 'group.limit': '100', hl: 'false' }))).to.equal(null);
      expect(refusal({ hl: 'true', rows: '100', 'group.limit': '100', 'group.field': 'p_s' })).to.equal(null);
    });

    it('the parameters are counted on the raw query string and form body before they are parsed: a 10 MiB body of 5 million parameters answers 400 naming MAX_SEARCH_PARAMETERS in milliseconds', async () => {
      const settings = loadSettings({});
      const stub: unknown = new Proxy(() => undefined, { get: (_t, k) => (k === 'then' ? undefined : stub), apply: () => stub });
      // An anonymous caller (the token is read before the body: request-auth.ts `requestCaller`).
      const tokens = { known: () => undefined, caller: async () => null };
      const deps = new Proxy({ settings, tokens } as Record<string, unknown>, { get: (t, k: string) => (k in t ? t[k] : stub) });
      const service = new SearchService(deps as unknown as SearchServiceDeps);
      const { handler, params } = service.router.match('POST', [settings.SOLR_COLLECTION, 'select']);
      const post = async (rawQuery: string, body: Buffer): Promise<[AppError, number]> => {
        const x = {
          method: 'POST',
          arrived: true,
          rawQuery,
          header: (h: string) => (h === 'content-type' ? 'application/x-www-form-urlencoded' : undefined),
          body: async () => body,
        } as unknown as Exchange;
        const t0 = performance.now();
        const e = await Promise.resolve(handler(x, params)).then(
          () => expect.fail('answered'),
          (err: unknown) => err,
        );
        const ms = performance.now() - t0;
        expect(e).to.be.instanceOf(AppError);
        return [e as AppError, ms];
      };
      // the reported body: 1.4-1.9 s of the gateway's thread and 0.5-1 GB of memory before its 400
      const [reported, ms] = await post('', Buffer.from('a&'.repeat(5 * 1024 * 1024)));
      expect(reported.http).to.equal(400);
      expect(reported.extraInfo.parameter).to.equal('a');
      expect(reported.message).to.contain(`at most ${MAX_SEARCH_PARAMETERS} (MAX_SEARCH_PARAMETERS)`);
      expect(ms, 'milliseconds to refuse').to.be.below(250);
      // the query string counts with the body
      const [both] = await post('q=*:*&rows=1', Buffer.from(`${'fl=id&'.repeat(MAX_SEARCH_PARAMETERS - 2)}x%20y=1`));
      expect(both.extraInfo.parameter).to.equal('x y');
    });

    it('checkParameterCount counts the pieces URLSearchParams reads (not empty ones), in strings and bytes, and names the first past MAX_SEARCH_PARAMETERS', () => {
      const count = (...parts: (string | Uint8Array)[]) => {
        try {
          checkParameterCount(...parts);
          return null;
        } catch (e) {
          expect(e).to.be.instanceOf(AppError);
          return (e as AppError).extraInfo.parameter;
        }
      };
      const pieces = (n: number) => Array.from({ length: n }, (_, i) => `f${i}=1`).join('&');
      expect(count(`&&${pieces(MAX_SEARCH_PARAMETERS)}&&`)).to.equal(null);
      expect(count(`${pieces(MAX_SEARCH_PARAMETERS)}&=`)).to.equal('');
      expect(count(pieces(500), Buffer.from(`${'&'.repeat(100_000)}${pieces(500)}`))).to.equal(null);
      expect(count(pieces(500), Buffer.from(`${pieces(500)}&%C3%A9t%C3%A9=x`))).to.equal('été');
      expect(count('', Buffer.from(`${pieces(MAX_SEARCH_PARAMETERS)}&a+b=1&c=2`))).to.equal('a b');
      const many = `${pieces(MAX_SEARCH_PARAMETERS)}&last`;
      expect([...new URLSearchParams(many)]).to.have.length(MAX_SEARCH_PARAMETERS + 1);
      expect(count(many)).to.equal('last');
    });

    it('lists are bounded before their items are read: fl names at most MAX_FL_FIELDS fields in all, qf, pf and hl.fl MAX_LISTED_FIELDS each, a facet.pivot MAX_PIVOT_LEVELS levels whether or not faceting is on', () => {
      const names = (n: number, name = (i: number) => `f${i}_s`) => Array.from({ length: n }, (_, i) => name(i)).join(',');
      // the reported bodies: 100 fl (and facet.pivot, faceting off) of 33,333 names each took 3 s and passed
      const big = names(33_333, () => 'id');
      for (const [key, bound, extra] of <[string, string, [string, string][]][]>[
        ['fl', 'MAX_FL_FIELDS', []],
        ['facet.pivot', 'MAX_PIVOT_LEVELS', [['facet', 'false']]],
        ['facet.pivot', 'MAX_PIVOT_LEVELS', []],
      ]) {
        const t0 = performance.now();
        const r = refusal([['q', '*:*'], ...extra, ...Array.from({ length: 100 }, (): [string, string] => [key, big])]);
        const ms = performance.now() - t0;
        expect(r?.parameter, key).to.equal(key);
        expect(r?.message, key).to.contain(bound);
        expect(ms, `${key}: milliseconds to refuse`).to.be.below(250);
      }
      expect(refusal({ fl: names(MAX_FL_FIELDS) })).to.equal(null);
      const fl = refusal({ fl: names(MAX_FL_FIELDS + 1) });
      expect(fl?.parameter).to.equal('fl');
      expect(fl?.message).to.contain(`at most ${MAX_FL_FIELDS} (MAX_FL_FIELDS)`);
      // all fl together
      expect(
        refusal([
          ['fl', names(500)],
          ['fl', names(500)],
        ]),
      ).to.equal(null);
      const all = refusal([
        ['fl', names(500)],
        ['fl', names(500)],
        ['fl', 'id'],
      ]);
      expect(all?.parameter).to.equal('fl');
      expect(all?.message).to.contain(`at most ${MAX_FL_FIELDS} in all its values (MAX_FL_FIELDS)`);
      for (const key of ['qf', 'pf', 'hl.fl']) {
        expect(refusal({ [key]: names(MAX_LISTED_FIELDS) }), key).to.equal(null);
        const r = refusal({ [key]: names(MAX_LISTED_FIELDS + 1) });
        expect(r?.parameter, key).to.equal(key);
        expect(r?.message, key).to.contain(`at most ${MAX_LISTED_FIELDS} (MAX_LISTED_FIELDS)`);
      }
      expect(refusal({ 'hl.fl': names(MAX_LISTED_FIELDS + 1, () => '*') })?.parameter).to.equal('hl.fl');
      // a pivot of more than 4 levels, faceting off or not asked
      for (const facet of <Record<string, string>[]>[{ facet: 'false' }, {}]) {
        expect(refusal({ ...facet, 'facet.pivot': 'a_s,b_s,c_s,d_s' })).to.equal(null);
        const r = refusal({ ...facet, 'facet.pivot': 'a_s,b_s,c_s,d_s,e_s' });
        expect(r?.parameter).to.equal('facet.pivot');
        expect(r?.message).to.contain(`the pivot has 5 levels; a pivot may have at most ${MAX_PIVOT_LEVELS} (MAX_PIVOT_LEVELS)`);
      }
    });

    it('facet.offset, global and per field, is at most MAX_FACET_OFFSET (2147483647 made the engine throw NegativeArraySizeException: a 500)', () => {
      for (const [key, extra] of <[string, Record<string, string>][]>[
        ['facet.offset', { 'facet.field': 'id' }],
        ['f.id.facet.offset', { 'facet.field': 'id' }],
        ['facet.offset', { 'facet.pivot': 'a_s,b_s', 'facet.limit': '10' }],
        ['f.a_s.facet.offset', { 'facet.pivot': 'a_s,b_s', 'facet.limit': '10' }],
      ]) {
        const r = refusal({ q: '*:*', rows: '0', facet: 'true', ...extra, [key]: '2147483647' });
        expect(r?.parameter, key).to.equal(key);
        expect(r?.message, key).to.contain(`from 0 to ${MAX_FACET_OFFSET}`);
        expect(refusal({ facet: 'true', ...extra, [key]: String(MAX_FACET_OFFSET + 1) })?.parameter, key).to.equal(key);
        expect(refusal({ facet: 'true', ...extra, [key]: String(MAX_FACET_OFFSET) }), key).to.equal(null);
      }
      // offset + limit stays far within the engine's 32-bit sum
      expect(MAX_FACET_OFFSET + 20_000 * 2).to.be.below(2 ** 31 - 1);
    });
  });
  // Sorting, faceting, grouping or stats on a field without docValues makes the engine un-invert
  // the field (every term of every document) into its heap, for an anonymous caller: a facet of
  // svc_text on 20,000 documents of 300 words took 1.1 s and 1.9 s of CPU and 34 MB of heap,
  // again after every commit, where the field type is uninvertible; where it is not (the bundled
  // schema), the engine answered 200 with an empty facet, and 500 to group.field.
  describe("facets, sorts, groups and stats only on fields with docValues, as the collection's schema has them", () => {
    /** The bundled schema of the `content` collection, as the platform reads it until the engine's is learnt. */
    const bundled = indexSchemaOf(
      parseSchemaXml(readFileSync(fileURLToPath(new URL('../../tools/solr/configsets/content/conf/schema.xml', import.meta.url)), 'utf8')),
    );
    const refused = (params: Record<string, string> | [string, string][], schema: IndexSchema = bundled) => refusal(params, undefined, schema);

    it('a tokenized (full-text) field answers 400 naming the parameter and the field, whichever parameter names it', () => {
      for (const [name, value, field] of [
        ['facet.field', 'svc_text', 'svc_text'],
        ['facet.field', 'summary_t', 'summary_t'],
        ['facet.field', 'quotes_txt', 'quotes_txt'],
        ['facet.field', 'svc_tag_autocomplete_x_lc', 'svc_tag_autocomplete_x_lc'],
        ['facet.pivot', 'svc_type_s,svc_text', 'svc_text'],
        ['facet.pivot', 'body_t tags_ss', 'body_t'],
        ['sort', 'svc_text asc', 'svc_text'],
        ['sort', 'version desc, summary_t asc,id asc', 'summary_t'],
        ['group.field', 'svc_text', 'svc_text'],
        ['stats.field', 'summary_t', 'summary_t'],
        ['facet.range', 'svc_text', 'svc_text'],
      ]) {
        const r = refused([
          ['q', '*:*'],
          ['facet', 'true'],
          ['group', 'true'],
          ['stats', 'true'],
          [name, value],
        ]);
        expect(r?.parameter, `${name}=${value}`).to.equal(name);
        expect(r?.message, `${name}=${value}`)
          .to.contain(`'${field}'`)
          .and.to.match(/tokenized \(full-text\)/);
      }
      // also when the component is not switched on (a handler's defaults could switch it on)
      expect(refused({ 'facet.field': 'svc_text' })?.parameter).to.equal('facet.field');
      expect(refused({ 'group.field': 'body_t' })?.parameter).to.equal('group.field');
    });

    it('a field without docValues (_root_, a date range) answers 400 too; a field the schema does not know fails closed', () => {
      for (const [name, value, field, why] of [
        ['facet.field', '_root_', '_root_', /has no docValues/],
        ['sort', '_root_ desc', '_root_', /has no docValues/],
        ['group.field', 'window_drange', 'window_drange', /has no docValues/],
        ['facet.pivot', 'tags_ss,window_drange', 'window_drange', /has no docValues/],
        ['facet.field', 'nosuch', 'nosuch', /not a field of the search collection's schema/],
        ['sort', 'id asc,nosuch_x desc', 'nosuch_x', /not a field of the search collection's schema/],
        ['stats.field', 'nosuch', 'nosuch', /not a field of the search collection's schema/],
      ] as [string, string, string, RegExp][]) {
        const r = refused([[name, value]]);
        expect(r?.parameter, `${name}=${value}`).to.equal(name);
        expect(r?.message, `${name}=${value}`).to.contain(`'${field}'`).and.to.match(why);
      }
    });

    it('what newsrooms facet, sort, group and take stats on is answered: strings, numbers, dates, booleans, ids, score', () => {
      expect(
        refused([
          ['q', 'svc_text:election'],
          ['facet', 'true'],
          ['facet.field', 'svc_type_s'],
          ['facet.field', 'tags_ss'],
          ['facet.field', 'breaking_b'],
          ['facet.field', 'root'],
          ['facet.pivot', 'svc_security_context_ss,words_i'],
          ['facet.range', 'svc_modificationTime_dt'],
          ['facet.range.start', 'NOW-1YEAR'],
          ['facet.range.end', 'NOW'],
          ['facet.range.gap', '+1MONTH'],
          ['sort', 'score desc,published_dt desc,version asc,id asc'],
          ['group', 'true'],
          ['group.field', 'svc_type_s'],
          ['stats', 'true'],
          ['stats.field', 'views_l'],
          ['hl', 'true'],
          ['hl.fl', 'svc_text'],
          ['qf', 'svc_text summary_t'],
          ['fl', 'id,svc_text,score'],
        ]),
      ).to.equal(null);
      // a range facet counts documents per bucket with range queries: a date range field may take one
      expect(refused({ 'facet.range': 'window_drange' })).to.equal(null);
    });

    it("the schema learnt from the engine's Schema API decides: its types' classes and docValues, fields and dynamic fields", () => {
      // as Solr's Schema API answers (defaults left out, flags as JSON booleans)
      const learnt = indexSchemaOf({
        fields: [
          { name: 'id', type: 'string' },
          { name: 'headline', type: 'text_en', multiValued: false },
          { name: 'legacy_s', type: 'string', docValues: false },
        ],
        dynamicFields: [
          { name: '*_s', type: 'string' },
          { name: '*_x', type: 'plain' },
          { name: '*_k', type: 'plain', docValues: true },
          { name: 'attr_*', type: 'pint' },
          { name: '*_st', type: 'sortable_text' },
        ],
        fieldTypes: [
          { name: 'string', class: 'solr.StrField', docValues: true },
          { name: 'text_en', class: 'org.apache.solr.schema.TextField' },
          { name: 'plain', class: 'solr.StrField', docValues: false },
          { name: 'pint', class: 'solr.IntPointField' },
          { name: 'sortable_text', class: 'solr.SortableTextField' },
        ],
      });
      expect(refused({ 'facet.field': 'headline' }, learnt)?.message).to.match(/'headline' is a tokenized \(full-text\) field \(type text_en\)/);
      expect(refused({ sort: 'legacy_s asc' }, learnt)?.message).to.match(/'legacy_s' has no docValues/);
      expect(refused({ 'group.field': 'a_x' }, learnt)?.message).to.match(/'a_x' has no docValues/);
      expect(refused({ 'facet.field': 'svc_text' }, learnt)?.message).to.match(/not a field of the search collection's schema/);
      for (const ok of ['id', 'a_s', 'a_k', 'attr_count', 'a_st']) expect(refused({ 'facet.field': ok, sort: `${ok} asc` }, learnt), ok).to.equal(null);
    });
  });
});
