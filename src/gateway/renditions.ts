import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { Readable } from 'node:stream';
import { s3Connection, type Settings } from '../../config/settings.js';
import type { FileKey, FileStore, StoredFile } from '../adapters/file-store.js';
import { fileKeyOf, splitStoredKey, storageKeyOf } from '../adapters/file-store.js';
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
import type { Principal } from '../content/permissions.js';
import { AppError } from '../errors.js';
import type { Exchange } from './http.js';
import { callerKey, KeyedCounts } from './keyed-counts.js';

export interface RenditionsDeps {
  settings: Settings;
  files: FileStore;
  redis: RedisClient;
  renditions: NamedRenditions;
}

/**
 * Redis keys of one source's kept renditions, all with the source's hash tag (one Cluster slot,
 * so the scripts below change them together): `rendition:{s}` the index (rendition id → stored
 * path; once the source is being deleted only the mark `!gone`, for GONE_MARK_MS),
 * `rendition-lru:{s}` the last use of each (ms), `rendition-trash:{s}` the evicted ones
 * (`<id>/<stored path>` → when evicted), whose files are removed once the grace is over.
 */
const keysOf = (tag: string) => ({ tag, index: `rendition:{${tag}}`, lru: `rendition-lru:{${tag}}`, trash: `rendition-trash:{${tag}}` });
/** A source's keys, and when it was uploaded if it is a `tmp` file (it expires: TMP_SOURCES). */
const sourceKeysOf = (source: StoredFile): SourceKeys => ({
  ...keysOf(sourceTag(source)),
  ...(source.key.space === 'tmp' ? { tmpSince: source.creationTime } : {}),
});
/**
 * The sources whose trash may hold renditions (source tag → when it is next due, ms), swept by
 * every web process (`sweepDue`), so an eviction is removed whether or not the process that made
 * it lives through the grace, and whether or not its source is ever rendered again.
 */
const TRASH_SOURCES = 'rendition-trash-sources';
/**
 * The `tmp` sources with kept renditions (source tag → when the source was uploaded, ms): once
 * TMP_TTL_SECONDS is over the source expires, and the periodic sweeper condemns its renditions as
 * a delete would (`condemnTag`), whatever removes the source: the tmp sweeper, S3's lifecycle
 * rule (which runs no code of ours), or nothing yet. Registered before a rendition is named.
 */
const TMP_SOURCES = 'rendition-tmp-sources';
/**
 * How long a deleted source's index keeps its mark `!gone` (rendition-condemn-3.lua): longer than
 * a render may take and still be kept (RENDER_KEEP_WINDOW_MS), so that no render of the source in
 * flight when it was deleted names its rendition afterwards.
 */
const GONE_MARK_MS = 3600_000;
/** A render that took longer than this (from before it read its source) is answered, not kept: see GONE_MARK_MS. */
const RENDER_KEEP_WINDOW_MS = 600_000;
/**
 * The previous layout: one key per kept rendition, `rendition:<id>` → stored path (no hash tag).
 * A rendition found there is moved into its source's index on its first read (`adopt`).
 */
const LEGACY_PREFIX = 'rendition:';
/** Seconds a client is asked to wait when the renders in flight are at one of their bounds (theirs, their caller's, or what their decodes and encodes hold). */
const RETRY_AFTER_SECONDS = 1;
/**
 * How long an evicted rendition's file stays after its index entry is gone: a read that found
 * it just before (between the index and opening the file, or streaming it from S3) finishes.
 */
export const EVICTION_GRACE_MS = 60_000;
/** Evicted files a sweep reads at a time. */
const SWEEP_BATCH = 100;
/** Due sources the periodic sweeper reads at a time, and the batches it takes in one pass. */
const SOURCES_BATCH = 100;
const SOURCES_BATCHES_PER_PASS = 20;
/** The periodic sweeper runs every half grace, not more often than this (ms). */
const MIN_SWEEP_INTERVAL_MS = 250;
/** Focal points are kept to this step (0.01: 41 pixels of a 4096-pixel side) in rendition ids. */
const FOCAL_STEP = 100;

