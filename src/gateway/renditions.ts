import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { Readable } from 'node:stream';
import { s3Connection, type Settings } from '../../config/settings.js';
import type { FileKey, FileStore, StoredFile } from '../adapters/file-store.js';
import { fileKeyOf } from '../adapters/file-store.js';
import type { RedisClient } from '../adapters/redis.js';
import { createRenditionStore } from '../adapters/rendition-store.js';
import {
  canonicalQuery,
  type Format,
  MIME_OF_FORMAT,
  type NamedRenditions,
  parseRenditionQuery,
  RENDERABLE,
  type RenditionParams,
  type RenditionRequest,
} from '../content/renditions.js';
import { AppError } from '../errors.js';

export interface RenditionsDeps {
  settings: Settings;
  files: FileStore;
  redis: RedisClient;
  renditions: NamedRenditions;
}

/** Where a kept rendition's stored key is remembered, by rendition id. */
const INDEX_PREFIX = 'rendition:';
/** Seconds a client is asked to wait when the renders in flight are at their bound. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Renditions of delivered images (CONTRACT §17): the signature check, and each rendition made
 * once, kept in the rendition store (immutable, named by the source and the canonical
 * parameters) and found again through a small index in Redis. Renders of the same rendition
 * in flight in this process are one render; renders in flight are bounded (503 past it).
 */
export class Renditions {
  /** Renders done by this process (tests prove coalescing with it). */
  renders = 0;
  private active = 0;
  private readonly inFlight = new Map<string, Promise<StoredFile>>();
  private storePromise?: Promise<FileStore>;

  constructor(private readonly d: RenditionsDeps) {}

  /** The rendition the query asks for (null: none), its signature checked. */
  request(query: URLSearchParams): RenditionRequest | null {
    const req = parseRenditionQuery(query, this.d.renditions);
    if (!req) return null;
    const key = this.d.settings.RENDITION_SIGNING_KEY;
    // Named renditions are a fixed set an operator chose: anyone may ask for them. Free
    // parameters multiply into as many renders and kept files as a caller can spell, so with a
    // key set only URLs the site signed are rendered.
    if (key && req.name === null) {
      const sig = query.get('sig');
      if (!sig || !verifySignature(key, req.canonical, sig))
        throw new AppError('PERMISSION_DENIED', 'Rendition parameters need a valid sig', { parameter: 'sig' });
    }
    return req;
  }

  store(): Promise<FileStore> {
    const s = this.d.settings;
    this.storePromise ??= createRenditionStore({
      kind: this.d.files.kind,
      filesDir: s.FILES_DIR,
      tmpTtlSeconds: s.TMP_TTL_SECONDS,
      s3: s3Connection(s),
    }).catch((e: unknown) => {
      this.storePromise = undefined;
      throw e;
    });
    return this.storePromise;
  }

  /**
   * The kept rendition of `source` with `params` in `format`: found, or made now (once, however
   * many ask at the same time). 400 when the source is no image.
   */
  async renditionOf(source: StoredFile, params: RenditionParams, format: Format): Promise<StoredFile> {
    if (!RENDERABLE.has(source.mimeType)) throw new AppError('BAD_REQUEST', 'Rendition parameters apply to images only', { parameter: 'source' });
    const canonical = `${canonicalQuery({ ...params, fm: format })}`;
    const id = createHash('sha256').update(`${source.storageKey}\n${source.objectId}\n${canonical}`).digest('hex');
    const store = await this.store();
    const kept = await this.kept(store, id);
    if (kept) return kept;
    let p = this.inFlight.get(id);
    if (!p) {
      p = this.make(store, id, source, params, format).finally(() => this.inFlight.delete(id));
      this.inFlight.set(id, p);
    }
    return p;
  }

  private async kept(store: FileStore, id: string): Promise<StoredFile | null> {
    const path = await this.d.redis.get(INDEX_PREFIX + id);
    if (!path) return null;
    return store.stat(fileKeyOf('content', id, path));
  }

  private async make(store: FileStore, id: string, source: StoredFile, params: RenditionParams, format: Format): Promise<StoredFile> {
    if (this.active >= this.d.settings.RENDITION_MAX_CONCURRENT)
      throw new AppError('UNAVAILABLE', 'Too many renditions are being made: retry shortly', {}, RETRY_AFTER_SECONDS);
    this.active++;
    try {
      const input = await readAll(this.d.files, source.key);
      // sharp (libvips) is loaded on the first render: a process that never renders does not
      // carry its memory.
      const { renderImage } = await import('../adapters/image-renderer.js');
      const out = await renderImage(input, { params, format, maxPixels: this.d.settings.RENDITION_MAX_PIXELS });
      this.renders++;
      const key = fileKeyOf('content', id, `r.${format === 'jpeg' ? 'jpg' : format}`);
      const stored = await store.put(key, Readable.from([out]), {
        maxBytes: Number.MAX_SAFE_INTEGER,
        uploader: 'renditions',
        contentType: MIME_OF_FORMAT[format],
        declaredLength: out.length,
      });
      // Another process may have kept the same rendition meanwhile: the first one named stays.
      await this.d.redis.set(INDEX_PREFIX + id, stored.key.path, 'NX');
      const path = await this.d.redis.get(INDEX_PREFIX + id);
      if (path && path !== stored.key.path) {
        const first = await store.stat(fileKeyOf('content', id, path));
        if (first) {
          await store.delete(stored.key);
          return first;
        }
      }
      return stored;
    } finally {
      this.active--;
    }
  }
}

async function readAll(files: FileStore, key: FileKey): Promise<Buffer> {
  const { stream } = await files.get(key);
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** `sig`: HMAC-SHA256 of the canonical query under the key, base64url. */
export function signRendition(key: string, canonical: string): string {
  return createHmac('sha256', key).update(canonical).digest('base64url');
}

function verifySignature(key: string, canonical: string, sig: string): boolean {
  const want = Buffer.from(signRendition(key, canonical));
  const got = Buffer.from(sig);
  return want.length === got.length && timingSafeEqual(want, got);
}
