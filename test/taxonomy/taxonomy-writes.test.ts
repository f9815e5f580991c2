import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * Writes of taxonomy aspects (spec "Taxonomy resources": children reference their parents, an
 * entity has at most one parent; `childrenOmitted` "must not be sent back when categorizing").
 * A parent reference that closes a cycle, and a categorization carrying childrenOmitted, are
 * refused with 400 and change nothing, on create, update and promote.
 */
describe('taxonomy writes: parent cycles and childrenOmitted refused (spec Taxonomy resources, CONTRACT §10)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  const T = `w${Date.now().toString(36)}`;
  const id = (s: string) => `${T}-${s}`;
  const entity = (eid: string, parent: string) => ({
    system: { contentType: 'svcEntityDefinitionContent' },
    aspects: { svcEntityDefinition: { id: eid, name: eid.toUpperCase(), localizations: {}, parent } },
    operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: eid }],
  });

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    for (const [e, parent] of [
      ['dim', null],
      ['a', 'dim'],
      ['b', 'a'],
      ['c', 'b'],
    ] as const) {
      const r =
        parent === null
          ? await editor.create({
              system: { contentType: 'svcDimensionDefinitionContent' },
              aspects: { svcDimensionDefinition: { id: id(e), name: 'Dim', enumerable: true, localizations: {} } },
              operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: id(e) }],
            })
          : await editor.create(entity(id(e), id(parent)));
      expect(r.status, r.text).to.equal(201);
    }
  });
  after(async () => p?.stop());

  it('an entity that is its own parent is refused with 400 and not created', async () => {
    const r = await editor.create(entity(id('self'), id('self')));
    expect(r.status, r.text).to.equal(400);
    expect(r.json.statusCode).to.equal('40000');
    expect(r.json.extraInfo).to.deep.equal({ field: 'svcEntityDefinition.parent', cycle: [id('self'), id('self')] });
    expect((await editor.readContent(`_taxonomy/${id('self')}`)).status).to.equal(404);
  });

  it('an update that makes an ancestor the child of its descendant is refused, and the stored parent stays', async () => {
    const before = await editor.readContent(`_taxonomy/${id('a')}`);
    const etag = before.headers.get('etag')!;
    const r = await editor.update(
      `_taxonomy/${id('a')}`,
      { aspects: { svcEntityDefinition: { id: id('a'), name: 'A', localizations: {}, parent: id('c') } } },
      etag,
    );
    expect(r.status, r.text).to.equal(400);
    expect((r.json.extraInfo as { cycle: string[] }).cycle).to.deep.equal([id('a'), id('c'), id('b'), id('a')]);
    const after = await editor.readContent(`_taxonomy/${id('a')}`);
    expect(after.headers.get('etag')).to.equal(etag);
    expect(after.json.aspects!.svcEntityDefinition.parent).to.equal(id('dim'));
  });

  it('a new entity whose parent chain leads back to it (its id already used as an ancestor) is refused', async () => {
    // x -> y is stored while y does not exist yet; y -> x would close the cycle.
    expect((await editor.create(entity(id('x'), id('y')))).status).to.equal(201);
    const r = await editor.create(entity(id('y'), id('x')));
    expect(r.status, r.text).to.equal(400);
    expect((r.json.extraInfo as { cycle: string[] }).cycle).to.deep.equal([id('y'), id('x'), id('y')]);
  });

  it('moving an entity under another branch, and a parent that does not exist yet, are accepted', async () => {
    const c = await editor.readContent(`_taxonomy/${id('c')}`);
    const r = await editor.update(
      `_taxonomy/${id('c')}`,
      { aspects: { svcEntityDefinition: { id: id('c'), name: 'C', localizations: {}, parent: id('a') } } },
      c.headers.get('etag'),
    );
    expect(r.status, r.text).to.equal(200);
    expect((await editor.create(entity(id('early'), id('later')))).status).to.equal(201);
    const s = await eventually(async () => {
      const s = await editor.taxonomyStructure(id('a'), 1);
      expect(s.json.entities.map((e: { id: string }) => e.id).sort()).to.deep.equal([id('b'), id('c')]);
      return s;
    });
    expect(s.status).to.equal(200);
  });

  it('a merge update that leaves the definition alone is not checked again', async () => {
    const b = await editor.readContent(`_taxonomy/${id('b')}`);
    const r = await editor.update(`_taxonomy/${id('b')}`, { aspects: { note: { text: 'hi' } } }, b.headers.get('etag'), 'updateMode=merge');
    expect(r.status, r.text).to.equal(200);
  });

  it('a categorization carrying childrenOmitted is refused on create and update, naming the field', async () => {
    const cat = (entities: unknown[]) => ({ svcCategorization: { dimensions: [{ id: id('dim'), entities }] } });
    const bad = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 't' }, ...cat([{ id: id('a'), name: 'A', entities: [{ id: id('b'), name: 'B', childrenOmitted: false }] }]) },
    });
    expect(bad.status, bad.text).to.equal(400);
    expect(bad.json.extraInfo).to.deep.equal({ field: 'svcCategorization.dimensions[0].entities[0].entities[0].childrenOmitted' });

    const ok = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 't' }, ...cat([{ id: id('a'), name: 'A' }]) } });
    expect(ok.status, ok.text).to.equal(201);
    const cid = ok.json.system.id;
    const etag = ok.headers.get('etag')!;
    const upd = await editor.update(cid, { aspects: cat([{ id: id('a'), name: 'A', childrenOmitted: true }]) }, etag, 'updateMode=merge');
    expect(upd.status, upd.text).to.equal(400);
    const now = await editor.readContent(cid);
    expect(now.headers.get('etag')).to.equal(etag);
    expect(now.json.aspects!.svcCategorization).to.deep.include(cat([{ id: id('a'), name: 'A' }]).svcCategorization);
  });

  it('a draft carrying a cycle is refused when promoted, and the draft stays', async () => {
    const d = await editor.createDraft(`ws${T}`, entity(id('wsloop'), id('wsloop')));
    expect(d.status, d.text).to.equal(201);
    const promote = await editor.req('POST', `/content/workspace/ws${T}/alias/${d.json.system!.id}/promote`);
    expect(promote.status, promote.text).to.equal(400);
    expect(promote.json.extraInfo.cycle).to.deep.equal([id('wsloop'), id('wsloop')]);
    expect((await editor.read(`/content/workspace/ws${T}/alias/${d.json.system!.id}`)).status).to.equal(200);
    expect((await editor.readContent(`_taxonomy/${id('wsloop')}`)).status).to.equal(404);
  });
});
