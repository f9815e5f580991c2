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
  /**
   * Renders whose decode and encode would hold more bytes than this together (`decodeBytesOf` +
   * `encodeBytesOf`, `planRender`) are refused (422) before anything is decoded. Unset: no bound
   * (the gateway checks it, and the sum of the renders in flight, before it calls `renderImage`).
   */
  maxRenderBytes?: number;
}

/** What a render needs to know of its source before decoding it, from the header alone. */
export interface ImageHeader {
  /** The size as displayed (after the EXIF orientation). */
  width: number;
  height: number;
  format?: string;
  /** Its bands (with alpha: 2 or 4) and bytes a sample, which a rendition's encode may keep (`encodeBytesOf`). */
  channels: number;
  sampleBytes: number;
  /** The bytes a render of it holds while decoding (`decodeBytesOf`). */
  decodeBytes: number;
}

/** Bytes of one sample in each of libvips' band formats (sharp's `depth`). */
const BYTES_PER_SAMPLE: Record<string, number> = { uchar: 1, char: 1, ushort: 2, short: 2, uint: 4, int: 4, float: 4, complex: 8, double: 8, dpcomplex: 16 };

/**
 * Rows of its full width a render's pipeline holds, whatever the decoder: libvips works in
 * strips, and a resize of a source it cannot shrink while loading (PNG, TIFF, GIF) holds many rows
 * of the source's width, in more than one buffer. Measured (peak RSS of one render to 100 pixels
 * wide, `.cache/sec16/bomb-probe.ts`) on non-interlaced 8-bit RGBA PNGs of up to 50 MP: about
 * 1,200 to 2,200 rows' worth from 1,000 to 14,142 pixels wide (3535: 31 MB, 7071: 42 MB, 16-bit
 * 75 MB, 14142: 67 MB; what any render holds, 10-20 MB, is in these figures), and more than the
 * whole image once it is very wide: 60000×833 212 MB, 100000×500 346 MB, 1000000×50 1,662 MB
 * (a 0.97 MB file).
 */
const STRIP_ROWS = 2048;
/** Samples of a JPEG component are stored in blocks of up to 32×32 pixels (8×8 times a sampling factor of up to 4). */
const JPEG_MCU = 32;

/**
 * The bytes one render of an image with this header holds while it decodes the source, from the
 * header alone (sharp's `metadata()`): RENDITION_MAX_RENDER_BYTES bounds the sum of these, with
 * what the encoders hold (`encodeBytesOf`), over the renders in flight in a process. Measured as peak RSS of one render to 100 pixels wide with
 * `.cache/sec16/bomb-probe.ts` (sharp 0.35.5, libvips 8.18.7, 2 cores), on flat images of
 * 7071×7071 (50 MP, the default RENDITION_MAX_PIXELS) whose files are 34 bytes to 1 MB; the
 * estimate follows each figure in brackets.
 *
 * - Every source: the rows its pipeline holds, STRIP_ROWS × width × channels × bytes a sample.
 *   This is all a source that libvips decodes as a stream holds: a baseline JPEG 5 MB [43] (it
 *   is shrunk up to 8× while it is decoded), a non-interlaced PNG 42 MB [58], 16-bit 75 MB [116],
 *   1000000×50 1,662 MB [8,192]; it is also what a resize holds of a source decoded whole.
 * - Progressive JPEG (`isProgressive`: progressive, or any JPEG of more than one scan): libjpeg
 *   keeps every DCT coefficient of the image until the last scan, 2 bytes a sample of every
 *   component at full size, its blocks' padding included. 4:4:4 305 MB [344]; 4:2:0 155 MB
 *   [344] (its chroma is a quarter, which the header as sharp reads it does not tell reliably).
 * - Interlaced PNG (`isProgressive`, Adam7): libpng decodes it whole, pixels × channels × bytes a
 *   sample (16-bit: 2). 8-bit RGB 165 MB [193], RGBA 227 MB [258], palette 166 MB [193]; 16-bit
 *   RGBA 444 MB [516].
 * - GIF: libnsgif decodes into an RGBA canvas of the whole image, 4 bytes a pixel: 242 MB [258].
 * - WebP: libwebp decodes the whole image, shrunk while decoding where the resize allows it:
 *   a full-size render of a 34-byte lossless file 407 MB [493], to 100 pixels wide 26 MB;
 *   estimated at full size, 3 bytes a sample.
 * - HEIF/AVIF: libheif and the AV1 decoder hold the whole image in several planes and copies,
 *   whatever the rendition: 8-bit 4:4:4 923 MB [1,018] (a 943-byte file), 4:2:0 767 MB [1,018],
 *   with alpha 935 MB [1,358], 10-bit 1,243 MB [2,037], 3535×3535 230 MB [265]; 6.5 times
 *   pixels × channels × bytes a sample.
 * - TIFF: in tiles, libvips holds a row of tiles or two, past the image's edge (a tile may hold
 *   up to 100 MB): 7071×7071 in 4096-pixel tiles 217 MB [343], 4097×4097 in 4096-pixel tiles
 *   111 MB [126]; in strips 28-42 MB. The layout is not in the header sharp reads, so every TIFF
 *   is estimated at twice its pixels × channels × bytes a sample.
 * - Any other format (none is read: see `sharp.block` above) as a TIFF.
 *
 * What a render holds to encode its rendition, which follows the rendition's size whatever the
 * source, is `encodeBytesOf`.
 */
