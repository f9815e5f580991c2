import { expect } from 'chai';
import { loadSettings } from '../../config/settings.js';
import { createLogger } from '../../src/adapters/log.js';
import { matchesLevels } from '../../src/content/taxonomy.js';
import { startPlatform } from '../../src/main.js';
import { Client } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually } from '../support/wait.js';
import { checked } from '../support/openapi-check.js';

/** `A B/C` as the service splits it: levels of lowercased whitespace tokens. */
const input = (s: string) =>
  s
    .split('/')
    .map((l) => l.toLowerCase().split(/\s+/).filter(Boolean))
    .filter((l) => l.length);
const path = (s: string) => s.split('/');

describe('taxonomy completion matching (spec "Taxonomy service": completion matching)', () => {
  const cases: [string, string, boolean, string][] = [
    // the examples of the spec
    ['A B', 'Alpha Beta', true, 'ordered token prefixes'],
    ['A B', 'Beta Alpha', false, 'tokens out of order'],
    ['P', 'Parent', true, 'a parent matched'],
    ['P', 'Parent/Pear', true, 'its child, when the child matches too'],
    ['P', 'Parent/Child', false, 'P does not match the child path Parent/Child'],
    ['P/C', 'Parent/Child', true, 'P/C matches Parent/Child'],
    // more, from the rules
    ['p/c', 'Parent/Child', true, 'case does not matter'],
    ['PAR/CHI', 'Parent/Child', true, 'upper-case input'],
    ['Par', 'Parent', true, 'a longer prefix'],
    ['Parents', 'Parent', false, 'input longer than the token'],
    ['arent', 'Parent', false, 'not a prefix'],
    ['Pre Lea', 'Premier League', true, 'two tokens, two prefixes'],
    ['Lea', 'Premier League', true, 'a later token alone'],
    ['Lea Pre', 'Premier League', false, 'two tokens reversed'],
    ['Pre Pre', 'Premier League', false, 'one name token cannot serve two input tokens'],
    ['Pre Pre', 'Premier Premium', true, 'two name tokens for two input tokens'],
    ['  Pre   Lea  ', 'Premier League', true, 'extra whitespace'],
    ['F/P L', 'Football/Premier League', true, 'levels with several tokens'],
    ['F/P L', 'Sport/Football/Premier League', true, 'the last levels of a deeper path'],
    ['S/F/P', 'Sport/Football/Premier League', true, 'three levels'],
    ['S/P', 'Sport/Football/Premier League', false, 'levels must be adjacent at the end'],
    ['S/F', 'Sport/Football/Premier League', false, 'the last level must match'],
    ['S/F/P/X', 'Sport/Football/Premier League', false, 'more levels than the path'],
    ['Fuß', 'Fußball', true, 'non-ASCII letters'],
    ['élé', 'Éléphant', true, 'accented capitals lowercased'],
    ['東京', '東京 タワー', true, 'CJK tokens'],
    ['タ', '東京 タワー', true, 'a later CJK token'],
    ['Foot/', 'Sport/Football', true, 'a trailing slash adds no level'],
  ];
  for (const [i, p, want, why] of cases) {
    it(`${JSON.stringify(i)} ${want ? 'matches' : 'does not match'} ${JSON.stringify(p)}: ${why}`, () => {
      expect(matchesLevels(path(p), input(i))).to.equal(want);
    });
  }
});

