import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import sharp from 'sharp';
import { fileKeyOf, type StoredFile } from '../../src/adapters/file-store.js';
import { renderImage } from '../../src/adapters/image-renderer.js';
import type { Format, RenditionParams } from '../../src/content/renditions.js';
import { AppError } from '../../src/errors.js';
import type { FileDeliveryService } from '../../src/gateway/file-service.js';
import { signRendition } from '../../src/gateway/renditions.js';
import { fileKeyOfUri } from '../../src/security/file-access.js';
import { sleep } from '../../src/wait.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Image renditions on file delivery (CONTRACT §17) over HTTP, answers decoded with sharp:
 * sizes, fits, formats, `fm=auto` with `Vary: Accept`, focal crops (given and from the
 * content), the main image only as renditions, bad parameters and non-images, kept renditions
 * with ETags and ranges, coalesced renders; then the abuse guards (signatures, the pixel
 * bound, the bound on concurrent renders).
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

/** 400×100: the left half red, the right half blue (a focal crop shows which side it kept). */
async function twoColours(): Promise<Buffer> {
  const red = await sharp({ create: { width: 200, height: 100, channels: 3, background: { r: 255, g: 0, b: 0 } } })
    .png()
    .toBuffer();
  return sharp({ create: { width: 400, height: 100, channels: 3, background: { r: 0, g: 0, b: 255 } } })
    .composite([{ input: red, left: 0, top: 0 }])
    .png()
    .toBuffer();
}

async function centrePixel(img: Buffer): Promise<{ r: number; g: number; b: number }> {
  const { data, info } = await sharp(img).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const i = (Math.floor(info.height / 2) * info.width + Math.floor(info.width / 2)) * 3;
  return { r: data[i], g: data[i + 1], b: data[i + 2] };
}

/** A `width`×`height` grey PNG (a 1×30000 one is 30k pixels: far under any pixel bound). */
async function grey(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: '#888' } })
    .png()
    .toBuffer();
}

/** A refusal in the platform's JSON error format, never a 5xx. */
function expectJsonRefusal(r: { status: number; body: Buffer }, status: number, what: string): void {
  expect(r.status, `${what}: ${r.body.toString()}`).to.equal(status);
  const body = JSON.parse(r.body.toString());
  expect(body.statusCode, what).to.equal(`${status}00`);
  expect(body.message, what).to.be.a('string');
  expect(body.extraInfo, what).to.be.an('object');
}

async function setup(overrides: Record<string, string> = {}) {
  const p = await startTestPlatform(overrides);
  const editor = await new Client(p.base).login('editor');
  const delivery = `${p.url}/file-delivery-service`;
  async function upload(path: string, body: Buffer, contentType: string): Promise<string> {
    const r = await editor.req('POST', `${p.url}/file-service/file/content/${path}`, { raw: body, headers: { 'Content-Type': contentType } });
    expect(r.status, r.text).to.equal(201);
    return r.json.URI as string;
  }
  async function content(files: Record<string, string>, svcImage?: Record<string, unknown>) {
    const entries = Object.fromEntries(Object.entries(files).map(([path, uri]) => [path, { fileUri: uri, filePath: path }]));
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'pictures' }, svcFiles: { files: entries }, ...(svcImage ? { svcImage } : {}) },
    });
    expect(c.status, c.text).to.equal(201);
    return c.json.system.version as string;
  }
  async function get(url: string, headers: Record<string, string> = {}) {
    const res = await fetch(url, { headers: { 'X-Auth-Token': editor.token!, ...headers } });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  }
  const renditions = () => (p.gateway as unknown as { delivery: FileDeliveryService }).delivery.renditions;
  return { p, editor, delivery, upload, content, get, renditions };
}

