import { createHash, randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { rawRequest } from '../support/raw-http.js';

/**
 * The file service over HTTP (spec "File service", "File info", "File parameters"; CONTRACT
 * §2 and §8), on the local disk store. The S3 store passes the same adapter contract
 * (test/files/file-store.test.ts) and the same HTTP paths in file-delivery.test.ts.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const LIMIT = 200_000;
const CACHE_CONTROL = 'private, no-transform, max-age=31536000';
/** A whole 1x1 PNG. */
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000b49444154789c6360000200000500017a5eab3f0000000049454e44ae426082',
  'hex',
);

/** Every file under the store's directory (finished or not). */
function storedFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(join(d, e.name));
    }
  };
  walk(dir);
  return out;
}

describe('file service (spec "File service", CONTRACT §8)', () => {
  let p: P;
  let editor: Client;
  let files: string;

  before(async () => {
    p = await startTestPlatform({ MAX_UPLOAD_BYTES: String(LIMIT) });
    editor = await new Client(p.base).login('editor');
    files = `${p.url}/file-service/file`;
  });
  after(async () => p.stop());

  const port = () => Number(new URL(p.url).port);
  const upload = (path: string, body: Buffer | string, headers: Record<string, string> = {}, c: Client = editor) =>
    c.req('POST', `${files}/${path}`, {
      raw: typeof body === 'string' ? Buffer.from(body) : body,
      headers: { 'Content-Type': 'application/octet-stream', Accept: 'application/json', ...headers },
    });

  async function download(location: string, headers: Record<string, string> = {}) {
    const res = await fetch(location, { headers: { 'X-Auth-Token': editor.token!, ...headers } });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  }

  describe('upload', () => {
    it('answers 201 with Location and the file info; the stored path holds a new object id', async () => {
      const before = Date.now();
      const r = await upload('tmp/editor/photos/a.txt', 'hello files', { 'Content-Type': 'text/plain' });
      expect(r.status).to.equal(201);
      expect(r.headers.get('svc-response-origin')).to.equal('file-service');
      expect(r.headers.get('svc-api-version')).to.match(/^\d+\.\d+\.\d+$/);
      const location = r.headers.get('location')!;
      expect(location).to.match(new RegExp(`^${files}/tmp/editor/[0-9A-HJKMNP-TV-Z]{26}/photos/a\\.txt$`));
      const objectId = location.split('/').at(-3);
      expect(r.json).to.deep.include({
        URI: `tmp://editor/${objectId}/photos/a.txt`,
        length: 11,
        accessTime: -1,
        mimeType: 'text/plain',
        originalPath: 'photos/a.txt',
      });
      expect(r.json.creationTime).to.be.within(before, Date.now());
      expect(r.json.modifiedTime).to.equal(r.json.creationTime);
      expect(r.headers.get('x-original-path')).to.equal('photos/a.txt');
    });

    it('generates the host (the caller) and the path when they are omitted', async () => {
      const both = await upload('tmp', 'x');
      expect(both.status).to.equal(201);
      expect(both.headers.get('location')).to.match(new RegExp(`^${files}/tmp/editor/[0-9A-Z]{26}/file$`));
      const path = await upload('content/someowner', 'y');
      expect(path.status).to.equal(201);
      expect(path.json.URI).to.match(/^content:\/\/someowner\/[0-9A-Z]{26}\/file$/);
      expect((await download(path.headers.get('location')!)).body.toString()).to.equal('y');
    });

    it('never overwrites: the same path twice gives two files, each with its own bytes', async () => {
      const a = await upload('content/article-1/img.bin', 'first');
      const b = await upload('content/article-1/img.bin', 'second');
      expect(a.headers.get('location')).to.not.equal(b.headers.get('location'));
      expect((await download(a.headers.get('location')!)).body.toString()).to.equal('first');
      expect((await download(b.headers.get('location')!)).body.toString()).to.equal('second');
    });

    it('takes chunked bodies', async () => {
      const data = randomBytes(150_000);
      const body = new ReadableStream({
        start(ctl) {
          for (let i = 0; i < data.length; i += 7_000) ctl.enqueue(data.subarray(i, i + 7_000));
          ctl.close();
        },
      });
      const res = await fetch(`${files}/tmp/editor/chunked.bin`, {
        method: 'POST',
        body,
        duplex: 'half',
        headers: { 'X-Auth-Token': editor.token! },
      } as RequestInit);
      expect(res.status).to.equal(201);
      const info = (await res.json()) as { length: number };
      expect(info.length).to.equal(data.length);
      const back = await download(res.headers.get('location')!);
      expect(createHash('sha256').update(back.body).digest('hex')).to.equal(createHash('sha256').update(data).digest('hex'));
    });

    it('takes an empty file', async () => {
      const r = await upload('tmp/editor/empty', Buffer.alloc(0));
      expect(r.status).to.equal(201);
      expect(r.json.length).to.equal(0);
      const d = await download(r.headers.get('location')!);
      expect(d.status).to.equal(200);
      expect(d.body.length).to.equal(0);
    });

    it('needs a token: 401 without or with a bad one, and nothing is stored', async () => {
      const before = storedFiles(p.settings.FILES_DIR).length;
      const none = await upload('tmp/editor/x', 'secret', {}, new Client(p.url));
      expect(none.status).to.equal(401);
      expect(none.json.statusCode).to.equal('40100');
      const bad = await upload('tmp/editor/x', 'secret', { 'X-Auth-Token': 'not-a-token' }, new Client(p.url));
      expect(bad.status).to.equal(401);
      expect(storedFiles(p.settings.FILES_DIR).length).to.equal(before);
    });

    it('refuses an unknown space (400) and answers 405 with Allow to other methods', async () => {
      const r = await upload('archive/editor/x', 'x');
      expect(r.status).to.equal(400);
      expect(r.json.statusCode).to.equal('40000');
      const put = await editor.req('PUT', `${files}/tmp/editor/x`, { raw: Buffer.from('x') });
      expect(put.status).to.equal(405);
      expect(put.headers.get('allow')).to.equal('GET, POST, DELETE');
    });
  });

  describe('MAX_UPLOAD_BYTES (CONTRACT §8: that size or more is 413, stores nothing)', () => {
    it('one byte under the limit is stored', async () => {
      const r = await upload('tmp/editor/under', randomBytes(LIMIT - 1));
      expect(r.status).to.equal(201);
      expect(r.json.length).to.equal(LIMIT - 1);
    });

    it('exactly the limit, announced by Content-Length: 413 before any byte is stored', async () => {
      const before = storedFiles(p.settings.FILES_DIR);
      const r = await upload('tmp/editor/at-limit', randomBytes(LIMIT));
      expect(r.status).to.equal(413);
      expect(r.json).to.include({ statusCode: '41300' });
      expect(storedFiles(p.settings.FILES_DIR)).to.deep.equal(before);
    });

    it('a chunked upload that grows past the limit: 413 and nothing stored', async () => {
      const before = storedFiles(p.settings.FILES_DIR);
      const r = await rawRequest(port(), {
        method: 'POST',
        path: '/file-service/file/tmp/editor/growing',
        headers: { 'X-Auth-Token': editor.token! },
        body: randomBytes(LIMIT * 3),
        chunked: 16_384,
      });
      expect(r.status).to.equal(413);
      expect(r.json.statusCode).to.equal('41300');
      expect(storedFiles(p.settings.FILES_DIR)).to.deep.equal(before);
    });

    it('a Content-Length that lies low (more bytes follow) cannot get past the limit either', async () => {
      const before = storedFiles(p.settings.FILES_DIR);
      const r = await upload('tmp/editor/large', randomBytes(LIMIT + 10));
      expect(r.status).to.equal(413);
      expect(storedFiles(p.settings.FILES_DIR)).to.deep.equal(before);
    });
  });

  describe('read, info, delete', () => {
    let location: string;
    const data = Buffer.concat([PNG, randomBytes(5000)]);

    before(async () => {
      const r = await upload('content/story-9/images/pic.jpg', data, { 'Content-Type': 'application/octet-stream' });
      location = r.headers.get('location')!;
    });

    it('GET answers the bytes with the type sniffed from the data and the spec Cache-Control', async () => {
      const r = await download(location);
      expect(r.status).to.equal(200);
      expect(r.body.equals(data)).to.equal(true);
      expect(r.headers.get('content-type')).to.equal('image/png');
      expect(r.headers.get('content-length')).to.equal(String(data.length));
      expect(r.headers.get('cache-control')).to.equal(CACHE_CONTROL);
      expect(r.headers.get('svc-response-origin')).to.equal('file-service');
      expect(r.headers.get('etag')).to.match(/^"[0-9A-Z]{26}"$/);
      expect(r.headers.get('accept-ranges')).to.equal('bytes');
      expect(r.headers.get('x-content-type-options')).to.equal('nosniff');
      // Kept privately for a year, decided for this token: a browser shared by two users must ask again for the other.
      expect(r.headers.get('vary')).to.equal('X-Auth-Token');
    });

    it('an uploaded HTML page is served sandboxed: scripts in it never run with the platform origin', async () => {
      const html = '<!doctype html><html><body><script>fetch("/content-service/security/token")</script></body></html>';
      const up = await upload('content/story-9/embed/page.html', html, { 'Content-Type': 'text/html' });
      expect(up.status).to.equal(201);
      const r = await download(up.headers.get('location')!);
      expect(r.status).to.equal(200);
      expect(r.body.toString()).to.equal(html);
      expect(r.headers.get('content-type')).to.match(/^text\/html/);
      expect(r.headers.get('content-security-policy')).to.equal('sandbox');
      expect(r.headers.get('x-content-type-options')).to.equal('nosniff');
    });

    it('the file info read answers the info of the upload', async () => {
      const info = await editor.req('GET', location.replace('/file-service/file/', '/file-service/file/info/'), { headers: { Accept: 'application/json' } });
      expect(info.status).to.equal(200);
      expect(info.json).to.deep.include({ length: data.length, mimeType: 'image/png', accessTime: -1, originalPath: 'images/pic.jpg' });
      expect(info.json.URI).to.match(/^content:\/\/story-9\/[0-9A-Z]{26}\/images\/pic\.jpg$/);
    });

    it('ranges: 206 with Content-Range, suffix ranges, 416 past the end; several ranges answer the whole file', async () => {
      const r = await download(location, { Range: 'bytes=10-19' });
      expect(r.status).to.equal(206);
      expect(r.headers.get('vary')).to.equal('X-Auth-Token');
      expect(r.headers.get('content-range')).to.equal(`bytes 10-19/${data.length}`);
      expect(r.body.equals(data.subarray(10, 20))).to.equal(true);
      const suffix = await download(location, { Range: 'bytes=-100' });
      expect(suffix.status).to.equal(206);
      expect(suffix.body.equals(data.subarray(data.length - 100))).to.equal(true);
      const open = await download(location, { Range: `bytes=${data.length - 5}-` });
      expect(open.body.equals(data.subarray(data.length - 5))).to.equal(true);
      const past = await download(location, { Range: `bytes=${data.length}-` });
      expect(past.status).to.equal(416);
      expect(past.headers.get('content-range')).to.equal(`bytes */${data.length}`);
      const many = await download(location, { Range: 'bytes=0-1,5-6' });
      expect(many.status).to.equal(200);
      expect(many.body.length).to.equal(data.length);
    });

    it('If-None-Match with the ETag answers 304', async () => {
      const etag = (await download(location)).headers.get('etag')!;
      const r = await download(location, { 'If-None-Match': etag });
      expect(r.status).to.equal(304);
      expect(r.body.length).to.equal(0);
      expect(r.headers.get('vary')).to.equal('X-Auth-Token');
    });

    it('reads need a token (401)', async () => {
      const r = await fetch(location);
      expect(r.status).to.equal(401);
      expect(((await r.json()) as { statusCode: string }).statusCode).to.equal('40100');
    });

    it('unknown files answer 404: another object id, a path without one, a wrong path under a real id', async () => {
      expect((await download(location.replace(/\/[0-9A-Z]{26}\//, '/01ARZ3NDEKTSV4RRFFQ69G5FAV/'))).status).to.equal(404);
      expect((await download(`${files}/content/story-9/images/pic.jpg`)).status).to.equal(404);
      expect((await download(location.replace('pic.jpg', 'other.jpg'))).status).to.equal(404);
      expect((await download(`${files}/content/story-9`)).status).to.equal(404);
    });

    it('DELETE answers 200 with an empty body; reads and info of it answer 404 afterwards, a second delete too', async () => {
      const r = await upload('tmp/editor/doomed.txt', 'bye');
      const loc = r.headers.get('location')!;
      const d = await editor.req('DELETE', loc);
      expect(d.status).to.equal(200);
      expect(d.text).to.equal('');
      expect((await download(loc)).status).to.equal(404);
      expect((await editor.req('GET', loc.replace('/file/', '/file/info/'))).status).to.equal(404);
      expect((await editor.req('DELETE', loc)).status).to.equal(404);
      expect((await new Client(p.url).req('DELETE', location)).status).to.equal(401);
    });
  });

  describe('keys never escape their space (1,000 traversal and bad-name inputs)', () => {
    /** Bad segments as they appear in a request path (raw, not normalised by a client). */
    const BAD_SEGMENTS = [
      '..',
      '.',
      '%2e%2e',
      '%2E%2E',
      '.%2e',
      '%2e.',
      '%252e%252e',
      '%2e',
      '..%2f..',
      '%2f',
      '%2F',
      'a%2fb',
      '..%5c..',
      '%5c',
      'a%5cb',
      '%00',
      'a%00b',
      '%0a',
      '%0d%0a',
      'x%09y',
      '%7f',
      '%c0%ae%c0%ae',
      '%',
      '%zz',
      '%e2%82',
      '%ed%a0%80',
    ];
    const PLACES: ((seg: string) => string)[] = [
      (s) => `tmp/${s}/file.txt`,
      (s) => `tmp/editor/${s}`,
      (s) => `tmp/editor/${s}/x`,
      (s) => `tmp/editor/a/${s}/b`,
      (s) => `content/${s}`,
      (s) => `content/owner/deep/${s}/${s}/x`,
      (s) => `${s}/editor/x`,
      (s) => `tmp/editor/x/${s}/${s}`,
    ];
    const EXTRA = [
      'tmp//x',
      'tmp/editor//x',
      'tmp/editor/x/',
      '/tmp/editor/x',
      `tmp/editor/${'a'.repeat(300)}`,
      `tmp/${'h'.repeat(300)}/x`,
      `tmp/editor/${'seg/'.repeat(300)}x`,
      'tmp/C:/x',
      'tmp/editor/C:/x',
    ];

    function inputs(): string[] {
      const out = new Set<string>();
      for (const seg of BAD_SEGMENTS) for (const place of PLACES) out.add(place(seg));
      for (const e of EXTRA) out.add(e);
      // combinations of two bad segments
      for (let i = 0; out.size < 1000; i++) {
        const a = BAD_SEGMENTS[i % BAD_SEGMENTS.length];
        const b = BAD_SEGMENTS[Math.floor(i / BAD_SEGMENTS.length) % BAD_SEGMENTS.length];
        out.add(`tmp/editor/ok/${a}/${b}/f${i}`);
      }
      return [...out];
    }

    it('each answers 400 or 404 with the error body for upload, read, info and delete, and nothing is stored', async function () {
      this.timeout(120_000);
      // Control: the same token and raw client store, read, inform on and delete a good path,
      // so a refusal below is the path's (a dead token would answer 401, not 400 or 404).
      const control = async (method: string, path: string, status: number) => {
        const headers: Record<string, string> = { 'X-Auth-Token': editor.token!, ...(method === 'POST' ? { 'Content-Type': 'text/plain' } : {}) };
        const r = await rawRequest(port(), { method, path, headers, body: method === 'POST' ? 'payload' : undefined });
        expect(r.status, `control ${method} ${path} → ${r.status} ${r.body.slice(0, 200)}`).to.equal(status);
        return r;
      };
      const good = await control('POST', '/file-service/file/tmp/editor/control.txt', 201);
      const stored = new URL(good.headers.location, p.url).pathname;
      await control('GET', stored, 200);
      await control('GET', stored.replace('/file/', '/file/info/'), 200);
      await control('DELETE', stored, 200);
      const before = storedFiles(p.settings.FILES_DIR);
      const all = inputs();
      expect(all.length).to.be.at.least(1000);
      const methods = ['POST', 'GET', 'DELETE'] as const;
      const seen: Record<string, number> = {};
      let i = 0;
      const worker = async () => {
        while (i < all.length) {
          const input = all[i++];
          const method = methods[i % methods.length];
          const path = method === 'GET' && i % 2 ? `/file-service/file/info/${input}` : `/file-service/file/${input}`;
          const r = await rawRequest(port(), { method, path, headers: { 'X-Auth-Token': editor.token! }, body: method === 'POST' ? 'payload' : undefined });
          const label = `${method} ${path} → ${r.status} ${r.body.slice(0, 200)}`;
          expect(r.status, label).to.be.oneOf([400, 404]);
          expect(r.json?.statusCode, label).to.equal(r.status === 400 ? '40000' : '40400');
          expect(r.body, label).to.not.match(/\bat .*\.(ts|js):\d+/);
          seen[`${method} ${r.status}`] = (seen[`${method} ${r.status}`] ?? 0) + 1;
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
      console.log(`      answers: ${JSON.stringify(seen)}`);
      expect(storedFiles(p.settings.FILES_DIR)).to.deep.equal(before);
      // The token is still good after the run.
      await control('GET', '/file-service/file/info/tmp/editor/never-stored.txt', 404);
      await control('POST', '/file-service/file/tmp/editor/control.txt', 201);
    });
  });

  it('/health reports the file store', async () => {
    const r = await editor.req('GET', `${p.url}/health`);
    expect(r.status).to.equal(200);
    expect(r.json.files).to.equal('ok');
  });
});
