import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { newObjectId } from '../../src/adapters/file-store.js';
import type { S3FileStore } from '../../src/adapters/file-store-s3.js';
import type { Answer } from '../../src/client/index.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestS3 } from '../support/s3.js';
import { storedUnder as storedFiles } from '../support/stored-files.js';

/**
 * Who may touch a file (CONTRACT §20 "Files in content/<key>/", "Files in tmp/"; issue 14,
 * finding 7: the file service checked only that a token was valid, so a reader deleted an
 * editor's file and a sportseditor read and deleted culture files), on the disk store and on
 * S3 (S3Proxy started by the harness):
 *
 * - `content/<key>/` while content `contentid/<key>` exists: its permissions, Read for GET and
 *   info, Update for upload and DELETE; the permission decides before the file is looked up.
 * - `tmp/`, and `content/<key>/` while no such content exists (a generated or future host, or
 *   a deleted content): only the uploader and sysadmin; to anyone else such a file answers
 *   exactly as a missing file does. Files stored before the uploader was recorded: sysadmin only.
 * - HTML, SVG and XML files are answered as attachments (CONTRACT §20 "Served files").
 * - A refusal names the permission and the user, never the content's type.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

/** A content type name that must never appear in a refusal. */
const TYPE = 'fileAccessMemo';

