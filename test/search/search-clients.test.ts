import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { buildMavenTool, javaAndMavenAvailable } from '../../src/dev/maven-tool.js';
import { repoPath } from '../../src/repo-files.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually } from '../support/wait.js';

/**
 * Search clients no one here wrote, against the search proxy (issue 22 part 5, CONTRACT §9 and
 * §20 "Search parameters"): SolrJ from Maven Central with its default format javabin
 * (tools/solrj-check decodes each answer with SolrJ and prints it as JSON), and the npm
 * `solr-client`. Facets, paging (start/rows and cursorMark), sort, errors, and above all the
 * permissions: a sportseditor's answer never holds culture content, whatever the format.
 */

/** One answer of tools/solrj-check: SolrJ's decoded QueryResponse, or its exception. */
interface SolrjAnswer {
  ok: boolean;
  code?: number;
  message?: string;
  numFound?: number;
  ids?: string[];
  facets?: Record<string, Record<string, number>>;
  nextCursorMark?: string;
  response?: Record<string, unknown>;
}
type SolrjKind = 'http1' | 'jdk' | 'http2';
interface SolrjRequest {
  caller: Client | null;
  params: Record<string, string> | [string, string][];
  method?: 'GET' | 'POST';
}

const SOLRJ = { dir: dirname(repoPath('tools', 'solrj-check', 'pom.xml')), what: 'the SolrJ check (tools/solrj-check)' };

/** The npm solr-client, as much of it as the test uses (its own types are for an older version). */
interface SolrQuery {
  q(q: string): SolrQuery;
  start(n: number): SolrQuery;
  rows(n: number): SolrQuery;
  sort(s: Record<string, 'asc' | 'desc'>): SolrQuery;
  facet(f: { field: string; mincount?: number }): SolrQuery;
  fl(f: string): SolrQuery;
}
interface SolrClientType {
  query(): SolrQuery;
  searchAsync(q: SolrQuery | string): Promise<{
    response: { numFound: number; docs: { id: string }[] };
    facet_counts?: { facet_fields: Record<string, (string | number)[]> };
  }>;
}
const solrClient = createRequire(import.meta.url)('solr-client') as {
  createClient(o: { host: string; port: number; path: string; core: string; request?: { headers: Record<string, string> } }): SolrClientType;
};

