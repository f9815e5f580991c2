import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestS3 } from '../support/s3.js';

/**
 * The file delivery service (spec "File delivery service", CONTRACT §8 and §12) over HTTP, on
 * the local disk and on S3 (S3Proxy started by the harness): path mapping from svcFiles, the
 * main image refused unless svcFileDelivery.variant maps it, content type from data and
 * extension, the permission rules (public views without a token, 401/403), ETag and ranges.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000b49444154789c6360000200000500017a5eab3f0000000049454e44ae426082',
  'hex',
);

for (const kind of ['disk', 's3'] as const) {
  describe(`file delivery on the ${kind} store (spec "File delivery service", CONTRACT §8)`, function () {
    this.timeout(90_000);
    let p: P;
    let editor: Client;
    let sports: Client;
    let anonymous: Client;
    let delivery: string;

    before(async () => {
      const overrides: Record<string, string> = {};
      if (kind === 's3') Object.assign(overrides, (await ensureTestS3()).env, { S3_BUCKET: `delivery-${Date.now().toString(36)}` });
      p = await startTestPlatform(overrides);
      editor = await new Client(p.base).login('editor');
      sports = await new Client(p.base).login('sportseditor');
      anonymous = new Client(p.base);
      delivery = `${p.url}/file-delivery-service`;
    });
    after(async () => p?.stop());

    async function upload(path: string, body: Buffer | string, contentType = 'application/octet-stream'): Promise<string> {
      const r = await editor.req('POST', `${p.url}/file-service/file/content/${path}`, { raw: Buffer.from(body), headers: { 'Content-Type': contentType } });
      expect(r.status, r.text).to.equal(201);
      return r.json.URI as string;
    }

    const fileEntry = (uri: string, path: string) => ({ fileUri: uri, filePath: path });

    /** A content of `type` with three files: a stylesheet, a picture and the main image. */
    async function contentWithFiles(type = 'article', operations: unknown[] = [], tag = 'v1') {
      const css = await upload('owner/site.css', `body{color:red} /* ${tag} */`, 'text/plain');
      const pic = await upload('owner/pic.jpg', Buffer.concat([PNG, Buffer.from(tag)]));
      const main = await upload('owner/main.png', PNG);
      const envelope = {
        system: { contentType: type },
        aspects: {
          body: { title: tag },
          svcFiles: {
            files: {
              'styles/site.css': fileEntry(css, 'styles/site.css'),
              'images/pic.jpg': fileEntry(pic, 'images/pic.jpg'),
              'main.png': fileEntry(main, 'main.png'),
            },
          },
          svcImage: { filePath: 'main.png' },
        },
        operations,
      };
      const c = await editor.create(envelope);
      expect(c.status, c.text).to.equal(201);
      return { id: c.json.system.id as string, version: c.json.system.version as string, etag: c.headers.get('etag')!, envelope };
    }

    async function get(c: Client, url: string, headers: Record<string, string> = {}) {
      const h: Record<string, string> = { ...headers };
      if (c.token) h['X-Auth-Token'] = c.token;
      const res = await fetch(url, { headers: h });
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    }

    describe('path mapping and content type', () => {
      let c: Awaited<ReturnType<typeof contentWithFiles>>;
      before(async () => {
        c = await contentWithFiles();
      });

      it('delivers a file by version under its path in the content', async () => {
        const r = await get(editor, `${delivery}/version/${c.version}/styles/site.css`);
        expect(r.status).to.equal(200);
        expect(r.body.toString()).to.equal('body{color:red} /* v1 */');
        // declared text/plain, nothing in the data: the extension decides
        expect(r.headers.get('content-type')).to.equal('text/css; charset=utf-8');
        expect(r.headers.get('cache-control')).to.equal('private, no-transform, max-age=31536000');
        expect(r.headers.get('etag')).to.match(/^"[0-9A-Z]{26}"$/);
        // Uploaded files are served from the platform's origin: never run as its pages.
        expect(r.headers.get('content-security-policy')).to.equal('sandbox');
        expect(r.headers.get('x-content-type-options')).to.equal('nosniff');
      });

      it('the data decides over the extension when it reveals its type (a PNG named .jpg is image/png)', async () => {
        const r = await get(editor, `${delivery}/version/${c.version}/images/pic.jpg`);
        expect(r.status).to.equal(200);
        expect(r.headers.get('content-type')).to.equal('image/png');
      });

      it('delivers by alias, revalidated through the ETag', async () => {
        const [ns, alias] = c.id.split('/');
        const r = await get(editor, `${delivery}/alias/${ns}/${alias}/images/pic.jpg`);
        expect(r.status).to.equal(200);
        expect(r.body.subarray(0, PNG.length).equals(PNG)).to.equal(true);
        expect(r.headers.get('cache-control')).to.equal('private, no-transform, no-cache');
        const again = await get(editor, `${delivery}/alias/${ns}/${alias}/images/pic.jpg`, { 'If-None-Match': r.headers.get('etag')! });
        expect(again.status).to.equal(304);
      });

      it('refuses the main image (svcImage) with 404 by default', async () => {
        const [ns, alias] = c.id.split('/');
        expect((await get(editor, `${delivery}/version/${c.version}/main.png`)).status).to.equal(404);
        expect((await get(editor, `${delivery}/alias/${ns}/${alias}/main.png`)).status).to.equal(404);
      });

      it('delivers the main image when the type has svcFileDelivery.variant mapping it (config/variants.json: image)', async () => {
        const img = await contentWithFiles('image');
        const r = await get(editor, `${delivery}/version/${img.version}/main.png`);
        expect(r.status).to.equal(200);
        expect(r.body.equals(PNG)).to.equal(true);
        expect(r.headers.get('content-type')).to.equal('image/png');
      });

      it('answers 404 for paths, versions and aliases that name nothing', async () => {
        const [ns, alias] = c.id.split('/');
        for (const url of [
          `${delivery}/version/${c.version}/styles/other.css`,
          `${delivery}/version/${c.version}/styles`,
          `${delivery}/version/not-a-version/styles/site.css`,
          `${delivery}/version/${c.version.replace(/:[^:]+$/, ':ZZZZ')}/styles/site.css`,
          `${delivery}/alias/${ns}/nope-${alias}/styles/site.css`,
          `${delivery}/version/${c.version}`,
          `${delivery}/nothing/${c.version}/x`,
        ]) {
          const r = await get(editor, url);
          expect(r.status, url).to.equal(404);
          expect(JSON.parse(r.body.toString()).statusCode, url).to.match(/^404\d\d$/);
        }
      });

      it('ranges (206) and 405 for other methods', async () => {
        const r = await get(editor, `${delivery}/version/${c.version}/styles/site.css`, { Range: 'bytes=0-3' });
        expect(r.status).to.equal(206);
        expect(r.body.toString()).to.equal('body');
        expect(r.headers.get('content-range')).to.match(/^bytes 0-3\/\d+$/);
        const post = await editor.req('POST', `${delivery}/version/${c.version}/styles/site.css`, { raw: Buffer.from('x') });
        expect(post.status).to.equal(405);
      });

      it('an old version keeps delivering its own files after an update', async () => {
        const fresh = await contentWithFiles('article', [], 'old');
        const css2 = await upload('owner/site.css', 'new css', 'text/plain');
        const body = structuredClone(fresh.envelope) as typeof fresh.envelope;
        body.aspects.svcFiles.files['styles/site.css'] = fileEntry(css2, 'styles/site.css');
        const u = await editor.req('PUT', `/content/alias/${fresh.id}`, { body, headers: { 'If-Match': fresh.etag } });
        expect(u.status, u.text).to.equal(200);
        expect((await get(editor, `${delivery}/version/${fresh.version}/styles/site.css`)).body.toString()).to.equal('body{color:red} /* old */');
        expect((await get(editor, `${delivery}/version/${u.json.system.version}/styles/site.css`)).body.toString()).to.equal('new css');
        const [ns, alias] = fresh.id.split('/');
        expect((await get(editor, `${delivery}/alias/${ns}/${alias}/styles/site.css`)).body.toString()).to.equal('new css');
      });

      it('a deleted file answers 404 through delivery too', async () => {
        const uri = await upload('owner/gone.txt', 'soon gone', 'text/plain');
        const envelope = { system: { contentType: 'article' }, aspects: { svcFiles: { files: { 'gone.txt': fileEntry(uri, 'gone.txt') } } } };
        const created = await editor.create(envelope);
        const url = `${delivery}/version/${created.json.system.version}/gone.txt`;
        expect((await get(editor, url)).status).to.equal(200);
        const [, host, ...rest] = uri.replace('content://', 'content/').split('/');
        const del = await editor.req('DELETE', `${p.url}/file-service/file/content/${host}/${rest.join('/')}`);
        expect(del.status).to.equal(200);
        expect((await get(editor, url)).status).to.equal(404);
      });
    });

    describe('permissions (CONTRACT §8, §12)', () => {
      it('without a token: 401 for content not on a public view; with a token lacking Read: 403', async () => {
        const c = await contentWithFiles();
        const url = `${delivery}/version/${c.version}/styles/site.css`;
        const none = await get(anonymous, url);
        expect(none.status).to.equal(401);
        expect(JSON.parse(none.body.toString()).statusCode).to.equal('40100');
        const denied = await get(sports, url);
        expect(denied.status).to.equal(403);
        expect(JSON.parse(denied.body.toString()).statusCode).to.equal('40300');
        const [ns, alias] = c.id.split('/');
        expect((await get(anonymous, `${delivery}/alias/${ns}/${alias}/styles/site.css`)).status).to.equal(401);
        expect((await get(sports, `${delivery}/alias/${ns}/${alias}/styles/site.css`)).status).to.equal(403);
        const bad = new Client(p.base, 'not-a-token');
        expect((await get(bad, url)).status).to.equal(401);
      });

      it('a context role grants Read on content of that context', async () => {
        const c = await contentWithFiles('article', [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }]);
        expect((await get(sports, `${delivery}/version/${c.version}/styles/site.css`)).status).to.equal(200);
      });

      it('content on a public view needs no token; by alias the public version is delivered, by version only public versions', async () => {
        const c = await contentWithFiles('article', [{ _type: 'svcAssignToViews', views: ['svcPublic'] }], 'public');
        const [ns, alias] = c.id.split('/');
        expect((await get(anonymous, `${delivery}/version/${c.version}/styles/site.css`)).body.toString()).to.equal('body{color:red} /* public */');
        // a newer, unpublished version: anonymous still gets the public one by alias, editors the latest
        const css2 = await upload('owner/site.css', 'draft css', 'text/plain');
        const body = structuredClone(c.envelope) as typeof c.envelope;
        body.operations = [];
        body.aspects.svcFiles.files['styles/site.css'] = fileEntry(css2, 'styles/site.css');
        const u = await editor.req('PUT', `/content/alias/${c.id}`, { body, headers: { 'If-Match': c.etag } });
        expect(u.status, u.text).to.equal(200);
        expect((await get(anonymous, `${delivery}/alias/${ns}/${alias}/styles/site.css`)).body.toString()).to.equal('body{color:red} /* public */');
        expect((await get(editor, `${delivery}/alias/${ns}/${alias}/styles/site.css`)).body.toString()).to.equal('draft css');
        expect((await get(anonymous, `${delivery}/version/${u.json.system.version}/styles/site.css`)).status).to.equal(401);
        // the main image stays refused on public content too
        expect((await get(anonymous, `${delivery}/version/${c.version}/main.png`)).status).to.equal(404);
      });

      it('hidden content is not public', async () => {
        const c = await contentWithFiles('article', [
          { _type: 'svcAssignToViews', views: ['svcPublic'] },
          { _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: true } } },
        ]);
        expect((await get(anonymous, `${delivery}/version/${c.version}/styles/site.css`)).status).to.equal(401);
        expect((await get(editor, `${delivery}/version/${c.version}/styles/site.css`)).status).to.equal(200);
      });

      it('deleted content delivers nothing', async () => {
        const c = await contentWithFiles('article', [{ _type: 'svcAssignToViews', views: ['svcPublic'] }]);
        const d = await editor.req('DELETE', `/content/alias/${c.id}`, { headers: { 'If-Match': c.etag } });
        expect(d.status, d.text).to.be.oneOf([200, 204]);
        expect((await get(editor, `${delivery}/version/${c.version}/styles/site.css`)).status).to.equal(404);
        expect((await get(anonymous, `${delivery}/version/${c.version}/styles/site.css`)).status).to.equal(404);
      });
    });

    it('large files stream through delivery with the right bytes', async () => {
      const data = randomBytes(12 * 1024 * 1024 + 17);
      const uri = await upload('owner/big.bin', data);
      const created = await editor.create({ system: { contentType: 'article' }, aspects: { svcFiles: { files: { 'big.bin': fileEntry(uri, 'big.bin') } } } });
      const r = await get(editor, `${delivery}/version/${created.json.system.version}/big.bin`);
      expect(r.status).to.equal(200);
      expect(r.body.equals(data)).to.equal(true);
      const tail = await get(editor, `${delivery}/version/${created.json.system.version}/big.bin`, { Range: `bytes=${data.length - 1000}-` });
      expect(tail.status).to.equal(206);
      expect(tail.body.equals(data.subarray(data.length - 1000))).to.equal(true);
    });
  });
}
