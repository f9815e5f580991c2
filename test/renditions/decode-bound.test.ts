import { expect } from 'chai';
import sharp from 'sharp';
import type { FileDeliveryService } from '../../src/gateway/file-service.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * RENDITION_MAX_RENDER_BYTES (security review sec16): a progressive JPEG keeps every DCT
 * coefficient until its last scan and an interlaced PNG is decoded whole, so a 0.6 MB file of
 * 7071×7071 pixels (within RENDITION_MAX_PIXELS) held 300-440 MB in one render, and four anonymous
 * renders of it (RENDITION_MAX_CONCURRENT) 1.2 GB. Each render's decode is now estimated from the
 * header (`decodeBytesOf`) and the renders in flight may hold RENDITION_MAX_RENDER_BYTES together:
 * one past it alone answers 422 and is never decoded, one past it with those in flight 503. What
 * the encoder holds is in the same sum (`encodeBytesOf`, from the rendition's size and format): a
 * 4096-pixel AVIF held 560 MB whatever its source. The same shape here with a small bound and
 * 1000×1000 images: baseline JPEG 2,048 rows × 1000 × 3 = 6,144,000 bytes, progressive 6,291,456
 * more (1024 × 1024 × 3 × 2 bytes of coefficients), and each rendition's encode.
 */
describe('renders are bounded by what their decodes hold (RENDITION_MAX_RENDER_BYTES)', function () {
  this.timeout(60_000);
  const BOUND = 12_000_000;
  const BASELINE = 6_144_000;
  const PROGRESSIVE = BASELINE + 6_291_456;
  // encodeBytesOf: 2 MiB and 10 bytes a pixel for a JPEG, 3 MiB and 38 for an AVIF (RGB, default quality).
  const JPEG_101 = 2 * 2 ** 20 + 101 * 101 * 10;
  const JPEG_501 = 2 * 2 ** 20 + 501 * 501 * 10;
  const AVIF_2048 = 3 * 2 ** 20 + 2048 * 2048 * 38;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let base: string;

  before(async () => {
    p = await startTestPlatform({ RENDITION_MAX_RENDER_BYTES: String(BOUND) });
    const editor = await new Client(p.base).login('editor');
    // Noise, so that encoding a rendition takes a while (two renders are in flight at once).
    const noise = Buffer.from(Array.from({ length: 1000 * 1000 * 3 }, (_, i) => (i * 7919 + (i >> 7) * 104729) % 251));
    const pixels = () => sharp(noise, { raw: { width: 1000, height: 1000, channels: 3 } });
    const files = {
      'baseline.jpg': await pixels().jpeg({ chromaSubsampling: '4:4:4', mozjpeg: false }).toBuffer(),
      'progressive.jpg': await pixels().jpeg({ progressive: true, chromaSubsampling: '4:4:4', mozjpeg: false }).toBuffer(),
    };
    const entries: Record<string, { fileUri: string; filePath: string }> = {};
    for (const [name, buf] of Object.entries(files)) {
      const up = await editor.upload(`content/owner/${name}`, buf, 'image/jpeg');
      expect(up.status, up.text).to.equal(201);
      entries[name] = { fileUri: up.json.URI as string, filePath: name };
    }
    // On a public view: anyone may ask for renditions of it, without a token.
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'decode bound' }, svcFiles: { files: entries } },
      operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
    });
    expect(c.status, c.text).to.equal(201);
    base = `${p.url}/file-delivery-service/version/${c.json.system.version as string}`;
  });
  after(async () => p?.stop());

  const renders = () => (p.gateway as unknown as { delivery: FileDeliveryService }).delivery.renditions.renders;
  const get = async (path: string) => {
    const r = await fetch(`${base}/${path}`);
    return { status: r.status, retryAfter: r.headers.get('retry-after'), body: Buffer.from(await r.arrayBuffer()) };
  };

  it('a progressive JPEG whose decode alone passes the bound answers 422 and is never rendered; the baseline JPEG of the same pixels renders', async () => {
    const before = renders();
    const r = await get('progressive.jpg?w=101');
    expect(r.status, r.status === 200 ? 'rendered' : r.body.toString()).to.equal(422);
    const body = JSON.parse(r.body.toString());
    expect(body.statusCode).to.equal('42200');
    expect(body.message).to.include(String(BOUND));
    expect(body.extraInfo).to.deep.equal({ maxRenderBytes: BOUND, decodeBytes: PROGRESSIVE, encodeBytes: JPEG_101 });
    expect(renders(), 'nothing rendered').to.equal(before);
    expect((await get('progressive.jpg')).status, 'the raw file is still delivered').to.equal(200);

    const ok = await get('baseline.jpg?w=101');
    expect(ok.status, ok.body.toString()).to.equal(200);
    expect((await sharp(ok.body).metadata()).width).to.equal(101);
    expect(renders()).to.equal(before + 1);
  });

  it('a small source asked for at a large AVIF answers 422 and is never rendered (the encoder would hold too much); a small AVIF of it renders', async () => {
    const before = renders();
    // 1000×1000 filled to 2048×2048: a decode of 6,144,000 bytes, an AVIF encode of 162,529,280.
    const r = await get('baseline.jpg?w=2048&h=2048&fit=fill&fm=avif');
    expect(r.status, r.status === 200 ? 'rendered' : r.body.toString()).to.equal(422);
    const body = JSON.parse(r.body.toString());
    expect(body.statusCode).to.equal('42200');
    expect(body.extraInfo).to.deep.equal({ maxRenderBytes: BOUND, decodeBytes: BASELINE, encodeBytes: AVIF_2048 });
    expect(renders(), 'nothing rendered').to.equal(before);

    // 64×64: 6,144,000 + 3,301,216 bytes, within the bound.
    const ok = await get('baseline.jpg?w=64&fm=avif');
    expect(ok.status, ok.body.toString()).to.equal(200);
    expect(await sharp(ok.body).metadata()).to.include({ format: 'heif', width: 64 });
    expect(renders()).to.equal(before + 1);
  });

  it('two renders whose decodes and encodes pass the bound together: one answers 503 with Retry-After, the other renders', async () => {
    // Each 6,144,000 + 2 MiB + 500 × 500 × 10 = 10,741,152 bytes, two past 12,000,000; two renders are within RENDITION_MAX_CONCURRENT (4).
    expect(BASELINE + JPEG_501).to.be.within(BOUND / 2, BOUND);
    const both = await Promise.all([get('baseline.jpg?w=500&fm=jpeg'), get('baseline.jpg?w=501&fm=jpeg')]);
    expect(both.map((r) => r.status).sort()).to.deep.equal([200, 503]);
    const refused = both.find((r) => r.status === 503)!;
    expect(refused.retryAfter).to.equal('1');
    expect(JSON.parse(refused.body.toString()).statusCode).to.equal('50300');
    // Once the first is done, the same rendition renders.
    const again = await get(both[0].status === 503 ? 'baseline.jpg?w=500&fm=jpeg' : 'baseline.jpg?w=501&fm=jpeg');
    expect(again.status, again.body.toString()).to.equal(200);
  });
});