describe('image renditions on file delivery (CONTRACT §17)', function () {
  this.timeout(60_000);
  let s: Awaited<ReturnType<typeof setup>>;
  let p: P;
  let base: string;

  before(async () => {
    s = await setup();
    p = s.p;
    const pic = await s.upload('owner/pic.png', await twoColours(), 'image/png');
    const main = await s.upload('owner/main.png', await twoColours(), 'image/png');
    const text = await s.upload('owner/notes.txt', Buffer.from('not an image'), 'text/plain');
    // an SVG said to be a PNG (content sniffing knows no SVG, so the declared type is kept)
    const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><rect width="40" height="40" fill="red"/></svg>';
    const fake = await s.upload('owner/fake.png', Buffer.from(svg), 'image/png');
    const version = await s.content(
      { 'pic.png': pic, 'main.png': main, 'notes.txt': text, 'fake.png': fake },
      { filePath: 'main.png', focalPoint: { x: 1, y: 0.5 } },
    );
    base = `${s.delivery}/version/${version}`;
  });
  after(async () => p?.stop());

  const meta = async (body: Buffer) => sharp(body).metadata();

  it('w alone keeps the aspect ratio (fit=inside) and the source format', async () => {
    const r = await s.get(`${base}/pic.png?w=100`);
    expect(r.status, r.body.toString()).to.equal(200);
    expect(r.headers.get('content-type')).to.equal('image/png');
    const m = await meta(r.body);
    expect([m.format, m.width, m.height]).to.deep.equal(['png', 100, 25]);
  });

  it('fits: cover, contain and fill make the box; inside never enlarges', async () => {
    for (const [q, w, h] of [
      ['fit=cover&w=50&h=50', 50, 50],
      ['fit=contain&w=50&h=50', 50, 50],
      ['fit=fill&w=50&h=20', 50, 20],
      ['w=800', 400, 100],
      ['w=100&h=100', 100, 25],
    ] as const) {
      const r = await s.get(`${base}/pic.png?${q}`);
      expect(r.status, q).to.equal(200);
      const m = await meta(r.body);
      expect([m.width, m.height], q).to.deep.equal([w, h]);
    }
  });

  it('formats: jpeg, png, webp, avif (checked by decoding), q accepted', async () => {
    for (const [fm, decoded, type] of [
      ['jpeg', 'jpeg', 'image/jpeg'],
      ['png', 'png', 'image/png'],
      ['webp', 'webp', 'image/webp'],
      ['avif', 'heif', 'image/avif'],
    ]) {
      const r = await s.get(`${base}/pic.png?w=40&fm=${fm}&q=60`);
      expect(r.status, fm).to.equal(200);
      expect(r.headers.get('content-type')).to.equal(type);
      expect((await meta(r.body)).format, fm).to.equal(decoded);
    }
  });

  it('fm=auto chooses from Accept and answers Vary: Accept', async () => {
    const webp = await s.get(`${base}/pic.png?w=30&fm=auto`, { Accept: 'image/webp,*/*' });
    expect((await meta(webp.body)).format).to.equal('webp');
    expect(webp.headers.get('vary')).to.match(/Accept/);
    const avif = await s.get(`${base}/pic.png?w=30&fm=auto`, { Accept: 'image/avif,image/webp,*/*' });
    expect((await meta(avif.body)).format).to.equal('heif');
    const plain = await s.get(`${base}/pic.png?w=30&fm=auto`, { Accept: '*/*' });
    expect((await meta(plain.body)).format).to.equal('png');
    expect(plain.headers.get('vary')).to.match(/Accept/);
    const fixed = await s.get(`${base}/pic.png?w=30&fm=webp`);
    expect(fixed.headers.get('vary')).to.equal('X-Auth-Token');
  });

  it('focal crops: the given point, and for the main image its content focal point', async () => {
    const left = await s.get(`${base}/pic.png?fit=cover&w=100&h=100&focal=0,0.5`);
    expect(await centrePixel(left.body)).to.include({ r: 255, b: 0 });
    const right = await s.get(`${base}/pic.png?fit=cover&w=100&h=100&focal=1,0.5`);
    expect(await centrePixel(right.body)).to.include({ r: 0, b: 255 });
    // pic.png has no focal point in the content: the centre (both halves meet there).
    const mainDefault = await s.get(`${base}/main.png?fit=cover&w=100&h=100`);
    expect(mainDefault.status).to.equal(200);
    expect(await centrePixel(mainDefault.body), 'svcImage.focalPoint x=1 keeps the right side').to.include({ r: 0, b: 255 });
    const mainGiven = await s.get(`${base}/main.png?fit=cover&w=100&h=100&focal=0,0`);
    expect(await centrePixel(mainGiven.body), 'a given focal wins').to.include({ r: 255, b: 0 });
  });

  it('the main image: 404 as a raw file, delivered as renditions (named ones too)', async () => {
    expect((await s.get(`${base}/main.png`)).status).to.equal(404);
    const r = await s.get(`${base}/main.png?w=120`);
    expect(r.status).to.equal(200);
    expect((await meta(r.body)).width).to.equal(120);
    const named = await s.get(`${base}/main.png?rendition=thumbnail`, { Accept: 'image/webp' });
    expect(named.status).to.equal(200);
    const m = await meta(named.body);
    expect([m.format, m.width, m.height]).to.deep.equal(['webp', 200, 200]);
  });

  it('bad parameters and non-images: 400 naming the parameter', async () => {
    for (const [q, param] of [
      ['w=0', 'w'],
      ['h=5000', 'h'],
      ['fit=crop', 'fit'],
      ['fm=gif', 'fm'],
      ['q=0', 'q'],
      ['focal=2,0', 'focal'],
      ['rendition=nope', 'rendition'],
    ]) {
      const r = await s.get(`${base}/pic.png?${q}`);
      expect(r.status, q).to.equal(400);
      expect(JSON.parse(r.body.toString()).extraInfo.parameter, q).to.equal(param);
    }
    const text = await s.get(`${base}/notes.txt?w=10`);
    expect(text.status).to.equal(400);
    // only the decoders of the six image formats run: an SVG under an image type is not rendered
    // (librsvg, an XML parser and rasteriser, is never reached by uploaded data)
    const fake = await s.get(`${base}/fake.png?w=10`);
    expect(fake.status, fake.body.toString()).to.equal(400);
    expect(JSON.parse(fake.body.toString()).extraInfo.parameter).to.equal('source');
    expect((await s.get(`${base}/notes.txt`)).status, 'the raw file is still delivered').to.equal(200);
  });

  it("extreme aspect ratios: a cover resize beyond libvips' coordinates answers 422 JSON, never 500", async () => {
    const tall = await s.upload('owner/tall.png', await grey(1, 30000), 'image/png');
    const wide = await s.upload('owner/wide.png', await grey(30000, 1), 'image/png');
    const tallish = await s.upload('owner/tallish.png', await grey(1, 20000), 'image/png');
    const fine = await s.upload('owner/fine.png', await grey(1, 2000), 'image/png');
    const v = `${s.delivery}/version/${await s.content({ 'tall.png': tall, 'wide.png': wide, 'tallish.png': tallish, 'fine.png': fine })}`;
    // focalCrop scales 1×30000 to 4096×122,880,000: above sharp's own bound (a synchronous throw,
    // a 500 before), and 1×20000 to 4096×81,920,000 (refused by libvips inside toBuffer, a 400).
    for (const q of [
      'tall.png?w=4096&h=4096&fit=cover&focal=0.5,0.5',
      'wide.png?w=4096&h=4096&fit=cover&focal=0.5,0.5',
      'tallish.png?w=4096&h=4096&fit=cover&focal=0,1',
      'tall.png?w=4096&h=4096&fit=cover',
      'wide.png?w=4096&h=4096&fit=cover',
    ])
      expectJsonRefusal(await s.get(`${v}/${q}`), 422, q);
    // the controls: the same sizes without cover, and a cover resize within the bound, still render
    for (const [q, w, h] of [
      ['tall.png?w=4096&h=4096', 1, 4096],
      ['wide.png?w=4096&h=4096', 4096, 1],
      ['tall.png?w=4096&h=4096&fit=contain', 4096, 4096],
      ['fine.png?w=4096&h=4096&fit=cover&focal=0.5,0.5', 4096, 4096],
    ] as const) {
      const r = await s.get(`${v}/${q}`);
      expect(r.status, `${q}: ${r.body.toString()}`).to.equal(200);
      const m = await meta(r.body);
      expect([m.width, m.height], q).to.deep.equal([w, h]);
    }
  });

  it('a rendition is kept: the same ETag each time, 304, ranges, no second render', async () => {
    const url = `${base}/pic.png?w=77&fm=jpeg`;
    const first = await s.get(url);
    const before = s.renditions().renders;
    const again = await s.get(url);
    expect(s.renditions().renders, 'served from the store').to.equal(before);
    expect(again.headers.get('etag')).to.equal(first.headers.get('etag'));
    expect(Buffer.compare(again.body, first.body)).to.equal(0);
    expect(first.headers.get('cache-control')).to.match(/max-age=31536000/);
    const nm = await s.get(url, { 'If-None-Match': first.headers.get('etag')! });
    expect(nm.status).to.equal(304);
    const part = await s.get(url, { Range: 'bytes=0-9' });
    expect(part.status).to.equal(206);
    expect(part.headers.get('content-range')).to.equal(`bytes 0-9/${first.body.length}`);
    expect(Buffer.compare(part.body, first.body.subarray(0, 10))).to.equal(0);
  });

  it('10 concurrent requests for a new rendition make one render', async () => {
    const before = s.renditions().renders;
    const url = `${base}/pic.png?w=123&fm=webp&q=71`;
    const all = await Promise.all(Array.from({ length: 10 }, () => s.get(url)));
    expect(all.map((r) => r.status)).to.deep.equal(Array(10).fill(200));
    expect(new Set(all.map((r) => r.headers.get('etag'))).size).to.equal(1);
    expect(s.renditions().renders - before).to.equal(1);
  });

  it('renditions are kept where the file service cannot reach them', async () => {
    const r = await s.get(`${base}/pic.png?w=99`);
    expect(r.status).to.equal(200);
    // The rendition store's spaces are its own: a file address names the user store only.
    const store = await s.renditions().store();
    expect(store).to.not.equal(p.files);
  });
});