/**
 * Renditions of delivered images (CONTRACT §17): the signature check, and each rendition made
 * once, kept in the rendition store (immutable, named by the source and the canonical
 * parameters) and found again through a small index in Redis. Renders of the same rendition
 * in flight in this process are one render; renders in flight are bounded, in number
 * (RENDITION_MAX_CONCURRENT) and in the bytes their decodes and encodes hold together
 * (RENDITION_MAX_RENDER_BYTES, estimated from each source's header and each rendition's size
 * and format): 503 past either. A caller's renders in flight are bounded too
 * (RENDITION_AT_ONCE_PER_CALLER, below RENDITION_MAX_CONCURRENT): 429 past it, so that no one
 * caller takes every render of the process.
 *
 * Kept renditions are bounded per source file (RENDITION_MAX_PER_SOURCE): past it, the least
 * recently used one leaves the index at once (a later read makes it again, the same bytes) and
 * its file is removed after EVICTION_GRACE_MS, so a read that found it just before still
 * finishes: by the next render of the source, or by the periodic sweep of every web process
 * (TRASH_SOURCES), whichever comes first. A source's renditions go when the source is deleted,
 * whatever deletes it (SECURITY.md, "Renditions of deleted sources"): the file store calls
 * `condemnRenditions` before it removes a file (`FileStore.beforeDelete`: the file service's
 * DELETE, the tmp sweeper, the unclaimed-files sweep), which moves them to the trash and marks
 * the index so that a render in flight keeps nothing; a `tmp` source's are condemned when it
 * expires (TMP_SOURCES), also when S3's lifecycle rule removes it. Focal points are rounded to
 * 0.01 in the rendition's parameters: a content's focal point is a free float, and each new one
 * would otherwise be new renditions. Renditions kept by the previous version (LEGACY_PREFIX) join the bound when read.
 */
export class Renditions {
  /** Renders done by this process (tests prove coalescing with it). */
  renders = 0;
  private grace = EVICTION_GRACE_MS;
  /**
   * Renders in flight in this process, by caller (`callerKey`: the user id, else the client
   * address): RENDITION_AT_ONCE_PER_CALLER each, RENDITION_MAX_CONCURRENT together. Before, only
   * the total was bounded: one anonymous client asking for new widths of a public image, six at
   * once, held all four renders, and every other caller's new rendition answered 503.
   */
  private readonly byCaller = new KeyedCounts();
  /**
   * The decode and encode estimates (`decodeBytesOf` + `encodeBytesOf`, from `planRender`) of the
   * renders in flight, bounded by RENDITION_MAX_RENDER_BYTES.
   */
  private rendering = 0;
  /** Sweeps of a source's trash running in this process, by trash key. */
  private readonly sweeps = new Map<string, { again: boolean; done: Promise<void> }>();
  /** The next pass of the periodic sweeper (`sweepDue`), and whether one runs. */
  private sweeper?: NodeJS.Timeout;
  private sweepingDue = false;
  private closed = false;
  private readonly inFlight = new Map<string, Promise<StoredFile>>();
  private storePromise?: Promise<FileStore>;

  constructor(private readonly d: RenditionsDeps) {
    this.scheduleSweep();
  }

  /** How long an evicted rendition's file outlives its index entry (tests set it lower). */
  get evictionGraceMs(): number {
    return this.grace;
  }

  set evictionGraceMs(ms: number) {
    this.grace = ms;
    this.scheduleSweep();
  }

