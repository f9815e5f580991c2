import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * Taxonomy structure (spec "Taxonomy resources", "Taxonomy service"; CONTRACT §10): definitions
 * are content of the definition types with aliases `_taxonomy/<id>`, shown in the svcTaxonomy
 * variant and by `GET {taxonomy_url}/structure[/<id>]` with `depth` (default and maximum 100)
 * and `childrenOmitted` exactly where children were left out. No token needed.
 */
describe('taxonomy structure (spec Taxonomy service, CONTRACT §10)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let anon: Client;
  const T = `t${Date.now().toString(36)}`;
  const id = (s: string) => `${T}-${s}`;
  /** The football entity with its one child, as every full read answers it. */
  const football = () => ({
    id: id('football'),
    name: 'Football',
    localizations: { de: 'Fußball' },
    attributes: { color: 'green' },
    childrenOmitted: false,
    entities: [{ id: id('pl'), name: 'Premier League', localizations: {}, attributes: {}, entities: [], childrenOmitted: false }],
  });

  async function define(
    type: 'svcTaxonomyDefinitionContent' | 'svcDimensionDefinitionContent' | 'svcEntityDefinitionContent',
    aspect: Record<string, unknown>,
  ) {
    const name = {
      svcTaxonomyDefinitionContent: 'svcTaxonomyDefinition',
      svcDimensionDefinitionContent: 'svcDimensionDefinition',
      svcEntityDefinitionContent: 'svcEntityDefinition',
    }[type];
    const r = await editor.create({
      system: { contentType: type },
      aspects: { [name]: aspect },
      operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: aspect.id }],
    });
    expect(r.status, r.text).to.equal(201);
    return r;
  }
  const structure = (path = '', query = '') => anon.req('GET', `${p.url}/taxonomy-service/structure${path}${query}`, { token: null });

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    anon = new Client(p.base);
    await define('svcTaxonomyDefinitionContent', { id: id('news'), name: 'News', dimensions: [id('sections'), id('tags')] });
    await define('svcDimensionDefinitionContent', {
      id: id('sections'),
      name: 'Sections',
      enumerable: true,
      localizations: { de: 'Rubriken', fr: 'Rubriques' },
    });
    await define('svcDimensionDefinitionContent', { id: id('tags'), name: 'Tags', enumerable: false, localizations: {} });
    await define('svcEntityDefinitionContent', { id: id('sport'), name: 'Sport', localizations: { de: 'Sport' }, parent: id('sections') });
    await define('svcEntityDefinitionContent', { id: id('politics'), name: 'Politics', localizations: { de: 'Politik' }, parent: id('sections') });
    await define('svcEntityDefinitionContent', {
      id: id('football'),
      name: 'Football',
      localizations: { de: 'Fußball' },
      parent: id('sport'),
      attributes: { color: 'green' },
    });
    await define('svcEntityDefinitionContent', { id: id('pl'), name: 'Premier League', localizations: {}, parent: id('football') });
  });
  after(async () => p.stop());

  it('a definition content reads in the svcTaxonomy variant as its representation', async () => {
    const r = await editor.read(`/content/alias/_taxonomy/${id('football')}?variant=svcTaxonomy`);
    expect(r.status, r.text).to.equal(200);
    expect({ svcEntity: r.json.aspects.svcEntity }).to.deep.equal({
      svcEntity: {
        _type: 'svcEntity',
        id: id('football'),
        name: 'Football',
        localizations: { de: 'Fußball' },
        attributes: { color: 'green' },
        parent: id('sport'),
      },
    });
    const t = await editor.read(`/content/alias/_taxonomy/${id('news')}?variant=svcTaxonomy`);
    expect(t.json.aspects.svcTaxonomy).to.deep.include({ id: id('news'), name: 'News', dimensions: [id('sections'), id('tags')] });
  });

  it('GET structure: every taxonomy with its dimensions and their entity trees, without a token', async () => {
    const r = await eventually(async () => {
      const r = await structure();
      expect(r.status, r.text).to.equal(200);
      expect(r.json.find((t: { id: string }) => t.id === id('news'))).to.not.equal(undefined);
      return r;
    });
    const news = r.json.find((t: { id: string }) => t.id === id('news'));
    expect(news).to.deep.equal({
      id: id('news'),
      name: 'News',
      dimensions: [
        {
          id: id('sections'),
          name: 'Sections',
          localizations: { de: 'Rubriken', fr: 'Rubriques' },
          enumerable: true,
          childrenOmitted: false,
          entities: [
            { id: id('politics'), name: 'Politics', localizations: { de: 'Politik' }, attributes: {}, entities: [], childrenOmitted: false },
            {
              id: id('sport'),
              name: 'Sport',
              localizations: { de: 'Sport' },
              attributes: {},
              childrenOmitted: false,
              entities: [football()],
            },
          ],
        },
        { id: id('tags'), name: 'Tags', localizations: {}, enumerable: false, entities: [], childrenOmitted: false },
      ],
    });
  });

  it('GET structure/<id>: a dimension or an entity with children down to depth; childrenOmitted exactly where children were cut', async () => {
    const d1 = await structure(`/${id('sections')}`, '?depth=1');
    expect(d1.status).to.equal(200);
    expect(d1.json.childrenOmitted).to.equal(false);
    const byId = Object.fromEntries(d1.json.entities.map((e: { id: string }) => [e.id, e]));
    expect(byId[id('sport')]).to.deep.include({ entities: [], childrenOmitted: true });
    expect(byId[id('politics')]).to.deep.include({ entities: [], childrenOmitted: false });
    const d0 = await structure(`/${id('sections')}`, '?depth=0');
    expect(d0.json).to.deep.include({ entities: [], childrenOmitted: true });
    const e = await structure(`/${id('football')}`, '?depth=1');
    expect(e.json).to.deep.equal(football());
    const t0 = await structure(`/${id('news')}`, '?depth=0');
    expect(t0.json).to.deep.equal({ id: id('news'), name: 'News', dimensions: [] });
  });

  it('a dimension a taxonomy lists many times is in its structure once (each copy was the whole tree again)', async () => {
    await define('svcTaxonomyDefinitionContent', { id: id('again'), name: 'Again', dimensions: Array.from({ length: 50 }, () => id('sections')) });
    await eventually(async () => {
      const t = await structure(`/${id('again')}`);
      expect(t.status).to.equal(200);
      expect(t.json.dimensions.map((d: { id: string }) => d.id)).to.deep.equal([id('sections')]);
    });
  });

  it('a custom content type holding a definition aspect is part of the structure like the definition types', async () => {
    const r = await editor.create({
      system: { contentType: 'topic' },
      aspects: { svcEntityDefinition: { id: id('custom'), name: 'Custom Topic', localizations: { de: 'Eigenes Thema' }, parent: id('politics') } },
      operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: id('custom') }],
    });
    expect(r.status, r.text).to.equal(201);
    await eventually(async () => {
      const s = await structure(`/${id('politics')}`);
      expect(s.json.entities).to.deep.equal([
        { id: id('custom'), name: 'Custom Topic', localizations: { de: 'Eigenes Thema' }, attributes: {}, entities: [], childrenOmitted: false },
      ]);
    });
    // and it leaves the structure with its content
    expect((await editor.remove(`_taxonomy/${id('custom')}`, r.headers.get('etag')!)).status).to.equal(204);
    await eventually(async () => expect((await structure(`/${id('custom')}`)).status).to.equal(404));
    expect((await structure(`/${id('politics')}`)).json.entities).to.deep.equal([]);
  });

  it('a definition counts only in the content holding its `_taxonomy/<id>` alias: the same id in another content changes nothing (a sportseditor cannot rename or move what it does not own)', async () => {
    const sports = await new Client(p.base).login('sportseditor');
    await define('svcDimensionDefinitionContent', { id: id('owned'), name: 'Owned', enumerable: true, localizations: { en: 'Owned' } });
    await define('svcEntityDefinitionContent', { id: id('owned-e'), name: 'Owned entity', localizations: {}, parent: id('owned') });
    const expected = {
      id: id('owned'),
      name: 'Owned',
      localizations: { en: 'Owned' },
      enumerable: true,
      childrenOmitted: false,
      entities: [{ id: id('owned-e'), name: 'Owned entity', localizations: {}, attributes: {}, entities: [], childrenOmitted: false }],
    };
    await eventually(async () => expect((await structure(`/${id('owned')}`)).json).to.deep.include(expected), 10_000);
    const sportsOwned = [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }];
    for (const aspects of [
      { svcDimensionDefinition: { id: id('owned'), name: 'HIJACKED', enumerable: false, localizations: { en: 'pwned' } } },
      { svcEntityDefinition: { id: id('owned-e'), name: 'Moved away', localizations: {}, parent: id('tags') } },
      { svcTaxonomyDefinition: { id: id('news'), name: 'Rewritten', dimensions: [id('owned')] } },
    ]) {
      const r = await sports.create({ system: { contentType: 'article' }, aspects: { body: { title: 'x' }, ...aspects }, operations: sportsOwned });
      expect(r.status, r.text).to.equal(201);
    }
    // Asking for the alias too: it names one content already, so the create is partial (20107) and the alias stays the owner's.
    const taken = await sports.create({
      system: { contentType: 'article' },
      aspects: { svcDimensionDefinition: { id: id('owned'), name: 'HIJACKED' } },
      operations: [...sportsOwned, { _type: 'svcSetAlias', namespace: '_taxonomy', alias: id('owned') }],
    });
    expect([taken.status, taken.json.status?.statusCode], taken.text).to.deep.equal([201, '20107']);
    // A later change of the model (a new definition) is read after those writes: it must show the owner's definitions.
    await define('svcEntityDefinitionContent', { id: id('owned-later'), name: 'Later', localizations: {}, parent: id('tags') });
    await eventually(async () => expect((await structure(`/${id('owned-later')}`)).status).to.equal(200), 10_000);
    expect((await structure(`/${id('owned')}`)).json).to.deep.include(expected);
    expect((await structure(`/${id('owned-e')}`)).json.name).to.equal('Owned entity');
    const news = (await structure(`/${id('news')}`)).json;
    expect(news.name).to.equal('News');
    expect(news.dimensions.map((d: { id: string }) => d.id)).to.deep.equal([id('sections'), id('tags')]);
  });

  it('unknown ids answer 404, other methods 405, a bad depth 400', async () => {
    const r = await structure('/nothing-here');
    expect(r.status).to.equal(404);
    expect(r.json.statusCode).to.equal('40400');
    const post = await anon.req('POST', `${p.url}/taxonomy-service/structure`, { body: {}, token: null });
    expect(post.status).to.equal(405);
    expect(post.headers.get('allow')).to.equal('GET');
    expect((await anon.req('DELETE', `${p.url}/taxonomy-service/structure/${id('sport')}`, { token: null })).status).to.equal(405);
    for (const bad of ['-1', 'abc', '1.5', '1e2']) expect((await structure(`/${id('sections')}`, `?depth=${bad}`)).status, bad).to.equal(400);
  });

  it('a 100-level chain is cut at the limit: the 100th level says childrenOmitted', async function () {
    this.timeout(120_000);
    await define('svcDimensionDefinitionContent', { id: id('deep'), name: 'Deep', enumerable: true, localizations: {} });
    for (let i = 0; i <= 101; i++)
      await define('svcEntityDefinitionContent', { id: id(`l${i}`), name: `L${i}`, localizations: {}, parent: i === 0 ? id('deep') : id(`l${i - 1}`) });
    const r = await eventually(async () => {
      const r = await structure(`/${id('deep')}`);
      expect(r.status).to.equal(200);
      expect(r.json.entities).to.have.length(1);
      return r;
    });
    let node = r.json;
    let levels = 0;
    while (node.entities.length) {
      node = node.entities[0];
      levels++;
    }
    expect(levels).to.equal(100);
    expect(node.id).to.equal(id('l99'));
    expect(node.childrenOmitted).to.equal(true);
    // 100 is the maximum: a larger depth gives the same answer
    expect((await structure(`/${id('deep')}`, '?depth=100')).json).to.deep.equal(r.json);
    expect((await structure(`/${id('deep')}`, '?depth=1000')).json).to.deep.equal(r.json);
  });

  it('a parent that would close a cycle is refused; the rest of the dimension reads as before', async () => {
    await define('svcDimensionDefinitionContent', { id: id('cyc'), name: 'Cyc', enumerable: true, localizations: {} });
    await define('svcEntityDefinitionContent', { id: id('a'), name: 'A', localizations: {}, parent: id('b') });
    const refused = await editor.create({
      system: { contentType: 'svcEntityDefinitionContent' },
      aspects: { svcEntityDefinition: { id: id('b'), name: 'B', localizations: {}, parent: id('a') } },
      operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: id('b') }],
    });
    expect(refused.status, refused.text).to.equal(400);
    await define('svcEntityDefinitionContent', { id: id('ok'), name: 'Ok', localizations: {}, parent: id('cyc') });
    const r = await eventually(async () => {
      const r = await structure(`/${id('cyc')}`);
      expect(r.json.entities.map((e: { id: string }) => e.id)).to.deep.equal([id('ok')]);
      return r;
    });
    expect(r.status).to.equal(200);
    expect((await structure(`/${id('b')}`)).status).to.equal(404);
  });
});