describe('search clients: SolrJ (javabin) and solr-client against the search proxy (issue 22 part 5)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let search: string;
  let editor: Client;
  let sports: Client;
  let classPath: string | undefined;
  let noJava = '';
  const T = `sc${Date.now()}`;
  /** Versions by section; ranks 0..11 alternate culture (even) and sports (odd). */
  const culture: string[] = [];
  const sport: string[] = [];
  const rank = new Map<string, number>();

  before(async function () {
    if (!javaAndMavenAvailable() && !process.env.TEST_SOLR_URL) {
      console.log('      skipped: Java 17 and Maven are not on PATH (they run the embedded Solr and SolrJ); set TEST_SOLR_URL to run the solr-client cases');
      this.skip();
    }
    const solr = await ensureTestSolr();
    if (javaAndMavenAvailable()) classPath = await buildMavenTool(SOLRJ, (m) => console.log(`[test setup] ${m}`));
    else noJava = 'SolrJ needs Java 17 and Maven (not on PATH): the SolrJ cases are skipped';
    p = await startTestPlatform({ SOLR_URL: solr });
    search = `${p.url}/search-service`;
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    for (let i = 0; i < 12; i++) {
      const isCulture = i % 2 === 0;
      const by = isCulture ? editor : sports;
      const r = await by.create({
        system: { contentType: T },
        aspects: { body: { title: `${isCulture ? 'culture' : 'sports'} ${i}` }, svcSolrDocument: { section_s: isCulture ? 'culture' : 'sports', rank_i: i } },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: [isCulture ? 'culture' : 'sports'] } } }],
      });
      expect(r.status, r.text).to.equal(201);
      const v = r.json.system.version as string;
      (isCulture ? culture : sport).push(v);
      rank.set(v, i);
    }
    await eventually(async () => expect((await json(editor, { q: `svc_type_s:${T}`, rows: '0' })).response.numFound).to.equal(12), 30_000);
  });
  after(async () => p?.stop());

  /** The proxy's JSON answer, for comparison with what a client decoded. */
  async function json(c: Client | null, params: Record<string, string>) {
    const r = await fetch(`${search}/content/select?${new URLSearchParams(params)}`, { headers: c?.token ? { 'X-Auth-Token': c.token } : {} });
    expect(r.status, await r.clone().text()).to.equal(200);
    return (await r.json()) as { response: { numFound: number; docs: { id: string }[] }; facet_counts?: { facet_fields: Record<string, (string | number)[]> } };
  }

  /** Runs SolrJ (one JVM) on the requests; answers SolrJ's decoded answers, in order. */
  function solrj(kind: SolrjKind, requests: SolrjRequest[]): Promise<SolrjAnswer[]> {
    return new Promise((done, fail) => {
      const java = spawn('java', ['-cp', classPath!, 'platform.SolrjCheck', search, kind], { stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      java.stdout.on('data', (b: Buffer) => (out += b.toString()));
      java.stderr.on('data', (b: Buffer) => (err += b.toString()));
      java.once('error', fail);
      java.once('close', (code) => {
        const lines = out.split('\n').filter(Boolean);
        if (code !== 0 || lines.length !== requests.length) fail(new Error(`SolrjCheck exited ${code} with ${lines.length} answers:\n${out}\n${err}`));
        else done(lines.map((l) => JSON.parse(l) as SolrjAnswer));
      });
      for (const r of requests) java.stdin.write(`${r.method ?? 'GET'}\t${r.caller?.token ?? '-'}\t${new URLSearchParams(r.params)}\n`);
      java.stdin.end();
    });
  }

  /** Facet counts of a JSON answer as SolrJ gives them ({value: count}). */
  const facetsOf = (a: { facet_counts?: { facet_fields: Record<string, (string | number)[]> } }) =>
    Object.fromEntries(
      Object.entries(a.facet_counts?.facet_fields ?? {}).map(([f, flat]) => [
        f,
        Object.fromEntries(flat.flatMap((v, i) => (i % 2 ? [] : [[String(v), Number(flat[i + 1])]]))),
      ]),
    );
  const byRank = (ids: string[]) => [...ids].sort((a, b) => rank.get(a)! - rank.get(b)!);

  describe('SolrJ, default format javabin', () => {
    before(function () {
      if (!classPath) {
        console.log(`      ${noJava}`);
        this.skip();
      }
    });

    it('Http2SolrClient over HTTP/1.1: paging, sort, facets and cursorMark decode to what the JSON answer holds, per caller', async () => {
      const q = `svc_type_s:${T}`;
      const page = (start: number) => ({ q, sort: 'rank_i asc', start: String(start), rows: '4', fl: 'id,rank_i,section_s' });
      const facet = { q, rows: '0', facet: 'true', 'facet.field': 'section_s' };
      const requests: (SolrjRequest & { params: Record<string, string> })[] = [
        ...[0, 4, 8].map((s) => ({ caller: editor, params: page(s) })),
        ...[0, 4].map((s) => ({ caller: sports, params: page(s) })),
        { caller: editor, params: facet },
        { caller: sports, params: facet },
        { caller: sports, params: { ...page(0), sort: 'rank_i desc' }, method: 'POST' },
        { caller: sports, params: { q, sort: 'rank_i asc,id asc', rows: '2', cursorMark: '*' } },
      ];
      const a = await solrj('http1', requests);
      for (const [i, r] of a.entries()) expect(r.ok, `${i}: ${r.message}`).to.equal(true);
      // paging and sort: the editor sees all twelve in rank order, the sportseditor its six
      expect(a.slice(0, 3).flatMap((r) => r.ids)).to.deep.equal(byRank([...culture, ...sport]));
      expect(a[0].numFound).to.equal(12);
      expect(a.slice(3, 5).flatMap((r) => r.ids)).to.deep.equal(byRank(sport));
      expect(a[3].numFound).to.equal(6);
      expect(a[7].ids).to.deep.equal(byRank(sport).reverse().slice(0, 4));
      // facets: counts of what the caller may read only
      expect(a[5].facets).to.deep.equal({ section_s: { culture: 6, sports: 6 } });
      expect(a[6].facets).to.deep.equal({ section_s: { sports: 6 } });
      // the same as the JSON answer of the same request
      for (const [i, r] of requests.entries()) {
        if (r.params.cursorMark) continue;
        const j = await json(r.caller, r.params);
        expect(a[i].numFound, `${i}`).to.equal(j.response.numFound);
        expect(a[i].ids, `${i}`).to.deep.equal(j.response.docs.map((d) => d.id));
        if (r.params.facet) expect(a[i].facets, `${i}`).to.deep.equal(facetsOf(j));
      }
      // cursorMark: following nextCursorMark visits the sportseditor's six, and only those
      const seen: string[] = [...a[8].ids!];
      let mark = a[8].nextCursorMark!;
      for (let i = 0; i < 5 && mark; i++) {
        const [n] = await solrj('http1', [{ caller: sports, params: { q, sort: 'rank_i asc,id asc', rows: '2', cursorMark: mark } }]);
        expect(n.ok, n.message).to.equal(true);
        if (n.nextCursorMark === mark) break;
        seen.push(...n.ids!);
        mark = n.nextCursorMark!;
      }
      expect(seen).to.deep.equal(byRank(sport));
    });

    it("a sportseditor's javabin answer never holds culture content, and is the same whether or not culture content exists", async () => {
      const onlyCulture = `svc_type_s:${T} AND section_s:culture`;
      const nothing = `svc_type_s:${T}-none`;
      const asks = (q: string): [string, string][] => [
        ...Object.entries({ q, rows: '100', fl: '*,score', facet: 'true', hl: 'true', 'hl.fl': '*' }),
        ...['section_s', 'svc_security_context_ss', 'svc_type_s'].map((f): [string, string] => ['facet.field', f]),
      ];
      const requests: SolrjRequest[] = [
        { caller: sports, params: { q: `svc_type_s:${T}`, rows: '100', facet: 'true', 'facet.field': 'section_s' } },
        { caller: sports, params: asks(onlyCulture) },
        { caller: sports, params: asks(nothing) },
        { caller: null, params: asks(`svc_type_s:${T}`) },
        { caller: sports, params: { q: `section_s:culture OR svc_type_s:${T}`, rows: '100', sort: 'rank_i desc', facet: 'true', 'facet.field': 'section_s' } },
      ];
      for (const kind of ['http1', 'jdk'] as const) {
        const a = await solrj(kind, requests);
        for (const [i, r] of a.entries()) {
          expect(r.ok, `${kind} ${i}: ${r.message}`).to.equal(true);
          const text = JSON.stringify(r.response);
          for (const v of culture) expect(text, `${kind} ${i}`).not.to.include(v);
          expect(text, `${kind} ${i}`).not.to.match(/culture \d+/);
        }
        expect([...a[0].ids!].sort(), kind).to.deep.equal([...sport].sort());
        expect(a[0].facets, kind).to.deep.equal({ section_s: { sports: 6 } });
        expect(a[4].ids, kind).to.deep.equal(byRank(sport).reverse());
        // anonymous: nothing here is on a public view
        expect(a[3].numFound, kind).to.equal(0);
        // what the sportseditor learns of culture content is what it learns of none at all
        const seen = (r: SolrjAnswer) => ({ numFound: r.numFound, ids: r.ids, facets: r.facets, rest: { ...r.response, responseHeader: undefined } });
        expect(seen(a[1]), kind).to.deep.equal(seen(a[2]));
      }
    });

    it('the raw javabin bytes: Solr content type, no culture id in them, and no way around the allowlist', async () => {
      const r = await fetch(`${search}/content/select?${new URLSearchParams({ q: `svc_type_s:${T}`, rows: '100', wt: 'javabin', version: '2' })}`, {
        headers: { 'X-Auth-Token': sports.token! },
      });
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.equal('application/octet-stream');
      const bytes = Buffer.from(await r.arrayBuffer());
      expect(bytes[0], 'javabin version byte').to.equal(2);
      for (const v of sport) expect(bytes.includes(Buffer.from(v)), v).to.equal(true);
      for (const v of culture) expect(bytes.includes(Buffer.from(v)), v).to.equal(false);
      // refused with javabin exactly as with json: the checks come before the format
      const refused: Record<string, string>[] = [
        { q: '{!join from=id to=id}*:*' },
        { q: '*:*', qt: '/terms' },
        { q: '*:*', fl: '[subquery]' },
        { q: '*:*', 'json.facet': '{}' },
        { q: '*:*', wt: 'xml' },
        { q: '*:*', wt: 'javabin', version: '3' },
        { q: '*:*', wt: 'javabin', inlineData: 'true' },
      ];
      for (const params of refused) {
        const x = await fetch(`${search}/content/select?${new URLSearchParams({ wt: 'javabin', ...params })}`, { headers: { 'X-Auth-Token': sports.token! } });
        expect(x.status, JSON.stringify(params)).to.equal(400);
        expect(x.headers.get('content-type')).to.match(/application\/json/);
      }
      const b = await fetch(`${search}/content/select?wt=javabin&inlineData=true&q=*:*`);
      expect(((await b.json()) as { message: string }).message).to.match(/inlineData.*wt=json/);
      // through SolrJ: a refused parameter and an engine error come back as a RemoteSolrException with the reason, no trace
      const [off, bad] = await solrj('http1', [
        { caller: sports, params: { q: '*:*', 'terms.fl': 'id' } },
        { caller: sports, params: { q: 'rank_i:[1 TO' } },
      ]);
      expect(off).to.include({ ok: false, code: 400 });
      expect(off.message).to.include("Parameter 'terms.fl' is not allowed");
      expect(bad).to.include({ ok: false, code: 400 });
      console.log(`      (SolrJ reports: ${off.message} / ${bad.message})`);
      expect(bad.message).to.match(/parse|syntax|Encountered/i);
      // SolrJ's message starts with the address it was given ("Error from server at <base URL>: ..."); the rest is the proxy's
      const fromProxy = bad.message!.replace(/^Error from server at \S+: /, '');
      expect(fromProxy).not.to.match(/org\.apache|\bat [a-z]+\.|127\.0\.0\.1|\[address\]/);
    });

    it("the README's SolrJ example runs as written (full-text query, sort, facets, the token header)", async () => {
      const { code, out } = await new Promise<{ code: number | null; out: string }>((done) => {
        const java = spawn('java', ['-cp', classPath!, 'platform.ReadmeExample', p.url, editor.token!], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        java.stdout.on('data', (b: Buffer) => (out += b.toString()));
        java.stderr.on('data', (b: Buffer) => (out += b.toString()));
        java.once('close', (code) => done({ code, out }));
      });
      expect(code, out).to.equal(0);
    });

    it('HttpJdkSolrClient with its defaults works; Http2SolrClient with its defaults (HTTP/2 without TLS) does not: the gateway speaks HTTP/1.1', async () => {
      const ask = { caller: editor, params: { q: `svc_type_s:${T}`, rows: '0' } };
      // one JVM each, side by side (the HTTP/2 one waits for SolrJ's own timeout)
      const [[jdk], [h2]] = await Promise.all([solrj('jdk', [ask]), solrj('http2', [ask])]);
      expect(jdk).to.include({ ok: true, numFound: 12 });
      expect(h2.ok, 'if this works now, drop the useHttp1_1 advice from the README').to.equal(false);
      console.log(`      (Http2SolrClient with defaults reports: ${h2.message})`);
    });
  });

  describe('npm solr-client (JSON)', () => {
    const client = (c: Client | null) => {
      const u = new URL(p.url);
      return solrClient.createClient({
        host: u.hostname,
        port: Number(u.port),
        path: '/search-service',
        core: 'content',
        ...(c?.token ? { request: { headers: { 'X-Auth-Token': c.token } } } : {}),
      });
    };

    it('query builder: paging, sort and facets, as the caller may read', async () => {
      const e = client(editor);
      const s = client(sports);
      const page = (c: SolrClientType, start: number) => c.searchAsync(c.query().q(`svc_type_s:${T}`).sort({ rank_i: 'asc' }).start(start).rows(5).fl('id'));
      const all = (await Promise.all([0, 5, 10].map((n) => page(e, n)))).flatMap((r) => r.response.docs.map((d) => d.id));
      expect(all).to.deep.equal(byRank([...culture, ...sport]));
      const mine = (await Promise.all([0, 5].map((n) => page(s, n)))).flatMap((r) => r.response.docs.map((d) => d.id));
      expect(mine).to.deep.equal(byRank(sport));
      const f = await s.searchAsync(s.query().q(`svc_type_s:${T}`).rows(0).facet({ field: 'section_s', mincount: 0 }));
      expect(f.response.numFound).to.equal(6);
      expect(f.facet_counts!.facet_fields.section_s).to.deep.equal(['sports', 6]);
      const anon = client(null);
      expect((await anon.searchAsync(anon.query().q(`svc_type_s:${T}`))).response.numFound).to.equal(0);
      // a string query, as the README shows it
      const r = await s.searchAsync(`q=${encodeURIComponent(`svc_type_s:${T} AND section_s:culture`)}&rows=10`);
      expect(r.response.numFound).to.equal(0);
    });

    it('a parameter off the allowlist is an error naming it', async () => {
      const s = client(sports);
      const err = await s.searchAsync(`q=*:*&terms.fl=id`).then(
        () => null,
        (e: Error) => e,
      );
      expect(err, 'refused').to.be.instanceOf(Error);
      expect((err as Error & { statusCode?: number }).statusCode).to.equal(400);
    });
  });
});
