import { expect } from 'chai';
import sharp from 'sharp';
import { AppError } from '../errors.js';
import { decodeBytesOf, encodeBytesOf, imageSize, planRender, renderImage } from './image-renderer.js';

/**
 * What a render's decode holds, estimated from the header (`decodeBytesOf`, RENDITION_MAX_RENDER_BYTES):
 * a baseline JPEG and a non-interlaced PNG stream (a strip of rows of their width), a progressive
 * JPEG holds 2 bytes a sample of coefficients, an interlaced PNG its whole image at its bit depth.
 */
describe('decodeBytesOf: what a render holds decoding its source (src/adapters/image-renderer.ts)', () => {
  const W = 300;
  const H = 200;
  const image = (channels: 3 | 4 = 3) => sharp({ create: { width: W, height: H, channels, background: { r: 10, g: 20, b: 30, alpha: 1 } } });
  const estimate = async (buf: Buffer) => {
    const meta = await sharp(buf).metadata();
    return { meta, bytes: decodeBytesOf(meta) };
  };

  it('a progressive JPEG holds 2 bytes a sample more than the baseline JPEG of the same pixels, which is small', async () => {
    const baseline = await estimate(await image().jpeg({ chromaSubsampling: '4:4:4' }).toBuffer());
    const progressive = await estimate(await image().jpeg({ progressive: true, chromaSubsampling: '4:4:4', mozjpeg: false }).toBuffer());
    expect(baseline.meta.isProgressive).to.equal(false);
    expect(progressive.meta.isProgressive).to.equal(true);
    // A strip of rows of its width: a few MB, whatever its height.
    expect(baseline.bytes).to.equal(2048 * W * 3);
    // Every coefficient of every component, in blocks of up to 32×32 (300×200 → 320×224).
    expect(progressive.bytes - baseline.bytes).to.equal(320 * 224 * 3 * 2);
    // mozjpeg's default is progressive too, and so is its estimate.
    const moz = await estimate(await image().jpeg({ mozjpeg: true }).toBuffer());
    expect(moz.meta.isProgressive).to.equal(true);
    expect(moz.bytes).to.equal(progressive.bytes);
  });

  it('an interlaced PNG holds its whole image at its bit depth (16-bit: 2 bytes a sample); a non-interlaced one streams', async () => {
    const png8 = await estimate(await image().png().toBuffer());
    const png8i = await estimate(await image().png({ progressive: true }).toBuffer());
    const png16 = await estimate(await image().toColourspace('rgb16').png().toBuffer());
    const png16i = await estimate(await image().toColourspace('rgb16').png({ progressive: true }).toBuffer());
    expect([png8, png8i, png16, png16i].map((e) => [e.meta.isProgressive, e.meta.depth])).to.deep.equal([
      [false, 'uchar'],
      [true, 'uchar'],
      [false, 'ushort'],
      [true, 'ushort'],
    ]);
    expect(png8.bytes).to.equal(2048 * W * 3);
    expect(png16.bytes).to.equal(2048 * W * 3 * 2);
    expect(png8i.bytes - png8.bytes).to.equal(W * H * 3);
    expect(png16i.bytes - png16.bytes).to.equal(W * H * 3 * 2);
    // With alpha: four channels.
    const rgba = await estimate(await image(4).png({ progressive: true }).toBuffer());
    expect(rgba.bytes).to.equal(2048 * W * 4 + W * H * 4);
  });

  it('formats decoded whole (GIF, WebP, AVIF, TIFF) are estimated above their pixels; a very wide baseline PNG above its strip', async () => {
    for (const buf of [
      await image().gif().toBuffer(),
      await image().webp().toBuffer(),
      await image().avif({ effort: 0 }).toBuffer(),
      await image().tiff().toBuffer(),
    ]) {
      const { meta, bytes } = await estimate(buf);
      expect(bytes, meta.format).to.be.at.least(2048 * W * meta.channels + W * H * meta.channels);
    }
    // 1,000,000×50 held 1.66 GB in one render: its estimate is past the default 1 GiB.
    const wide = { format: 'png', width: 1_000_000, height: 50, channels: 4, depth: 'uchar', isProgressive: false } as const;
    expect(decodeBytesOf(wide)).to.be.above(1024 * 2 ** 20);
  });

  it('planRender answers both estimates; renderImage refuses a render past maxRenderBytes (decode and encode) with 422 before decoding', async () => {
    const progressive = await image().jpeg({ progressive: true, mozjpeg: false }).toBuffer();
    const params = { w: 50, fit: 'inside' as const };
    const plan = await planRender(progressive, { params, format: 'jpeg', maxPixels: 50_000_000 });
    const { decodeBytes } = await imageSize(progressive, 50_000_000);
    expect(plan.decodeBytes).to.equal(decodeBytes);
    expect(decodeBytes).to.equal(decodeBytesOf(await sharp(progressive).metadata()));
    // 300×200 to 50 wide: a 50×33 JPEG.
    expect(plan.output).to.deep.equal({ width: 50, height: 33 });
    expect(plan.encodeBytes).to.equal(encodeBytesOf('jpeg', 50, 33, { channels: 3, sampleBytes: 1 }));
    const total = plan.decodeBytes + plan.encodeBytes;
    const err = await renderImage(progressive, { params, format: 'jpeg', maxPixels: 50_000_000, maxRenderBytes: total - 1 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).code).to.equal('UNPROCESSABLE');
    expect((err as AppError).extraInfo).to.deep.equal({ maxRenderBytes: total - 1, decodeBytes, encodeBytes: plan.encodeBytes });
    const out = await renderImage(progressive, { params, format: 'jpeg', maxPixels: 50_000_000, maxRenderBytes: total }, plan);
    expect((await sharp(out).metadata()).width).to.equal(50);
  });
});

