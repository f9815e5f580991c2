import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Permission checks cannot be stepped around (issue 8, security): a content owned by the
 * `culture` context is out of the sportseditor's reach (roles only in `sports`), whichever way
 * it is asked for: by alias or content id, at a revision, through a view or a symbolic view,
 * in a variant, as metadata or history, through a workspace (read-through and drafts), as the
 * files of its version or alias, or by writing its views. The reader (Read everywhere) reaches
 * the same URLs, so each row proves the URL works and the refusal is the permission's. No
 * refusal names the content's type (CONTRACT §20 "Error bodies", issue 14 finding 13).
 */
describe('security: permissions cannot be bypassed through views, variants, workspaces, files, history or metadata', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let reader: Client;
  let sports: Client;
  const T = `pb${Date.now().toString(36)}`;
  /** The content's type: a refusal must not reveal it. */
  const TYPE = 'cultureDeskMemo';
  let id = '';
  let version = '';
  let etag = '';
  let location = '';

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
    sports = await new Client(p.base).login('sportseditor');
    const up = await editor.req('POST', `${p.url}/file-service/file/content/${T}/notes.txt`, {
      raw: 'culture only',
      headers: { 'Content-Type': 'text/plain' },
    });
    expect(up.status, up.text).to.equal(201);
    const c = await editor.create({
      system: { contentType: TYPE },
      aspects: { body: { title: 'culture desk' }, svcFiles: { files: { 'notes.txt': { fileUri: up.json.URI, filePath: 'notes.txt' } } } },
      operations: [
        { _type: 'svcSetAlias', namespace: T, alias: 'story' },
        { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } },
        { _type: 'svcAssignToViews', views: ['desk'] },
        { _type: 'svcAssignToSymbolicViews', views: ['follow'], targetView: '@desk' },
      ],
    });
    expect(c.status, c.text).to.equal(201);
    id = c.json.system.id;
    version = c.json.system.version;
    etag = c.headers.get('etag')!;
    location = (await editor.req('GET', `/content/alias/${id}`)).headers.get('location')!;
    // a draft in a workspace
    const d = await editor.req('PUT', `/content/workspace/${T}ws/alias/${id}`, { body: { aspects: { body: { title: 'draft' } } } });
    expect(d.status, d.text).to.be.oneOf([200, 201]);
  });
  after(async () => p?.stop());

  const reads: [string, () => string][] = [
    ['by content id (303 or the version)', () => `/content/alias/${id}`],
    ['by another alias', () => `/content/alias/${T}/story`],
    ['the redirect target, asked for directly', () => location],
    ['a revision', () => `/content/alias/${id}/1`],
    ['in a variant', () => `/content/alias/${id}/1?variant=svcIndexing`],
    ['metadata', () => `/content/alias/${id}/metadata`],
    ['metadata of a revision', () => `/content/alias/${id}/1/metadata`],
    ['history', () => `/content/alias/${id}/history`],
    ['history of a revision', () => `/content/alias/${id}/1/history`],
    ['a view', () => `/content/view/desk/alias/${id}`],
    ['a view at a revision', () => `/content/view/desk/alias/${id}/1`],
    ['a symbolic view', () => `/content/view/follow/alias/${id}`],
    ['svcLatest', () => `/content/view/svcLatest/alias/${T}/story`],
    ['a workspace draft', () => `/content/workspace/${T}ws/alias/${id}`],
    ['a workspace read-through (no draft there)', () => `/content/workspace/${T}other/alias/${id}`],
    ['file delivery by version', () => `${p.url}/file-delivery-service/version/${version}/notes.txt`],
    ['file delivery by alias', () => `${p.url}/file-delivery-service/alias/${T}/story/notes.txt`],
  ];

  for (const [what, url] of reads) {
    it(`read ${what}: 403 for the sportseditor, 2xx/303 for the reader`, async () => {
      const ok = await reader.req('GET', url());
      expect(ok.status, `reader: ${ok.text}`).to.be.oneOf([200, 303]);
      const denied = await sports.req('GET', url());
      expect(denied.status, `sportseditor: ${denied.text}`).to.equal(403);
      expect(denied.json.statusCode).to.equal('40300');
      expect(denied.text).to.not.contain('culture desk');
      expect(denied.text).to.not.contain(TYPE);
      expect(denied.headers.get('location')).to.equal(null);
    });
  }

  it('writes through views, drafts, promote and release are refused too, and change nothing', async () => {
    const attempts = [
      await sports.req('PUT', '/view/desk', { body: { version }, headers: { 'If-Match': etag } }),
      await sports.req('DELETE', `/view/desk/alias/${id}`),
      await sports.req('PUT', `/content/workspace/${T}ws/alias/${id}`, { body: { aspects: { body: { title: 'mine' } } } }),
      await sports.req('POST', `/content/workspace/${T}ws/alias/${id}/promote`),
      await sports.req('PUT', `/content/alias/${id}`, { body: { aspects: { body: { title: 'mine' } } }, headers: { 'If-Match': etag } }),
      await sports.req('DELETE', `/content/alias/${id}`, { headers: { 'If-Match': etag } }),
      await sports.req('DELETE', `/content/alias/${T}/story/release`),
    ];
    for (const r of attempts) {
      expect(r.status, r.text).to.equal(403);
      expect(r.text).to.not.contain(TYPE);
    }
    const now = await editor.readContent(id);
    expect(now.headers.get('etag')).to.equal(etag);
    // The alias was not released: it still names the content.
    expect((await editor.read(`/content/alias/${T}/story`)).headers.get('etag')).to.equal(etag);
    expect(now.json.aspects!.body).to.deep.include({ title: 'culture desk' });
    const draft = await editor.req('GET', `/content/workspace/${T}ws/alias/${id}`);
    expect(draft.json.aspects.body.title).to.equal('draft');
  });
});
