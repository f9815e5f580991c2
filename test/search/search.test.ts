import { expect } from 'chai';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadSettings } from '../../config/settings.js';
import { startPlatform } from '../../src/main.js';
import { Client } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually } from '../support/wait.js';

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
    const platform = await startPlatform({ settings, log, clock: () => now });
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

  it('a created version is searchable within 2 s, as the svcIndexing document', async () => {
    const c = await create('Searchable', `${T}a`, [], { svcSolrDocument: { headline_s: 'Hello index' } });
    const started = Date.now();
    const r = await eventually(async () => {
      const r = await select(editor, { q: `svc_type_s:${T}a` });
      expect(r.status, r.text).to.equal(200);
      expect(ids(r)).to.deep.equal([c.version]);
      return r;
    });
    expect(Date.now() - started).to.be.below(2500);
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

  it('child documents (Events 3-4): indexed with the parent, deleted with it on update and on delete', async () => {
    const type = `${T}k`;
    const child = `part-${Date.now()}`;
    const c = await create('with parts', type, [], { svcSolrDocument: { parts: [{ id: child, part_s: 'kid' }] } });
    const find = async () => ids(await select(sysadmin, { q: `id:"${child}"` }));
    await eventually(async () => expect(await find()).to.deep.equal([child]));
    const kid = (await select(sysadmin, { q: `id:"${child}"`, fl: 'id,root' })).json.response.docs[0];
    expect(kid.root).to.equal(c.version);
    // an update without the children: the block is replaced, the child is gone
    const u = await editor.req('PUT', `/content/alias/${c.id}`, { body: { aspects: { svcSolrDocument: null } }, headers: { 'If-Match': c.etag } });
    expect(u.status).to.equal(200);
    await eventually(async () => expect(await find()).to.deep.equal([]));
    // children again, then a delete of the content removes them with their parent
    const u2 = await editor.req('PUT', `/content/alias/${c.id}`, { body: { aspects: { svcSolrDocument: { parts: [{ id: child, part_s: 'kid' }] } } }, headers: { 'If-Match': u.headers.get('etag')! } });
    await eventually(async () => expect(await find()).to.deep.equal([child]));
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
      hidden = await create('hidden', type, [{ _type: 'svcAssignToViews', views: ['svcPublic'] }, { _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: true } } }]);
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

    it('the filters cannot be lifted: fq, local params, defType, subqueries, expand, qt, shards, wt', async () => {
      const type = `${T}f`;
      for (const params of <Record<string, string>[]>[
        { q: `svc_type_s:${type}`, fq: '*:*' },
        { q: `{!lucene}svc_type_s:${type}` },
        { q: `svc_type_s:${type}`, defType: 'edismax', qf: 'id' },
        { q: `svc_type_s:${type}`, fq: `{!lucene v='*:*'}` },
        { q: `svc_type_s:${type} OR *:*` },
        { q: `{!join from=id to=id}svc_type_s:${type}` },
      ]) {
        const r = await select(sports, params);
        expect(r.status, JSON.stringify(params)).to.equal(200);
        // only content of context sports (other suites' sports content may be indexed too)
        for (const d of r.json.response.docs as { svc_security_context_ss?: string[] }[]) {
          expect(d.svc_security_context_ss ?? [], JSON.stringify(params)).to.include('sports');
        }
        expect(ids(r), JSON.stringify(params)).to.not.include(pub.version);
      }
      for (const params of <Record<string, string>[]>[
        { q: '*:*', fl: 'id,[subquery]', 'sub.q': '*:*' },
        { q: '*:*', 'expand.q': '*:*', expand: 'true' },
        { q: '*:*', qt: '/update' },
        { q: '*:*', shards: 'localhost:1/solr/content' },
        { q: '*:*', wt: 'xml' },
        { q: '*:*', 'stream.body': '<delete><query>*:*</query></delete>' },
      ]) {
        const r = await select(sports, params);
        expect(r.status, JSON.stringify(params)).to.equal(400);
        expect(r.json.statusCode).to.equal('40000');
      }
    });

    it('an injection table of 50 parameter sets never returns what the caller may not read', async () => {
      const type = `${T}f`;
      const qs = [`svc_type_s:${type}`, '*:*', `{!lucene}*:*`, `{!edismax qf=id}*`, `*:* OR id:*`, `{!join from=root to=id}*:*`, `{!frange l=0}1`, `{!parent which=*:*}*:*`, `(*:*) OR (svc_security_context_ss:*)`, `{!lucene q.op=OR}*:* -svc_type_s:nothing`];
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
          const params = { q, ...extra, fl: 'id,svc_security_context_ss', rows: '1000' };
          const r = await select(sports, params);
          cases++;
          if (r.status !== 200) {
            // refused by the proxy (4xx), or the engine's own error passed through unchanged
            // (CONTRACT §12; e.g. a block join whose parent filter matches children, once the
            // index holds child documents): never any document
            expect(r.status, JSON.stringify(params)).to.be.at.least(400);
            expect(r.json?.response, JSON.stringify(params)).to.equal(undefined);
            continue;
          }
          for (const d of r.json.response.docs as { svc_security_context_ss?: string[] }[]) {
            expect(d.svc_security_context_ss ?? [], JSON.stringify(params)).to.include('sports');
          }
          const anonymous = await select(anon, params, null);
          if (anonymous.status === 200) {
            expect(ids(anonymous), JSON.stringify(params)).to.not.include.members([hidden.version, later.version, latestOnly.version, sportsOnly.version]);
          }
        }
      }
      expect(cases).to.equal(50);
    });

    it('sysadmin sees everything, reader everything readable, on the same data', async () => {
      const all = [pub, hidden, later, latestOnly, sportsOnly].map((c) => c.version).sort();
      expect(ids(await select(sysadmin, { q: `svc_type_s:${T}f` }))).to.deep.equal(all);
    });

    it('POST with form parameters works; the JSON request API is refused', async () => {
      const form = await sports.req('POST', `${p.search}/content/select`, { raw: new URLSearchParams({ q: `svc_type_s:${T}f` }).toString(), headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
      expect(form.status).to.equal(200);
      expect(ids(form)).to.deep.equal([sportsOnly.version]);
      const json = await sports.req('POST', `${p.search}/content/select`, { body: { query: '*:*' } });
      expect(json.status).to.equal(415);
    });

    it('engine errors come through with the engine status and JSON body', async () => {
      const r = await select(reader, { q: 'svc_type_s:[' });
      expect(r.status).to.equal(400);
      expect(r.json.error).to.be.an('object');
      expect(r.json.error.code).to.equal(400);
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
      await fetch(`${solr}/content/update?commit=true`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ delete: { query: `svc_type_s:${type}` } }) });
      expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.have.length(0);

      const r = await sysadmin.req('POST', `/index/reindex/contentType/${type}`);
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^text\/plain/);
      const m = /^Re-indexing session (\S+) started: 5 content of type (\S+) queued\.$/.exec(r.text);
      expect(m, r.text).to.not.equal(null);
      const session = m![1];
      await eventually(async () => expect(ids(await select(sysadmin, { q: `svc_type_s:${type}` }))).to.have.length(5));
      await eventually(async () => expect(lines).to.include(`Re-indexing session ${session} started with a total of 5 content queued.`));
      await eventually(async () => expect(lines.some((l) => new RegExp(`^Re-indexing session ${session} complete\\. Duration: \\d+ seconds \\(\\d+ content / second\\)\\.$`).test(l))).to.equal(true));
      // the progress metric and the indexer's lag are on /metrics
      const metrics = await sysadmin.metrics();
      expect(metrics.text).to.contain(`reindex_session_progress_ratio{session="${session}"} 1`);
      expect(metrics.text).to.match(/indexer_lag\{partition="0"\} \d+/);
      expect(metrics.text).to.match(/indexer_pending\{partition="0"\} \d+/);

      const byAlias = await sysadmin.req('POST', `/index/reindex?aliases=${encodeURIComponent(made.slice(0, 2).map((c) => c.id).join(','))}`);
      expect(byAlias.text).to.match(/^Re-indexing session \S+ started: 2 content queued\.$/);
      const full = await sysadmin.req('POST', `/index/reindex/full?from=${encodeURIComponent(new Date(Date.now() - 60000).toISOString())}`);
      expect(full.status).to.equal(200);
      expect(full.text).to.match(/^Re-indexing session \S+ started: \d+ content affected from \S+ until now queued\.$/);
      const legacy = await sysadmin.req('POST', `/index/reindex?contentType=${type}`);
      expect(legacy.text).to.match(/started: 5 content of type/);
      expect((await sysadmin.req('POST', '/index/reindex/full?from=yesterday')).status).to.equal(400);
    });
  });
});