  /** Stops the periodic sweeper (it also stops by itself once the Redis client is closed). */
  close(): void {
    this.closed = true;
    clearTimeout(this.sweeper);
  }

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
   * many ask at the same time) in a render slot of `caller` (`renderCaller`). 400 when the source
   * is no image.
   */
  async renditionOf(source: StoredFile, asked: RenditionParams, format: Format, caller: string | null): Promise<StoredFile> {
    if (!RENDERABLE.has(source.mimeType)) throw new AppError('BAD_REQUEST', 'Rendition parameters apply to images only', { parameter: 'source' });
    const params = keptParams(asked);
    const canonical = `${canonicalQuery({ ...params, fm: format })}`;
    const id = createHash('sha256').update(`${source.storageKey}\n${source.objectId}\n${canonical}`).digest('hex');
    const keys = sourceKeysOf(source);
    const store = await this.store();
    const kept = await this.kept(store, keys, id);
    if (kept) return kept;
    let p = this.inFlight.get(id);
    if (!p) {
      p = this.make(store, keys, id, source, params, format, caller).finally(() => this.inFlight.delete(id));
      this.inFlight.set(id, p);
    }
    return p;
  }

  private async kept(store: FileStore, keys: SourceKeys, id: string): Promise<StoredFile | null> {
    const path = await this.d.redis.renditionLookup(keys.index, keys.lru, id, Date.now());
    // Gone from the store (removed by hand): made again, and the index then names the new file.
    if (path) return store.stat(fileKeyOf('content', id, path));
    return this.adopt(store, keys, id);
  }

  /**
   * A rendition kept by the previous version (LEGACY_PREFIX), outside any bound: named in its
   * source's index now (it counts against the bound, and may evict others), its legacy key
   * deleted; when its file is gone, only the key is deleted (and the rendition made again).
   * The legacy key is in another Cluster slot than the source's keys: separate commands, the
   * legacy key deleted last (a stop in between leaves it, and the index, naming the same file).
   */
  private async adopt(store: FileStore, keys: SourceKeys, id: string): Promise<StoredFile | null> {
    const legacy = LEGACY_PREFIX + id;
    const path = await this.d.redis.get(legacy);
    if (path === null) return null;
    const file = await store.stat(fileKeyOf('content', id, path));
    if (!file) {
      await this.d.redis.del(legacy);
      return null;
    }
    const named = await this.keep(keys, id, path);
    // Another process kept a file of this rendition meanwhile: the legacy one is named by none.
    // (null: the source is being deleted, and the script put the legacy file in the trash.)
    if (named !== null && named !== path) await this.discard(keys, id, path);
    await this.d.redis.del(legacy);
    return named === null || named === path ? file : store.stat(fileKeyOf('content', id, named));
  }

  /**
   * Puts the source in TRASH_SOURCES, due once a grace from now is over: before anything may go
   * into its trash (a stop in between leaves it swept, never forgotten), and again after (a
   * sweep that found its trash empty meanwhile leaves it there: its score changed).
   */
  private async registerTrash(keys: SourceKeys): Promise<void> {
    await this.d.redis.zadd(TRASH_SOURCES, Date.now() + this.grace, keys.tag);
  }

  /**
   * Names `path` as kept rendition `id` unless another file (not `stale`) is named already, evicting
   * past the bound (rendition-keep-3.lua); the source is registered before and after (and a `tmp`
   * source in TMP_SOURCES before). Answers the path the index names; null when the source is being
   * deleted (the file went to the trash).
   */
  private async keep(keys: SourceKeys, id: string, path: string, stale = ''): Promise<string | null> {
    await this.registerTrash(keys);
    if (keys.tmpSince !== undefined) await this.d.redis.zadd(TMP_SOURCES, keys.tmpSince, keys.tag);
    try {
      return await this.d.redis.renditionKeep(keys.index, keys.lru, keys.trash, id, path, stale, Date.now(), this.d.settings.RENDITION_MAX_PER_SOURCE);
    } finally {
      await this.registerTrash(keys).catch(() => undefined);
    }
  }

  /** A rendition file the index names no longer (or never did): removed after the grace, like an evicted one. */
  private async discard(keys: SourceKeys, id: string, path: string): Promise<void> {
    await this.d.redis.zadd(keys.trash, Date.now(), `${id}/${path}`);
    await this.registerTrash(keys).catch(() => undefined);
  }

  /**
   * Renders the rendition and keeps it. The render's slots, its caller's and the process's, are
   * taken before anything is awaited (renders asked at once cannot all pass the checks before one
   * counts) and before the source is read; given back however the render ends. Nothing is made
   * for a client that went away (`renderCaller`).
   */
  private async make(
    store: FileStore,
    keys: SourceKeys,
    id: string,
    source: StoredFile,
    params: RenditionParams,
    format: Format,
    caller: string | null,
  ): Promise<StoredFile> {
    const started = Date.now();
    const s = this.d.settings;
    const maxBytes = s.RENDITION_MAX_SOURCE_BYTES;
    if (source.length > maxBytes)
      throw new AppError('UNPROCESSABLE', `The image file has more than ${maxBytes} bytes: no rendition is made of it`, { maxBytes, bytes: source.length });
    if (caller === null) throw new AppError('BAD_REQUEST', 'The client went away: no rendition is made for it');
    if (this.byCaller.get(caller) >= s.RENDITION_AT_ONCE_PER_CALLER)
      throw new AppError(
        'TOO_MANY_REQUESTS',
        `At most ${s.RENDITION_AT_ONCE_PER_CALLER} renditions of one caller are made at once (RENDITION_AT_ONCE_PER_CALLER): retry when one has answered`,
        {},
        RETRY_AFTER_SECONDS,
      );
    if (this.byCaller.total >= s.RENDITION_MAX_CONCURRENT)
      throw new AppError('UNAVAILABLE', 'Too many renditions are being made: retry shortly', {}, RETRY_AFTER_SECONDS);
    this.byCaller.add(caller);
    try {
      const input = await readAll(this.d.files, source.key, source.length);
      // sharp (libvips) is loaded on the first render: a process that never renders does not
      // carry its memory.
      const { planRender, refuseCostlyRender, renderImage } = await import('../adapters/image-renderer.js');
      // The bound is checked here (with the renders in flight), not again by renderImage.
      const options = { params, format, maxPixels: s.RENDITION_MAX_PIXELS };
      // What the decode and the encode will hold, from the header (read once: the plan goes to
      // renderImage) and the rendition's size, reserved before anything is decoded: a progressive
      // JPEG or an interlaced PNG (and GIF, WebP, AVIF, tiled TIFF) is decoded whole, whatever the
      // size of its file, and a large AVIF, WebP or JPEG rendition is encoded whole, whatever its source.
      const plan = await planRender(input, options);
      refuseCostlyRender(plan, s.RENDITION_MAX_RENDER_BYTES);
      const bytes = plan.decodeBytes + plan.encodeBytes;
      if (this.rendering + bytes > s.RENDITION_MAX_RENDER_BYTES)
        throw new AppError('UNAVAILABLE', 'Too many renditions are being made: retry shortly', {}, RETRY_AFTER_SECONDS);
      this.rendering += bytes;
      let out: Buffer;
      try {
        out = await renderImage(input, options, plan);
      } finally {
        this.rendering -= bytes;
      }
      this.renders++;
      const key = fileKeyOf('content', id, `r.${format === 'jpeg' ? 'jpg' : format}`);
      const put = () =>
        store.put(key, Readable.from([out]), {
          maxBytes: Number.MAX_SAFE_INTEGER,
          uploader: 'renditions',
          contentType: MIME_OF_FORMAT[format],
          declaredLength: out.length,
        });
      // Once more if it fails: a sweep may have removed the rendition's emptied directory on disk
      // (an earlier life of this rendition, evicted) just as this put made it.
      const stored = await put().catch(put);
      try {
        // Another process may have kept the same rendition meanwhile: the first one named stays,
        // unless its file is gone (then this one replaces it in the index). Its source being
        // deleted (null), it is answered and goes with the trash; a render that outlasted the
        // window is not kept at all (a delete of its source may no longer be marked: GONE_MARK_MS).
        let stale = '';
        for (let i = 0; i < 3 && Date.now() - started <= RENDER_KEEP_WINDOW_MS; i++) {
          const path = await this.keep(keys, id, stored.key.path, stale);
          if (path === null || path === stored.key.path) return stored;
          const first = await store.stat(fileKeyOf('content', id, path));
          if (first) {
            await store.delete(stored.key);
            return first;
          }
          stale = path;
        }
        // Named by none: answered now, removed after the grace like an evicted one.
        await this.discard(keys, id, stored.key.path);
        return stored;
      } finally {
        await this.sweep(store, keys);
      }
    } finally {
      this.byCaller.remove(caller);
    }
  }

  /**
   * Removes the files of this source's evicted renditions whose grace is over (the index no
   * longer names them). One sweep of a source at a time in this process: a sweep asked for
   * while one runs makes it look once more, and waits for it.
   */
  private sweep(store: FileStore, keys: SourceKeys): Promise<void> {
    const running = this.sweeps.get(keys.trash);
    if (running) {
      running.again = true;
      return running.done;
    }
    const state = { again: true, done: Promise.resolve() };
    this.sweeps.set(keys.trash, state);
    state.done = (async () => {
      try {
        while (state.again) {
          state.again = false;
          await this.sweepOnce(store, keys);
        }
      } catch {
        // Redis or the store out of reach (or the platform stopped): the trash stays for the next sweep.
      } finally {
        this.sweeps.delete(keys.trash);
      }
    })();
    return state.done;
  }

  /**
   * Several processes may sweep one source at once: a file deleted twice (`delete` of a missing
   * file is false), a member removed twice, are no harm. What is left (in its grace) is swept by
   * the next render of the source or by the periodic sweeper (the source is in TRASH_SOURCES).
   */
  private async sweepOnce(store: FileStore, keys: SourceKeys): Promise<void> {
    for (;;) {
      const due = await this.d.redis.zrangebyscore(keys.trash, '-inf', Date.now() - this.grace, 'LIMIT', 0, SWEEP_BATCH);
      for (const member of due) {
        const slash = member.indexOf('/');
        await store.delete(fileKeyOf('content', member.slice(0, slash), member.slice(slash + 1)));
        await this.d.redis.zrem(keys.trash, member);
      }
      if (due.length < SWEEP_BATCH) return;
    }
  }

  /** The next pass of the periodic sweeper in half a grace (an unref'd timer: it keeps no process up). */
  private scheduleSweep(): void {
    clearTimeout(this.sweeper);
    if (this.closed) return;
    this.sweeper = setTimeout(
      () => {
        void this.sweepDue().finally(() => this.scheduleSweep());
      },
      Math.max(MIN_SWEEP_INTERVAL_MS, this.grace / 2),
    );
    this.sweeper.unref();
  }

  /**
   * Condemns the renditions of the `tmp` sources in TMP_SOURCES uploaded more than TMP_TTL_SECONDS
   * ago (they have expired), as a delete would; each leaves the set once condemned, so a process
   * that stops in between leaves it to the next pass.
   */
  private async condemnExpired(): Promise<void> {
    const redis = this.d.redis;
    for (let pass = 0; pass < SOURCES_BATCHES_PER_PASS && !this.closed; pass++) {
      const expired = await redis.zrangebyscore(TMP_SOURCES, '-inf', Date.now() - this.d.settings.TMP_TTL_SECONDS * 1000, 'LIMIT', 0, SOURCES_BATCH);
      for (const tag of expired) {
        await condemnTag(redis, tag);
        await redis.zrem(TMP_SOURCES, tag);
      }
      if (expired.length < SOURCES_BATCH) return;
    }
  }

  /**
   * The periodic sweeper: sweeps the trash of every source due in TRASH_SOURCES, then leaves it
   * there until its next eviction is due, or takes it out once its trash is empty; unless a
   * render registered it again meanwhile (rendition-trash-settle-1.lua).
   */
  private async sweepDue(): Promise<void> {
    const redis = this.d.redis;
    // The platform stopped (its Redis client closed): so does the sweeper.
    if (redis.status === 'end') this.close();
    if (this.closed || this.sweepingDue) return;
    this.sweepingDue = true;
    try {
      await this.condemnExpired();
      for (let pass = 0; pass < SOURCES_BATCHES_PER_PASS && !this.closed; pass++) {
        const due = await redis.zrangebyscore(TRASH_SOURCES, '-inf', Date.now(), 'WITHSCORES', 'LIMIT', 0, SOURCES_BATCH);
        if (due.length === 0) return;
        const store = await this.store();
        for (let i = 0; i < due.length && !this.closed; i += 2) {
          const keys = keysOf(due[i]);
          await this.sweep(store, keys);
          const [, first] = await redis.zrange(keys.trash, '0', '0', 'WITHSCORES');
          await redis.renditionTrashSettle(TRASH_SOURCES, keys.tag, due[i + 1], first === undefined ? '' : Number(first) + this.grace);
        }
        if (due.length < 2 * SOURCES_BATCH) return;
      }
    } catch {
      // Redis or the store out of reach: the sources stay due for the next pass.
    } finally {
      this.sweepingDue = false;
    }
  }
}

