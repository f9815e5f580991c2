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
 * The largest width or height a rendition may resize its source to. A cover resize scales the
 * source until it covers the box, so a 4096×4096 cover of a 1×30000 image is 4096×122,880,000
 * pixels: sharp refuses a side above 100,000,000 by throwing synchronously, and libvips fails
 * on output coordinates far below that (2^25 with libvips 8.18; VIPS_MAX_COORD, 10,000,000 in
 * earlier versions, is the bound that holds with any of them). Such a rendition is refused (422,
 * as a source over the pixel bound) before sharp is called.
 */
export const MAX_RESIZE_DIMENSION = 10_000_000;

/**
 * The size sharp resizes the source to (`resize*`) and the size of the rendition, for the
 * parameters given; null when nothing is resized. A box given by one side scales the other in
 * proportion (`fill` keeps the source's other side); `inside` never enlarges; `cover` and
 * `outside` scale until the box is covered (`cover` then crops to it).
 */
function resizeOf(
  width: number,
  height: number,
  p: RenditionParams,
  crop: ReturnType<typeof focalCrop> | undefined,
): { resizeWidth: number; resizeHeight: number; width: number; height: number } | null {
  if (p.w === undefined && p.h === undefined) return null;
  const scaled = (s: number) => ({ w: Math.max(1, Math.round(width * s)), h: Math.max(1, Math.round(height * s)) });
  if (p.w !== undefined && p.h !== undefined) {
    if (crop) return { resizeWidth: crop.resizeWidth, resizeHeight: crop.resizeHeight, width: p.w, height: p.h };
    if (p.fit === 'fill') return { resizeWidth: p.w, resizeHeight: p.h, width: p.w, height: p.h };
    const sx = p.w / width;
    const sy = p.h / height;
    const r = scaled(p.fit === 'inside' ? Math.min(sx, sy, 1) : p.fit === 'contain' ? Math.min(sx, sy) : Math.max(sx, sy));
    return { resizeWidth: r.w, resizeHeight: r.h, width: p.fit === 'contain' ? p.w : r.w, height: p.fit === 'contain' ? p.h : r.h };
  }
  if (p.fit === 'fill') {
    const w = p.w ?? width;
    const h = p.h ?? height;
    return { resizeWidth: w, resizeHeight: h, width: w, height: h };
  }
  const s = p.w !== undefined ? p.w / width : p.h! / height;
  const r = scaled(p.fit === 'inside' ? Math.min(s, 1) : s);
  return { resizeWidth: r.w, resizeHeight: r.h, width: r.w, height: r.h };
}

/**
 * Renders one rendition of `input` (the whole source in memory: images are bounded by the pixel
 * limit, checked from the header before decoding). EXIF orientation is applied, metadata dropped.
 */
export async function renderImage(input: Buffer, o: RenderOptions): Promise<Buffer> {
  const { width, height } = await imageSize(input, o.maxPixels);
  const p = o.params;
  // A cover resize (with or without a focal point) scales the source to cover the box first:
  // the same size focalCrop computes, and sharp's cover resize too.
  const box = p.fit === 'cover' && p.w !== undefined && p.h !== undefined ? { w: p.w, h: p.h } : undefined;
  const crop = box && focalCrop(width, height, box.w, box.h, p.focal ?? [0.5, 0.5]);
  const size = resizeOf(width, height, p, crop);
  if (size && (size.resizeWidth > MAX_RESIZE_DIMENSION || size.resizeHeight > MAX_RESIZE_DIMENSION))
    throw new AppError(
      'UNPROCESSABLE',
      `This resize of the image would make it larger than ${MAX_RESIZE_DIMENSION} pixels a side: no rendition is made of it`,
      {
        maxResizeDimension: MAX_RESIZE_DIMENSION,
      },
    );
  if (size && size.width * size.height > o.maxPixels)
    throw new AppError('UNPROCESSABLE', `The rendition would have more than ${o.maxPixels} pixels: none is made`, {
      maxPixels: o.maxPixels,
      pixels: size.width * size.height,
    });
  try {
    // limitInputPixels holds even if the header lied about the size.
    let img = sharp(input, { limitInputPixels: o.maxPixels, failOn: 'error' }).rotate();
    if (p.w !== undefined || p.h !== undefined) {
      if (box && crop && p.focal) {
        img = img.resize(crop.resizeWidth, crop.resizeHeight, { fit: 'fill' }).extract({ left: crop.left, top: crop.top, width: box.w, height: box.h });
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
    return await img.toBuffer();
  } catch (e) {
    // Building the pipeline is inside this try too: a parameter sharp refuses synchronously
    // is the same client error as a source libvips cannot decode, never a 500.
    if (e instanceof Error && /pixel limit/i.test(e.message))
      throw new AppError('UNPROCESSABLE', `The image has more than ${o.maxPixels} pixels`, { maxPixels: o.maxPixels });
    throw new AppError('BAD_REQUEST', 'The image could not be decoded', { parameter: 'source' });
  }
}