describe('taxonomy completion over HTTP (CONTRACT §10)', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startPlatform>>;
  let editor: Client;
  let anon: Client;
  const T = `c${Date.now().toString(36)}`;
  const id = (s: string) => `${T}-${s}`;

  async function define(kind: 'Dimension' | 'Entity', aspect: Record<string, unknown>) {
    const r = await editor.create({
      system: { contentType: `svc${kind}DefinitionContent` },
      aspects: { [`svc${kind}Definition`]: aspect },
      operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: aspect.id }],
    });
    expect(r.status, r.text).to.equal(201);
  }
  const complete = (dim: string, text: string) =>
    anon.req('GET', `${p.url}/taxonomy-service/complete/${encodeURIComponent(dim)}/${encodeURIComponent(text)}`, { token: null });
  const names = (r: { json: { entities: { name: string }[] } }) => r.json.entities.map((e) => e.name).sort();

  before(async () => {
    const solr = await ensureTestSolr();
    p = checked(
      await startPlatform({
        settings: loadSettings({ ...process.env, PORT: '0', PARTITIONS: '8', LEASE_MS: '2000', SOLR_URL: solr }),
        log: createLogger('silent'),
      }),
    );
    editor = await new Client(`${p.url}/content-service`).login('editor');
    anon = new Client(`${p.url}/content-service`);
    await define('Dimension', { id: id('sections'), name: 'Sections', enumerable: true, localizations: {} });
    await define('Entity', { id: id('sport'), name: 'Sport', localizations: {}, parent: id('sections') });
    await define('Entity', { id: id('football'), name: 'Football Club', localizations: {}, parent: id('sport') });
    await define('Entity', { id: id('fussball'), name: 'Fußball', localizations: {}, parent: id('sport'), attributes: { lang: 'de' } });
    await define('Entity', { id: id('politics'), name: 'Politics', localizations: {}, parent: id('sections') });
    await define('Dimension', { id: id('tags'), name: 'Tags', enumerable: false, localizations: {} });
  });
  after(async () => p?.stop());

  it('answers in the Dimension shape, each match an entity (id, name, entities, attributes, childrenOmitted)', async () => {
    const r = await eventually(async () => {
      const r = await complete(id('sections'), 'S');
      expect(r.status, r.text).to.equal(200);
      expect(names(r)).to.deep.equal(['Sport']);
      return r;
    });
    expect(r.json).to.deep.include({ id: id('sections'), name: 'Sections', enumerable: true, childrenOmitted: false });
    expect(r.json.entities).to.deep.equal([{ id: id('sport'), name: 'Sport', entities: [], attributes: {}, childrenOmitted: true }]);
  });

  it('URL-encoded input with spaces, slashes and non-ASCII letters', async () => {
    expect(names(await complete(id('sections'), 'S/F C'))).to.deep.equal(['Football Club']);
    expect(names(await complete(id('sections'), 'fu'))).to.deep.equal(['Fußball']);
    expect(names(await complete(id('sections'), 'Fuß'))).to.deep.equal(['Fußball']);
    expect(names(await complete(id('sections'), 'F'))).to.deep.equal(['Football Club', 'Fußball']);
    expect(names(await complete(id('sections'), 'C F'))).to.deep.equal([]);
    expect((await complete(id('sections'), 'Fuß')).json.entities[0].attributes).to.deep.equal({ lang: 'de' });
  });

  it('entities of a non-enumerable dimension exist once content is categorized with them (found through the index)', async () => {
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: {
        body: { title: 'x' },
        svcCategorization: { dimensions: [{ id: id('tags'), entities: [{ name: 'Climate Change', entities: [{ name: 'Carbon Tax' }] }] }] },
      },
      operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
    });
    expect(c.status, c.text).to.equal(201);
    await eventually(async () => expect(names(await complete(id('tags'), 'cli'))).to.deep.equal(['Climate Change']), 10_000);
    expect(names(await complete(id('tags'), 'Cl C/Ca'))).to.deep.equal(['Carbon Tax']);
    expect(names(await complete(id('tags'), 'C'))).to.deep.equal(['Carbon Tax', 'Climate Change']);
    expect(names(await complete(id('tags'), 'tax carbon'))).to.deep.equal([]);
  });

  it('candidates from the index are filtered like search (CONTRACT §20): without a token public views only, with one what the caller may Read', async () => {
    const reader = await new Client(`${p.url}/content-service`).login('reader');
    const sports = await new Client(`${p.url}/content-service`).login('sportseditor');
    const sys = await new Client(`${p.url}/content-service`).login('sysadmin');
    const tagged = (name: string) => ({ dimensions: [{ id: id('tags'), entities: [{ name }] }] });
    const make = async (name: string, ops: unknown[], as = editor) => {
      const r = await as.create({ system: { contentType: 'article' }, aspects: { body: { title: name }, svcCategorization: tagged(name) }, operations: ops });
      expect(r.status, r.text).to.equal(201);
      return r.json.system.version as string;
    };
    const hour = 3600_000;
    const made = [
      await make('Zebra Latest Only', []),
      await make('Zebra Hidden', [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        { _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: true } } },
      ]),
      await make('Zebra Later', [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        { _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { onTime: new Date(Date.now() + hour).toISOString() } } } } },
      ]),
      await make('Zebra Culture', [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }]),
      await make('Zebra Sports', [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }], sports),
      await make('Zebra Public', [{ _type: 'svcAssignToViews', views: ['svcPublic'] }]),
    ];
    await eventually(
      async () =>
        expect((await sys.search({ q: made.map((v) => `id:"${v}"`).join(' OR '), rows: '10', fl: 'id' })).json.response.numFound).to.equal(made.length),
      10_000,
    );
    const as = (c: Client) => (text: string) =>
      c.req('GET', `${p.url}/taxonomy-service/complete/${encodeURIComponent(id('tags'))}/${encodeURIComponent(text)}`);
    expect(names(await complete(id('tags'), 'zeb')), 'anonymous').to.deep.equal(['Zebra Public']);
    expect(names(await as(reader)('zeb')), 'reader').to.deep.equal([
      'Zebra Culture',
      'Zebra Hidden',
      'Zebra Later',
      'Zebra Latest Only',
      'Zebra Public',
      'Zebra Sports',
    ]);
    expect(names(await as(sports)('zeb')), 'sportseditor').to.deep.equal(['Zebra Sports']);
    const bad = await anon.req('GET', `${p.url}/taxonomy-service/complete/${encodeURIComponent(id('tags'))}/zeb`, { token: 'not-a-token' });
    expect(bad.status).to.equal(401);
    expect(bad.json.statusCode).to.equal('40100');
  });

  it('categorized content is found through the tag fields: names, every prefix path, and id paths of entities that have content', async () => {
    const sys = await new Client(`${p.url}/content-service`).login('sysadmin');
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: {
        body: { title: 'derby' },
        svcCategorization: {
          dimensions: [{ id: id('sections'), entities: [{ id: id('sport'), name: 'Sport', entities: [{ id: id('football'), name: 'Football Club' }] }] }],
        },
      },
    });
    expect(c.status, c.text).to.equal(201);
    const version = c.json.system.version;
    const found = (q: string) => sys.search({ q, fl: 'id' }).then((r) => (r.json.response.docs as { id: string }[]).map((d) => d.id));
    const field = (kind: string) => `svc_tag_${kind}${id('sections')}_ss`;
    await eventually(async () => expect(await found(`${field('')}:"Sport/Football Club"`)).to.deep.equal([version]), 10_000);
    expect(await found(`${field('')}:"Sport"`), 'every prefix of the path').to.deep.equal([version]);
    expect(await found(`${field('id_')}:"${id('sport')}/${id('football')}"`), 'id path').to.deep.equal([version]);
    expect(await found(`${field('')}:"Football Club"`), 'a path is not its last segment').to.deep.equal([]);
    const doc = (await sys.search({ q: `id:"${version}"`, fl: `svc_tag_*` })).json.response.docs[0];
    expect(doc).to.deep.equal({
      [field('')]: ['Sport', 'Sport/Football Club'],
      [`svc_tag_autocomplete_${id('sections')}_lc`]: ['Sport', 'Sport/Football Club'],
      [field('id_')]: [id('sport'), `${id('sport')}/${id('football')}`],
    });
  });

  it('an input of more distinct words than SEARCH_MAX_MULTI_TERMS (20) answers 400 naming it; repeated words count once', async () => {
    // Each word was a prefix term of the index query, expanded over the whole index: an anonymous
    // caller could send a thousand of them (security review).
    const many = Array.from({ length: 21 }, (_, i) => `w${i}`).join(' ');
    const r = await complete(id('sections'), many);
    expect(r.status, r.text).to.equal(400);
    expect(r.json.message).to.contain('SEARCH_MAX_MULTI_TERMS');
    expect(r.json.extraInfo).to.deep.equal({ parameter: 'input' });
    const levels = await complete(id('sections'), Array.from({ length: 21 }, (_, i) => `w${i}`).join('/'));
    expect(levels.status, 'words of every level count').to.equal(400);
    const repeated = await complete(id('sections'), Array.from({ length: 40 }, () => 'spo').join(' '));
    expect(repeated.status, repeated.text).to.equal(200);
    expect((await complete(id('sections'), many.split(' ').slice(0, 20).join(' '))).status).to.equal(200);
  });

  it('unknown dimensions 404, other methods 405', async () => {
    expect((await complete('no-such-dimension', 'a')).status).to.equal(404);
    expect((await complete(id('sport'), 'a')).status, 'an entity is not a dimension').to.equal(404);
    expect((await anon.req('POST', `${p.url}/taxonomy-service/complete/${id('sections')}/a`, { body: {}, token: null })).status).to.equal(405);
  });
});
