import { expect } from 'chai';
import type { Answer } from '../../src/client/index.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * A write's answer shows nothing its caller may not read (the eighteenth session's review,
 * finding 4). A role with Update and no Read got 403 from GET, but a PUT of `{"aspects":{}}`
 * (update or merge), a workspace PUT (a draft over main starts from main's aspects), a promote of
 * it and a restore answered 200 with every aspect of the content. Now such an answer keeps its
 * status and headers (the ETag a next write needs) and the envelope's `system` part, with an
 * empty aspects map and `status.extraInfo.aspectsOmitted: true` (`writtenEnvelope`,
 * `writtenDraftEnvelope` in src/gateway/content-writes.ts); creates are answered by the same
 * rule. Bulk lines answer no envelope at all.
 *
 * The default roles never hold Update without Read: the test adds a role `blindwriter` (Create
 * and Update on `*`) to the running platform's role table.
 */
describe('security: a write answers no aspects to a caller without Read (sec18a finding 4)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let blind: Client;
  const T = `wa${Date.now().toString(36)}`;
  const SECRET = 'secret title';

  before(async () => {
    p = await startTestPlatform();
    (p.tokens!.config.roles as Record<string, Record<string, string[]>>).blindwriter = { '*': ['Create', 'Update'] };
    await p.tokens!.createAccount(`${T}-blind`, 'blind-pw', { __global__: ['blindwriter'] });
    editor = await new Client(p.base).login('editor');
    blind = await new Client(p.base).login(`${T}-blind`, 'blind-pw');
  });
  after(async () => p?.stop());

  async function secret(): Promise<{ id: string; etag: string; version: string }> {
    const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: SECRET }, teaser: { text: `${SECRET} teaser` } } });
    expect(c.status, c.text).to.equal(201);
    return { id: c.json.system.id, etag: c.headers.get('etag')!, version: c.json.system.version };
  }

  /** The answer of a write to the caller without Read: its status, the system part, no aspects, and it says so. */
  function expectWithheld(r: Answer, status: number, statusCode: string, id: unknown) {
    expect(r.status, r.text).to.equal(status);
    expect(r.text).to.not.contain(SECRET);
    expect(r.json.system.id).to.equal(id);
    expect(r.json.system.version).to.be.a('string');
    expect(r.json.system.contentType).to.equal('article');
    expect(r.json.aspects).to.deep.equal({ _type: 'article' });
    expect(r.json.status.statusCode).to.equal(statusCode);
    expect(r.json.status.extraInfo).to.deep.equal({ aspectsOmitted: true });
  }
  /** The same header names as the answer a reader gets (ETag, Vary, Content-Type…); the body alone differs. */
  const headerNames = (r: Answer) =>
    [...r.headers.keys()].filter((h) => !['date', 'content-length', 'x-request-id', 'connection', 'keep-alive'].includes(h)).sort();

  it('update (update, merge and replace modes), restore, workspace PUT and promote answer their status and headers, and no aspects', async () => {
    const c = await secret();
    expect((await blind.readContent(c.id)).status).to.equal(403);

    let etag = c.etag;
    for (const query of ['', 'updateMode=merge', 'updateMode=update']) {
      const r = await blind.update(c.id, { aspects: {} }, etag, query);
      expectWithheld(r, 200, '20000', c.id);
      expect(r.headers.get('etag')).to.match(/^W\/"/);
      etag = r.headers.get('etag')!;
    }
    // what the blind writer sends it may see again: replace with its own aspects, still no aspects answered
    const mine = await blind.update(c.id, { aspects: { body: { title: 'x' } } }, null, 'updateMode=replace');
    expectWithheld(mine, 200, '20000', c.id);
    etag = mine.headers.get('etag')!;

    const restored = await blind.restore(c.id, c.version, etag);
    expectWithheld(restored, 200, '20000', c.id);
    expect((await editor.readContent(c.id)).json.aspects?.body?.title, 'the restore took place').to.equal(SECRET);
    etag = restored.headers.get('etag')!;

    const ws = `${T}-ws`;
    const draft = await blind.updateDraft(ws, c.id, { aspects: {}, origin: etag });
    expectWithheld(draft, 200, '20000', c.id);
    expect(draft.json.system?.version).to.match(/^draft:/);
    expect(draft.json.operations).to.deep.equal([]);
    expect((await blind.readDraft(ws, c.id)).status).to.equal(403);

    const promoted = await blind.promote(ws, c.id);
    expectWithheld(promoted, 200, '20000', c.id);

    // The same request of a caller who may read: the whole envelope, the same headers.
    const e = await secret();
    const asEditor = await editor.update(e.id, { aspects: {} }, e.etag);
    expect(asEditor.json.aspects?.body?.title).to.equal(SECRET);
    expect(asEditor.json.status).to.deep.equal({ message: 'OK', statusCode: '20000', extraInfo: {} });
    const asBlind = await blind.update(e.id, { aspects: {} }, asEditor.headers.get('etag')!);
    expect(headerNames(asBlind)).to.deep.equal(headerNames(asEditor));
  });

  it('create and workspace create by a caller without Read answer no aspects either; bulk lines carry no envelope', async () => {
    const c = await blind.create({ system: { contentType: 'article' }, aspects: { body: { title: SECRET } } });
    expectWithheld(c, 201, '20100', c.json.system?.id);
    expect(c.headers.get('location')).to.be.a('string');
    expect(c.headers.get('etag')).to.be.a('string');
    expect((await editor.readContent(c.json.system.id)).json.aspects?.body?.title).to.equal(SECRET);

    const d = await blind.createDraft(`${T}-new`, { system: { contentType: 'article' }, aspects: { body: { title: SECRET } } });
    expectWithheld(d, 201, '20100', d.json.system?.id);

    const s = await secret();
    const bulk = await blind.req('POST', '/bulk', {
      raw: `${JSON.stringify({ op: 'update', id: s.id, ifMatch: s.etag, content: { aspects: {} } })}\n`,
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(bulk.status, bulk.text).to.equal(200);
    const line = JSON.parse(bulk.text.trim());
    expect(line.status).to.equal(200);
    expect(Object.keys(line).sort()).to.deep.equal(['etag', 'id', 'line', 'status', 'version']);
  });
});