export function decodeBytesOf(meta: Pick<Metadata, 'format' | 'width' | 'height' | 'channels' | 'depth' | 'isProgressive'>): number {
  const width = meta.width ?? 0;
  const height = meta.height ?? 0;
  const channels = meta.channels ?? 4;
  const bytes = BYTES_PER_SAMPLE[meta.depth] ?? 8;
  const samples = width * height * channels;
  const strip = STRIP_ROWS * width * channels * bytes;
  const padded = (n: number) => Math.ceil(n / JPEG_MCU) * JPEG_MCU;
  switch (meta.format) {
    case 'jpeg':
      return strip + (meta.isProgressive ? padded(width) * padded(height) * channels * 2 : 0);
    case 'png':
      return strip + (meta.isProgressive ? samples * bytes : 0);
    case 'gif':
      return strip + width * height * 4;
    case 'webp':
      return strip + samples * 3;
    case 'heif':
      return strip + Math.ceil(samples * bytes * 6.5);
    default:
      return strip + samples * bytes * 2;
  }
}

const MiB = 2 ** 20;
/**
 * What an encoder holds per pixel of the rendition (bytes): at or below sharp's default quality
 * for the format and above it (`high`, up to q 100), without and with alpha; and what any encode
 * of the format holds. PNG's is per byte of its raw pixels, or, quantised to a palette, per pixel
 * up to a cap (libimagequant's histogram) and per pixel past it (`encodeBytesOf`).
 */
const ENCODE_COST = {
  jpeg: { fixed: 2 * MiB, defaultQuality: 80, perPixel: 10, highPerPixel: 16, alphaPerPixel: 10, highAlphaPerPixel: 16 },
  webp: { fixed: 3.5 * MiB, defaultQuality: 80, perPixel: 7, highPerPixel: 11, alphaPerPixel: 40, highAlphaPerPixel: 44 },
  avif: { fixed: 3 * MiB, defaultQuality: 50, perPixel: 38, highPerPixel: 52, alphaPerPixel: 56, highAlphaPerPixel: 75 },
  png: { fixed: 3 * MiB, perRawByte: 1.25, palettePerPixel: 75, paletteCap: 140 * MiB, palettePastCap: 3 },
} as const;

/** What a rendition's encode depends on besides its format and size. */
export interface EncodeShape {
  /** The source's bands (2 or 4: with alpha, which a WebP, AVIF or PNG rendition keeps). Unset: 4. */
  channels?: number;
  /** Bytes of a sample of the source (2: 16-bit, which a PNG rendition keeps). Unset: 2. */
  sampleBytes?: number;
  /** The rendition's `q` (a PNG below 100 is quantised to a palette). */
  quality?: number;
}

