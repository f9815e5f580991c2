import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

describe('actors: concurrent updates of one content (ARCHITECTURE principle 1, spec Errors rule 1)', function () {
  this.timeout(60000);
  let p: P;
  let editor: Client;

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
  });
  after(async () => p.stop());

  it('100 clients with the same If-Match: exactly one wins, 99 get 409/40900, nothing else changes', async () => {
    const c = await editor.create(article('start'));
    const id = c.json.system.id;
    const etag = c.headers.get('etag')!;
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => editor.req('PUT', `/content/alias/${id}`, { body: article(`client ${i}`), headers: { 'If-Match': etag } })),
    );
    const won = results.filter((r) => r.status === 200);
    const lost = results.filter((r) => r.status === 409);
    expect(won).to.have.length(1);
    expect(lost).to.have.length(99);
    for (const r of lost) {
      expect(r.json.statusCode).to.equal('40900');
      expect(r.json.extraInfo.ETag).to.equal(won[0].headers.get('etag'));
    }
    const h = await editor.read(`/content/alias/${id}/history`);
    expect(h.json.versions).to.have.length(2);
    expect((await editor.read(`/content/alias/${id}`)).json.aspects.body.title).to.equal(won[0].json.aspects.body.title);
  });

  it('100 clients retrying with the fresh ETag of each 409: every write lands exactly once, revisions 1..101', async () => {
    const c = await editor.create(article('start'));
    const id = c.json.system.id;
    const key = id.split('/')[1];
    let conflicts = 0;
    const client = async (i: number) => {
      let etag = c.headers.get('etag')!;
      for (let attempt = 0; attempt < 1000; attempt++) {
        const r = await editor.req('PUT', `/content/alias/${id}?updateMode=merge`, { body: { aspects: { body: { markers: [`m${i}`] } } }, headers: { 'If-Match': etag } });
        if (r.status === 200) return r.json.system.version as string;
        expect(r.status, r.text).to.equal(409);
        conflicts++;
        etag = r.json.extraInfo.ETag;
      }
      throw new Error(`client ${i} never got through`);
    };
    const versions = await Promise.all(Array.from({ length: 100 }, (_, i) => client(i)));
    expect(new Set(versions).size).to.equal(100);
    expect(conflicts).to.be.greaterThan(0);
    const final = await editor.req('GET', `/content/alias/${id}`);
    expect(final.headers.get('location')).to.match(/\/101$/);
    const h = await editor.read(`/content/alias/${id}/history`);
    expect(h.json.versions).to.have.length(101);
    expect(h.json.versions.map((v: { revision: { revisionNumber: number } }) => v.revision.revisionNumber)).to.deep.equal(Array.from({ length: 101 }, (_, i) => i + 1));
    for (const v of versions) expect(h.json.versions.map((x: { version: string }) => x.version)).to.include(v);
    // merge mode appends: the last version holds every client's marker exactly once, so no update was lost
    const markers: string[] = (await editor.read(`/content/alias/${id}`)).json.aspects.body.markers;
    expect(markers).to.have.length(100);
    expect(new Set(markers).size).to.equal(100);
    expect(key).to.be.a('string');
  });
});
