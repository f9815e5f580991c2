import { expect } from 'chai';
import type { Answer } from '../../src/client/index.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Time state and hidden are view membership (CONTRACT §6): `svcTimeState.views.<view>` decides
 * when the content is on a view for readers, `svcContentState.hidden` whether it is on the
 * public ones at all. Who may put content on views or take it off is AssignToView (PUT and
 * DELETE view, svcAssignToViews, svcAssignToSymbolicViews); before this guard, a role with
 * Update and no AssignToView (a writer who may edit but not publish) did the same with a
 * svcContentMetadata operation: it lifted a publisher's embargo (anonymous delivery 401 → 200),
 * unhid hidden content and took content off a public view by an `offTime` in the past (the
 * eighteenth session's review, finding 2). The rule: a write whose operations change a
 * content's time-state windows or hidden flag (as readers read them, `viewMembership` in
 * content-actor.ts; a create from none) needs AssignToView, on create, update, promote and
 * bulk lines.
 *
 * The default roles never hold Update without AssignToView: the test adds a role `writer`
 * (Create, Read, Update on `*`) to the running platform's role table.
 */
describe('security: time state and hidden need AssignToView, as views do (sec18a finding 2)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let writer: Client;
  let anon: Client;
  const T = `ts${Date.now().toString(36)}`;
  const meta = (aspects: Record<string, unknown>) => ({ _type: 'svcContentMetadata', aspects });
  const tomorrow = () => new Date(Date.now() + 86_400_000).toISOString();

  before(async () => {
    p = await startTestPlatform();
    // The role table the actors and the token service share (config/security.json, loaded per platform).
    (p.tokens!.config.roles as Record<string, Record<string, string[]>>).writer = { '*': ['Create', 'Read', 'Update'] };
    await p.tokens!.createAccount(`${T}-writer`, 'writer-pw', { __global__: ['writer'] });
    editor = await new Client(p.base).login('editor');
    writer = await new Client(p.base).login(`${T}-writer`, 'writer-pw');
    anon = new Client(p.base);
  });
  after(async () => p?.stop());

  /** An article with a file, put on svcPublic by the editor (a publisher), with the time state and hidden flag given. */
  async function published(ops: unknown[]): Promise<{ id: string; etag: string }> {
    const up = await editor.upload(`tmp/editor/${T}-${Math.random().toString(36).slice(2)}.txt`, 'the file', 'text/plain');
    expect(up.status, up.text).to.equal(201);
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'publisher decides' }, svcFiles: { files: { 'doc.txt': { fileUri: up.json.URI, filePath: 'doc.txt' } } } },
      operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }, ...ops],
    });
    expect(c.status, c.text).to.equal(201);
    return { id: c.json.system.id, etag: c.headers.get('etag')! };
  }
  const anonDelivery = async (id: string) => (await anon.deliver({ alias: id }, 'doc.txt')).status;
  const onPublic = async (id: string) => (await editor.readView('svcPublic', id)).status;
  /** What a refused write must leave alone: the revision and the metadata. */
  const state = async (id: string) => {
    const m = await editor.metadata(id);
    return {
      etag: (await editor.readContent(id)).headers.get('etag'),
      timeState: m.json.aspects.svcTimeState ?? null,
      contentState: m.json.aspects.svcContentState ?? null,
    };
  };
  const expectRefused = (r: Answer) => {
    expect(r.status, r.text).to.equal(403);
    expect(r.json.statusCode).to.equal('40300');
    expect(r.json.message).to.contain('AssignToView').and.to.contain(`${T}-writer`);
  };

  it('a writer without AssignToView can lift no embargo, unhide nothing and take nothing down (403, nothing changes); the publisher can', async () => {
    // an embargo: on svcPublic from tomorrow on
    const embargoed = await published([meta({ svcTimeState: { views: { svcPublic: { onTime: tomorrow() } } } })]);
    expect(await onPublic(embargoed.id)).to.equal(404);
    expect(await anonDelivery(embargoed.id)).to.equal(401);
    const before = await state(embargoed.id);
    for (const ops of [
      [meta({ svcTimeState: { views: {} } })],
      [meta({ svcTimeState: { views: { svcPublic: {} } } })],
      [meta({ svcTimeState: { views: { svcPublic: { onTime: new Date(Date.now() - 60_000).toISOString() } } } })],
    ]) {
      expectRefused(await writer.update(embargoed.id, { aspects: {}, operations: ops }, embargoed.etag));
      expectRefused(await writer.update(embargoed.id, { aspects: {}, operations: ops }, null));
      expect(await state(embargoed.id), JSON.stringify(ops)).to.deep.equal(before);
    }
    expect(await onPublic(embargoed.id)).to.equal(404);
    expect(await anonDelivery(embargoed.id)).to.equal(401);

    // hidden content stays hidden
    const hidden = await published([meta({ svcContentState: { hidden: true } })]);
    expect(await anonDelivery(hidden.id)).to.equal(401);
    for (const contentState of [{ hidden: false }, {}]) {
      expectRefused(await writer.update(hidden.id, { aspects: {}, operations: [meta({ svcContentState: contentState })] }, hidden.etag));
    }
    expect(await anonDelivery(hidden.id)).to.equal(401);

    // public content stays up: no offTime in the past, nor hiding it
    const live = await published([]);
    expect(await anonDelivery(live.id)).to.equal(200);
    const past = new Date(Date.now() - 60_000).toISOString();
    expectRefused(await writer.update(live.id, { aspects: {}, operations: [meta({ svcTimeState: { views: { svcPublic: { offTime: past } } } })] }, live.etag));
    expectRefused(await writer.update(live.id, { aspects: {}, operations: [meta({ svcContentState: { hidden: true } })] }, live.etag));
    expect(await onPublic(live.id)).to.equal(200);
    expect(await anonDelivery(live.id)).to.equal(200);

    // the publisher (AssignToView) does each of them
    const lift = await editor.update(embargoed.id, { aspects: {}, operations: [meta({ svcTimeState: { views: {} } })] }, embargoed.etag);
    expect(lift.status, lift.text).to.equal(200);
    expect(await anonDelivery(embargoed.id)).to.equal(200);
    const unhide = await editor.update(hidden.id, { aspects: {}, operations: [meta({ svcContentState: { hidden: false } })] }, hidden.etag);
    expect(unhide.status, unhide.text).to.equal(200);
    expect(await anonDelivery(hidden.id)).to.equal(200);
    const down = await editor.update(live.id, { aspects: {}, operations: [meta({ svcTimeState: { views: { svcPublic: { offTime: past } } } })] }, live.etag);
    expect(down.status, down.text).to.equal(200);
    expect(await onPublic(live.id)).to.equal(404);
  });

  it('a writer still edits content and writes the same time state and hidden flag, however spelled (compared with the head, as readers read them)', async () => {
    const on = tomorrow();
    const c = await published([meta({ svcTimeState: { views: { svcPublic: { onTime: on } } } })]);
    let etag = c.etag;
    const ok = async (body: unknown) => {
      const r = await writer.update(c.id, body, etag);
      expect(r.status, `${JSON.stringify(body)}: ${r.text}`).to.equal(200);
      etag = r.headers.get('etag')!;
    };
    await ok({ aspects: { body: { title: 'edited by the writer' } } });
    // the same window, the same instant written otherwise, an entry without bounds, another field
    await ok({ aspects: {}, operations: [meta({ svcTimeState: { views: { svcPublic: { onTime: on } } } })] });
    await ok({ aspects: {}, operations: [meta({ svcTimeState: { views: { svcPublic: { onTime: on.replace('Z', '+00:00') }, desk: {} }, note: 'x' } })] });
    // hidden false is what no svcContentState means
    await ok({ aspects: {}, operations: [meta({ svcContentState: { hidden: false } })] });
    // metadata that is no view membership
    await ok({ aspects: {}, operations: [meta({ editorial: { priority: 1 } })] });
    expect(await onPublic(c.id)).to.equal(404);
    expect(await anonDelivery(c.id)).to.equal(401);
  });

  it('create: a time state or hidden flag set on create needs AssignToView; without them the writer creates', async () => {
    for (const aspects of [{ svcTimeState: { views: { svcPublic: { onTime: tomorrow() } } } }, { svcContentState: { hidden: true } }]) {
      const r = await writer.create({ system: { contentType: 'article' }, aspects: { body: { title: 'x' } }, operations: [meta(aspects)] });
      expectRefused(r);
    }
    const plain = await writer.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'x' } },
      operations: [meta({ svcTimeState: { views: {} }, svcContentState: { hidden: false } })],
    });
    expect(plain.status, plain.text).to.equal(201);
    const byEditor = await editor.create({ system: { contentType: 'article' }, aspects: {}, operations: [meta({ svcContentState: { hidden: true } })] });
    expect(byEditor.status, byEditor.text).to.equal(201);
  });

  it('promote and bulk lines are held to the same rule: the writer’s draft that lifts an embargo is promoted by a publisher only', async () => {
    const c = await published([meta({ svcTimeState: { views: { svcPublic: { onTime: tomorrow() } } } })]);
    const ws = `${T}-ws`;
    const d = await writer.updateDraft(ws, c.id, { aspects: {}, operations: [meta({ svcTimeState: { views: {} } })], origin: c.etag });
    expect(d.status, d.text).to.equal(200);
    expectRefused(await writer.promote(ws, c.id));
    expect(await anonDelivery(c.id)).to.equal(401);
    expect((await writer.readDraft(ws, c.id)).status, 'the draft stays').to.equal(200);

    const lines = [
      { op: 'update', id: c.id, ifMatch: c.etag, content: { aspects: {}, operations: [meta({ svcTimeState: { views: {} } })] } },
      { op: 'create', content: { system: { contentType: 'article' }, aspects: {}, operations: [meta({ svcContentState: { hidden: true } })] } },
    ];
    const bulk = await writer.req('POST', '/bulk', {
      raw: `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`,
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(bulk.status, bulk.text).to.equal(200);
    const answers = bulk.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(answers.map((a) => [a.status, a.error?.statusCode])).to.deep.equal([
      [403, '40300'],
      [403, '40300'],
    ]);
    expect(await anonDelivery(c.id)).to.equal(401);

    const promoted = await editor.promote(ws, c.id);
    expect(promoted.status, promoted.text).to.equal(200);
    expect(await anonDelivery(c.id)).to.equal(200);
  });
});
