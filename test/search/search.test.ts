import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadSettings } from '../../config/settings.js';
import { startPlatform } from '../../src/main.js';
import { freePort } from '../../src/dev/redis-server.js';
import { repoPath } from '../../src/repo-files.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually } from '../support/wait.js';
import { checked } from '../support/openapi-check.js';

type P = Awaited<ReturnType<typeof startPlatform>> & { base: string; search: string };

describe('search service, indexer and re-indexing (spec Search service, Events 2-6, CONTRACT §9)', function () {
  this.timeout(240000);
  let p: P;
  let editor: Client;
  let reader: Client;
  let sysadmin: Client;
  let sports: Client;
  let anon: Client;
  const lines: string[] = [];
  const T = `t${Date.now()}`;
  let now = Date.now();

  before(async () => {
    const solr = await ensureTestSolr();
    const settings = loadSettings({ ...process.env, PORT: '0', PARTITIONS: '8', LEASE_MS: '2000', SOLR_URL: solr });
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l).msg);
        cb();
      },
    });
    const log = pino({ level: 'info' }, sink);
    const platform = checked(await startPlatform({ settings, log, clock: () => now }));
    p = Object.assign(platform, { base: `${platform.url}/content-service`, search: `${platform.url}/search-service` });
    editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
    sysadmin = await new Client(p.base).login('sysadmin');
    sports = await new Client(p.base).login('sportseditor');
    anon = new Client(p.base);
  });
  after(async () => p?.stop());

  const select = (c: Client, params: Record<string, string>, token?: string | null) =>
    c.req('GET', `${p.search}/content/select?${new URLSearchParams({ rows: '100', ...params })}`, { token });
  const ids = (r: { json: { response: { docs: { id: string }[] } } }) => r.json.response.docs.map((d) => d.id).sort();

  async function create(title: string, type: string, ops: unknown[] = [], aspects: Record<string, unknown> = {}, as = editor) {
    const r = await as.create({ system: { contentType: type }, aspects: { body: { title }, ...aspects }, operations: ops });
    expect(r.status, r.text).to.equal(201);
    return { id: r.json.system.id as string, version: r.json.system.version as string, etag: r.headers.get('etag')! };
  }

  // How soon a commit is searchable is a speed figure: npm run bench measures it ("commit to searchable").
  it('a created version becomes searchable, as the svcIndexing document', async () => {
    const c = await create('Searchable', `${T}a`, [], { svcSolrDocument: { headline_s: 'Hello index' } });
    const r = await eventually(async () => {
      const r = await select(editor, { q: `svc_type_s:${T}a` });
      expect(r.status, r.text).to.equal(200);
      expect(ids(r)).to.deep.equal([c.version]);
      return r;
    }, 30_000);
    const doc = r.json.response.docs[0];
    expect(doc).to.include({ id: c.version, root: c.version, svc_type_s: `${T}a`, headline_s: 'Hello index', svc_contentstate_hidden_b: false });
    expect(doc.svc_views_ss).to.deep.equal(['svcLatest']);
    expect(r.json.responseHeader).to.be.an('object');
  });

  it('an update replaces the version document; a delete removes the content from the index', async () => {
    const c = await create('v1', `${T}b`);
    await eventually(async () => expect(ids(await select(editor, { q: `svc_type_s:${T}b` }))).to.deep.equal([c.version]));
    const u = await editor.req('PUT', `/content/alias/${c.id}`, { body: { aspects: { body: { title: 'v2' } } }, headers: { 'If-Match': c.etag } });
    await eventually(async () => expect(ids(await select(editor, { q: `svc_type_s:${T}b` }))).to.deep.equal([u.json.system.version]));
    await editor.req('DELETE', `/content/alias/${c.id}`, { headers: { 'If-Match': u.headers.get('etag')! } });
    await eventually(async () => expect(ids(await select(editor, { q: `svc_type_s:${T}b` }))).to.deep.equal([]));
  });

  it('one document per version on an indexed view (svcLatest, svcPublic); a version leaving a view leaves the index', async () => {
    const c = await create('v1', `${T}c`, [{ _type: 'svcAssignToViews', views: ['svcPublic'] }]);
    const u = await editor.req('PUT', `/content/alias/${c.id}`, { body: { aspects: { body: { title: 'v2' } } }, headers: { 'If-Match': c.etag } });
    // v1 stays on svcPublic, v2 is on svcLatest: two documents
    await eventually(async () => expect(ids(await select(editor, { q: `svc_type_s:${T}c` }))).to.deep.equal([c.version, u.json.system.version].sort()));
    await editor.req('DELETE', `/view/svcPublic/alias/${c.id}`);
    await eventually(async () => expect(ids(await select(editor, { q: `svc_type_s:${T}c` }))).to.deep.equal([u.json.system.version]));
  });

  it('child documents (Events 3-4): indexed with the parent under ids derived from its id (CONTRACT §20), deleted with it on update and on delete', async () => {
    const type = `${T}k`;
    const kid = `kid-${Date.now()}`;
    const c = await create('with parts', type, [], { svcSolrDocument: { parts: [{ part_s: kid }] } });
    const solr = await ensureTestSolr();
    const find = async () =>
      (
        (await (await fetch(`${solr}/content/select?${new URLSearchParams({ q: `part_s:"${kid}"`, fl: 'id,root', wt: 'json' })}`)).json()) as {
          response: { docs: { id: string; root: string }[] };
        }
      ).response.docs;
    await eventually(async () => expect(await find()).to.deep.equal([{ id: `${c.version}/parts/0`, root: c.version }]));
    // an update without the children: the block is replaced, the child is gone
    const u = await editor.req('PUT', `/content/alias/${c.id}`, { body: { aspects: { svcSolrDocument: null } }, headers: { 'If-Match': c.etag } });
    expect(u.status).to.equal(200);
    await eventually(async () => expect(await find()).to.deep.equal([]));
    // children again, then a delete of the content removes them with their parent
    const u2 = await editor.req('PUT', `/content/alias/${c.id}`, {
      body: { aspects: { svcSolrDocument: { parts: [{ part_s: kid }] } } },
      headers: { 'If-Match': u.headers.get('etag')! },
    });
    await eventually(async () => expect(await find()).to.deep.equal([{ id: `${u2.json.system.version}/parts/0`, root: u2.json.system.version }]));
    await editor.req('DELETE', `/content/alias/${c.id}`, { headers: { 'If-Match': u2.headers.get('etag')! } });
    await eventually(async () => expect(await find()).to.deep.equal([]));
  });

  describe('filters', () => {
    let pub: { version: string };
    let hidden: { version: string };
    let later: { version: string };
    let latestOnly: { version: string };
    let sportsOnly: { version: string };
    before(async () => {
      const type = `${T}f`;
      pub = await create('public', type, [{ _type: 'svcAssignToViews', views: ['svcPublic'] }]);
      hidden = await create('hidden', type, [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        { _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: true } } },
      ]);
      later = await create('later', type, [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        { _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { onTime: new Date(now + 3600000).toISOString() } } } } },
      ]);
      latestOnly = await create('latest only', type);
      sportsOnly = await create('sports', type, [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }], {}, sports);
      await eventually(async () => expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.have.length(5));
    });

    it('without a token: only content on public views, not hidden, inside its time state', async () => {
      const r = await select(anon, { q: `svc_type_s:${T}f` }, null);
      expect(r.status).to.equal(200);
      expect(ids(r)).to.deep.equal([pub.version]);
    });

    it('with a token: exactly what the caller may Read (types and security contexts), counts included', async () => {
      const all = [pub, hidden, later, latestOnly, sportsOnly].map((c) => c.version).sort();
      expect(ids(await select(reader, { q: `svc_type_s:${T}f` }))).to.deep.equal(all);
      const s = await select(sports, { q: `svc_type_s:${T}f` });
      expect(ids(s)).to.deep.equal([sportsOnly.version]);
      expect(s.json.response.numFound).to.equal(1);
      expect((await select(anon, { q: `svc_type_s:${T}f` }, 'not-a-token')).status).to.equal(401);
    });

    it('view: only content on that view, with time state applied', async () => {
      expect(ids(await select(reader, { q: `svc_type_s:${T}f`, view: 'svcPublic' }))).to.deep.equal([pub.version, hidden.version].sort());
      now += 2 * 3600000;
      try {
        expect(ids(await select(reader, { q: `svc_type_s:${T}f`, view: 'svcPublic' }))).to.deep.equal([pub.version, hidden.version, later.version].sort());
        expect(ids(await select(anon, { q: `svc_type_s:${T}f` }, null))).to.deep.equal([pub.version, later.version].sort());
      } finally {
        now -= 2 * 3600000;
      }
    });

    it('variant: only content of types that have it; inlineData puts the content in _content', async () => {
      expect(ids(await select(reader, { q: `svc_type_s:${T}f`, variant: 'teaser' }))).to.deep.equal([]);
      const r = await select(reader, { q: `svc_type_s:${T}f`, view: 'svcPublic', inlineData: 'true', variant: 'svcIndexing' });
      expect(r.status).to.equal(200);
      const docs = r.json.response.docs as { id: string; _content: { system: { version: string }; aspects: Record<string, unknown> } }[];
      expect(docs).to.have.length(2);
      for (const d of docs) {
        expect(d._content.system.version).to.equal(d.id);
        expect(d._content.aspects).to.have.property('svcSolrDocument');
      }
    });

    it('variant: a search in a variant returns the content whose type has it (config/variants.json), and no other', async () => {
      const marker = `variant${T}`;
      const made: Record<string, string> = {};
      for (const type of ['article', 'image', `${T}v`]) made[type] = (await create(marker, type, [], { svcSolrDocument: { headline_s: marker } })).version;
      const q = { q: `headline_s:"${marker}"` };
      await eventually(async () => expect(ids(await select(reader, q))).to.deep.equal(Object.values(made).sort()));
      expect(ids(await select(reader, { ...q, variant: 'teaser' })), 'teaser: article only').to.deep.equal([made.article]);
      expect(ids(await select(reader, { ...q, variant: 'svcFileDelivery.variant' })), 'svcFileDelivery.variant: image only').to.deep.equal([made.image]);
      expect(ids(await select(reader, { ...q, variant: 'svcIndexing' })), 'svcIndexing: every type').to.deep.equal(Object.values(made).sort());
      const inline = await select(reader, { ...q, variant: 'teaser', inlineData: 'true' });
      const aspects = inline.json.response.docs[0]._content.aspects;
      expect(aspects, 'the teaser projection keeps body').to.have.property('body');
      expect(aspects, 'and drops the other aspects').to.not.have.property('svcSolrDocument');
    });

    it('offTime (spec svcTimeState): once it has passed, the content leaves anonymous search and the view filter; a reader still finds it', async () => {
      const type = `${T}o`;
      const onPublic = (offTime?: number) => [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        ...(offTime === undefined
          ? []
          : [{ _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { offTime: new Date(offTime).toISOString() } } } } }]),
      ];
      const always = await create('always', type, onPublic());
      const ending = await create('ending', type, onPublic(now + 3600000));
      const ended = await create('ended', type, onPublic(now - 3600000));
      const all = [always, ending, ended].map((c) => c.version).sort();
      await eventually(async () => expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.deep.equal(all));
      expect(ids(await select(anon, { q: `svc_type_s:${type}` }, null)), 'anonymous, before the offTime of "ending"').to.deep.equal(
        [always.version, ending.version].sort(),
      );
      now += 2 * 3600000;
      try {
        expect(ids(await select(anon, { q: `svc_type_s:${type}` }, null)), 'anonymous, after it').to.deep.equal([always.version]);
        expect(ids(await select(reader, { q: `svc_type_s:${type}`, view: 'svcPublic' })), 'view svcPublic, after it').to.deep.equal([always.version]);
        expect(ids(await select(reader, { q: `svc_type_s:${type}` })), 'a reader reads it off the view').to.deep.equal(all);
      } finally {
        now -= 2 * 3600000;
      }
    });

    /** A refusal of the proxy (CONTRACT §11, §20): 400, the error body, naming the parameter. */
    const refused = (
      r: { status: number; json: { message?: string; statusCode?: string; extraInfo?: Record<string, unknown> } },
      param: string,
      what: string,
    ) => {
      expect(r.status, what).to.equal(400);
      expect(r.json.statusCode, what).to.equal('40000');
      expect(r.json.extraInfo?.parameter, what).to.equal(param);
      expect(r.json.message, what).to.contain(`'${param}'`);
      expect(r.json, what).to.not.have.property('response');
    };
    const forbidden = () => [hidden.version, later.version, latestOnly.version, sportsOnly.version];

    it('the filters cannot be lifted: fq, defType, OR-ing; local params, subqueries, expand, qt, shards, wt are refused (CONTRACT §20)', async () => {
      const type = `${T}f`;
      for (const params of <Record<string, string>[]>[
        { q: `svc_type_s:${type}`, fq: '*:*' },
        { q: `svc_type_s:${type}`, defType: 'edismax', qf: 'id svc_type_s' },
        { q: `svc_type_s:${type} OR *:*` },
      ]) {
        const r = await select(sports, params);
        expect(r.status, JSON.stringify(params)).to.equal(200);
        // only content of context sports (other suites' sports content may be indexed too)
        for (const d of r.json.response.docs as { svc_security_context_ss?: string[] }[]) {
          expect(d.svc_security_context_ss ?? [], JSON.stringify(params)).to.include('sports');
        }
        expect(ids(r), JSON.stringify(params)).to.not.include(pub.version);
      }
      for (const [param, params] of <[string, Record<string, string>][]>[
        ['q', { q: `{!lucene}svc_type_s:${type}` }],
        ['fq', { q: `svc_type_s:${type}`, fq: `{!lucene v='*:*'}` }],
        ['q', { q: `{!join from=id to=id}svc_type_s:${type}` }],
        ['fl', { q: '*:*', fl: 'id,[subquery]', 'sub.q': '*:*' }],
        ['expand.q', { q: '*:*', 'expand.q': '*:*', expand: 'true' }],
        ['qt', { q: '*:*', qt: '/update' }],
        ['shards', { q: '*:*', shards: 'localhost:1/solr/content' }],
        ['wt', { q: '*:*', wt: 'xml' }],
        ['stream.body', { q: '*:*', 'stream.body': '<delete><query>*:*</query></delete>' }],
      ]) {
        refused(await select(sports, params), param, JSON.stringify(params));
      }
    });

    it('an injection table of 50 parameter sets: what the allowlist lets through is filtered, the rest answers 400 naming the parameter', async () => {
      const type = `${T}f`;
      const qs = [
        `svc_type_s:${type}`,
        '*:*',
        `{!lucene}*:*`,
        `{!edismax qf=id}*`,
        `*:* OR id:*`,
        `{!join from=root to=id}*:*`,
        `{!frange l=0}1`,
        `{!parent which=*:*}*:*`,
        `(*:*) OR (svc_security_context_ss:*)`,
        `{!lucene q.op=OR}*:* -svc_type_s:nothing`,
      ];
      const extras: Record<string, string>[] = [
        {},
        { fq: '*:*' },
        { fq: `{!cache=false}*:*` },
        { defType: 'edismax', qf: 'id svc_type_s', mm: '0' },
        { defType: 'dismax', 'q.alt': '*:*' },
      ];
      let cases = 0;
      for (const q of qs) {
        for (const extra of extras) {
          const params: Record<string, string> = { q, ...extra, fl: 'id,svc_security_context_ss', rows: '1000' };
          // the first parameter, in request order, that the allowlist refuses
          const culprit = Object.keys(params).find((k) => k === 'q.alt' || params[k].includes('{!'));
          for (const [caller, token] of <[Client, string | null | undefined][]>[
            [sports, undefined],
            [anon, null],
          ]) {
            const r = await select(caller, params, token);
            cases++;
            if (culprit) {
              refused(r, culprit, JSON.stringify(params));
              continue;
            }
            expect(r.status, `${JSON.stringify(params)} ${r.text.slice(0, 300)}`).to.equal(200);
            if (caller === sports) {
              for (const d of r.json.response.docs as { svc_security_context_ss?: string[] }[])
                expect(d.svc_security_context_ss ?? [], JSON.stringify(params)).to.include('sports');
            } else {
              expect(ids(r), JSON.stringify(params)).to.not.include.members(forbidden());
            }
          }
        }
      }
      expect(cases).to.equal(100);
    });

    it('a range facet of more buckets than SEARCH_MAX_RANGE_BUCKETS (1000) answers 400 naming its gap, before the engine is asked; an ordinary one is answered', async () => {
      // The reported search had 10,000,000 buckets (the embedded Solr ran out of memory, 500);
      // 100,000 are enough to be refused and leave the engine well if the check is missing.
      const range = {
        q: '*:*',
        rows: '0',
        facet: 'true',
        'facet.range': 'version',
        'facet.range.start': '0',
        'facet.range.end': '100000',
        'facet.range.gap': '1',
      };
      for (const [param, params] of <[string, Record<string, string>][]>[
        ['facet.range.gap', range],
        ['f.version.facet.range.gap', { ...range, 'f.version.facet.range.gap': '10' }],
        [
          'facet.range.gap',
          { ...range, 'facet.range': 'svc_modificationTime_dt', 'facet.range.start': 'NOW-10YEARS', 'facet.range.end': 'NOW', 'facet.range.gap': '+1DAY' },
        ],
      ]) {
        refused(await select(anon, params, null), param, JSON.stringify(params));
        refused(await select(sports, params), param, JSON.stringify(params));
      }
      const ok = await select(anon, { ...range, 'facet.range.gap': '100' }, null);
      expect(ok.status, ok.text.slice(0, 300)).to.equal(200);
      expect(ok.json.facet_counts.facet_ranges.version.gap).to.equal(100);
      const dates = await select(sports, {
        ...range,
        'facet.range': 'svc_modificationTime_dt',
        'facet.range.start': 'NOW/DAY-10YEARS',
        'facet.range.end': 'NOW/DAY+1DAY',
        'facet.range.gap': '+1MONTH',
      });
      expect(dates.status, dates.text.slice(0, 300)).to.equal(200);
      expect(dates.json.facet_counts.facet_ranges.svc_modificationTime_dt.gap).to.equal('+1MONTH');
    });

    describe('issue 14: what the proxy let through (regressions)', () => {
      it('1. inlineData through the [value] transformer: refused, never an envelope', async () => {
        for (const fl of [
          `id:[value v="${latestOnly.version}"]`,
          `[value v="${sportsOnly.version}"]`,
          'id,[docid]',
          'id,[child]',
          'id,[explain]',
          `id,x:[value v=1]`,
        ]) {
          const r = await select(anon, { q: '*:*', rows: '1', fl, inlineData: 'true' }, null);
          refused(r, 'fl', fl);
          expect(r.text).to.not.contain('_content');
        }
      });

      it('1. inlineData loads only what the caller may read, even when the index says otherwise', async () => {
        // a content on svcLatest only whose document in the engine claims a public view
        const type = `${T}i`;
        const c = await create('not public', type);
        await eventually(async () => expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.deep.equal([c.version]));
        const solr = await ensureTestSolr();
        const forged = {
          id: c.version,
          root: c.version,
          svc_type_s: type,
          svc_views_ss: ['svcPublic'],
          svc_timestate_svcPublic_drange: ['[0000 TO 9999]'],
          svc_contentstate_hidden_b: false,
          svc_security_context_ss: ['sports'],
        };
        const put = await fetch(`${solr}/content/update?commit=true`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify([forged]),
        });
        expect(put.status).to.equal(200);
        try {
          for (const [who, caller, token] of <[string, Client, string | null | undefined][]>[
            ['anonymous', anon, null],
            ['sportseditor', sports, undefined],
          ]) {
            const r = await select(caller, { q: `svc_type_s:${type}`, inlineData: 'true' }, token);
            expect(r.status, who).to.equal(200);
            expect(ids(r), `${who}: the engine returns the forged document`).to.deep.equal([c.version]);
            expect(r.json.response.docs[0]._content, `${who} may not read the content`).to.equal(null);
          }
          const r = await select(reader, { q: `svc_type_s:${type}`, inlineData: 'true' });
          expect(r.json.response.docs[0]._content.system.version, 'reader may').to.equal(c.version);
        } finally {
          await fetch(`${solr}/content/update?commit=true`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ delete: { id: c.version } }),
          });
        }
      });

      it('2. facets list only terms of documents the caller may read (facet.mincount raised to 1), in every form', async () => {
        const facetTerms = (r: { json: { facet_counts: { facet_fields: Record<string, (string | number)[]> } } }, field: string) => {
          const flat = r.json.facet_counts.facet_fields[field];
          const terms: string[] = [];
          for (let i = 0; i < flat.length; i += 2) {
            expect(flat[i + 1], `count of ${flat[i]}`).to.be.at.least(1);
            terms.push(String(flat[i]));
          }
          return terms;
        };
        for (const extra of <Record<string, string>[]>[
          {},
          { 'facet.mincount': '0' },
          { 'facet.mincount': '-3' },
          { 'f.id.facet.mincount': '0' },
          { 'facet.prefix': 'c:' },
          { 'f.id.facet.prefix': 'c:', 'f.id.facet.mincount': '0' },
        ]) {
          for (const [who, caller, token] of <[string, Client, string | null | undefined][]>[
            ['anonymous', anon, null],
            ['sportseditor', sports, undefined],
          ]) {
            // facet.limit=-1 is sent as 1000 (SEARCH_MAX_FACET_VALUES): the fq keeps this suite's
            // own among them whatever else the index holds (the forbidden ones are of the same type)
            const r = await select(
              caller,
              { q: '*:*', fq: `svc_type_s:${T}f`, rows: '0', facet: 'true', 'facet.field': 'id', 'facet.limit': '-1', ...extra },
              token,
            );
            expect(r.status, `${who} ${JSON.stringify(extra)} ${r.text.slice(0, 200)}`).to.equal(200);
            const terms = facetTerms(r, 'id');
            expect(terms, `${who} ${JSON.stringify(extra)}`).to.not.include.members(
              who === 'anonymous' ? forbidden() : [pub.version, hidden.version, later.version, latestOnly.version],
            );
            expect(terms, `${who} sees its own`).to.include(who === 'anonymous' ? pub.version : sportsOnly.version);
          }
        }
        const pivot = await select(
          anon,
          // every value at both levels (-1) would be refused: a pivot counts every node of its tree
          { q: '*:*', fq: `svc_type_s:${T}f`, rows: '0', facet: 'true', 'facet.pivot': 'svc_type_s,id', 'facet.limit': '100', 'facet.mincount': '0' },
          null,
        );
        expect(pivot.status, pivot.text.slice(0, 300)).to.equal(200);
        const pivotIds = JSON.stringify(pivot.json.facet_counts.facet_pivot);
        for (const v of forbidden()) expect(pivotIds).to.not.contain(v);
        expect(pivotIds).to.contain(pub.version);
        for (const field of ['{!key=x}id', '{!ex=t}id', '{!terms=a,b}id', 'id {!x}'])
          refused(await select(anon, { q: '*:*', facet: 'true', 'facet.field': field }, null), 'facet.field', field);
        refused(await select(anon, { q: '*:*', facet: 'true', 'facet.pivot': '{!stats=s}id' }, null), 'facet.pivot', 'pivot with local params');
        refused(await select(anon, { q: '*:*', facet: 'true', 'facet.query': '{!terms f=id}x' }, null), 'facet.query', 'facet.query with local params');
        refused(await select(anon, { q: '*:*', facet: 'true', 'facet.field': 'id', 'facet.method': 'enum' }, null), 'facet.method', 'facet.method');
        refused(await select(anon, { q: '*:*', 'json.facet': '{x:{type:terms,field:id}}' }, null), 'json.facet', 'json.facet');
        refused(await select(anon, { q: '*:*', facet: 'true', 'facet.field': 'id', 'facet.missing': 'true' }, null), 'facet.missing', 'facet.missing');
      });

      it('3. more-like-this and other components that read past the filters are refused', async () => {
        for (const [param, extra] of <[string, Record<string, string>][]>[
          ['mlt', { mlt: 'true', 'mlt.fl': 'svc_type_s', 'mlt.mindf': '1', 'mlt.mintf': '1' }],
          ['mlt.fl', { 'mlt.fl': 'svc_type_s' }],
          ['terms', { terms: 'true', 'terms.fl': 'id' }],
          ['spellcheck', { spellcheck: 'true' }],
          ['debugQuery', { debugQuery: 'true' }],
          ['explainOther', { explainOther: '*:*' }],
          ['rq', { rq: '{!rerank reRankQuery=$rqq}' }],
          ['hl.q', { hl: 'true', 'hl.q': '*:*' }],
          ['group.query', { group: 'true', 'group.query': '*:*' }],
          ['group.func', { group: 'true', 'group.func': 'docfreq(id,x)' }],
          ['stats.facet', { stats: 'true', 'stats.field': 'version', 'stats.facet': 'id' }],
          ['uf', { defType: 'edismax', qf: 'id', uf: '*' }],
        ]) {
          refused(await select(anon, { q: `svc_type_s:${T}f`, ...extra }, null), param, JSON.stringify(extra));
        }
      });

      it('4. oracles: joins, magic fields, function queries in q/fq/facet.query/fl/sort are refused, in every spelling', async () => {
        const guess = `id:"${latestOnly.version}"`;
        for (const [param, extra] of <[string, Record<string, string>][]>[
          ['q', { q: `{!join from=root to=id}${guess}` }],
          ['q', { q: `{ !join from=root to=id}${guess}` }],
          ['q', { q: `*:* AND _query_:"{!join from=root to=id}${guess}"` }],
          ['q', { q: `*:* AND \\_query\\_:"\\{!join from=root to=id}x"` }],
          ['q', { q: '*:* AND \\u005fquery\\u005f:x' }],
          ['q', { q: `*:* AND _val_:"docfreq(id,'${latestOnly.version}')"` }],
          ['q', { q: '*:* AND \\u005fval\\u005f:"docfreq(id,x)"' }],
          ['q', { q: `id:${latestOnly.version.replace(/:/g, '\\:')}~1` }],
          ['q', { q: '${facet.prefix}', 'facet.prefix': `_val_:"docfreq(id,'${latestOnly.version}')"`, fl: 'id,score' }],
          ['q', { q: `\${x:_query_:"{!join from=root to=id}${guess}"}` }],
          ['fq', { q: '*:*', fq: `_query_:"{!join from=root to=id}${guess}"` }],
          ['fq', { q: '*:*', fq: '{!frange l=1}docfreq(id,x)' }],
          ['facet.query', { q: '*:*', facet: 'true', 'facet.query': `_query_:"{!join from=root to=id}${guess}"` }],
          ['facet.query', { q: '*:*', facet: 'true', 'facet.query': '_val_:"docfreq(id,x)"' }],
          ['fl', { q: '*:*', fl: `id,df:docfreq(id,'${latestOnly.version}')` }],
          ['fl', { q: '*:*', fl: `docfreq(id,'${latestOnly.version}')` }],
          ['fl', { q: '*:*', fl: 'id,n:numdocs()' }],
          ['sort', { q: '*:*', sort: `docfreq(id,'${latestOnly.version}') asc` }],
          ['sort', { q: '*:*', sort: 'id asc,query({!v=x}) desc' }],
          ['sort', { q: '*:*', sort: 'if(exists(id),1,0) desc' }],
          ['qf', { q: 'x', defType: 'edismax', qf: '{!join from=id to=id}id' }],
          ['df', { q: 'x', df: '_val_' }],
          ['stats.field', { q: '*:*', stats: 'true', 'stats.field': '{!func}docfreq(id,x)' }],
          ['group.field', { q: '*:*', group: 'true', 'group.field': '{!x}id' }],
          ['hl.fl', { q: '*:*', hl: 'true', 'hl.fl': 'id,{!x}' }],
        ]) {
          refused(await select(anon, extra, null), param, JSON.stringify(extra));
        }
      });

      it('10. engine errors: the status and the JSON error without trace, Java class names or addresses; HTML becomes the error body', async () => {
        const syntax = await select(reader, { q: 'svc_type_s:[' });
        expect(syntax.status).to.equal(400);
        expect(syntax.json).to.include({ statusCode: '40000' });
        expect(syntax.json.extraInfo).to.deep.equal({});
        expect(syntax.json.message)
          .to.be.a('string')
          .and.to.match(/^Cannot parse 'svc_type_s:\[':/);
        expect(syntax.json.error).to.deep.equal({ msg: syntax.json.message, code: 400 });
        const badField = await select(reader, { q: 'x', defType: 'edismax', qf: 'no_such_field' });
        expect(badField.status).to.equal(400);
        expect(badField.json.error).to.deep.equal({ msg: "Query Field 'no_such_field' is not a valid field name", code: 400 });
        for (const r of [syntax, badField]) {
          expect(Object.keys(r.json).sort()).to.deep.equal(['error', 'extraInfo', 'message', 'responseHeader', 'statusCode']);
          expect(r.text).to.not.match(/trace|metadata|org\.apache|java\.|Exception|\tat |https?:\/\/|127\.0\.0\.1|localhost|Jetty/);
        }
        // edismax without qf or df: Solr answers 500 with a Java stack trace; the proxy refuses it first
        refused(await select(reader, { q: 'x', defType: 'edismax' }), 'qf', 'edismax without qf or df');
        // an unknown collection: Jetty's HTML 404 naming its version, as the error body
        const html = await reader.req('GET', `${p.search}/no_such_collection/select?q=*:*`);
        expect(html.status).to.equal(404);
        expect(html.headers.get('content-type')).to.match(/^application\/json/);
        expect(html.json).to.deep.equal({ message: 'The search engine has no collection no_such_collection', statusCode: '40400', extraInfo: {} });
        // the engine down: 503 with Retry-After, and no address of the engine
        const port = await freePort();
        const down = await startTestPlatform({ SOLR_URL: `http://127.0.0.1:${port}/solr` }, ['web']);
        try {
          const r = await new Client(down.base).req('GET', `${down.url}/search-service/content/select?q=*:*`, { token: null });
          expect(r.status).to.equal(503);
          expect(r.headers.get('retry-after')).to.equal('5');
          expect(r.json).to.deep.equal({ message: 'The search engine is unavailable', statusCode: '50300', extraInfo: {} });
          expect(r.text).to.not.contain(String(port));
        } finally {
          await down.stop();
        }
      });
    });

    it('only the platform collection is searched: another collection of the same engine answers as one that does not exist', async function () {
      // A second core on the engine, holding a document nobody's filters were written for: made
      // in the embedded Solr's home, so not on a Solr given by TEST_SOLR_URL.
      if (process.env.TEST_SOLR_URL) this.skip();
      const solr = await ensureTestSolr();
      const home = ((await (await fetch(`${solr}/admin/info/system?wt=json`)).json()) as { solr_home: string }).solr_home;
      const name = `other${T}`;
      cpSync(repoPath('tools', 'solr', 'configsets', 'content', 'conf'), join(home, name, 'conf'), { recursive: true });
      const made = await fetch(`${solr}/admin/cores?action=CREATE&name=${name}&instanceDir=${encodeURIComponent(join(home, name))}&wt=json`);
      expect(made.status, await made.text()).to.equal(200);
      try {
        const added = await fetch(`${solr}/${name}/update?commit=true`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: '[{"id":"not-platform-content","root":"not-platform-content"}]',
        });
        expect(added.status, await added.text()).to.equal(200);
        const other = await reader.req('GET', `${p.search}/${name}/select?q=*:*`);
        const none = await reader.req('GET', `${p.search}/no_such_collection/select?q=*:*`);
        expect(other.text).to.not.include('not-platform-content');
        expect([other.status, other.text.split(name).join('<name>')]).to.deep.equal([none.status, none.text.split('no_such_collection').join('<name>')]);
        expect(none.status).to.equal(404);
      } finally {
        await fetch(`${solr}/admin/cores?action=UNLOAD&core=${name}&deleteInstanceDir=true`);
      }
    });

    it('sysadmin sees everything, reader everything readable, on the same data', async () => {
      const all = [pub, hidden, later, latestOnly, sportsOnly].map((c) => c.version).sort();
      expect(ids(await select(sysadmin, { q: `svc_type_s:${T}f` }))).to.deep.equal(all);
    });

    it('POST with form parameters works; the JSON request API is refused', async () => {
      const form = await sports.req('POST', `${p.search}/content/select`, {
        raw: new URLSearchParams({ q: `svc_type_s:${T}f` }).toString(),
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      expect(form.status).to.equal(200);
      expect(ids(form)).to.deep.equal([sportsOnly.version]);
      const json = await sports.req('POST', `${p.search}/content/select`, { body: { query: '*:*' } });
      expect(json.status).to.equal(415);
    });
  });

  describe('re-indexing', () => {
    it('needs sysadmin in __global__ (403 otherwise)', async () => {
      expect((await editor.req('POST', '/index/reindex/full')).status).to.equal(403);
      expect((await editor.req('POST', '/index/reindex/full', { token: null })).status).to.equal(401);
    });

    it('full, by type and by aliases: 200 with a plain-text message naming the session and count; the index is rebuilt; the spec log lines', async () => {
      const type = `${T}r`;
      const made = [];
      for (let i = 0; i < 5; i++) made.push(await create(`r${i}`, type));
      await eventually(async () => expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.have.length(5));
      // wipe them from the engine behind the platform's back
      const solr = await ensureTestSolr();
      await fetch(`${solr}/content/update?commit=true`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ delete: { query: `svc_type_s:${type}` } }),
      });
      expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.have.length(0);

      const r = await sysadmin.req('POST', `/index/reindex/contentType/${type}`);
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^text\/plain/);
      const m = /^Re-indexing session (\S+) started: 5 content of type (\S+) queued\.$/.exec(r.text);
      expect(m, r.text).to.not.equal(null);
      const session = m![1];
      await eventually(async () => expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.have.length(5));
      await eventually(async () => expect(lines).to.include(`Re-indexing session ${session} started with a total of 5 content queued.`));
      await eventually(async () =>
        expect(
          lines.some((l) => new RegExp(`^Re-indexing session ${session} complete\\. Duration: \\d+ seconds \\(\\d+ content / second\\)\\.$`).test(l)),
        ).to.equal(true),
      );
      // the progress metric and the indexer's lag are on /metrics
      const metrics = await sysadmin.metrics();
      expect(metrics.text).to.contain(`reindex_session_progress_ratio{session="${session}"} 1`);
      expect(metrics.text).to.match(/indexer_lag\{partition="0"\} \d+/);
      expect(metrics.text).to.match(/indexer_pending\{partition="0"\} \d+/);

      const byAlias = await sysadmin.req(
        'POST',
        `/index/reindex?aliases=${encodeURIComponent(
          made
            .slice(0, 2)
            .map((c) => c.id)
            .join(','),
        )}`,
      );
      expect(byAlias.text).to.match(/^Re-indexing session \S+ started: 2 content queued\.$/);
      const full = await sysadmin.req('POST', `/index/reindex/full?from=${encodeURIComponent(new Date(Date.now() - 60000).toISOString())}`);
      expect(full.status).to.equal(200);
      expect(full.text).to.match(/^Re-indexing session \S+ started: \d+ content affected from \S+ until now queued\.$/);
      const legacy = await sysadmin.req('POST', `/index/reindex?contentType=${type}`);
      expect(legacy.text).to.match(/started: 5 content of type/);
      expect((await sysadmin.req('POST', '/index/reindex/full?from=yesterday')).status).to.equal(400);
    });

    it('a session of more than one record (250 content each) logs start, progress and completion, in that order (spec Events 6)', async () => {
      const type = `${T}p`;
      const n = 251;
      for (let i = 0; i < n; i += 25) await Promise.all(Array.from({ length: Math.min(25, n - i) }, (_, j) => create(`p${i + j}`, type)));
      const r = await sysadmin.req('POST', `/index/reindex/contentType/${type}`);
      expect(r.status, r.text).to.equal(200);
      const session = /^Re-indexing session (\S+) started: 251 content of type \S+ queued\.$/.exec(r.text)?.[1];
      expect(session, r.text).to.be.a('string');
      const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
      const complete = new RegExp(`^Re-indexing session ${session} complete\\. Duration: \\d+ seconds \\(\\d+ content / second\\)\\.$`);
      await eventually(async () => expect(at(complete), 'the completion line').to.be.above(-1), 60_000);
      const start = lines.indexOf(`Re-indexing session ${session} started with a total of ${n} content queued.`);
      const progress = new RegExp(`^Re-indexing session ${session} progress: (\\d+)% \\(duration: \\d+ seconds\\)\\.$`);
      const progressLines = lines.filter((l) => progress.test(l));
      expect(start, 'the start line').to.be.above(-1);
      expect(progressLines, 'progress lines').to.not.be.empty;
      for (const l of progressLines) expect(Number(progress.exec(l)![1]), l).to.be.within(0, 99);
      expect(at(progress), 'progress after the start').to.be.above(start);
      const lastProgress = lines.reduce((last, l, i) => (progress.test(l) ? i : last), -1);
      expect(at(complete), 'completion after the progress').to.be.above(lastProgress);
    });
  });
});
