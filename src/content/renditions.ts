import { z } from 'zod';
import { AppError } from '../errors.js';

/**
 * Image renditions on file delivery (CONTRACT §17): the rule of the query parameters, pure.
 * A delivery read with any of `w`, `h`, `fit`, `fm`, `q`, `focal` or `rendition` asks for a
 * rendition; each value is checked here (400 naming the parameter) and put in one canonical
 * form, so that the same rendition asked in two spellings is made, kept and signed once.
 */

export const FITS = ['inside', 'cover', 'contain', 'fill'] as const;
export type Fit = (typeof FITS)[number];
export const FORMATS = ['jpeg', 'png', 'webp', 'avif'] as const;
export type Format = (typeof FORMATS)[number];

/** The parameters that ask for a rendition; `sig` signs them (it asks for nothing by itself). */
export const RENDITION_PARAMS = ['w', 'h', 'fit', 'fm', 'q', 'focal', 'rendition'] as const;
export const MAX_DIMENSION = 4096;

/** A rendition's parameters, checked: absent ones take the defaults at render time. */
export interface RenditionParams {
  w?: number;
  h?: number;
  fit: Fit;
  fm?: Format | 'auto';
  q?: number;
  /** Focal point, each 0..1 from the left and top edges. */
  focal?: [number, number];
}

export interface RenditionRequest {
  params: RenditionParams;
  /** The named rendition asked for, or null for free parameters. */
  name: string | null;
  /** The canonical query of the free parameters (what `sig` signs); '' for a named rendition. */
  canonical: string;
}

const dimension = z.number().int().min(1).max(MAX_DIMENSION);
const namedSchema = z
  .object({
    w: dimension.optional(),
    h: dimension.optional(),
    fit: z.enum(FITS).optional(),
    fm: z.enum([...FORMATS, 'auto']).optional(),
    q: z.number().int().min(1).max(100).optional(),
  })
  .strict();