for (const kind of ['disk', 's3'] as const) {
  describe(`file service permissions on the ${kind} store (CONTRACT §20, issue 14 finding 7)`, function () {
    this.timeout(90_000);
    let p: P;
    let sysadmin: Client;
    let editor: Client;
    let reader: Client;
    let sports: Client;
    let files: string;
    /** Keys of a culture-only and a sports-only content. */
    let culture = '';
    let sportsKey = '';

    before(async () => {
      const overrides: Record<string, string> = {};
      if (kind === 's3') Object.assign(overrides, (await ensureTestS3()).env, { S3_BUCKET: `access-${Date.now().toString(36)}` });
      p = await startTestPlatform(overrides);
      [sysadmin, editor, reader, sports] = await Promise.all(['sysadmin', 'editor', 'reader', 'sportseditor'].map((u) => new Client(p.base).login(u)));
      files = `${p.url}/file-service/file`;
      culture = await contentOwnedBy(['culture']);
      sportsKey = await contentOwnedBy(['sports']);
    });
    after(async () => p?.stop());

    async function contentOwnedBy(owners: string[]): Promise<string> {
      const c = await editor.create({
        system: { contentType: TYPE },
        aspects: { body: { title: owners.join(',') } },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners } } }],
      });
      expect(c.status, c.text).to.equal(201);
      return c.json.system.id.split('/')[1];
    }

    async function upload(c: Client, where: string, body = 'data', contentType = 'text/plain') {
      return c.req('POST', `${files}/${where}`, { raw: Buffer.from(body), headers: { 'Content-Type': contentType } });
    }

    /** Uploads and answers the file's address below `file/` (`<space>/<host>/<objectId>/<path>`). */
    async function stored(c: Client, where: string, body = 'data', contentType = 'text/plain'): Promise<string> {
      const r = await upload(c, where, body, contentType);
      expect(r.status, r.text).to.equal(201);
      return r.headers.get('location')!.slice(files.length + 1);
    }

    /** The same address under another (never issued) object id: a missing file. */
    const missing = (addr: string) => {
      const [space, host, , ...path] = addr.split('/');
      return [space, host, newObjectId(), ...path].join('/');
    };

    const get = (c: Client, addr: string) => c.req('GET', `${files}/${addr}`);
    const head = (c: Client, addr: string) => c.req('HEAD', `${files}/${addr}`);
    const info = (c: Client, addr: string) => c.req('GET', `${files}/info/${addr}`);
    const del = (c: Client, addr: string) => c.req('DELETE', `${files}/${addr}`);

    /** What stays of status and body once the object ids are taken out (they differ by design). */
    const shape = (r: { status: number; text: string }) => ({ status: r.status, body: r.text.replace(/[0-9A-HJKMNP-TV-Z]{26}/g, '<id>') });

    const storedUnder = (space: string, host: string) => storedFiles(p.files!, p.settings.FILES_DIR, space, host);

    function expectRefusal(r: Answer, permission: string, user: string) {
      expect(r.status, r.text).to.equal(403);
      expect(r.json.statusCode).to.equal('40300');
      expect(r.json.message).to.contain(permission).and.to.contain(user);
      expect(r.text).to.not.contain(TYPE);
    }

    describe('tmp files: only the uploader and sysadmin', () => {
      it("a reader cannot delete, read or stat an editor's tmp file: the answers are those of a missing file", async () => {
        const addr = await stored(editor, 'tmp/editor/secret.txt', 'editor only');
        const gone = missing(addr);
        for (const c of [reader, sports]) {
          expect(shape(await del(c, addr))).to.deep.equal(shape(await del(c, gone)));
          expect(shape(await get(c, addr))).to.deep.equal(shape(await get(c, gone)));
          expect(shape(await head(c, addr))).to.deep.equal(shape(await head(c, gone)));
          expect(shape(await info(c, addr))).to.deep.equal(shape(await info(c, gone)));
          expect((await get(c, addr)).status).to.equal(404);
        }
        const still = await get(editor, addr);
        expect(still.status).to.equal(200);
        expect(still.text).to.equal('editor only');
      });

      it("the host does not decide: a file the editor put under tmp/sportseditor/ stays the editor's", async () => {
        const addr = await stored(editor, 'tmp/sportseditor/planted.txt', 'planted');
        expect((await get(sports, addr)).status).to.equal(404);
        expect((await get(editor, addr)).text).to.equal('planted');
      });

      it('the uploader reads, stats and deletes its own tmp file', async () => {
        const addr = await stored(reader, 'tmp/reader/mine.txt', 'mine');
        expect((await get(reader, addr)).text).to.equal('mine');
        expect((await info(reader, addr)).json).to.include({ length: 4, originalPath: 'mine.txt' });
        expect((await del(reader, addr)).status).to.equal(200);
        expect((await get(reader, addr)).status).to.equal(404);
      });

      it("sysadmin reads, stats and deletes anyone's tmp file", async () => {
        const addr = await stored(sports, 'tmp/sportseditor/s.txt', 'sports tmp');
        expect((await get(sysadmin, addr)).text).to.equal('sports tmp');
        expect((await info(sysadmin, addr)).status).to.equal(200);
        expect((await del(sysadmin, addr)).status).to.equal(200);
        expect((await get(sports, addr)).status).to.equal(404);
      });

      it('a file stored before uploaders were recorded: sysadmin only', async () => {
        const id = newObjectId();
        const body = Buffer.from('from before');
        if (p.files!.kind === 'disk') {
          const dir = join(p.settings.FILES_DIR, 'tmp', 'editor');
          mkdirSync(dir, { recursive: true });
          writeFileSync(join(dir, `${id}.data`), body);
          writeFileSync(
            join(dir, `${id}.json`),
            JSON.stringify({ path: `${id}/old.txt`, length: body.length, creationTime: Date.now(), mimeType: 'text/plain', originalPath: 'old.txt' }),
          );
        } else {
          const s3 = p.files as S3FileStore;
          await s3.client.putObject(s3.bucket, `tmp/editor/${id}/old.txt`, body, body.length, { 'Content-Type': 'text/plain' });
        }
        const addr = `tmp/editor/${id}/old.txt`;
        expect(shape(await get(editor, addr))).to.deep.equal(shape(await get(editor, missing(addr))));
        expect((await del(editor, addr)).status).to.equal(404);
        expect((await get(sysadmin, addr)).text).to.equal('from before');
      });
    });

    describe('content/<key> files of an existing content: its permissions', () => {
      it('a sportseditor cannot read, stat, delete or upload culture files; the refusal comes before the file is looked up', async () => {
        const addr = await stored(editor, `content/${culture}/notes.txt`, 'culture notes');
        const before = await storedUnder('content', culture);
        for (const a of [addr, missing(addr)]) {
          expectRefusal(await get(sports, a), 'Read', 'sportseditor');
          expectRefusal(await info(sports, a), 'Read', 'sportseditor');
          expectRefusal(await del(sports, a), 'Update', 'sportseditor');
          expect((await head(sports, a)).status).to.equal(403);
        }
        expectRefusal(await upload(sports, `content/${culture}/mine.txt`, 'mine'), 'Update', 'sportseditor');
        expect(await storedUnder('content', culture)).to.deep.equal(before);
        expect((await get(editor, addr)).text).to.equal('culture notes');
      });

      it('a reader reads culture files (Read everywhere) but cannot delete or upload them (no Update)', async () => {
        const addr = await stored(editor, `content/${culture}/read-only.txt`, 'read me');
        expect((await get(reader, addr)).text).to.equal('read me');
        expect((await info(reader, addr)).status).to.equal(200);
        expectRefusal(await del(reader, addr), 'Update', 'reader');
        expectRefusal(await upload(reader, `content/${culture}/x.txt`), 'Update', 'reader');
        expect((await get(editor, addr)).status).to.equal(200);
      });

      it('a sportseditor reads, stats, uploads and deletes the files of sports content, also those another user uploaded', async () => {
        const byEditor = await stored(editor, `content/${sportsKey}/editor.txt`, 'from the editor');
        const own = await stored(sports, `content/${sportsKey}/own.txt`, 'own');
        expect((await get(sports, byEditor)).text).to.equal('from the editor');
        expect((await info(sports, own)).status).to.equal(200);
        expect((await del(sports, byEditor)).status).to.equal(200);
        expect((await get(editor, byEditor)).status).to.equal(404);
        expect((await get(editor, own)).text).to.equal('own');
      });
    });

    describe('content/<key> without an existing content: as tmp', () => {
      it('a generated or future host: only the uploader and sysadmin', async () => {
        const addr = await stored(sports, `content/${newObjectId()}/early.txt`, 'early');
        expect((await get(sports, addr)).text).to.equal('early');
        expect(shape(await get(editor, addr))).to.deep.equal(shape(await get(editor, missing(addr))));
        expect((await del(reader, addr)).status).to.equal(404);
        expect((await get(sysadmin, addr)).text).to.equal('early');
      });

      it("a future host's files stay their uploader's when another user's draft takes the host, unless the content maps them", async () => {
        // A culture draft of new content X; its editor uploads to X's future host and maps one file.
        const ws = `takeover${Date.now().toString(36)}`;
        const d = await editor.req('POST', `/content/workspace/${ws}`, {
          body: {
            system: { contentType: TYPE },
            aspects: { body: { title: 'culture draft' } },
            operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }],
          },
        });
        expect(d.status, d.text).to.equal(201);
        const id = d.json.system.id;
        const key = id.split('/')[1];
        const secret = await stored(editor, `content/${key}/secret.txt`, 'culture secret');
        const mapped = await stored(editor, `content/${key}/mapped.txt`, 'culture mapped');
        // A sportseditor may replace a draft of new content (spec Authentication 6): it makes X
        // its own, maps the one file and drops the culture owners, then promotes.
        const mappedUri = `content://${mapped.split('/').slice(1).join('/')}`;
        const r = await sports.req('PUT', `/content/workspace/${ws}/alias/${id}?updateMode=replace`, {
          body: {
            aspects: { body: { title: 'taken' } },
            operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
          },
        });
        expect(r.status, r.text).to.equal(200);
        expect((await sports.req('POST', `/content/workspace/${ws}/alias/${id}/promote`)).status).to.equal(200);
        // X exists, owned by sports: the file uploaded before it existed, which X does not map,
        // answers the sportseditor exactly as a missing file does; its uploader and sysadmin still read it.
        for (const [c, op] of [
          [sports, get],
          [sports, info],
          [sports, del],
          [reader, get],
        ] as const)
          expect(shape(await op(c, secret))).to.deep.equal(shape(await op(c, missing(secret))));
        expect((await get(editor, secret)).text).to.equal('culture secret');
        expect((await get(sysadmin, secret)).text).to.equal('culture secret');
        // It cannot be mapped by the sportseditor either (a file it may not read).
        const map = await sports.req('PUT', `/content/alias/${id}?unsafeUpdate=true`, {
          body: { aspects: { svcFiles: { files: { s: { fileUri: `content://${secret.split('/').slice(1).join('/')}`, filePath: 's.txt' } } } } },
        });
        expect(map.status, map.text).to.equal(400);
        // A file of the host that the content maps (its uploader mapped it) is the content's.
        const e = await editor.req('PUT', `/content/alias/${id}?unsafeUpdate=true`, {
          body: { aspects: { body: { title: 'taken' }, svcFiles: { files: { m: { fileUri: mappedUri, filePath: 'm.txt' } } } } },
        });
        expect(e.status, e.text).to.equal(200);
        expect((await get(sports, mapped)).text).to.equal('culture mapped');
        // A file uploaded into the existing content follows its permissions as before.
        const after = await stored(sports, `content/${key}/after.txt`, 'after');
        expect((await get(reader, after)).text).to.equal('after');
      });

      it('a deleted content: its files fall back to their uploader', async () => {
        const c = await editor.create({ system: { contentType: TYPE }, aspects: { body: { title: 'short-lived' } } });
        const key = c.json.system.id.split('/')[1];
        const addr = await stored(editor, `content/${key}/left.txt`, 'left behind');
        expect((await get(reader, addr)).status).to.equal(200);
        expect((await editor.remove(c.json.system.id, c.headers.get('etag')!)).status).to.equal(204);
        expect((await get(reader, addr)).status).to.equal(404);
        expect((await get(editor, addr)).text).to.equal('left behind');
      });
    });

    describe('served files (CONTRACT §20 "Served files")', () => {
      const markup: [string, string, string][] = [
        ['page.html', 'text/html', '<!doctype html><script>alert(1)</script>'],
        ['logo.svg', 'image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'],
        ['feed.xml', 'application/xml', '<?xml version="1.0"?><x/>'],
        ['page.xhtml', 'application/xhtml+xml', '<html xmlns="http://www.w3.org/1999/xhtml"/>'],
      ];

      it('HTML, SVG and XML files are attachments, from the file service and from delivery; other files are not', async () => {
        const entries: Record<string, { fileUri: string; filePath: string }> = {};
        for (const [name, type, body] of markup) {
          const r = await upload(editor, `tmp/editor/${name}`, body, type);
          expect(r.status, r.text).to.equal(201);
          entries[name] = { fileUri: r.json.URI, filePath: name };
          const got = await get(editor, r.headers.get('location')!.slice(files.length + 1));
          expect(got.status).to.equal(200);
          expect(got.headers.get('content-disposition'), name).to.equal('attachment');
          expect(got.headers.get('content-security-policy')).to.equal('sandbox');
          expect(got.headers.get('x-content-type-options')).to.equal('nosniff');
        }
        const plain = await upload(editor, 'tmp/editor/plain.txt', 'just text', 'text/plain');
        entries['plain.txt'] = { fileUri: plain.json.URI, filePath: 'plain.txt' };
        expect((await get(editor, plain.headers.get('location')!.slice(files.length + 1))).headers.get('content-disposition')).to.equal(null);

        const c = await editor.create({ system: { contentType: TYPE }, aspects: { svcFiles: { files: entries } } });
        expect(c.status, c.text).to.equal(201);
        for (const [name] of markup) {
          const d = await editor.deliver({ version: c.json.system.version }, name);
          expect(d.status, name).to.equal(200);
          expect(d.headers.get('content-disposition'), name).to.equal('attachment');
        }
        expect((await editor.deliver({ version: c.json.system.version }, 'plain.txt')).headers.get('content-disposition')).to.equal(null);
      });

      it('a list-valued Content-Type is never kept: a page declared `text/plain;,text/html` is not rendered as HTML', async () => {
        const entries: Record<string, { fileUri: string; filePath: string }> = {};
        for (const [name, type] of [
          ['listed', 'text/plain;,text/html'],
          ['listed-svg', 'image/png;,image/svg+xml'],
          ['params', 'text/plain; format=flowed; charset=utf-8'],
        ]) {
          const r = await upload(editor, `tmp/editor/${name}`, '<!doctype html><title>x</title><script>alert(1)</script>', type);
          expect(r.status, r.text).to.equal(201);
          entries[name] = { fileUri: r.json.URI, filePath: name };
          const got = await get(editor, r.headers.get('location')!.slice(files.length + 1));
          const served = got.headers.get('content-type') ?? '';
          expect(served, name).not.to.include(',');
          expect(served.split(';')[0], name).to.be.oneOf(['application/octet-stream', 'text/plain']);
        }
        const c = await editor.create({ system: { contentType: TYPE }, aspects: { svcFiles: { files: entries } } });
        expect(c.status, c.text).to.equal(201);
        for (const name of Object.keys(entries)) {
          const d = await editor.deliver({ version: c.json.system.version }, name);
          expect(d.status, name).to.equal(200);
          expect(d.headers.get('content-type') ?? '', name).not.to.include(',');
        }
        const params = await editor.deliver({ version: c.json.system.version }, 'params');
        expect(params.headers.get('content-type'), 'type and charset kept, other parameters not').to.equal('text/plain; charset=utf-8');
      });
    });
  });
}