describe('renderImage: cover resizes bounded, sharp refusals are client errors', function () {
  this.timeout(60_000);
  const render = (input: Buffer, params: RenditionParams, format: Format = 'png') => renderImage(input, { params, format, maxPixels: 50_000_000 });
  async function refusal(p: Promise<unknown>): Promise<AppError> {
    const e = await p.then(
      () => expect.fail('rendered'),
      (x: unknown) => x,
    );
    expect(e, String(e)).to.be.instanceOf(AppError);
    return e as AppError;
  }

  it('a cover resize within 10,000,000 pixels a side renders; one pixel of source more is 422 before sharp runs', async () => {
    // 1×2441 covers 4096×4096 at 4096×9,998,336; 1×2442 at 4096×10,002,432
    const within = await render(await grey(1, 2441), { fit: 'cover', w: 4096, h: 4096, focal: [0.5, 0.5] });
    expect((await sharp(within).metadata()).height).to.equal(4096);
    const beyond = await grey(1, 2442);
    for (const params of [
      { fit: 'cover', w: 4096, h: 4096, focal: [0.5, 0.5] },
      { fit: 'cover', w: 4096, h: 4096 },
    ] as RenditionParams[]) {
      const e = await refusal(render(beyond, params));
      expect([e.http, e.statusCode], JSON.stringify(params)).to.deep.equal([422, '42200']);
      expect(e.extraInfo).to.deep.equal({ maxResizeDimension: 10_000_000 });
    }
  });

  it('a parameter sharp refuses while the pipeline is built (a synchronous throw) is a 400, not a 500', async () => {
    // Not reachable through the query (w, h and q are checked there): the pipeline's own guard.
    const src = await grey(4, 4);
    for (const [params, format] of [[{ fit: 'inside', w: 2, q: 0 }, 'jpeg']] as [RenditionParams, Format][]) {
      const e = await refusal(render(src, params, format));
      expect([e.http, e.extraInfo.parameter], JSON.stringify(params)).to.deep.equal([400, 'source']);
    }
    // a side sharp would refuse is refused before it runs
    const e = await refusal(render(src, { fit: 'fill', w: 200_000_000, h: 2 }));
    expect([e.http, e.extraInfo]).to.deep.equal([422, { maxResizeDimension: 10_000_000 }]);
  });

  it('every fit is bounded by what it would make: a rendition past the pixel bound, or a resize past 10,000,000 a side, is 422 before sharp runs', async () => {
    const tall = await grey(1, 30_000); // 30,000 pixels, far within the source bound
    for (const [params, extra] of [
      [
        { fit: 'fill', w: 4096 },
        { maxPixels: 50_000_000, pixels: 4096 * 30_000 },
      ],
      [{ fit: 'cover', w: 4096 }, { maxResizeDimension: 10_000_000 }],
      [{ fit: 'contain', w: 4096 }, { maxResizeDimension: 10_000_000 }],
      [{ fit: 'outside', w: 4096, h: 4096 }, { maxResizeDimension: 10_000_000 }],
    ] as [RenditionParams, Record<string, number>][]) {
      const e = await refusal(render(tall, params));
      expect([e.http, e.statusCode, e.extraInfo], JSON.stringify(params)).to.deep.equal([422, '42200', extra]);
    }
    // the controls: within the bounds they render, at the size sharp makes
    for (const [params, size] of [
      [{ fit: 'fill', w: 100 }, [100, 30_000]],
      [{ fit: 'inside', w: 4096 }, [1, 30_000]],
      [{ fit: 'contain', w: 300, h: 300 }, [300, 300]],
      [{ fit: 'cover', w: 100, h: 100 }, [100, 100]],
    ] as [RenditionParams, number[]][]) {
      const m = await sharp(await render(tall, params)).metadata();
      expect([m.width, m.height], JSON.stringify(params)).to.deep.equal(size);
    }
  });
});

