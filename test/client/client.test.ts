import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { changes } from '../../src/client/changes.js';
import { bulkImport, exportContents } from '../../src/client/bulk.js';
import { idPath, PlatformClient } from '../../src/client/index.js';
import { checkerOf } from '../support/openapi-check.js';
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
    // Webhook targets on this machine are allowed: the client's webhook calls name a local URL.
    p = await startTestPlatform({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    c = await new PlatformClient(p.base).login('editor');
  });
  after(async () => p.stop());

  it('an id goes into a path as encoded segments; one with an empty, `.` or `..` segment is refused before any request', async () => {
    // Taken as it was, `../workspace/desk` made remove() send DELETE /content/workspace/desk
    // with the client's token: URL parsing resolves dot segments (security review).
    expect(idPath('contentid/01JABCDEF')).to.equal('contentid/01JABCDEF');
    expect(idPath('news/hello world?x#y')).to.equal('news/hello%20world%3Fx%23y');
    let requests = 0;
    const server = createServer((_req, res) => {
      requests++;
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const c = new PlatformClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}/content-service`, 'token');
      for (const id of ['../workspace/desk', 'news/../../security/token', 'contentid//x', './x', 'a/.'])
        await (async () => c.remove(id, 'W/"x/1"'))().then(
          () => expect.fail(`${id} was sent`),
          (e: Error) => expect(e.message).to.contain('not a content id or alias'),
        );
      expect(requests).to.equal(0);
    } finally {
      server.close();
    }
  });

  it('a file path, version id or file address from a content goes into a path as encoded segments; dot segments are refused before any request (review 15)', async () => {
    // A writer may put `../../../content-service/audit` in svcFiles: deliver() sent GET
    // /content-service/audit with the client's token (a sysadmin's: the whole audit trail).
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? '');
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const c = new PlatformClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}/content-service`, 'token');
      const refused = async (what: string, call: () => Promise<unknown>) =>
        (async () => call())().then(
          () => expect.fail(`${what} was sent`),
          (e: Error) => expect(e.message, what).to.match(/^not a/),
        );
      await refused('file path', () => c.deliver({ version: 'contentid/K/V' }, '../../../content-service/audit'));
      await refused('file path', () => c.deliver({ version: 'contentid/K/V' }, 'img/../../../../content-service/operations'));
      await refused('alias', () => c.deliver({ alias: 'web/../../../content-service/webhooks/x' }, 'a.png'));
      await refused('file info', () => c.fileInfo('content://K/../../content-service/audit'));
      await refused('file delete', () => c.deleteFile('tmp/editor/../../../content-service/webhooks/x'));
      await refused('upload', () => c.upload('tmp/../../content-service/bulk', 'x'));
      expect(paths).to.deep.equal([]);
      await c.deliver({ version: 'contentid/K/V' }, 'images/a b.png');
      await c.fileInfo(`http://h/file-service/file/tmp/editor/x%20y.txt`);
      expect(paths).to.deep.equal(['/file-delivery-service/version/contentid/K/V/images/a%20b.png', '/file-service/file/info/tmp/editor/x%20y.txt']);
    } finally {
      server.close();
    }
  });

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

  it('workspaces: drafts read, written, deleted and promoted; a workspace cleared', async () => {
    const ws = `typed${Date.now()}`;
    const main = await c.create({ system: { contentType: 'article' }, aspects: { body: { title: 'main' } } });
    const id: string = main.json.system.id;
    const draft = await c.updateDraft(ws, id, { aspects: { body: { title: 'draft' } }, origin: main.headers.get('etag') });
    expect(draft.status, draft.text).to.equal(200);
    expect(draft.json.system?.version).to.match(/^draft:/);
    expect((await c.readDraft(ws, id)).json.aspects?.body?.title).to.equal('draft');
    expect(Object.keys((await c.workspace(ws)).json.drafts)).to.deep.equal([id]);
    const promoted = await c.promote(ws, id);
    expect(promoted.status, promoted.text).to.equal(200);
    expect(promoted.headers.get('etag')).to.match(/\/2"$/);
    expect((await c.readContent(id)).json.aspects?.body?.title).to.equal('draft');
    const second = await c.createDraft(ws, { system: { contentType: 'article' }, aspects: { body: { title: 'gone' } } });
    const secondId = String(second.json.system?.id);
    expect((await c.deleteDraft(ws, secondId)).status).to.equal(204);
    expect((await c.readDraft(ws, secondId)).status).to.equal(404);
    await c.createDraft(ws, { system: { contentType: 'article' }, aspects: { body: { title: 'cleared' } } });
    expect((await c.clearWorkspace(ws)).status).to.equal(204);
    expect((await c.workspace(ws)).json.drafts).to.deep.equal({});
  });

  it('aliases, revisions and views: release, versioned reads, off a view', async () => {
    const name = `typed-${Date.now()}`;
    const created = await c.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'aliased' } },
      operations: [{ _type: 'svcSetAlias', namespace: 'news', alias: name }],
    });
    const id: string = created.json.system.id;
    expect((await c.readRevision(`news/${name}`, 1)).json.aspects.body.title).to.equal('aliased');
    expect((await c.readRevision(id, 1, 'metadata')).json.system.contentType).to.equal('_contentInfo');
    expect((await c.readRevision(id, 1, 'history')).json.versions).to.have.length(1);
    const onView = await c.putView('svcPublic', { version: created.json.system.version }, created.headers.get('etag')!);
    const off = await c.removeFromView('svcPublic', id);
    expect(off.status).to.equal(204);
    expect(off.headers.get('etag')).to.not.equal(onView.headers.get('etag'));
    expect((await c.readView('svcPublic', id)).status).to.equal(404);
    expect((await c.releaseAlias(`news/${name}`)).status, 'editor').to.equal(403);
    const admin = await new PlatformClient(p.base).login('sysadmin');
    expect((await admin.releaseAlias(`news/${name}`)).status).to.equal(204);
    expect((await admin.releaseAlias(`news/${name}`)).status, 'nothing left to release').to.equal(200);
    expect((await c.readContent(`news/${name}`)).status).to.equal(404);
  });

  it('files: info and delete', async () => {
    const up = await c.upload('tmp', 'bytes', 'text/plain');
    const location = up.headers.get('location')!;
    const info = await c.fileInfo(location);
    expect(info.status).to.equal(200);
    expect(info.json).to.deep.include({ URI: up.json.URI, length: 5 });
    expect((await c.fileInfo(up.json.URI)).json.URI, 'by fileUri too').to.equal(up.json.URI);
    expect((await c.deleteFile(up.json.URI)).status).to.equal(200);
    expect((await c.fileInfo(location)).status).to.equal(404);
    const named = await c.upload('tmp/editor', 'with a host', 'text/plain');
    expect(named.json.URI).to.match(/^tmp:\/\/editor\/[0-9A-Z]{26}\/file$/);
  });

  it('webhooks: create, list, get, update, deliveries, redeliver, delete (sysadmin)', async () => {
    const admin = await new PlatformClient(p.base).login('sysadmin');
    expect((await c.listWebhooks()).status, 'editor').to.equal(403);
    const hook = await admin.createWebhook({ url: 'http://127.0.0.1:9/hook', kinds: ['create'] });
    expect(hook.status, hook.text).to.equal(201);
    expect(hook.json.secret).to.match(/^whsec_/);
    expect((await admin.listWebhooks()).json.webhooks.map((w) => w.id)).to.include(hook.json.id);
    expect((await admin.getWebhook(hook.json.id)).json.secret).to.equal(undefined);
    const updated = await admin.updateWebhook(hook.json.id, { url: 'http://127.0.0.1:9/other', description: 'd' });
    expect(updated.json).to.deep.include({ url: 'http://127.0.0.1:9/other', description: 'd' });
    expect((await admin.webhookDeliveries(hook.json.id, { limit: 10 })).json.deliveries).to.be.an('array');
    expect((await admin.redeliver(hook.json.id, 'no-such-delivery')).status).to.equal(404);
    expect((await admin.deleteWebhook(hook.json.id)).status).to.equal(204);
    expect((await admin.getWebhook(hook.json.id)).status).to.equal(404);
  });

  it('search (GET and form POST), re-indexing and taxonomy answer as documented (no engine here: 503)', async () => {
    expect((await c.search({ q: '*:*' })).status).to.equal(503);
    expect((await c.searchForm({ q: '*:*' })).status).to.equal(503);
    const admin = await new PlatformClient(p.base).login('sysadmin');
    for (const r of [await admin.reindexFull(), await admin.reindexType('article'), await admin.reindexAliases(['contentid/x'])])
      expect(r.status).to.equal(503);
    expect((await c.reindexType('article')).status, 'editor').to.equal(403);
    expect((await c.taxonomyStructure()).json).to.be.an('array');
    expect((await c.taxonomyStructure('no-such')).status).to.equal(404);
    expect((await c.taxonomyComplete('no-such', 'x')).status).to.equal(404);
  });

  it('the change feed through the client', async () => {
    const created = await c.create({ system: { contentType: 'article' }, aspects: { body: { title: 'fed' } } });
    const stop = new AbortController();
    for await (const e of changes(p.base, c.token!, { kinds: ['create'], signal: stop.signal, pollMs: 1000 })) {
      if (e.id !== created.json.system.id) continue;
      expect(e.kind).to.equal('create');
      stop.abort();
    }
  });

  it('the change feed waits out a 503 with Retry-After as an HTTP date or seconds, and leaves no abort listener per retry', async () => {
    let retryAfter = '';
    let hits = 0;
    const server = createServer((_req, res) => {
      hits++;
      res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': retryAfter });
      res.end('{"message":"Service unavailable","statusCode":"50300","extraInfo":{}}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/content-service`;
    /** Follows the feed for `ms`: the requests made, the waits asked, the abort listeners at each retry. */
    const follow = async (value: string, ms: number) => {
      [retryAfter, hits] = [value, 0];
      const stop = new AbortController();
      const waits: number[] = [];
      const listeners: number[] = [];
      const timer = setTimeout(() => stop.abort(), ms);
      const onRetry = (_e: unknown, wait: number) => {
        waits.push(wait);
        listeners.push(getEventListeners(stop.signal, 'abort').length);
        // A tight loop: stop it here rather than after thousands of requests.
        if (waits.length >= 50) stop.abort();
      };
      for await (const _ of changes(base, 'token', { signal: stop.signal, onRetry })) expect.fail('a 503 hands out no event');
      clearTimeout(timer);
      return { hits, waits, listeners };
    };
    try {
      // A date in the past is a wait of 0: the normal back-off (200, 400, 800 ms) applies.
      const past = await follow('Wed, 21 Oct 2015 07:28:00 GMT', 1000);
      expect(past.waits.slice(0, 3), 'past date').to.deep.equal([200, 400, 800].slice(0, past.waits.length));
      expect(past.hits, 'past date: requests in 1 s').to.be.within(2, 4);
      // A date ahead is waited out (HTTP dates are to the second).
      const ahead = await follow(new Date(Date.now() + 3000).toUTCString(), 1000);
      expect(ahead.hits, 'date ahead: requests in 1 s').to.equal(1);
      expect(ahead.waits[0], 'date ahead').to.be.within(1000, 3000);
      // Delta-seconds as before; and each retry leaves no listener of its own on the signal (fetch's
      // own, one per request at most until collected, are all that may stay).
      const seconds = await follow('0', 1600);
      expect(seconds.waits, 'Retry-After: 0').to.deep.equal([200, 400, 800, 1600].slice(0, seconds.waits.length));
      for (const [i, n] of seconds.listeners.entries()) expect(n, `abort listeners at retry ${i + 1}`).to.be.at.most(i + 1);
      expect((await follow('1', 500)).waits, 'Retry-After: 1').to.deep.equal([1000]);
    } finally {
      server.close();
    }
  });

  it('logout revokes the token', async () => {
    const other = await new PlatformClient(p.base).login('reader');
    expect((await other.revoke()).status).to.equal(204);
    expect((await other.permission('reader')).status).to.equal(401);
  });

  it('bulk import, export and the operations snapshot', async () => {
    const ns = `bulk${Date.now()}`;
    const answers = await bulkImport(c, [
      {
        op: 'create',
        content: {
          system: { contentType: 'clientbulk' },
          aspects: { body: { title: 'b' } },
          operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }],
        },
      },
      { op: 'update', id: `${ns}/a`, content: { aspects: { body: { title: 'b2' } } } },
    ]);
    expect(answers.map((a) => [a.line, a.status])).to.deep.equal([
      [1, 201],
      [2, 200],
    ]);
    const exported = await exportContents(c, { types: ['clientbulk'] });
    expect(exported.map((e) => e.content.aspects.body)).to.deep.include({ _type: 'body', title: 'b2' });
    expect((await c.operations()).status).to.equal(403);
    const admin = await new PlatformClient(p.base).login('sysadmin');
    const ops = await admin.operations();
    expect(ops.status, ops.text).to.equal(200);
    expect(ops.json.partitions).to.have.length(8);
  });

  it('covers every operation of the OpenAPI document (the WebSocket feed aside: the iterator long-polls; and the console page)', async () => {
    const check = await checkerOf(p.url);
    // The console's static files are a page for browsers, not an operation of the API.
    const missing = check.operations().filter((o) => !check.covered.has(o) && o !== 'GET /content-service/changes/ws' && !/^GET \/console(\/|$)/.test(o));
    expect(missing, 'operations no method of the client reached').to.deep.equal([]);
  });
});
