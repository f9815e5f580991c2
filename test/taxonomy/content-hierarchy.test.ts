import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * The special `contentHierarchy` taxonomy (spec "Taxonomy resources": it "models hierarchies
 * among contents"): contents holding the `svcContentHierarchy` aspect are the entities of its
 * one dimension `contentHierarchy.contents`, each under the content its `parent` names (by
 * content id or any alias), roots under the dimension. Entity ids are content ids.
 */
describe('contentHierarchy taxonomy (spec Taxonomy resources)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  const T = `h${Date.now().toString(36)}`;
  const ids: Record<string, string> = {};
  const etags: Record<string, string> = {};

  async function node(key: string, type: string, hierarchy: Record<string, unknown>, alias?: string) {
    const r = await editor.create({
      system: { contentType: type },
      aspects: { body: { title: key }, svcContentHierarchy: hierarchy },
      operations: alias ? [{ _type: 'svcSetAlias', namespace: T, alias }] : [],
    });
    expect(r.status, r.text).to.equal(201);
    ids[key] = r.json.system.id;
    etags[key] = r.headers.get('etag')!;
  }
  const entityIds = (list: { id: string }[]) => list.map((e) => e.id);

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    await node('home', 'page', { name: `${T} Home`, localizations: { de: 'Startseite' } });
    await node('sport', 'page', { name: 'Sport', parent: ids.home }, 'sport');
    await node('culture', 'page', { name: 'Culture', parent: ids.home });
    // the parent given by another alias than the content id
    await node('match', 'article', { name: 'Match Report', parent: `${T}/sport`, attributes: { byline: 'AP' } });
  });
  after(async () => p?.stop());

  it('GET structure/contentHierarchy: the taxonomy, its dimension and the contents as entities under their parents', async () => {
    const r = await eventually(async () => {
      const r = await editor.taxonomyStructure('contentHierarchy');
      expect(r.status, r.text).to.equal(200);
      expect(entityIds(r.json.dimensions[0].entities)).to.include(ids.home);
      return r;
    });
    expect(r.json).to.deep.include({ id: 'contentHierarchy', name: 'Content hierarchy' });
    const dim = r.json.dimensions[0];
    expect(dim).to.deep.include({ id: 'contentHierarchy.contents', enumerable: true, childrenOmitted: false });
    const home = dim.entities.find((e: { id: string }) => e.id === ids.home);
    expect(home).to.deep.equal({
      id: ids.home,
      name: `${T} Home`,
      localizations: { de: 'Startseite' },
      attributes: { contentType: 'page' },
      childrenOmitted: false,
      entities: [
        { id: ids.culture, name: 'Culture', localizations: {}, attributes: { contentType: 'page' }, entities: [], childrenOmitted: false },
        {
          id: ids.sport,
          name: 'Sport',
          localizations: {},
          attributes: { contentType: 'page' },
          childrenOmitted: false,
          entities: [{ id: ids.match, name: 'Match Report', localizations: {}, attributes: { byline: 'AP', contentType: 'article' }, entities: [], childrenOmitted: false }],
        },
      ],
    });
    // listed among all taxonomies too
    const all = await editor.taxonomyStructure();
    expect(all.json.map((t: { id: string }) => t.id)).to.include('contentHierarchy');
  });

  it('GET structure/<content id> (it holds a slash) with depth, childrenOmitted where cut', async () => {
    const r = await editor.taxonomyStructure(ids.home, 1);
    expect(r.status, r.text).to.equal(200);
    expect(entityIds(r.json.entities)).to.deep.equal([ids.culture, ids.sport]);
    expect(r.json.entities[1]).to.deep.include({ entities: [], childrenOmitted: true });
    // the same id unencoded, as two path segments
    const raw = await editor.req('GET', `${p.url}/taxonomy-service/structure/${ids.home}?depth=0`, { token: null });
    expect(raw.status).to.equal(200);
    expect(raw.json).to.deep.include({ id: ids.home, entities: [], childrenOmitted: true });
  });

  it('a parent that makes a cycle among contents is refused with 400 and changes nothing', async () => {
    const r = await editor.update(ids.home, { aspects: { svcContentHierarchy: { name: 'Home', parent: ids.match } } }, etags.home, 'updateMode=merge');
    expect(r.status, r.text).to.equal(400);
    expect(r.json.extraInfo).to.deep.equal({ field: 'svcContentHierarchy.parent', cycle: [ids.home, ids.match, `${T}/sport`, ids.home] });
    expect((await editor.readContent(ids.home)).headers.get('etag')).to.equal(etags.home);
    const self = await editor.update(ids.sport, { aspects: { svcContentHierarchy: { name: 'Sport', parent: `${T}/sport` } } }, etags.sport, 'updateMode=merge');
    expect(self.status, self.text).to.equal(400);
  });

  it('completion on contentHierarchy.contents matches name paths of contents', async () => {
    const r = await editor.taxonomyComplete('contentHierarchy.contents', `${T} H/Sp/Ma`);
    expect(r.status, r.text).to.equal(200);
    expect(r.json.entities).to.deep.equal([{ id: ids.match, name: 'Match Report', entities: [], attributes: { byline: 'AP', contentType: 'article' }, childrenOmitted: false }]);
    expect(entityIds((await editor.taxonomyComplete('contentHierarchy.contents', 'Sp')).json.entities)).to.deep.equal([ids.sport]);
  });

  it('a moved content moves with its children; a deleted one leaves the hierarchy', async () => {
    const moved = await editor.update(ids.sport, { aspects: { svcContentHierarchy: { name: 'Sport', parent: ids.culture } } }, etags.sport, 'updateMode=merge');
    expect(moved.status, moved.text).to.equal(200);
    await eventually(async () => {
      const c = await editor.taxonomyStructure(ids.culture, 2);
      expect(entityIds(c.json.entities)).to.deep.equal([ids.sport]);
      expect(entityIds(c.json.entities[0].entities)).to.deep.equal([ids.match]);
    });
    const del = await editor.remove(ids.match, (await editor.readContent(ids.match)).headers.get('etag')!);
    expect(del.status, del.text).to.equal(204);
    await eventually(async () => expect((await editor.taxonomyStructure(ids.match)).status).to.equal(404));
    expect((await editor.taxonomyStructure(ids.sport)).json).to.deep.include({ entities: [], childrenOmitted: false });
  });
});
