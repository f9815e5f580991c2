import { expect } from 'chai';
import { pino } from 'pino';
import { loadSettings } from '../../config/settings.js';
import { startPlatform } from '../../src/main.js';
import { fullText, MAX_FULL_TEXT } from '../../src/content/variants.js';
import { Client } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually } from '../support/wait.js';
import { checked } from '../support/openapi-check.js';

type P = Awaited<ReturnType<typeof startPlatform>> & { base: string; search: string };

/**
 * Full-text search by default (issue 22 part 2): the standard indexing composer fills the
 * catch-all field `svc_text` from the text of the content's aspects, and the select handler's
 * default field is it, so a query without a field name finds headlines and bodies. The
 * visibility filter applies as for every query, highlighting included.
 */
describe('full-text search by default: the catch-all text field (issue 22)', function () {
  this.timeout(240000);
  let p: P;
  let editor: Client;
  let reader: Client;
  let sports: Client;
  let anon: Client;
  // A word of this run only, so that documents of other suites in the same Solr do not count.
  const W = `ftw${Date.now()}`;
  let election: { id: string; version: string };
  let accented: { version: string };
  let unreadable: { version: string };
  let sportsOwn: { version: string };

  const select = (c: Client, params: Record<string, string>, token?: string | null) =>
    c.req('GET', `${p.search}/content/select?${new URLSearchParams({ rows: '100', ...params })}`, { token });
  const ids = (r: { json: { response: { docs: { id: string }[] } } }) => r.json.response.docs.map((d) => d.id).sort();

  async function create(type: string, aspects: Record<string, unknown>, ops: unknown[] = [], as = editor) {
    const r = await as.create({ system: { contentType: type }, aspects, operations: ops });
    expect(r.status, r.text).to.equal(201);
    return { id: r.json.system.id as string, version: r.json.system.version as string };
  }

  before(async () => {
    const solr = await ensureTestSolr();
    const settings = loadSettings({ ...process.env, PORT: '0', PARTITIONS: '4', LEASE_MS: '2000', SOLR_URL: solr });
    const platform = checked(await startPlatform({ settings, log: pino({ level: 'silent' }) }));
    p = Object.assign(platform, { base: `${platform.url}/content-service`, search: `${platform.url}/search-service` });
    editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
    sports = await new Client(p.base).login('sportseditor');
    anon = new Client(p.base);
    const pub = [{ _type: 'svcAssignToViews', views: ['svcPublic'] }];
    election = await create('article', { headline: { text: `Election night ${W}` }, body: { paragraphs: ['The polls closed at eight.'] } }, pub);
    accented = await create('article', { body: { title: `Une élection à Paris ${W}` } }, pub);
    // Readable by reader and editor only: no owners, so the sports editor may not read it; not public.
    unreadable = await create('article', { body: { title: `Election secret ${W}`, note: `hiddenword${W}` } });
    sportsOwn = await create(
      'article',
      { body: { title: `Sports election ${W}` } },
      [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
      sports,
    );
    await eventually(async () => expect(ids(await select(reader, { q: W }))).to.have.length(4), 30_000);
  });
  after(async () => p?.stop());

  it('q=election (no field name) finds headline and body text, whatever the case and accents', async () => {
    const r = await select(reader, { q: `election AND ${W}` });
    expect(r.status, r.text).to.equal(200);
    expect(ids(r)).to.deep.equal([election.version, accented.version, unreadable.version, sportsOwn.version].sort());
    // "élection" finds "Election" and the other way round (ASCII folding, lowercase).
    expect(ids(await select(reader, { q: `ÉLECTION AND ${W}`, fq: 'svc_type_s:article' }))).to.have.length(4);
    expect(ids(await select(reader, { q: `polls AND ${W}` }))).to.deep.equal([election.version]);
    expect(ids(await select(reader, { q: `"polls closed" AND ${W}` }))).to.deep.equal([election.version]);
  });

  it("documents never carry Solr's _version_ (its low bits count index operations of content the caller may not read)", async () => {
    for (const fl of [undefined, '*', '_*', '*,score']) {
      const r = await select(reader, { q: W, ...(fl ? { fl } : {}) });
      expect(r.status, r.text).to.equal(200);
      const docs = r.json.response.docs as Record<string, unknown>[];
      expect(docs.length, String(fl)).to.be.greaterThan(0);
      expect(docs.filter((d) => '_version_' in d).length, `fl=${fl}`).to.equal(0);
    }
    expect((await select(reader, { q: W, fl: '_version_' })).status).to.equal(400);
  });

  it('a fielded query still works, and so does edismax with qf on the catch-all field', async () => {
    const r = await select(reader, { q: `svc_type_s:article AND svc_text:${W} AND id:"${election.version}"` });
    expect(r.status, r.text).to.equal(200);
    expect(ids(r)).to.deep.equal([election.version]);
    const e = await select(reader, { q: `paris ${W}`, defType: 'edismax', qf: 'svc_text', mm: '100%' });
    expect(e.status, e.text).to.equal(200);
    expect(ids(e)).to.deep.equal([accented.version]);
  });

  it('highlighting on the catch-all field (the default field of hl.fl too)', async () => {
    const r = await select(reader, { q: `polls AND ${W}`, hl: 'true', 'hl.fl': 'svc_text' });
    expect(r.status, r.text).to.equal(200);
    expect(Object.keys(r.json.highlighting)).to.deep.equal([election.version]);
    expect(r.json.highlighting[election.version].svc_text.join(' ')).to.match(/<em>polls<\/em>/);
    const byDefault = await select(reader, { q: `polls AND ${W}`, hl: 'true' });
    expect(byDefault.json.highlighting[election.version].svc_text.join(' ')).to.match(/<em>polls<\/em>/);
  });

  it('content a caller may not read is never found nor highlighted (anonymous, another context)', async () => {
    // anonymous: public content only
    const a = await select(anon, { q: `election AND ${W}`, hl: 'true', 'hl.fl': 'svc_text' }, null);
    expect(a.status, a.text).to.equal(200);
    expect(ids(a)).to.deep.equal([election.version, accented.version].sort());
    expect(Object.keys(a.json.highlighting).sort()).to.deep.equal([election.version, accented.version].sort());
    // the sports editor: its own content only
    const s = await select(sports, { q: `election AND ${W}`, hl: 'true', 'hl.fl': 'svc_text', facet: 'true', 'facet.field': 'svc_type_s' });
    expect(s.status, s.text).to.equal(200);
    expect(ids(s)).to.deep.equal([sportsOwn.version]);
    expect(s.json.response.numFound).to.equal(1);
    expect(Object.keys(s.json.highlighting)).to.deep.equal([sportsOwn.version]);
    expect(JSON.stringify(s.json)).not.to.include('secret');
    // a word only the unreadable content holds: nothing, for both
    for (const [c, token] of [
      [sports, undefined],
      [anon, null],
    ] as const) {
      const r = await select(c, { q: `hiddenword${W}`, hl: 'true' }, token);
      expect(r.status, r.text).to.equal(200);
      expect(r.json.response.numFound).to.equal(0);
      expect(JSON.stringify(r.json)).not.to.include(`hiddenword${W}`);
    }
    // the reader may read it
    expect(ids(await select(reader, { q: `hiddenword${W}` }))).to.deep.equal([unreadable.version]);
  });

  it('a content cannot set the catch-all field itself (svc_ fields are the indexer’s)', async () => {
    const r = await editor.create({ system: { contentType: 'article' }, aspects: { svcSolrDocument: { svc_text: 'forged' } } });
    expect(r.status).to.equal(400);
    expect(r.json.extraInfo.field).to.equal('svc_text');
  });

  it('the proxy still refuses edismax without qf or df, and local parameters in a field-less query', async () => {
    const e = await select(reader, { q: 'election', defType: 'edismax' });
    expect(e.status).to.equal(400);
    expect(e.json.extraInfo.parameter).to.equal('qf');
    const l = await select(reader, { q: '{!join from=id to=id}election' });
    expect(l.status).to.equal(400);
    expect(l.json.extraInfo.parameter).to.equal('q');
  });

  it('fullText: string values of the own aspects only, bounded', () => {
    const t = fullText({
      headline: { _type: 'headline', text: 'Election' },
      body: { paragraphs: ['One', { nested: 'Two' }, 3, true] },
      svcFiles: { files: [{ key: 'tmp/abc' }] },
    });
    expect(t.split('\n')).to.deep.equal(['Election', 'One', 'Two']);
    const big = fullText({ a: { x: 'y'.repeat(MAX_FULL_TEXT) }, b: { x: 'more' } });
    expect(big.length).to.be.at.most(MAX_FULL_TEXT);
    expect(big).not.to.include('more');
  });
});