export type NamedRendition = z.infer<typeof namedSchema>;
export type NamedRenditions = Record<string, NamedRendition>;
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** config/renditions.json, checked: names to parameters (no focal: that comes from the image). */
export function parseRenditionsConfig(raw: unknown, file = 'renditions.json'): NamedRenditions {
  const parsed = z.record(z.string().regex(NAME), namedSchema).safeParse(raw);
  if (!parsed.success) throw new Error(`${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

const bad = (param: string, message: string): AppError => new AppError('BAD_REQUEST', `Invalid rendition parameter ${param}: ${message}`, { parameter: param });

/** A decimal integer in [min, max]; no sign, no exponent, no fraction. */
function intParam(param: string, v: string, min: number, max: number): number {
  if (!/^\d{1,6}$/.test(v)) throw bad(param, `must be an integer from ${min} to ${max}`);
  const n = Number(v);
  if (n < min || n > max) throw bad(param, `must be an integer from ${min} to ${max}`);
  return n;
}

/** A decimal fraction in [0, 1]. */
function unitParam(param: string, v: string): number {
  if (!/^(0(\.\d{1,6})?|1(\.0{1,6})?|\.\d{1,6})$/.test(v)) throw bad(param, 'must be x,y with each from 0 to 1');
  return Number(v);
}

/** Does the query ask for a rendition? */
export function asksForRendition(query: URLSearchParams): boolean {
  return RENDITION_PARAMS.some((p) => query.has(p));
}

/**
 * The rendition a delivery query asks for, or null when it asks for none. Each parameter at
 * most once; `rendition=<name>` stands alone (a named rendition is a fixed, unsigned set).
 */
export function parseRenditionQuery(query: URLSearchParams, named: NamedRenditions): RenditionRequest | null {
  if (!asksForRendition(query)) return null;
  for (const p of [...RENDITION_PARAMS, 'sig']) if (query.getAll(p).length > 1) throw bad(p, 'given more than once');
  const name = query.get('rendition');
  if (name !== null) {
    for (const p of RENDITION_PARAMS) if (p !== 'rendition' && query.has(p)) throw bad(p, 'cannot be combined with rendition');
    const def = Object.hasOwn(named, name) ? named[name] : undefined;
    if (!def) throw bad('rendition', `no rendition named ${JSON.stringify(name.slice(0, 64))}`);
    return { params: { ...def, fit: def.fit ?? 'inside' }, name, canonical: '' };
  }
  const params: RenditionParams = { fit: 'inside' };
  const w = query.get('w');
  if (w !== null) params.w = intParam('w', w, 1, MAX_DIMENSION);
  const h = query.get('h');
  if (h !== null) params.h = intParam('h', h, 1, MAX_DIMENSION);
  const fit = query.get('fit');
  if (fit !== null) {
    if (!(FITS as readonly string[]).includes(fit)) throw bad('fit', `must be one of ${FITS.join(', ')}`);
    params.fit = fit as Fit;
  }
  const fm = query.get('fm');
  if (fm !== null) {
    if (fm !== 'auto' && !(FORMATS as readonly string[]).includes(fm)) throw bad('fm', `must be one of ${FORMATS.join(', ')}, auto`);
    params.fm = fm as Format | 'auto';
  }
  const q = query.get('q');
  if (q !== null) params.q = intParam('q', q, 1, 100);
  const focal = query.get('focal');
  if (focal !== null) {
    const parts = focal.split(',');
    if (parts.length !== 2) throw bad('focal', 'must be x,y with each from 0 to 1');
    params.focal = [unitParam('focal', parts[0]), unitParam('focal', parts[1])];
  }
  return { params, name: null, canonical: canonicalQuery(params, fit !== null) };
}

/**
 * The canonical query of free parameters: the given ones sorted by name, numbers in their
 * shortest decimal form (`w=0100` is `w=100`, `focal=.50,1.0` is `focal=0.5,1`). `fit` appears
 * when it was given. This is what `sig` signs, and with the source what names a kept rendition.
 */
export function canonicalQuery(p: RenditionParams, withFit = true): string {
  const pairs: [string, string][] = [];
  if (withFit) pairs.push(['fit', p.fit]);
  if (p.fm !== undefined) pairs.push(['fm', p.fm]);
  if (p.focal) pairs.push(['focal', `${p.focal[0]},${p.focal[1]}`]);
  if (p.h !== undefined) pairs.push(['h', String(p.h)]);
  if (p.q !== undefined) pairs.push(['q', String(p.q)]);
  if (p.w !== undefined) pairs.push(['w', String(p.w)]);
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

/**
 * The output format: `auto` chooses from `Accept` (AVIF, then WebP, when the client takes
 * them), else the source's own format when it is one of ours, else JPEG. Without `fm`, the
 * source's format too.
 */
export function resolveFormat(fm: Format | 'auto' | undefined, accept: string | undefined, source: string | undefined): Format {
  if (fm !== undefined && fm !== 'auto') return fm;
  if (fm === 'auto') {
    const a = (accept ?? '').toLowerCase();
    if (accepts(a, 'image/avif')) return 'avif';
    if (accepts(a, 'image/webp')) return 'webp';
  }
  return (FORMATS as readonly string[]).includes(source ?? '') ? (source as Format) : 'jpeg';
}

/** Does an Accept header list `type` with a non-zero q? */
function accepts(accept: string, type: string): boolean {
  return accept.split(',').some((part) => {
    const [t, ...ps] = part.split(';').map((s) => s.trim());
    if (t !== type) return false;
    const q = ps.find((x) => x.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/**
 * The focal point an image's content gives: `svcImage.focalPoint` `{x, y}` (each 0 to 1), for
 * the main image. Anything else there is ignored (the centre is used).
 */
export function focalOfContent(svcImage: Record<string, unknown> | undefined): [number, number] | undefined {
  const fp = svcImage?.focalPoint as { x?: unknown; y?: unknown } | undefined;
  if (!fp || typeof fp !== 'object') return undefined;
  const { x, y } = fp;
  if (typeof x !== 'number' || typeof y !== 'number' || !(x >= 0 && x <= 1) || !(y >= 0 && y <= 1)) return undefined;
  return [x, y];
}

/**
 * Where a cover crop of a `sw`×`sh` source to `w`×`h` starts around the focal point: the
 * source scaled to cover, then the window centred on the focal point as far as the edges let.
 */
export function focalCrop(sw: number, sh: number, w: number, h: number, focal: [number, number]) {
  const scale = Math.max(w / sw, h / sh);
  const rw = Math.max(w, Math.round(sw * scale));
  const rh = Math.max(h, Math.round(sh * scale));
  const left = Math.min(rw - w, Math.max(0, Math.round(focal[0] * rw - w / 2)));
  const top = Math.min(rh - h, Math.max(0, Math.round(focal[1] * rh - h / 2)));
  return { resizeWidth: rw, resizeHeight: rh, left, top };
}

export const MIME_OF_FORMAT: Record<Format, string> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp', avif: 'image/avif' };

/** Source types a rendition can be made from. */
export const RENDERABLE = new Set(['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif', 'image/tiff']);
