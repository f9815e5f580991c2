import { expect } from 'chai';
import { PlatformClient } from '../../src/client/index.js';
import { startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * The typed client (src/client) against a running platform: each of its methods reaches the
 * endpoint it names and answers what the spec says. (Every other e2e test sends its requests
 * through the same client as well: test/support/platform.ts exports it as `Client`.)
 */
describe('typed client (src/client)', () => {
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: PlatformClient;

  before(async () => {
    p = await startTestPlatform();
    c = await new PlatformClient(p.base).login('editor');
  });
  after(async () => p.stop());

  it('tokens, permission, content, views, metadata, history, workspaces', async () => {
    const t = await c.issueToken({ username: 'reader', password: 'reader' });
    expect(t.status).to.equal(200);
    expect(t.json.userId).to.equal('reader');
    expect(t.json.expireTime).to.match(/^\d+$/);
    expect((await c.permission('editor')).status).to.equal(200);
    const created = await c.create({ system: { contentType: 'article' }, aspects: { body: { title: 'typed' } } });
    expect(created.status).to.equal(201);
    const id: string = created.json.system.id;
    const read = await c.readContent(id);
    expect(read.json.aspects?.body?.title).to.equal('typed');
    const updated = await c.update(id, { aspects: { body: { title: 'typed 2' } } }, created.headers.get('etag'));
    expect(updated.status).to.equal(200);
    expect((await c.update(id, { aspects: { body: { title: 'stale' } } }, created.headers.get('etag'))).status).to.equal(409);
    const view = await c.putView('svcPublic', { version: created.json.system.version }, updated.headers.get('etag')!);
    expect(view.status).to.equal(200);
    expect((await c.readView('svcPublic', id)).json.aspects?.body?.title).to.equal('typed');
    expect((await c.metadata(id)).json.system.contentType).to.equal('_contentInfo');
    expect((await c.history(id)).json.versions).to.have.length(2);
    const draft = await c.createDraft(`ws${Date.now()}`, { system: { contentType: 'article' }, aspects: { body: { title: 'draft' } } });
    expect(draft.status).to.equal(201);
    expect((await c.remove(id, view.headers.get('etag')!)).status).to.be.oneOf([200, 204]);
  });

  it('revisions: compare, restore, audit', async () => {
    const created = await c.create({ system: { contentType: 'article' }, aspects: { body: { title: 'one' } } });
    const id: string = created.json.system.id;
    const first: string = created.json.system.version;
    const updated = await c.update(id, { aspects: { body: { title: 'two' } } }, created.headers.get('etag'));
    const diff = await c.compare(id, first);
    expect(diff.status, diff.text).to.equal(200);
    expect(diff.json.patch).to.deep.equal([{ op: 'replace', path: '/body/title', value: 'two' }]);
    const restored = await c.restore(id, first, updated.headers.get('etag')!);
    expect(restored.status, restored.text).to.equal(200);
    expect((await c.readContent(id)).json.aspects?.body?.title).to.equal('one');
    expect((await c.audit()).status).to.equal(403);
    const admin = await new PlatformClient(p.base).login('sysadmin');
    await eventually(async () => {
      const trail = await admin.audit({ content: id, limit: 10 });
      expect(trail.status, trail.text).to.equal(200);
      expect(trail.json.entries.map((e: { via: string }) => e.via)).to.deep.equal(['restore', 'main', 'main']);
    });
  });

  it('files: upload, download, delivery', async () => {
    const up = await c.upload('content/typed/note.txt', 'hello', 'text/plain');
    expect(up.status).to.equal(201);
    expect(up.json.URI).to.match(/^content:\/\/typed\/[0-9A-Z]{26}\/note\.txt$/);
    const down = await c.download(up.headers.get('location')!);
    expect(down.body.toString()).to.equal('hello');
    const created = await c.create({
      system: { contentType: 'article' },
      aspects: { svcFiles: { files: { 'n.txt': { fileUri: up.json.URI, filePath: 'n.txt' } } } },
    });
    const delivered = await c.deliver({ version: created.json.system.version }, 'n.txt');
    expect(delivered.status).to.equal(200);
    expect(delivered.body.toString()).to.equal('hello');
    expect((await c.deliver({ alias: created.json.system.id }, 'n.txt')).body.toString()).to.equal('hello');
  });

  it('health, the OpenAPI document and metrics over HTTP', async () => {
    expect((await c.health()).json.redis).to.equal('ok');
    const doc = await c.openApi();
    expect(doc.status).to.equal(200);
    expect(doc.json.openapi).to.match(/^3\.1/);
    expect(Object.keys(doc.json.paths)).to.include.members([
      '/content-service/content',
      '/file-service/file/{space}/{host}/{path}',
      '/file-delivery-service/version/{versionId}/{path}',
      '/taxonomy-service/structure/{id}',
      '/taxonomy-service/complete/{dimension}/{input}',
      '/content-service/changes',
      '/content-service/changes/ws',
    ]);
    const m = await c.metrics();
    expect(m.text).to.match(/http_requests_total\{route="file-service\/file",method="POST",status="201"\} \d+/);
  });
});