/**
 * The bytes one render holds while it encodes a `width`×`height` rendition in `format`, with the
 * settings `renderImage` uses (mozjpeg, progressive; PNG to a palette below q 100; WebP and AVIF
 * at effort 2): RENDITION_MAX_RENDER_BYTES bounds the sum of these and the decodes'
 * (`decodeBytesOf`) over the renders in flight in a process. It follows the rendition's size
 * whatever the source: the encoders of JPEG (every coefficient, for its progressive scans), WebP
 * and AVIF hold the whole image in planes of their own, PNG its whole output. Measured as the peak
 * RSS (VmHWM) of one encode of gaussian noise (the worst case: flat images hold 10-45 % less) made
 * by sharp's `create` (no decoder), after a warm-up encode of the same format, whose code and
 * tables every render of the process shares (`.cache/sec16/encode-probe.ts`; sharp 0.35.5,
 * libvips 8.18.7, 2 cores); MB, the estimate in brackets; RGB at the default quality unless said.
 *
 * - JPEG: 64² 0.4 [2.1], 800×600 5.9 [6.9], 1024² 11.1 [12.6], 1200×900 11.8 [12.9], 2048² 41
 *   [44], 4096² 156 [170] (flat 106), 16384×1024 155 [170], 7071² 444 [502] (flat 309); q 100
 *   2048² 62 [69]; alpha is dropped (RGBA 4096² 120). 10 bytes a pixel (16 above q 80) and 2 MiB.
 * - WebP: 64² 0.2 [3.7], 800×600 4.8 [7.0], 1024² 8.5 [11.0], 1200×900 9.0 [11.2], 2048² 28.4
 *   [33.0] (q 1 23.5, q 100 43.1 [49.8]), 4096² 88 [121] (flat 82), 7071² 279 [354] (flat 238).
 *   With alpha, its lossless alpha encoder holds far more: 1024² 42 [46] (flat 16), 4096² 629
 *   [675], 7071² 1,833 [2,004]. 7 bytes a pixel (11 above q 80; alpha 40, 44) and 3.5 MiB.
 * - AVIF: 64² 1.7 [3.3], 800×600 19.7 [21.4], 1024² 39.2 [43.0], 1200×900 41.6 [44.2], 2048² 148
 *   [163] (q 1 100, q 100 205 [221]), 4096² 562 [641] (flat 345), 16384×1024 577 [641], 7071²
 *   1,683 [1,903] (flat 1,018); with alpha 1024² 56.8 [61.9], 4096² 822 [943], 7071² 2,443
 *   [2,803]. 38 bytes a pixel (52 above q 50; alpha 56, 75, the last not measured) and 3 MiB.
 * - PNG holds its output, for noise about its raw pixels: RGB 800×600 4.0 [4.9], 1024² 6.0 [7.1],
 *   1200×900 6.3 [7.2], 2048² 16.9 [18.9], 4096² 55.8 [66.1], 16384×1024 61.3 [66.1], 7071² 137
 *   [191] (flat 10.6); RGBA 1024² 7.5 [8.4], 4096² 70.8 [87.0], 7071² 195 [253]; 16-bit (a PNG
 *   rendition keeps the source's depth) RGB 2048² 21.9 [34.6], RGBA 4096² 97 [171]. 1.25 times
 *   its raw bytes (channels × bytes a sample) and 3 MiB. Quantised to a palette (q below 100),
 *   libimagequant holds about 70 bytes a pixel up to its histogram's cap, then about 2: 800×600
 *   35.2 [40.6], 1024² 70.8 [84.9] (RGBA 78.2), 2048² 128 [163], 4096² 152 [200], 7071² 267
 *   [300]; 75 bytes a pixel up to 140 MiB, 3 more a pixel, and 3 MiB.
 *
 * Whole renders of a 7071×7071 baseline JPEG (measured while RENDITION_MAX_RENDER_BYTES was made,
 * sampled RSS) held less than decode and encode estimated together: 4096-pixel AVIF 377 MB
 * [43 + 641], WebP 111 [43 + 121], JPEG 135 [43 + 170]; full-size WebP 250 [43 + 354], JPEG 320
 * [43 + 502]. Unknown bands (`shape` unset) are estimated as 16-bit RGBA.
 */
export function encodeBytesOf(format: Format, width: number, height: number, shape: EncodeShape = {}): number {
  const pixels = width * height;
  const channels = shape.channels ?? 4;
  if (format === 'png') {
    const c = ENCODE_COST.png;
    if (shape.quality !== undefined && shape.quality < 100) return c.fixed + Math.min(pixels * c.palettePerPixel, c.paletteCap) + pixels * c.palettePastCap;
    return c.fixed + Math.ceil(pixels * channels * (shape.sampleBytes ?? 2) * c.perRawByte);
  }
  const c = ENCODE_COST[format];
  const alpha = channels % 2 === 0;
  const high = shape.quality !== undefined && shape.quality > c.defaultQuality;
  return c.fixed + pixels * (alpha ? (high ? c.highAlphaPerPixel : c.alphaPerPixel) : high ? c.highPerPixel : c.perPixel);
}

/**
 * 422 when a render's decode and encode (`planRender`) would hold more than `maxRenderBytes`
 * together (nothing is decoded).
 */