type SourceKeys = ReturnType<typeof keysOf> & { tmpSince?: number };

/**
 * A stored file is about to be deleted (`FileStore.beforeDelete`, set by the web role): its kept
 * renditions go to their trash, removed after the grace by the periodic sweeper of any web
 * process, and its index is marked so that a render in flight keeps nothing (`condemnTag`).
 * Before the file goes, so a process that stops between the two leaves the renditions condemned
 * (the file itself is then still there, its delete failed, and rendered again when asked).
 */
export async function condemnRenditions(redis: RedisClient, key: FileKey): Promise<void> {
  const split = splitStoredKey(key);
  if (!split) return;
  const tag = tagOf(storageKeyOf(key), split.objectId);
  await condemnTag(redis, tag);
  // Condemned: its expiry has nothing left to do (a stop before this leaves it to that pass).
  if (key.space === 'tmp') await redis.zrem(TMP_SOURCES, tag);
}

/**
 * Condemns the renditions of the source `tag` (rendition-condemn-3.lua). The source is put in
 * TRASH_SOURCES first, due a grace from now unless it is due sooner already (LT: a render's
 * eviction, or a render that kept nothing because the source is going, is not put off), so that
 * a stop right after the script leaves its trash swept, never forgotten; then due at once when the
 * script moved renditions (the sweeper still waits for the grace of its own process before it
 * removes their files).
 */
