import { expect } from 'chai';
import sharp from 'sharp';
import { AppError } from '../errors.js';
import { decodeBytesOf, imageSize, renderImage } from './image-renderer.js';

/**
 * What a render's decode holds, estimated from the header (`decodeBytesOf`, RENDITION_MAX_DECODE_BYTES):
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
    // 1,000,000×50 held 1.66 GB in one render: its estimate is past the default 512 MiB.
    const wide = { format: 'png', width: 1_000_000, height: 50, channels: 4, depth: 'uchar', isProgressive: false } as const;
    expect(decodeBytesOf(wide)).to.be.above(512 * 2 ** 20);
  });

  it('imageSize answers the estimate; renderImage refuses a source past maxDecodeBytes with 422 before decoding it', async () => {
    const progressive = await image().jpeg({ progressive: true, mozjpeg: false }).toBuffer();
    const { decodeBytes } = await imageSize(progressive, 50_000_000);
    expect(decodeBytes).to.equal(decodeBytesOf(await sharp(progressive).metadata()));
    const params = { w: 50, fit: 'inside' as const };
    const err = await renderImage(progressive, { params, format: 'jpeg', maxPixels: 50_000_000, maxDecodeBytes: decodeBytes - 1 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).code).to.equal('UNPROCESSABLE');
    expect((err as AppError).extraInfo).to.deep.equal({ maxDecodeBytes: decodeBytes - 1, decodeBytes });
    const out = await renderImage(progressive, { params, format: 'jpeg', maxPixels: 50_000_000, maxDecodeBytes: decodeBytes });
    expect((await sharp(out).metadata()).width).to.equal(50);
  });
});