export function refuseCostlyRender(plan: Pick<RenderPlan, 'decodeBytes' | 'encodeBytes'>, maxRenderBytes: number): void {
  const { decodeBytes, encodeBytes } = plan;
  if (decodeBytes + encodeBytes > maxRenderBytes)
    throw new AppError(
      'UNPROCESSABLE',
      `Decoding the image and encoding this rendition would take more than ${maxRenderBytes} bytes (RENDITION_MAX_RENDER_BYTES): no rendition is made of it`,
      { maxRenderBytes, decodeBytes, encodeBytes },
    );
}

/**
 * Width and height from the header alone, its bands, and the bytes its decode holds (`decodeBytesOf`); 400
 * when the data is no image sharp can read, 422 past the pixel bound.
 */
export async function imageSize(input: Buffer, maxPixels: number): Promise<ImageHeader> {
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
  return {
    width,
    height,
    format: meta.format,
    channels: meta.channels ?? 4,
    sampleBytes: BYTES_PER_SAMPLE[meta.depth] ?? 8,
    decodeBytes: decodeBytesOf(meta),
  };
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

/** What a render will do and hold, known from the source's header before anything is decoded (`planRender`). */
export interface RenderPlan extends ImageHeader {
  /** The focal crop of a cover resize (made with a focal point only). */
  crop?: ReturnType<typeof focalCrop>;
  /** The rendition's size. */
  output: { width: number; height: number };
  /** What encoding the rendition holds (`encodeBytesOf`). */
  encodeBytes: number;
}

/**
 * Reads the source's header once and plans the render: the source's size and decode estimate
 * (`imageSize`), the resize, the rendition's size and its encode estimate (`encodeBytesOf`); 400
 * when the data is no image, 422 past the pixel bound (of the source or of the rendition) or past
 * the largest resize. The gateway reserves `decodeBytes + encodeBytes` with it and hands it to
 * `renderImage`, so the header is parsed once per render.
 */
export async function planRender(input: Buffer, o: Pick<RenderOptions, 'params' | 'format' | 'maxPixels'>): Promise<RenderPlan> {
  const header = await imageSize(input, o.maxPixels);
  const { width, height } = header;
  const p = o.params;
  // A cover resize (with or without a focal point) scales the source to cover the box first:
  // the same size focalCrop computes, and sharp's cover resize too.
  const box = p.fit === 'cover' && p.w !== undefined && p.h !== undefined ? { w: p.w, h: p.h } : undefined;
  const crop = box && focalCrop(width, height, box.w, box.h, p.focal ?? [0.5, 0.5]);
  const resize = resizeOf(width, height, p, crop);
  if (resize && (resize.resizeWidth > MAX_RESIZE_DIMENSION || resize.resizeHeight > MAX_RESIZE_DIMENSION))
    throw new AppError(
      'UNPROCESSABLE',
      `This resize of the image would make it larger than ${MAX_RESIZE_DIMENSION} pixels a side: no rendition is made of it`,
      {
        maxResizeDimension: MAX_RESIZE_DIMENSION,
      },
    );
  if (resize && resize.width * resize.height > o.maxPixels)
    throw new AppError('UNPROCESSABLE', `The rendition would have more than ${o.maxPixels} pixels: none is made`, {
      maxPixels: o.maxPixels,
      pixels: resize.width * resize.height,
    });
  const output = resize ? { width: resize.width, height: resize.height } : { width, height };
  const shape = { channels: header.channels, sampleBytes: header.sampleBytes, quality: p.q };
  return { ...header, crop, output, encodeBytes: encodeBytesOf(o.format, output.width, output.height, shape) };
}

/**
 * Renders one rendition of `input` (the whole source in memory: images are bounded by the pixel
 * limit and, given `maxRenderBytes`, by what their decode and encode hold, both checked from the
 * header before decoding). `plan` is `planRender`'s for the same input and options (read here
 * when not given). EXIF orientation is applied, metadata dropped.
 */
export async function renderImage(input: Buffer, o: RenderOptions, planned?: RenderPlan): Promise<Buffer> {
  const plan = planned ?? (await planRender(input, o));
  if (o.maxRenderBytes !== undefined) refuseCostlyRender(plan, o.maxRenderBytes);
  const p = o.params;
  const { crop } = plan;
  try {
    // limitInputPixels holds even if the header lied about the size.
    let img = sharp(input, { limitInputPixels: o.maxPixels, failOn: 'error' }).rotate();
    if (p.w !== undefined || p.h !== undefined) {
      // A crop is planned for a cover resize of both sides only.
      if (crop && p.focal) {
        img = img.resize(crop.resizeWidth, crop.resizeHeight, { fit: 'fill' }).extract({ left: crop.left, top: crop.top, width: p.w!, height: p.h! });
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
