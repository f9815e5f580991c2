import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { javaAndMavenAvailable, startSolr } from '../../src/dev/solr-server.js';
import { ensureTestSolr } from '../support/solr.js';
import { until } from '../support/wait.js';

/**
 * The Solr that `npm start` and `npm test` run (tools/solr, or SOLR_URL / TEST_SOLR_URL) with the
 * configset tools/solr/configsets/content: the spec's required fields and dynamic field patterns
 * ("Categorization and search index documents"), child documents, and soft commits that make
 * a change searchable within 2 s (CONTRACT §9). Plain HTTP, no platform code in between.
 */
describe('embedded Solr and the content configset (spec Categorization and search index documents, CONTRACT §9)', function () {
  this.timeout(300000); // the first run builds tools/solr with Maven
  const RUN = `sst${Date.now()}`;
  let core: string;

  type Doc = Record<string, unknown> & { id: string };
  interface SelectBody {
    response: { numFound: number; docs: Doc[] };
  }

  async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
    const res = await fetch(`${core}/${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }

  async function select(q: string, extra: Record<string, string> = {}): Promise<SelectBody> {
    const params = new URLSearchParams({ q, fq: `run_s:${RUN}`, rows: '100', sort: 'id asc', ...extra });
    const res = await fetch(`${core}/select?${params}`);
    const body = (await res.json()) as SelectBody & { error?: { msg: string } };
    expect(res.status, body.error?.msg).to.equal(200);
    return body;
  }

  const ids = async (q: string, extra: Record<string, string> = {}) => (await select(q, extra)).response.docs.map((d) => d.id);

  before(async () => {
    core = `${await ensureTestSolr()}/content`;
    const docs = [
      {
        id: `${RUN}-a`,
        root: `${RUN}-a`,
        version: 7,
        run_s: RUN,
        svc_type_s: 'article',
        svc_views_ss: ['svcLatest', 'svcPublic'],
        svc_modificationTime_dt: '2026-03-04T05:06:07Z',
        svc_timestate__drange: '[2026-01-01T00:00:00Z TO 2026-12-31T23:59:59Z]',
        count_l: 9007199254740000,
        rank_i: 42,
        svc_contentstate_hidden_b: false,
        flags_bs: [true, false],
        svc_tag_autocomplete_dim_lc: ['Sports', 'Sports/Football Club'],
        _childDocuments_: [{ id: `${RUN}-a-c1`, root: `${RUN}-a`, run_s: RUN, kind_s: 'image', rank_i: 1 }],
      },
      {
        id: `${RUN}-b`,
        root: `${RUN}-b`,
        version: 1,
        run_s: RUN,
        svc_type_s: 'image',
        svc_views_ss: ['svcLatest'],
        svc_modificationTime_dt: '2027-01-01T00:00:00Z',
        svc_timestate__drange: '[2027-01-01T00:00:00Z TO *]',
        count_l: 3,
        rank_i: 7,
        svc_contentstate_hidden_b: true,
        flags_bs: [true],
        svc_tag_autocomplete_dim_lc: 'Culture/Film Festivals',
        // a labelled child (nested path `parts`), the other form Solr accepts
        parts: [{ id: `${RUN}-b-p1`, root: `${RUN}-b`, run_s: RUN, kind_s: 'caption' }],
      },
    ];
    const r = await post('update?commit=true', docs);
    expect(r.status, JSON.stringify(r.json)).to.equal(200);
  });

  after(async () => {
    if (core) await post('update?commit=true', { delete: { query: `run_s:${RUN}` } });
  });

  it('answers ping and /select in JSON', async () => {
    const ping = await fetch(`${core}/admin/ping`);
    expect(ping.status).to.equal(200);
    expect(((await ping.json()) as { status: string }).status).to.equal('OK');
    const res = await fetch(`${core}/select?q=*:*&rows=0`);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
  });

  it('declares id (unique key), root, version, _version_ and every dynamic field pattern of the spec', async () => {
    const get = async (path: string) => (await (await fetch(`${core}/schema/${path}`)).json()) as Record<string, unknown>;
    expect(((await get('uniquekey')) as { uniqueKey: string }).uniqueKey).to.equal('id');
    const fields = ((await get('fields')) as { fields: { name: string; type: string }[] }).fields;
    const type = (n: string) => fields.find((f) => f.name === n)?.type;
    expect([type('id'), type('root'), type('version'), type('_version_')]).to.deep.equal(['string', 'string', 'plong', 'plong']);
    expect(fields.map((f) => f.name)).to.include.members(['_root_', '_nest_path_']);

    const dyn = ((await get('dynamicfields?showDefaults=true')) as { dynamicFields: { name: string; type: string; multiValued?: boolean }[] }).dynamicFields;
    const types = ((await get('fieldtypes')) as { fieldTypes: { name: string; class: string }[] }).fieldTypes;
    const cls = (t: string) => types.find((x) => x.name === t)?.class;
    const want: Record<string, [string, boolean]> = {
      '*_s': ['solr.StrField', false],
      '*_ss': ['solr.StrField', true],
      '*_dt': ['solr.DatePointField', false],
      '*_drange': ['solr.DateRangeField', true],
      '*_l': ['solr.LongPointField', false],
      '*_i': ['solr.IntPointField', false],
      '*_b': ['solr.BoolField', false],
      '*_bs': ['solr.BoolField', true],
      '*_lc': ['solr.TextField', true],
    };
    for (const [pattern, [klass, multi]] of Object.entries(want)) {
      const f = dyn.find((d) => d.name === pattern);
      expect(f, pattern).to.exist;
      expect(cls(f!.type), pattern).to.equal(klass);
      expect(Boolean(f!.multiValued), `${pattern} multiValued`).to.equal(multi);
    }
  });

  it('analyses *_lc as the spec says: `/` becomes a space, split on whitespace, lowercased', async () => {
    const params = new URLSearchParams({ 'analysis.fieldname': 'x_lc', 'analysis.fieldvalue': 'Sports/Football Club', wt: 'json' });
    const body = (await (await fetch(`${core}/analysis/field?${params}`)).json()) as {
      analysis: { field_names: Record<string, { index: unknown[] }> };
    };
    const stages = body.analysis.field_names.x_lc.index;
    const last = stages[stages.length - 1] as { text: string }[];
    expect(last.map((t) => t.text)).to.deep.equal(['sports', 'football', 'club']);
  });

  it('matches *_lc values by any lowercased word or path segment', async () => {
    const a = `${RUN}-a`;
    expect(await ids('svc_tag_autocomplete_dim_lc:football')).to.deep.equal([a]);
    expect(await ids('svc_tag_autocomplete_dim_lc:sports')).to.deep.equal([a]);
    expect(await ids('svc_tag_autocomplete_dim_lc:FOOTBALL')).to.deep.equal([a]); // the query is analysed too
    expect(await ids('svc_tag_autocomplete_dim_lc:club')).to.deep.equal([a]);
    expect(await ids('svc_tag_autocomplete_dim_lc:foot*')).to.deep.equal([a]); // autocompletion by prefix
    expect(await ids('svc_tag_autocomplete_dim_lc:"sports football"')).to.deep.equal([a]); // path order kept
    expect(await ids('svc_tag_autocomplete_dim_lc:festivals')).to.deep.equal([`${RUN}-b`]);
    expect(await ids('svc_tag_autocomplete_dim_lc:"Sports/Football Club"')).to.deep.equal([a]);
    expect(await ids('svc_tag_autocomplete_dim_lc:basketball')).to.deep.equal([]);
    // stored values come back as sent
    const [doc] = (await select(`id:${a}`, { fl: 'svc_tag_autocomplete_dim_lc' })).response.docs;
    expect(doc.svc_tag_autocomplete_dim_lc).to.deep.equal(['Sports', 'Sports/Football Club']);
  });

  it('queries *_drange as date ranges (Contains, Intersects, Within)', async () => {
    const a = `${RUN}-a`;
    const b = `${RUN}-b`;
    expect(await ids('{!field f=svc_timestate__drange op=Contains}2026-06-01T00:00:00Z')).to.deep.equal([a]);
    expect(await ids('{!field f=svc_timestate__drange op=Contains}2030-06-01T00:00:00Z')).to.deep.equal([b]); // open end
    expect(await ids('{!field f=svc_timestate__drange op=Contains}2025-06-01T00:00:00Z')).to.deep.equal([]);
    expect(await ids('svc_timestate__drange:[2026-12-01T00:00:00Z TO 2027-02-01T00:00:00Z]')).to.deep.equal([a, b]); // Intersects by default
    expect(await ids('{!field f=svc_timestate__drange op=Within}[2025-01-01T00:00:00Z TO 2027-01-01T00:00:00Z]')).to.deep.equal([a]);
    expect(await ids('svc_timestate__drange:2026-06')).to.deep.equal([a]); // a truncated date is a range too
  });

  it('indexes *_s, *_ss, *_dt, *_l, *_i, *_b, *_bs and version with their types', async () => {
    const a = `${RUN}-a`;
    const b = `${RUN}-b`;
    expect(await ids('svc_type_s:article')).to.deep.equal([a]);
    expect(await ids('svc_type_s:Article')).to.deep.equal([]); // strings are exact
    expect(await ids('svc_views_ss:svcPublic')).to.deep.equal([a]);
    expect(await ids('svc_views_ss:svcLatest')).to.deep.equal([a, b]);
    expect(await ids('svc_modificationTime_dt:[2026-01-01T00:00:00Z TO 2026-12-31T00:00:00Z]')).to.deep.equal([a]);
    expect(await ids('count_l:[9007199254739999 TO *]')).to.deep.equal([a]);
    expect(await ids('rank_i:[10 TO 50]')).to.deep.equal([a]);
    expect(await ids('svc_contentstate_hidden_b:true')).to.deep.equal([b]);
    expect(await ids('flags_bs:false')).to.deep.equal([a]);
    expect(await ids('version:7')).to.deep.equal([a]);
    expect(await ids('svc_type_s:*', { sort: 'svc_modificationTime_dt desc' })).to.deep.equal([b, a]);
    expect(await ids('svc_type_s:*', { sort: 'count_l asc' })).to.deep.equal([b, a]);

    const [doc] = (await select(`id:${a}`, { fl: 'id,root,version,svc_views_ss,svc_modificationTime_dt,count_l,rank_i,svc_contentstate_hidden_b,flags_bs' }))
      .response.docs;
    expect(doc).to.deep.equal({
      id: a,
      root: a,
      version: 7,
      svc_views_ss: ['svcLatest', 'svcPublic'],
      svc_modificationTime_dt: '2026-03-04T05:06:07Z',
      count_l: 9007199254740000,
      rank_i: 42,
      svc_contentstate_hidden_b: false,
      flags_bs: [true, false],
    });
  });

  it('rejects a value of the wrong type and a document without root (the spec requires root)', async () => {
    const wrong = await post('update?commit=true', [{ id: `${RUN}-x`, root: `${RUN}-x`, version: 1, run_s: RUN, rank_i: 'many' }]);
    expect(wrong.status).to.equal(400);
    const noRoot = await post('update?commit=true', [{ id: `${RUN}-y`, version: 1, run_s: RUN }]);
    expect(noRoot.status).to.equal(400);
    expect(JSON.stringify(noRoot.json)).to.match(/root/);
    expect(await ids(`id:(${RUN}-x OR ${RUN}-y)`)).to.deep.equal([]);
    // id + root + version is all a document needs
    const minimal = await post('update?commit=true', [{ id: `${RUN}-z`, root: `${RUN}-z`, version: 3, run_s: RUN }]);
    expect(minimal.status).to.equal(200);
    expect(await ids(`id:${RUN}-z`)).to.deep.equal([`${RUN}-z`]);
  });

  it('keeps child documents: searchable themselves, joined to their parent, returned nested, replaced with it', async () => {
    const a = `${RUN}-a`;
    const b = `${RUN}-b`;
    // children are documents of their own, with the parent's id as root
    const [c1] = (await select(`id:${a}-c1`, { fl: 'id,root,kind_s' })).response.docs;
    expect(c1).to.deep.equal({ id: `${a}-c1`, root: a, kind_s: 'image' });
    expect(await ids('kind_s:*')).to.deep.equal([`${a}-c1`, `${b}-p1`]);
    // Labelled children (`parts`) get a _nest_path_, so "no _nest_path_" selects the roots; the
    // [child] transformer nests them under the label.
    const roots = '*:* -_nest_path_:*';
    expect(await ids(`{!child of="${roots}"}id:${b}`)).to.deep.equal([`${b}-p1`]);
    expect(await ids(`{!parent which="${roots}"}kind_s:caption`)).to.deep.equal([b]);
    const [, pb] = (await select(`id:(${a} OR ${b})`, { fl: 'id,kind_s,parts,[child]' })).response.docs;
    expect(pb.parts).to.deep.equal([{ id: `${b}-p1`, kind_s: 'caption' }]);
    // Anonymous children (`_childDocuments_`) have no _nest_path_: block joins name the parents
    // with a field only parents carry; [child] does not return them with this nested schema.
    expect(await ids(`{!child of="svc_type_s:*"}id:${a}`)).to.deep.equal([`${a}-c1`]);
    expect(await ids(`{!parent which="svc_type_s:*"}kind_s:image`)).to.deep.equal([a]);
    // re-adding a parent without children replaces its whole block (both forms)
    const r = await post('update?commit=true', [
      { id: a, root: a, version: 8, run_s: RUN, svc_type_s: 'article' },
      { id: b, root: b, version: 2, run_s: RUN, svc_type_s: 'image' },
    ]);
    expect(r.status).to.equal(200);
    expect(await ids('kind_s:*')).to.deep.equal([]);
    expect(await ids(`id:(${a}* OR ${b}*)`)).to.deep.equal([a, b]);
  });

  // The hard autoCommit does not open a searcher, so only a soft commit can make the update
  // visible here. How soon is a speed figure: npm run bench measures it ("commit to searchable").
  it('makes a change searchable without an explicit commit (soft commits)', async () => {
    const id = `${RUN}-soft`;
    const r = await post('update', [{ id, root: id, version: 1, run_s: RUN, svc_type_s: 'soft' }]);
    expect(r.status).to.equal(200);
    await until(async () => (await ids(`id:${id}`)).length === 1, 30_000, 'the update to be searchable without a commit');
  });
});

describe('startSolr: the embedded Solr process (tools/solr)', function () {
  this.timeout(300000);
  const dirs: string[] = [];
  const tmp = (p: string) => {
    const d = mkdtempSync(join(tmpdir(), p));
    dirs.push(d);
    return d;
  };
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const until = async (ok: () => boolean | Promise<boolean>, ms: number) => {
    for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (await ok()) return true;
    return ok();
  };

  before(() => {
    if (!javaAndMavenAvailable()) throw new Error('needs Java and Maven for the embedded Solr');
  });
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('stops cleanly on SIGTERM and keeps committed documents across a restart on the same port', async () => {
    const dir = tmp('solr-restart-');
    const first = await startSolr({ dataDir: dir });
    const port = Number(new URL(first.url).port);
    const add = await fetch(`${first.url}/content/update?commit=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ id: 'kept', root: 'kept', version: 1 }]),
    });
    expect(add.status).to.equal(200);
    const t0 = Date.now();
    await first.stop();
    expect(Date.now() - t0, 'SIGTERM stop').to.be.below(10000); // a SIGKILL fallback would take 10 s
    expect(alive(first.pid)).to.equal(false);
    const second = await startSolr({ dataDir: dir, port });
    try {
      expect(second.url).to.equal(first.url);
      const body = (await (await fetch(`${second.url}/content/select?q=id:kept`)).json()) as { response: { numFound: number } };
      expect(body.response.numFound).to.equal(1);
    } finally {
      await second.stop();
    }
  });

  it('fails at once, naming the reason, when the port is taken', async () => {
    const blocker = createServer();
    await new Promise<void>((ok) => blocker.listen(0, '127.0.0.1', ok));
    const port = (blocker.address() as { port: number }).port;
    const t0 = Date.now();
    try {
      await startSolr({ dataDir: tmp('solr-busy-'), port }).then(
        (h) => h.stop().then(() => expect.fail('started on a port in use')),
        (e: Error) => expect(e.message).to.match(/Failed to bind/),
      );
      expect(Date.now() - t0).to.be.below(30000);
    } finally {
      blocker.close();
    }
  });

  it('exits by itself when the process that started it is killed', async () => {
    const dir = tmp('solr-orphan-');
    const script = `import { startSolr } from ${JSON.stringify(new URL('../../src/dev/solr-server.ts', import.meta.url).href)};
const h = await startSolr({ dataDir: ${JSON.stringify(dir)} });
console.log('PID ' + h.pid);`;
    const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const pid = await new Promise<number>((ok, fail) => {
      let out = '';
      parent.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        const m = /PID (\d+)/.exec(out);
        if (m) ok(Number(m[1]));
      });
      parent.once('exit', (code) => fail(new Error(`parent exited (${code}) before Solr was ready`)));
    });
    expect(alive(pid)).to.equal(true);
    parent.kill('SIGKILL'); // no exit handlers run
    expect(await until(() => !alive(pid), 15000), 'Solr JVM gone after its parent was killed').to.equal(true);
  });
});