describe('rendition abuse guards (CONTRACT §17)', function () {
  this.timeout(60_000);
  const KEY = 'a-signing-key-of-enough-length';
  let s: Awaited<ReturnType<typeof setup>>;
  let base: string;

  before(async () => {
    s = await setup({
      RENDITION_SIGNING_KEY: KEY,
      RENDITION_MAX_PIXELS: '1000000',
      RENDITION_MAX_CONCURRENT: '1',
      RENDITION_MAX_SOURCE_BYTES: String(4 * 2 ** 20),
    });
    const small = await s.upload('owner/small.png', await twoColours(), 'image/png');
    const big = await sharp({ create: { width: 1100, height: 1000, channels: 3, background: '#888' } })
      .png()
      .toBuffer();
    const huge = await s.upload('owner/huge.png', big, 'image/png');
    const noise = await sharp(Buffer.from(Array.from({ length: 900 * 900 * 3 }, (_, i) => (i * 7919) % 251)), { raw: { width: 900, height: 900, channels: 3 } })
      .png()
      .toBuffer();
    const busy = await s.upload('owner/busy.png', noise, 'image/png');
    // A 64×64 JPEG followed by 5 MB of other bytes: an image of few pixels in a large file.
    const jpeg = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#36a' } })
      .jpeg()
      .toBuffer();
    const padded = await s.upload('owner/padded.jpg', Buffer.concat([jpeg, Buffer.alloc(5 * 2 ** 20)]), 'image/jpeg');
    const version = await s.content({ 'small.png': small, 'huge.png': huge, 'busy.png': busy, 'padded.jpg': padded });
    base = `${s.delivery}/version/${version}`;
  });
  after(async () => s?.p.stop());

  it('free parameters need sig (HMAC-SHA256 of the canonical query, base64url): 403 without or wrong', async () => {
    expect((await s.get(`${base}/small.png?w=50`)).status).to.equal(403);
    expect((await s.get(`${base}/small.png?w=50&sig=AAAA`)).status).to.equal(403);
    const sig = signRendition(KEY, 'fm=webp&w=50');
    const ok = await s.get(`${base}/small.png?w=50&fm=webp&sig=${sig}`);
    expect(ok.status, ok.body.toString()).to.equal(200);
    const reordered = await s.get(`${base}/small.png?fm=webp&w=050&sig=${sig}`);
    expect(reordered.status, 'the canonical query is signed, not the spelling').to.equal(200);
    expect((await s.get(`${base}/small.png?w=51&fm=webp&sig=${sig}`)).status).to.equal(403);
  });

  it('named renditions need no sig', async () => {
    expect((await s.get(`${base}/small.png?rendition=thumbnail`)).status).to.equal(200);
  });

  it('sources over RENDITION_MAX_PIXELS: 422', async () => {
    const r = await s.get(`${base}/huge.png?rendition=thumbnail`);
    expect(r.status).to.equal(422);
    expect(JSON.parse(r.body.toString()).statusCode).to.equal('42200');
    expect((await s.get(`${base}/huge.png`)).status, 'the raw file is still delivered').to.equal(200);
  });

  it('sources over RENDITION_MAX_SOURCE_BYTES: 422 before the file is read (a render holds its source in memory)', async () => {
    // Before: each render read the whole file into memory (twice, while its chunks were joined);
    // four anonymous renders of a 64×64 JPEG padded to 100 MB held about 200 MB (security review).
    const reads = s.renditions() as unknown as { renders: number };
    const before = reads.renders;
    expectJsonRefusal(await s.get(`${base}/padded.jpg?rendition=thumbnail`), 422, 'padded');
    expect(reads.renders, 'nothing rendered').to.equal(before);
    expect((await s.get(`${base}/padded.jpg`)).status, 'the raw file is still delivered').to.equal(200);
    expect((await s.get(`${base}/busy.png?rendition=thumbnail`)).status, 'a file within the bound renders').to.equal(200);
  });

  it('a named cover rendition of a very tall main image with a focal point: 422 JSON, never 500', async () => {
    // teaser is 640×360 cover: 1×160000 scales to 640×102,400,000 (a 500 before)
    const tall = await s.upload('owner/tall-main.png', await grey(1, 160000), 'image/png');
    const version = await s.content({ 'tall-main.png': tall }, { filePath: 'tall-main.png', focalPoint: { x: 0.5, y: 0.3 } });
    expectJsonRefusal(await s.get(`${s.delivery}/version/${version}/tall-main.png?rendition=teaser`), 422, 'teaser');
    const article = await s.get(`${s.delivery}/version/${version}/tall-main.png?rendition=article`);
    expect(article.status, 'an inside rendition of the same image renders').to.equal(200);
  });

  it('renders past the bound answer 503 with Retry-After', async () => {
    const urls = [10, 20, 30, 40, 50, 60].map((w) => `${base}/busy.png?w=${w}&fm=avif&sig=${signRendition(KEY, `fm=avif&w=${w}`)}`);
    const all = await Promise.all(urls.map((u) => s.get(u)));
    const statuses = all.map((r) => r.status);
    expect(statuses).to.include(200);
    expect(statuses).to.include(503);
    for (const r of all.filter((x) => x.status === 503)) expect(r.headers.get('retry-after')).to.equal('1');
  });
});

