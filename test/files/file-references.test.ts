import { expect } from 'chai';
import { newObjectId } from '../../src/adapters/file-store.js';
import type { Answer } from '../../src/client/index.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestS3 } from '../support/s3.js';

/**
 * File references (CONTRACT §20 "File references"; issue 14, finding 8: delivery served any
 * file a content mapped, so a sportseditor mapped a culture file into its own public content
 * and anyone downloaded it). `svcFiles` may map only files the writer may read by the rules of
 * the file service; any other URI answers 400 on the write, naming the path in the content and
 * the URI, and nothing is stored. Checked on create, update, workspace create and update, and
 * promote (which writes main as the promoter). A mapping the content already holds is not
 * added by a write that keeps it, so it is not checked again.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;
const TYPE = 'fileRefMemo';
const owned = (owners: string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners } } });
const filesAspect = (entries: Record<string, string>) => ({
  files: Object.fromEntries(Object.entries(entries).map(([path, fileUri]) => [path, { fileUri, filePath: path }])),
});

for (const kind of ['disk', 's3'] as const) {
  describe(`svcFiles may map only files the writer may read, on the ${kind} store (CONTRACT §20, issue 14 finding 8)`, function () {
    this.timeout(90_000);
    let p: P;
    let sysadmin: Client;
    let editor: Client;
    let sports: Client;
    let anonymous: Client;
    const T = `fr${kind}${Date.now().toString(36)}`;
    /** A culture content and a file in its space; the editor's tmp file; the sportseditor's own files. */
    const u = { cultureFile: '', editorTmp: '', sportsTmp: '', sportsContentFile: '' };
    let sportsId = '';

    before(async () => {
      const overrides: Record<string, string> = {};
      if (kind === 's3') Object.assign(overrides, (await ensureTestS3()).env, { S3_BUCKET: `refs-${Date.now().toString(36)}` });
      p = await startTestPlatform(overrides);
      [sysadmin, editor, sports] = await Promise.all(['sysadmin', 'editor', 'sportseditor'].map((n) => new Client(p.base).login(n)));
      anonymous = new Client(p.base);
      const culture = await editor.create({ system: { contentType: TYPE }, aspects: { body: { title: 'culture' } }, operations: [owned(['culture'])] });
      expect(culture.status, culture.text).to.equal(201);
      const s = await sports.create({ system: { contentType: TYPE }, aspects: { body: { title: 'sports' } }, operations: [owned(['sports'])] });
      expect(s.status, s.text).to.equal(201);
      sportsId = s.json.system.id;
      u.cultureFile = await uri(editor, `content/${culture.json.system.id.split('/')[1]}/review.txt`, 'culture review');
      u.editorTmp = await uri(editor, 'tmp/editor/draft.txt', 'editor tmp');
      u.sportsTmp = await uri(sports, 'tmp/sportseditor/score.txt', 'sports tmp');
      u.sportsContentFile = await uri(sports, `content/${sportsId.split('/')[1]}/photo.txt`, 'sports photo');
    });
    after(async () => p?.stop());

    async function uri(c: Client, where: string, body: string): Promise<string> {
      const r = await c.upload(where, body, 'text/plain');
      expect(r.status, r.text).to.equal(201);
      return r.json.URI;
    }

    function expectRefused(r: Answer, path: string, fileUri: string) {
      expect(r.status, r.text).to.equal(400);
      expect(r.json.statusCode).to.equal('40000');
      expect(r.json.extraInfo).to.deep.equal({ path, fileUri });
    }

    /** The foreign URIs a sportseditor may not map: a culture file, another user's tmp file, a missing file, no file at all. */
    const foreign = () => [u.cultureFile, u.editorTmp, `tmp://sportseditor/${newObjectId()}/never.txt`, 'https://elsewhere.example/x.png', 'not a uri'];

    async function current(id: string) {
      const r = await editor.readContent(id);
      return { etag: r.headers.get('etag'), files: r.json.aspects?.svcFiles ?? null };
    }

    describe('create', () => {
      it('refuses a foreign file, even in content the writer makes public (the reported attack), and stores nothing', async () => {
        for (const [i, bad] of foreign().entries()) {
          const alias = `c${i}`;
          const r = await sports.create({
            system: { contentType: TYPE },
            aspects: { svcFiles: filesAspect({ 'own.txt': u.sportsTmp, 'stolen.txt': bad }) },
            operations: [owned(['sports']), { _type: 'svcSetAlias', namespace: T, alias }, { _type: 'svcAssignToViews', views: ['svcPublic'] }],
          });
          expectRefused(r, 'stolen.txt', bad);
          expect((await editor.req('GET', `/content/alias/${T}/${alias}`)).status, bad).to.equal(404);
          expect((await anonymous.deliver({ alias: `${T}/${alias}` }, 'stolen.txt')).status).to.equal(404);
        }
      });

      it("maps the writer's own tmp files and files of content it may read", async () => {
        const r = await sports.create({
          system: { contentType: TYPE },
          aspects: { svcFiles: filesAspect({ 'a.txt': u.sportsTmp, 'b.txt': u.sportsContentFile }) },
          operations: [owned(['sports']), { _type: 'svcAssignToViews', views: ['svcPublic'] }],
        });
        expect(r.status, r.text).to.equal(201);
        expect((await anonymous.deliver({ version: r.json.system.version }, 'b.txt')).body.toString()).to.equal('sports photo');
      });

      it('sysadmin may map any file it may read', async () => {
        const r = await sysadmin.create({
          system: { contentType: TYPE },
          aspects: { svcFiles: filesAspect({ 'x.txt': u.editorTmp, 'y.txt': u.cultureFile }) },
        });
        expect(r.status, r.text).to.equal(201);
      });
    });

    describe('update', () => {
      it('refuses a foreign file in every update mode; the content is unchanged', async () => {
        const before = await current(sportsId);
        for (const mode of ['update', 'replace', 'merge']) {
          for (const bad of foreign()) {
            const r = await sports.update(sportsId, { aspects: { svcFiles: filesAspect({ [`${mode}.txt`]: bad }) } }, before.etag, `updateMode=${mode}`);
            expectRefused(r, `${mode}.txt`, bad);
          }
        }
        expect(await current(sportsId)).to.deep.equal(before);
      });

      it('a write that keeps a mapping the content already holds is not refused for it', async () => {
        // The editor maps its own tmp file into sports content; the sportseditor, who may not
        // read that file, then writes the content back whole: the mapping is kept, not added.
        const c = await editor.create({
          system: { contentType: TYPE },
          aspects: { svcFiles: filesAspect({ 'e.txt': u.editorTmp }) },
          operations: [owned(['sports'])],
        });
        expect(c.status, c.text).to.equal(201);
        const r = await sports.update(
          c.json.system.id,
          { aspects: { body: { title: 'edited' }, svcFiles: filesAspect({ 'e.txt': u.editorTmp, 'own.txt': u.sportsTmp }) } },
          c.headers.get('etag'),
        );
        expect(r.status, r.text).to.equal(200);
        // A URI the content does not hold yet is checked as ever.
        const again = await sports.update(
          c.json.system.id,
          { aspects: { svcFiles: filesAspect({ 'copy.txt': u.cultureFile }) } },
          r.headers.get('etag'),
          'updateMode=merge',
        );
        expectRefused(again, 'copy.txt', u.cultureFile);
      });
    });

    describe('workspaces', () => {
      it('refuses a foreign file in a draft create; nothing is reserved or stored', async () => {
        const ws = `${T}ws1`;
        for (const [i, bad] of foreign().entries()) {
          const r = await sports.createDraft(ws, {
            system: { contentType: TYPE },
            aspects: { svcFiles: filesAspect({ 'stolen.txt': bad }) },
            operations: [owned(['sports']), { _type: 'svcSetAlias', namespace: T, alias: `w${i}` }],
          });
          expectRefused(r, 'stolen.txt', bad);
          expect((await editor.req('GET', `/content/workspace/${ws}/alias/${T}/w${i}`)).status).to.equal(404);
        }
        expect((await editor.workspace(ws)).json.drafts).to.deep.equal({});
      });

      it('refuses a foreign file in a draft update; the draft is unchanged', async () => {
        const ws = `${T}ws2`;
        const first = await sports.req('PUT', `/content/workspace/${ws}/alias/${sportsId}`, { body: { aspects: { body: { title: 'draft 1' } } } });
        expect(first.status, first.text).to.equal(200);
        for (const bad of foreign()) {
          const r = await sports.req('PUT', `/content/workspace/${ws}/alias/${sportsId}`, {
            body: { aspects: { svcFiles: filesAspect({ 'stolen.txt': bad }) } },
          });
          expectRefused(r, 'stolen.txt', bad);
        }
        const draft = await editor.req('GET', `/content/workspace/${ws}/alias/${sportsId}`);
        expect(draft.json.aspects.body.title).to.equal('draft 1');
        expect(draft.json.aspects.svcFiles).to.equal(undefined);
      });

      it('promote writes main as the promoter: a draft mapping a file the promoter may not read is refused, main and draft stay', async () => {
        const ws = `${T}ws3`;
        const before = await current(sportsId);
        // The editor may read the culture file, so its draft write passes.
        const d = await editor.req('PUT', `/content/workspace/${ws}/alias/${sportsId}`, {
          body: { aspects: { svcFiles: filesAspect({ 'culture.txt': u.cultureFile }) } },
        });
        expect(d.status, d.text).to.equal(200);
        const r = await sports.req('POST', `/content/workspace/${ws}/alias/${sportsId}/promote`);
        expectRefused(r, 'culture.txt', u.cultureFile);
        expect(await current(sportsId)).to.deep.equal(before);
        expect((await editor.req('GET', `/content/workspace/${ws}/alias/${sportsId}`)).json.aspects.svcFiles.files['culture.txt'].fileUri).to.equal(
          u.cultureFile,
        );
        // The editor may: its promote goes through.
        expect((await editor.req('POST', `/content/workspace/${ws}/alias/${sportsId}/promote`)).status).to.equal(200);
      });

      it('promote of a draft that arose from a create is checked the same way', async () => {
        const ws = `${T}ws4`;
        const d = await editor.createDraft(ws, {
          system: { contentType: TYPE },
          aspects: { svcFiles: filesAspect({ 'e.txt': u.editorTmp }) },
          operations: [owned(['sports']), { _type: 'svcSetAlias', namespace: T, alias: 'fromdraft' }],
        });
        expect(d.status, d.text).to.equal(201);
        const r = await sports.req('POST', `/content/workspace/${ws}/alias/${T}/fromdraft/promote`);
        expectRefused(r, 'e.txt', u.editorTmp);
        expect((await editor.req('GET', `/content/alias/${T}/fromdraft`)).status).to.equal(404);
        expect((await editor.req('POST', `/content/workspace/${ws}/alias/${T}/fromdraft/promote`)).status).to.equal(200);
      });
    });
  });
}
