import { expect } from 'chai';
import type { Answer } from '../../src/client/index.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Owners (CONTRACT §20 "Owners"; issue 14, finding 11: a sportseditor moved sports content to
 * culture only, or to no owners at all, because only the old owners were checked). A write
 * that changes `svcSecurityContext.owners` needs Update both in the contexts before and in the
 * contexts after; no owners means `__global__` only. Refused writes change nothing, and the
 * refusal names the permission and the user, never the content's type.
 */
describe('security: changing owners needs Update before and after (CONTRACT §20, issue 14 finding 11)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;
  const TYPE = 'ownersMemo';
  const owners = (list: unknown) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: list === undefined ? {} : { owners: list } } });

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => p?.stop());

  async function sportsContent(): Promise<{ id: string; etag: string }> {
    const c = await sports.create({ system: { contentType: TYPE }, aspects: { body: { title: 'match report' } }, operations: [owners(['sports'])] });
    expect(c.status, c.text).to.equal(201);
    return { id: c.json.system.id, etag: c.headers.get('etag')! };
  }

  /** What a refused write must leave alone: the revision and the owners. */
  async function state(id: string) {
    const m = await editor.metadata(id);
    expect(m.status, m.text).to.equal(200);
    return { etag: (await editor.readContent(id)).headers.get('etag'), owners: m.json.aspects.svcSecurityContext?.owners ?? null };
  }

  function expectRefusal(r: Answer) {
    expect(r.status, r.text).to.equal(403);
    expect(r.json.statusCode).to.equal('40300');
    expect(r.json.message).to.contain('Update').and.to.contain('sportseditor');
    expect(r.text).to.not.contain(TYPE);
  }

  it('a sportseditor cannot move sports content to culture only, to no owners or to an empty owner list; nothing changes', async () => {
    const c = await sportsContent();
    const before = await state(c.id);
    expect(before.owners).to.deep.equal(['sports']);
    for (const to of [['culture'], [], undefined, ['__global__']]) {
      expectRefusal(await sports.update(c.id, { aspects: {}, operations: [owners(to)] }, c.etag));
      expect(await state(c.id), JSON.stringify(to)).to.deep.equal(before);
    }
    // The content stays the sportseditor's to edit.
    expect((await sports.update(c.id, { aspects: { body: { title: 'still mine' } } }, c.etag)).status).to.equal(200);
  });

  it('a move that keeps a context the writer holds is allowed, and the way back from it too', async () => {
    const c = await sportsContent();
    const both = await sports.update(c.id, { aspects: {}, operations: [owners(['sports', 'culture'])] }, c.etag);
    expect(both.status, both.text).to.equal(200);
    // From [sports, culture] to [culture]: Update in the contexts after is missing.
    expectRefusal(await sports.update(c.id, { aspects: {}, operations: [owners(['culture'])] }, both.headers.get('etag')!));
    const back = await sports.update(c.id, { aspects: {}, operations: [owners(['sports'])] }, both.headers.get('etag')!);
    expect(back.status, back.text).to.equal(200);
  });

  it('a user with Update in both places moves the content; the sportseditor then can no longer write it', async () => {
    const c = await sportsContent();
    const moved = await editor.update(c.id, { aspects: {}, operations: [owners(['culture'])] }, c.etag);
    expect(moved.status, moved.text).to.equal(200);
    expect((await state(c.id)).owners).to.deep.equal(['culture']);
    expect((await sports.update(c.id, { aspects: { body: { title: 'x' } } }, moved.headers.get('etag')!)).status).to.equal(403);
    const global = await editor.update(c.id, { aspects: {}, operations: [owners([])] }, moved.headers.get('etag')!);
    expect(global.status, global.text).to.equal(200);
  });

  it('a promote that moves the content is checked the same way; main and the draft stay', async () => {
    const c = await sportsContent();
    const before = await state(c.id);
    const ws = `owners${Date.now().toString(36)}`;
    const d = await sports.req('PUT', `/content/workspace/${ws}/alias/${c.id}`, {
      body: { aspects: { body: { title: 'moved' } }, operations: [owners(['culture'])] },
    });
    expect(d.status, d.text).to.equal(200);
    expectRefusal(await sports.req('POST', `/content/workspace/${ws}/alias/${c.id}/promote`));
    expect(await state(c.id)).to.deep.equal(before);
    expect((await sports.req('GET', `/content/workspace/${ws}/alias/${c.id}`)).json.aspects.body.title).to.equal('moved');
    expect((await editor.req('POST', `/content/workspace/${ws}/alias/${c.id}/promote`)).status).to.equal(200);
    expect((await state(c.id)).owners).to.deep.equal(['culture']);
  });

  it('create: owners the writer holds no Create in are refused (checked against the new contexts)', async () => {
    for (const to of [['culture'], []]) {
      const r = await sports.create({ system: { contentType: TYPE }, aspects: {}, operations: [owners(to)] });
      expect(r.status, r.text).to.equal(403);
      expect(r.text).to.not.contain(TYPE);
    }
  });
});