describe('renditions on the S3 store (CONTRACT §17)', function () {
  this.timeout(60_000);
  let s: Awaited<ReturnType<typeof setup>>;

  before(async () => {
    const { ensureTestS3 } = await import('../support/s3.js');
    s = await setup({ ...(await ensureTestS3()).env, S3_BUCKET: `renditions-${Date.now().toString(36)}` });
  });
  after(async () => s?.p.stop());

  it('made once, kept in its own bucket, served with ETag and ranges; metadata (EXIF) dropped', async () => {
    const withExif = await sharp(await twoColours())
      .jpeg()
      .withExif({ IFD0: { Copyright: 'secret place' } })
      .toBuffer();
    expect((await sharp(withExif).metadata()).exif).to.not.equal(undefined);
    const uri = await s.upload('owner/exif.jpg', withExif, 'image/jpeg');
    const version = await s.content({ 'exif.jpg': uri });
    const url = `${s.delivery}/version/${version}/exif.jpg?w=80&fm=jpeg`;
    const before = s.renditions().renders;
    const a = await s.get(url);
    expect(a.status, a.body.toString()).to.equal(200);
    const m = await sharp(a.body).metadata();
    expect([m.format, m.width, m.height]).to.deep.equal(['jpeg', 80, 20]);
    expect(m.exif).to.equal(undefined);
    const b = await s.get(url, { Range: 'bytes=2-5' });
    expect(b.status).to.equal(206);
    expect(Buffer.compare(b.body, a.body.subarray(2, 6))).to.equal(0);
    expect(s.renditions().renders - before).to.equal(1);
    expect((await s.renditions().store()).kind).to.equal('s3');
  });
});