async function condemnTag(redis: RedisClient, tag: string): Promise<void> {
  const keys = keysOf(tag);
  await redis.zadd(TRASH_SOURCES, 'LT', Date.now() + EVICTION_GRACE_MS, tag);
  const moved = await redis.renditionCondemn(keys.index, keys.lru, keys.trash, Date.now(), GONE_MARK_MS);
  if (moved > 0) await redis.zadd(TRASH_SOURCES, Date.now(), tag);
}

/**
 * The caller whose render slots a rendition of `x` takes: as for a search (`callerKey`: the
 * user id, else the client address), or null once the client went away, for whom nothing is
 * rendered. The address is read when first asked for and is gone with the client, so
 * `callerKey` would count every such request as one caller beside the client's own: an
 * anonymous client that closed each socket right after its request held that caller's renders
 * besides its own, all four of the process (a probe: 16 of an editor's 20 new renditions in 10 s
 * answered 503).
 */
export function renderCaller(user: Principal | null, x: Exchange, settings: Settings): string | null {
  return x.aborted ? null : callerKey(user, x, settings);
}

/** The hash tag of a source file's renditions in Redis. */
function sourceTag(source: StoredFile): string {
  return tagOf(source.storageKey, source.objectId);
}

function tagOf(storageKey: string, objectId: string): string {
  return createHash('sha256').update(`${storageKey}\n${objectId}`).digest('hex').slice(0, 32);
}

/** The parameters a rendition is made and named with: the focal point to FOCAL_STEP. */
function keptParams(p: RenditionParams): RenditionParams {
  if (!p.focal) return p;
  const round = (v: number) => Math.round(v * FOCAL_STEP) / FOCAL_STEP;
  return { ...p, focal: [round(p.focal[0]), round(p.focal[1])] };
}

/**
 * A stored file's bytes in one buffer of its stored length, filled as they come (no copy of the
 * chunks, no second buffer): RENDITION_MAX_SOURCE_BYTES and RENDITION_MAX_CONCURRENT bound what
 * renders hold. A file that is not the length it was stored with fails the render.
 */
async function readAll(files: FileStore, key: FileKey, length: number): Promise<Buffer> {
  const { stream } = await files.get(key);
  const out = Buffer.allocUnsafe(length);
  let at = 0;
  try {
    for await (const c of stream) {
      const chunk = c as Buffer;
      if (at + chunk.length > length) throw new Error(`stored file ${key.path} is longer than its recorded ${length} bytes`);
      at += chunk.copy(out, at);
    }
  } finally {
    stream.destroy();
  }
  if (at !== length) throw new Error(`stored file ${key.path} is shorter than its recorded ${length} bytes`);
  return out;
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