/**
 * What a render's encode holds, estimated from the rendition's size and format (`encodeBytesOf`,
 * RENDITION_MAX_RENDER_BYTES with the decode): AVIF holds the most, then WebP, JPEG and PNG; a
 * WebP or AVIF with alpha more; a PNG its raw pixels, or far more quantised to a palette.
 */
describe('encodeBytesOf: what a render holds encoding its rendition (src/adapters/image-renderer.ts)', () => {
  const MiB = 2 ** 20;
  const rgb = { channels: 3, sampleBytes: 1 };

  it('larger renditions estimate more, in every format', () => {
    for (const format of ['jpeg', 'png', 'webp', 'avif'] as const) {
      const sizes = [
        [64, 64],
        [800, 600],
        [1200, 900],
        [4096, 4096],
        [7071, 7071],
      ].map(([w, h]) => encodeBytesOf(format, w, h, rgb));
      expect(sizes, format).to.deep.equal([...sizes].sort((a, b) => a - b));
      expect(new Set(sizes).size, format).to.equal(sizes.length);
    }
  });

  it('AVIF estimates more than WebP, WebP more than PNG, for the same size; alpha and a palette cost more', () => {
    for (const [w, h] of [
      [256, 256],
      [1200, 900],
      [4096, 4096],
    ]) {
      const [avif, webp, png] = (['avif', 'webp', 'png'] as const).map((f) => encodeBytesOf(f, w, h, rgb));
      expect(avif, `${w}×${h}`).to.be.above(webp);
      expect(webp, `${w}×${h}`).to.be.above(png);
      expect(encodeBytesOf('webp', w, h, { ...rgb, channels: 4 })).to.be.above(webp);
      expect(encodeBytesOf('avif', w, h, { ...rgb, channels: 4 })).to.be.above(avif);
      expect(encodeBytesOf('png', w, h, { ...rgb, quality: 80 })).to.be.above(png);
      // A JPEG drops alpha.
      expect(encodeBytesOf('jpeg', w, h, { ...rgb, channels: 4 })).to.equal(encodeBytesOf('jpeg', w, h, rgb));
    }
  });

  it('a few fixed values: measured (peak RSS of encoding noise) at or below each', () => {
    // A 4096² AVIF held 562 MB, WebP 88, JPEG 156; a full-size (7071²) WebP 279, JPEG 444.
    expect(encodeBytesOf('avif', 4096, 4096, rgb)).to.equal(3 * MiB + 4096 * 4096 * 38);
    expect(encodeBytesOf('webp', 4096, 4096, rgb)).to.equal(3.5 * MiB + 4096 * 4096 * 7);
    expect(encodeBytesOf('jpeg', 4096, 4096, rgb)).to.equal(2 * MiB + 4096 * 4096 * 10);
    expect(encodeBytesOf('webp', 7071, 7071, rgb)).to.be.at.least(279e6);
    expect(encodeBytesOf('jpeg', 7071, 7071, rgb)).to.be.at.least(444e6);
    // The bench's 800×600 and 1200×900 WebP: 5.9 and 10.2 MB.
    expect(encodeBytesOf('webp', 800, 600, rgb)).to.equal(3.5 * MiB + 800 * 600 * 7);
    expect(encodeBytesOf('webp', 1200, 900, rgb)).to.equal(3.5 * MiB + 1200 * 900 * 7);
    // An 8-bit RGB PNG: 1.25 times its raw bytes; unknown bands count as 16-bit RGBA.
    expect(encodeBytesOf('png', 1000, 1000, rgb)).to.equal(3 * MiB + 1000 * 1000 * 3 * 1.25);
    expect(encodeBytesOf('png', 1000, 1000)).to.equal(3 * MiB + 1000 * 1000 * 8 * 1.25);
    // A 4096² AVIF is within the default bound (1 GiB); one of 6000×6000 alone passes it.
    expect(encodeBytesOf('avif', 4096, 4096, rgb)).to.be.within(512 * MiB, 1024 * MiB);
    expect(encodeBytesOf('avif', 6000, 6000, rgb)).to.be.above(1024 * MiB);
  });

  it('planRender estimates the rendition it will make: the size of a fill, a cover, a source kept whole', async () => {
    const src = await sharp({ create: { width: 300, height: 200, channels: 4, background: { r: 1, g: 2, b: 3, alpha: 0.5 } } })
      .png()
      .toBuffer();
    const plan = (params: object, format: 'avif' | 'webp' | 'png') => planRender(src, { params: { fit: 'inside', ...params }, format, maxPixels: 50_000_000 });
    const rgba = { channels: 4, sampleBytes: 1 };
    const fill = await plan({ w: 2000, h: 1000, fit: 'fill' }, 'avif');
    expect(fill.output).to.deep.equal({ width: 2000, height: 1000 });
    expect(fill.encodeBytes).to.equal(encodeBytesOf('avif', 2000, 1000, rgba));
    const cover = await plan({ w: 100, h: 100, fit: 'cover', focal: [0.2, 0.5] }, 'webp');
    expect(cover.output).to.deep.equal({ width: 100, height: 100 });
    expect(cover.encodeBytes).to.equal(encodeBytesOf('webp', 100, 100, rgba));
    const whole = await plan({ q: 50 }, 'png');
    expect(whole.output).to.deep.equal({ width: 300, height: 200 });
    expect(whole.encodeBytes).to.equal(encodeBytesOf('png', 300, 200, { ...rgba, quality: 50 }));
  });
});