describe('kept renditions are bounded per source (RENDITION_MAX_PER_SOURCE)', function () {
  this.timeout(120_000);
  const KEY = 'a-signing-key-of-enough-length';
  const ACCEPTS = ['image/avif,image/webp,*/*', 'image/webp,*/*', '*/*'];
  let s: Awaited<ReturnType<typeof setup>>;

  before(async () => {
    s = await setup({ RENDITION_SIGNING_KEY: KEY, RENDITION_MAX_PER_SOURCE: '8', RENDITION_MAX_CONCURRENT: '50', RENDITION_AT_ONCE_PER_CALLER: '50' });
  });
  after(async () => s?.p.stop());

  /** The rendition files on disk (kept ones, and evicted ones not yet removed). */
  async function renditionFiles(): Promise<number> {
    let n = 0;
    for (const host of await readdir(renditionsDir()).catch(() => [] as string[]))
      n += (await readdir(join(renditionsDir(), host)).catch(() => [] as string[])).filter((f) => f.endsWith('.data')).length;
    return n;
  }
  const renditionsDir = () => join(s.p.settings.FILES_DIR, 'renditions', 'content');
  /** Entries of the Redis keys `rendition*` (a string key counts one). */
  async function renditionKeys(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const k of await s.p.redis.keys('rendition*')) {
      const type = await s.p.redis.type(k);
      out.set(k, type === 'hash' ? await s.p.redis.hlen(k) : type === 'zset' ? await s.p.redis.zcard(k) : 1);
    }
    return out;
  }
  /** Evicted renditions are removed at once (not after the grace a read in progress gets). */
  const noGrace = () => {
    (s.renditions() as unknown as { evictionGraceMs: number }).evictionGraceMs = 0;
  };
  const withGrace = () => {
    (s.renditions() as unknown as { evictionGraceMs: number }).evictionGraceMs = 60_000;
  };

  /** A content whose main image is `main.png`, and a way to move its focal point. */
  async function imageContent(x: number) {
    const uri = await s.upload(`owner/main-${Date.now()}-${Math.random().toString(36).slice(2)}.png`, await twoColours(), 'image/png');
    const envelope = (fx: number) => ({
      system: { contentType: 'article' },
      aspects: {
        body: { title: 'pictures' },
        svcFiles: { files: { 'main.png': { fileUri: uri, filePath: 'main.png' } } },
        svcImage: { filePath: 'main.png', focalPoint: { x: fx, y: 0.5 } },
      },
    });
    const c = await s.editor.create(envelope(x));
    expect(c.status, c.text).to.equal(201);
    const id = c.json.system.id as string;
    let etag = c.headers.get('etag')!;
    const versions = [c.json.system.version as string];
    return {
      uri,
      versions,
      async move(fx: number): Promise<string> {
        const u = await s.editor.update(id, envelope(fx), etag);
        expect(u.status, u.text).to.equal(200);
        etag = u.headers.get('etag')!;
        const version = u.json.system!.version as string;
        versions.push(version);
        return version;
      },
    };
  }

  it('30 focal-point updates, each read as thumbnail and teaser in three formats, leave at most 8 kept renditions', async () => {
    noGrace();
    const before = await renditionFiles();
    const dirsBefore = (await readdir(renditionsDir()).catch(() => [])).length;
    const keysBefore = await renditionKeys();
    const c = await imageContent(0.1);
    for (let i = 0; i < 30; i++) {
      const v = await c.move((10 + 2 * i) / 100);
      for (const name of ['thumbnail', 'teaser'])
        for (const accept of ACCEPTS) {
          const r = await s.get(`${s.delivery}/version/${v}/main.png?rendition=${name}`, { Accept: accept });
          expect(r.status, `${i} ${name} ${accept}: ${r.body.toString()}`).to.equal(200);
        }
    }
    // 180 kept files before (one per update, name and format), and 180 `rendition:<id>` keys
    expect((await renditionFiles()) - before).to.be.at.most(8);
    expect((await readdir(renditionsDir())).length - dirsBefore, 'no empty directories left').to.be.at.most(8);
    const added = [...(await renditionKeys())].filter(([k]) => !keysBefore.has(k));
    expect(added.length, added.map(([k]) => k).join(' ')).to.be.at.most(3);
    for (const [k, n] of added) expect(n, k).to.be.at.most(8);
  });

  it('focal points that differ past the second decimal share their renditions', async () => {
    const c = await imageContent(0.3);
    const a = await c.move(0.5);
    const b = await c.move(0.500001);
    const first = await s.get(`${s.delivery}/version/${a}/main.png?rendition=thumbnail`, { Accept: '*/*' });
    expect(first.status).to.equal(200);
    const renders = s.renditions().renders;
    const second = await s.get(`${s.delivery}/version/${b}/main.png?rendition=thumbnail`, { Accept: '*/*' });
    expect(second.status).to.equal(200);
    expect(s.renditions().renders, 'no second render').to.equal(renders);
    expect(second.headers.get('etag')).to.equal(first.headers.get('etag'));
  });

  it('a rendition read again after its eviction answers 200 with the same bytes (made again)', async () => {
    noGrace();
    const c = await imageContent(0.2);
    const first = c.versions[0];
    const url = `${s.delivery}/version/${first}/main.png?rendition=teaser`;
    const a = await s.get(url, { Accept: 'image/webp' });
    expect(a.status).to.equal(200);
    // ten newer renditions of the same source push it out
    for (let i = 0; i < 10; i++) {
      const v = await c.move((30 + 3 * i) / 100);
      expect((await s.get(`${s.delivery}/version/${v}/main.png?rendition=teaser`, { Accept: 'image/webp' })).status).to.equal(200);
    }
    const renders = s.renditions().renders;
    const b = await s.get(url, { Accept: 'image/webp' });
    expect(b.status, b.body.toString()).to.equal(200);
    expect(s.renditions().renders - renders, 'it was evicted, so made again').to.equal(1);
    expect(Buffer.compare(a.body, b.body)).to.equal(0);
  });

  it('the least recently used rendition is the one evicted', async () => {
    noGrace();
    const c = await imageContent(0.2);
    const hot = `${s.delivery}/version/${c.versions[0]}/main.png?rendition=thumbnail`;
    expect((await s.get(hot, { Accept: '*/*' })).status).to.equal(200);
    const renders = s.renditions().renders;
    for (let i = 0; i < 12; i++) {
      const v = await c.move((30 + 3 * i) / 100);
      expect((await s.get(`${s.delivery}/version/${v}/main.png?rendition=thumbnail`, { Accept: '*/*' })).status).to.equal(200);
      expect((await s.get(hot, { Accept: '*/*' })).status, 'read again each time').to.equal(200);
    }
    // one render per new rendition: the one read each time was never evicted (first in, first out
    // would have evicted it once); the oldest of the others were
    expect(s.renditions().renders - renders, 'the hot one stayed kept').to.equal(12);
    const oldest = await s.get(`${s.delivery}/version/${c.versions[1]}/main.png?rendition=thumbnail`, { Accept: '*/*' });
    expect(oldest.status).to.equal(200);
    expect(s.renditions().renders - renders, 'the least recently used one was evicted').to.equal(13);
  });

  it('concurrent reads of many renditions of one source all answer, the same rendition is made once, and the bound holds', async () => {
    withGrace();
    const c = await imageContent(0.2);
    const v = c.versions[0];
    const sizes = Array.from({ length: 20 }, (_, i) => 20 + i);
    const urls = sizes.flatMap((w) => {
      const u = `${s.delivery}/version/${v}/main.png?w=${w}&fm=png&sig=${signRendition(KEY, `fm=png&w=${w}`)}`;
      return [u, u, u];
    });
    const before = s.renditions().renders;
    const all = await Promise.all(urls.map((u) => s.get(u)));
    expect(all.map((r) => r.status)).to.deep.equal(Array(urls.length).fill(200));
    for (const [i, r] of all.entries()) expect((await sharp(r.body).metadata()).width).to.equal(sizes[Math.floor(i / 3)]);
    expect(s.renditions().renders - before, 'one render per rendition').to.equal(20);
    // within the grace, evicted files are still there for reads in progress; past it they go
    const baseline = await renditionFiles();
    noGrace();
    expect((await s.get(`${s.delivery}/version/${v}/main.png?w=99&fm=png&sig=${signRendition(KEY, 'fm=png&w=99')}`)).status).to.equal(200);
    expect(await renditionFiles()).to.be.below(baseline);
  });

  it('a read in progress is not broken by the eviction of its rendition', async () => {
    withGrace();
    const c = await imageContent(0.2);
    const v = c.versions[0];
    const url = (w: number) => `${s.delivery}/version/${v}/main.png?w=${w}&fm=png&sig=${signRendition(KEY, `fm=png&w=${w}`)}`;
    const a = await s.get(url(31));
    expect(a.status).to.equal(200);
    // what a read holds once it has found the kept rendition
    const source = await s.p.files!.stat(fileKeyOfUri(c.uri)!);
    const store = await s.renditions().store();
    const kept = await s.renditions().renditionOf(source!, { fit: 'inside', w: 31, fm: 'png' }, 'png', 'user:editor');
    for (let w = 40; w < 52; w++) expect((await s.get(url(w))).status).to.equal(200);
    const renders = s.renditions().renders;
    expect((await s.get(url(31))).status).to.equal(200);
    expect(s.renditions().renders - renders, 'evicted, so made again').to.equal(1);
    const read = await store.get(kept.key);
    const chunks: Buffer[] = [];
    for await (const chunk of read.stream) chunks.push(chunk as Buffer);
    expect(Buffer.compare(Buffer.concat(chunks), a.body)).to.equal(0);
  });
});

