import sharp, { type Metadata } from 'sharp';
import { focalCrop, type Format, type RenditionParams } from '../content/renditions.js';
import { AppError } from '../errors.js';

// libvips keeps decoded images and open files in a cache of its own, and by default uses a
// thread per core for each image: a burst of large renders then holds far more memory than the
// bound on concurrent renders suggests (peers' resizing services report exactly these spikes).
// A small operation cache, no file cache, and one thread per render keep a render's memory to
// its own pixels; parallelism comes from the gateway's bound on concurrent renders instead.
sharp.cache({ memory: 32, files: 0, items: 50 });
sharp.concurrency(1);
// Only the decoders of the formats renditions are made of (RENDERABLE in content/renditions.ts)
// read uploaded data. A file's stored type comes from content sniffing, which falls back to the
// uploader's declared type where it recognises nothing (an SVG, a PDF, a PPM); without this,
// libvips would pick its loader from the bytes and hand such a file to librsvg, poppler or its
// text loaders, far larger parsers than renditions need. In this process, sharp reads nothing else.
sharp.block({ operation: ['VipsForeignLoad'] });
sharp.unblock({
  operation: [
    'VipsForeignLoadJpegBuffer',
    'VipsForeignLoadPngBuffer',
    'VipsForeignLoadWebpBuffer',
    'VipsForeignLoadHeifBuffer',
    'VipsForeignLoadNsgifBuffer',
    'VipsForeignLoadTiffBuffer',
  ],
});

export interface RenderOptions {
  params: RenditionParams;
  format: Format;
  /** Sources with more pixels than this are refused (422) before anything is decoded. */
  maxPixels: number;
}

/** Width and height from the header alone; 400 when the data is no image sharp can read. */
export async function imageSize(input: Buffer, maxPixels: number): Promise<{ width: number; height: number; format?: string }> {
  let meta: Metadata;
  try {
    meta = await sharp(input, { limitInputPixels: false }).metadata();
  } catch {
    throw new AppError('BAD_REQUEST', 'The file is not an image that renditions can be made of', { parameter: 'source' });
  }
  // The size as displayed: an EXIF orientation of a quarter turn swaps the two.
  const width = meta.autoOrient?.width ?? meta.width ?? 0;
  const height = meta.autoOrient?.height ?? meta.height ?? 0;
  if (!width || !height) throw new AppError('BAD_REQUEST', 'The file is not an image that renditions can be made of', { parameter: 'source' });
  if (width * height > maxPixels)
    throw new AppError('UNPROCESSABLE', `The image has more than ${maxPixels} pixels: no rendition is made of it`, { maxPixels, pixels: width * height });
  return { width, height, format: meta.format };
}

/**
 * Renders one rendition of `input` (the whole source in memory: images are bounded by the pixel
 * limit, checked from the header before decoding). EXIF orientation is applied, metadata dropped.
 */
export async function renderImage(input: Buffer, o: RenderOptions): Promise<Buffer> {
  const { width, height } = await imageSize(input, o.maxPixels);
  const p = o.params;
  // limitInputPixels holds even if the header lied about the size.
  let img = sharp(input, { limitInputPixels: o.maxPixels, failOn: 'error' }).rotate();
  if (p.w !== undefined || p.h !== undefined) {
    if (p.fit === 'cover' && p.focal && p.w !== undefined && p.h !== undefined) {
      const c = focalCrop(width, height, p.w, p.h, p.focal);
      img = img.resize(c.resizeWidth, c.resizeHeight, { fit: 'fill' }).extract({ left: c.left, top: c.top, width: p.w, height: p.h });
    } else {
      img = img.resize({ width: p.w, height: p.h, fit: p.fit, withoutEnlargement: p.fit === 'inside' });
    }
  }
  const quality = p.q;
  switch (o.format) {
    case 'jpeg':
      img = img.jpeg({ quality, mozjpeg: true });
      break;
    case 'png':
      img = img.png(quality !== undefined ? { quality, palette: quality < 100 } : {});
      break;
    case 'webp':
      // Effort 2 of 6: about a third less encoding time than the default for a few percent in size,
      // which keeps a first render of a 12-megapixel photo near the 300 ms.
      img = img.webp({ quality, effort: 2 });
      break;
    case 'avif':
      img = img.avif({ quality, effort: 2 });
      break;
  }
  try {
    return await img.toBuffer();
  } catch (e) {
    if (e instanceof Error && /pixel limit/i.test(e.message))
      throw new AppError('UNPROCESSABLE', `The image has more than ${o.maxPixels} pixels`, { maxPixels: o.maxPixels });
    throw new AppError('BAD_REQUEST', 'The image could not be decoded', { parameter: 'source' });
  }
}