/**
 * What the bound leaves behind when a process stops, and what the previous version left: own
 * platforms (on the shared Redis, with a files directory of the test's), none alive beside them
 * (a platform with another grace would sweep their sources too).
 */
describe('kept renditions after a restart and after the upgrade (RENDITION_MAX_PER_SOURCE)', function () {
  this.timeout(120_000);
  const KEY = 'a-signing-key-of-enough-length';
  type S = Awaited<ReturnType<typeof setup>>;
  const started: S[] = [];
  const dirs: string[] = [];
  after(async () => {
    for (const s of started) await s.p.stop().catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  async function platform(filesDir: string, overrides: Record<string, string> = {}): Promise<S> {
    const s = await setup({ FILES_DIR: filesDir, RENDITION_SIGNING_KEY: KEY, ...overrides });
    started.push(s);
    return s;
  }
  const filesDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'renditions-kept-'));
    dirs.push(d);
    return d;
  };
  const setGrace = (s: S, ms: number) => {
    (s.renditions() as unknown as { evictionGraceMs: number }).evictionGraceMs = ms;
  };
  /** The hash tag of a source's renditions (as src/gateway/renditions.ts names it). */
  const tagOf = (f: StoredFile) => createHash('sha256').update(`${f.storageKey}\n${f.objectId}`).digest('hex').slice(0, 32);
  /** An image content, and the signed URL of its `w`-wide PNG rendition. */
  async function image(s: S, name: string) {
    const uri = await s.upload(`owner/${name}-${Date.now()}.png`, await twoColours(), 'image/png');
    const version = await s.content({ 'pic.png': uri });
    const source = (await s.p.files!.stat(fileKeyOfUri(uri)!))!;
    const tag = tagOf(source);
    return {
      url: (w: number) => `${s.delivery}/version/${version}/pic.png?w=${w}&fm=png&sig=${signRendition(KEY, `fm=png&w=${w}`)}`,
      keys: { index: `rendition:{${tag}}`, lru: `rendition-lru:{${tag}}`, trash: `rendition-trash:{${tag}}` },
      tag,
    };
  }
  const renditionDataFiles = async (dir: string, id: string) =>
    (await readdir(join(dir, 'renditions', 'content', id)).catch(() => [] as string[])).filter((f) => f.endsWith('.data'));

  it('an evicted rendition whose grace outlives its process is removed by another process, with no render of its source', async () => {
    const dir = filesDir();
    const first = await platform(dir, { RENDITION_MAX_PER_SOURCE: '1' });
    setGrace(first, 1500);
    const img = await image(first, 'restart');
    expect((await first.get(img.url(31))).status).to.equal(200);
    expect((await first.get(img.url(32))).status).to.equal(200);
    const evicted = await first.p.redis.zrange(img.keys.trash, '0', '-1');
    expect(evicted, 'w=31 evicted into the trash').to.have.length(1);
    const id = evicted[0].slice(0, evicted[0].indexOf('/'));
    // the process stops within the grace (a deploy, a crash), and the source is never read again
    await first.p.stop();
    const second = await platform(dir, { RENDITION_MAX_PER_SOURCE: '1' });
    setGrace(second, 1500);
    const redis = second.p.redis;
    expect(await redis.zrange(img.keys.trash, '0', '-1'), 'still in the trash after the stop').to.deep.equal(evicted);
    expect(await renditionDataFiles(dir, id), 'its file still there after the stop').to.have.length(1);
    const renders = second.renditions().renders;
    const deadline = Date.now() + 6000;
    while (Date.now() < deadline && ((await redis.zcard(img.keys.trash)) > 0 || (await renditionDataFiles(dir, id)).length > 0)) await sleep(100);
    expect(await redis.zcard(img.keys.trash), 'the trash entry removed').to.equal(0);
    expect(await renditionDataFiles(dir, id), 'its file removed').to.have.length(0);
    expect(second.renditions().renders, 'with no render').to.equal(renders);
    expect(await redis.hlen(img.keys.index), 'the kept one stays').to.equal(1);
    expect(await redis.zscore('rendition-trash-sources', img.tag), 'the source leaves the sweep once its trash is empty').to.equal(null);
  });

  /** A platform, an image on it, and a way to keep its renditions as the previous version did. */
  async function previousVersion() {
    const s = await platform(filesDir(), { RENDITION_MAX_PER_SOURCE: '1' });
    const redis = s.p.redis;
    const store = await s.renditions().store();
    const img = await image(s, 'legacy');
    /** Renders w, then moves its index entry to the layout of the previous version. */
    async function keptByThePreviousVersion(w: number): Promise<{ id: string; path: string; body: Buffer }> {
      const r = await s.get(img.url(w));
      expect(r.status).to.equal(200);
      const entries = Object.entries(await redis.hgetall(img.keys.index));
      expect(entries).to.have.length(1);
      const [id, path] = entries[0];
      await redis.hdel(img.keys.index, id);
      await redis.zrem(img.keys.lru, id);
      await redis.set(`rendition:${id}`, path, 'NX');
      return { id, path, body: r.body };
    }
    return { s, redis, store, img, keptByThePreviousVersion };
  }

  it('a rendition kept by the previous version (`rendition:<id>` → path) is adopted into the bound, not made again', async () => {
    const { s, redis, img, keptByThePreviousVersion } = await previousVersion();
    const legacy = await keptByThePreviousVersion(33);
    expect((await s.get(img.url(35))).status).to.equal(200);
    const renders = s.renditions().renders;
    const again = await s.get(img.url(33));
    expect(again.status, again.body.toString()).to.equal(200);
    expect(Buffer.compare(again.body, legacy.body)).to.equal(0);
    expect(s.renditions().renders, 'no new render').to.equal(renders);
    expect(await redis.exists(`rendition:${legacy.id}`), 'the legacy key is gone').to.equal(0);
    expect(await redis.hget(img.keys.index, legacy.id), 'the index names it').to.equal(legacy.path);
    // it counts against the bound (1): w=35 was evicted for it
    expect(await redis.hlen(img.keys.index)).to.equal(1);
    expect(await redis.zcard(img.keys.trash)).to.equal(1);
    expect(await redis.zscore('rendition-trash-sources', img.tag), 'its trash is swept').to.not.equal(null);
  });

  it('a rendition kept by the previous version whose file is gone is made again, and its legacy key deleted', async () => {
    const { s, redis, store, img, keptByThePreviousVersion } = await previousVersion();
    const gone = await keptByThePreviousVersion(34);
    expect(await store.delete(fileKeyOf('content', gone.id, gone.path))).to.equal(true);
    const renders = s.renditions().renders;
    const made = await s.get(img.url(34));
    expect(made.status, made.body.toString()).to.equal(200);
    expect(Buffer.compare(made.body, gone.body)).to.equal(0);
    expect(s.renditions().renders - renders, 'made again').to.equal(1);
    expect(await redis.exists(`rendition:${gone.id}`), 'the legacy key is gone').to.equal(0);
    const path = await redis.hget(img.keys.index, gone.id);
    expect(path, 'the index names the new file').to.be.a('string');
    expect(await store.stat(fileKeyOf('content', gone.id, path!))).to.not.equal(null);
  });
});
