import type { Readable } from 'node:stream';
import { z } from 'zod';
import type { WriteResult } from '../actors/content/content-actor.js';
import { etagOf, mainAlias, versionId } from '../content/model.js';
import { mayAnywhere, type Principal } from '../content/permissions.js';
import { AppError } from '../errors.js';
import type { ContentEndpoints, ContentServiceDeps } from './content-deps.js';
import type { AliasRef, ContentWrites, WriteContext } from './content-writes.js';
import { partialCreated } from './envelope.js';
import { KeyedCounts } from './keyed-counts.js';
import { type ExportFilter, exportRenderer } from './export-render.js';
import { errorOf, type Exchange, parseJsonBody } from './http.js';
import { MAX_CONTAINERS_PER_BODY, MAX_KEYS_PER_BODY } from './body-limits.js';
import { invalid, MAX_BODY_DEPTH, typeSchema, updateModeOf, viewSchema } from './schemas.js';

/** The bulk import's route under the content service; its body is streamed, not collected (server.ts). */
export const BULK_ROUTE = 'bulk';
const NDJSON = 'application/x-ndjson';
/**
 * What the lines in flight may weigh at once, besides BULK_IN_FLIGHT lines: a few huge lines must
 * not fill memory either. A line weighs what it holds parsed (`parsedWeight`): a JSON text of
 * empty objects holds about 21 times its length. Before, lines counted by their bytes: one
 * sportseditor's import of 200 lines of 99,000 empty objects, with the actors slow to answer,
 * took the gateway's heap up by 757 MiB (the twenty-first session's review).
 */
const WINDOW_BYTES = 32 * 1024 * 1024;
/** Contents read and rendered per step of an export. */
const EXPORT_BATCH = 500;
/**
 * What the versions an export step reads may weigh as stored, at least one version (a content
 * may hold up to MAX_BODY_BYTES): a step's 500 contents are read this much at a time, and each
 * part is rendered and handed to the client before the next is read. Before, a step read its 500
 * versions in one call, whatever they weighed: 40 contents of 1 MB were made 40 MB ahead of a
 * client reading 400 KB/s, and 500 contents of 10 MB would have been 5 GB in one reply.
 */
const EXPORT_STEP_BYTES = 4 * 1024 * 1024;
/** What an import's lines may do: a caller holding none of these anywhere writes nothing with one. */
const IMPORT_WRITES = ['Create', 'Update', 'Delete'] as const;
/** Partitions an export scans at once. */
const EXPORT_SCANNERS = 8;
/** Retry-After of an export refused past EXPORT_MAX_PER_USER. */
const EXPORT_RETRY_AFTER_SECONDS = 5;
/** Bytes of an export's HTTP chunks (all but the last; ExportChunks). */
const EXPORT_CHUNK_BYTES = 64 * 1024;

const idSchema = z.string().min(3).max(2048);
const ifMatchSchema = z.string().min(1).max(4096);
/** One line of a bulk import (CONTRACT §16). Unknown fields are refused: a misspelt `ifMatch` must not turn into an unsafe update. */
const lineSchema = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('create'), content: z.unknown() }),
  z.strictObject({ op: z.literal('update'), id: idSchema, ifMatch: ifMatchSchema.optional(), mode: z.string().max(32).optional(), content: z.unknown() }),
  z.strictObject({ op: z.literal('delete'), id: idSchema, ifMatch: ifMatchSchema.optional() }),
]);
type Line = z.infer<typeof lineSchema>;

/**
 * Runs `run` as one of at most `max` of `what` (imports, exports) of the user at once on this
 * process, counted in `running`; 429 with Retry-After past it, before anything is answered.
 * With `maxAll`, at most that many of every user together: 503 with Retry-After past it.
 */
async function oneOfFew(
  running: KeyedCounts,
  user: Principal,
  max: number,
  what: string,
  run: () => Promise<void>,
  maxAll = Number.POSITIVE_INFINITY,
): Promise<void> {
  if (running.get(user.userId) >= max)
    throw new AppError('TOO_MANY_REQUESTS', `At most ${max} ${what} of one user may run at once; wait for one to end`, {}, EXPORT_RETRY_AFTER_SECONDS);
  if (running.total >= maxAll)
    throw new AppError('UNAVAILABLE', `At most ${maxAll} ${what} may run at once on this process; retry shortly`, {}, EXPORT_RETRY_AFTER_SECONDS);
  running.add(user.userId);
  try {
    await run();
  } finally {
    running.remove(user.userId);
  }
}

/** What the bulk service needs of the content service: its router, token check, read rule and writes. */
export type BulkEndpoints = ContentEndpoints & { readonly writes: ContentWrites };

/**
 * Bulk import and export over NDJSON (CONTRACT §16). Every import line is a single create,
 * update or delete, through the same code (ContentWrites) and the same actor commit as its own
 * request, answered with the status that request would get. Lines run pipelined across
 * partitions, a content's lines in order, within a bounded window that pauses the upload.
 * Export scans the commit catalogs with a cursor and writes with the socket's back-pressure.
 */
export class BulkService {
  /** Exports running on this process, per user (EXPORT_MAX_PER_USER). */
  private readonly exporting = new KeyedCounts();
  /** Imports running on this process, per user (IMPORT_MAX_PER_USER). */
  private readonly importing = new KeyedCounts();
  /** Imports of callers who may write nothing, counted apart (`import`). */
  private readonly importingNoWrite = new KeyedCounts();

  constructor(
    private readonly d: ContentServiceDeps,
    private readonly c: BulkEndpoints,
  ) {
    c.router.on('POST', BULK_ROUTE, (x) => this.import(x));
    c.router.on('GET', 'export', (x) => this.export(x));
  }

  // ---- import ----

  private async import(x: Exchange): Promise<void> {
    const user = await this.c.authenticate(x);
    const type = (x.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
    if (type !== NDJSON && type !== 'application/jsonl') {
      throw new AppError('UNSUPPORTED_MEDIA_TYPE', `A bulk import is sent as ${NDJSON}, one operation a line`);
    }
    // Each import holds up to its window of parsed lines (WINDOW_BYTES): one user may run only a
    // few at once, and every user together IMPORT_MAX. A caller who may write nothing (none of
    // Create, Update, Delete anywhere) gets a 403 for every line (CONTRACT §16), and its imports
    // are counted apart, at most a quarter of IMPORT_MAX together: before, reader accounts'
    // imports kept open with a line now and then held every place, and writers' imports answered
    // 503 (review s23b; a write's own request is refused before its body, `Needs`).
    const s = this.d.settings;
    const writer = IMPORT_WRITES.some((p) => mayAnywhere(this.d.security, user, p));
    const [running, max] = writer ? [this.importing, s.IMPORT_MAX] : [this.importingNoWrite, Math.max(1, Math.floor(s.IMPORT_MAX / 4))];
    await oneOfFew(running, user, s.IMPORT_MAX_PER_USER, 'imports', () => this.importFor(x, user), max);
  }

  private async importFor(x: Exchange, user: Principal): Promise<void> {
    // Before the status line: an exchange without a streamed body fails here as a plain error (500), never mid-answer.
    const body = x.bodyStream();
    x.beginChunked(200, [['Content-Type', NDJSON]]);
    const run = new ImportRun(x, this.c.writes, user, {
      maxLines: this.d.settings.BULK_MAX_LINES,
      window: this.d.settings.BULK_IN_FLIGHT,
      maxLineBytes: this.d.settings.MAX_BODY_BYTES,
      log: (err) => this.d.log.error({ err, requestId: x.requestId }, 'bulk line failed'),
    });
    // An import may stay open for hours: each line acts as its caller is when it runs, as its
    // single request would. A revoked or expired token answers the lines after it 401; changed
    // roles apply to the lines after the change.
    const token = x.header('x-auth-token')!;
    let unwatch = (): void => undefined;
    const watch = (opened: Principal): void => {
      unwatch = this.d.tokens.watch(token, opened, (now) => {
        run.actAs(now);
        if (now) watch(now);
      });
    };
    watch(user);
    let complete: boolean;
    try {
      complete = await run.consume(body);
    } finally {
      unwatch();
    }
    if (complete) x.endChunked();
    else if (!x.aborted) {
      // The status line is out: the client must see a cut answer, never a complete-looking one.
      x.discardBody();
      x.res.close();
    }
  }

  // ---- export ----

  private async export(x: Exchange): Promise<void> {
    const user = await this.c.authenticate(x);
    const types = listParam(x, 'types', typeSchema);
    const views = listParam(x, 'views', viewSchema);
    if (x.method === 'HEAD') return x.send(200, [['Content-Type', NDJSON]]); // the headers a GET would have, no scan
    // Each export holds rendered lines while its client reads (about a batch): one user may run
    // only a few at once, and every user together EXPORT_MAX.
    const s = this.d.settings;
    await oneOfFew(this.exporting, user, s.EXPORT_MAX_PER_USER, 'exports', () => this.exportTo(x, user, types, views), s.EXPORT_MAX);
  }

  private async exportTo(x: Exchange, user: Principal, types: string[] | null, views: string[] | null): Promise<void> {
    x.beginChunked(200, [['Content-Type', NDJSON]]);
    // A few partitions are scanned at once: a small export is bound by round trips, not work.
    // Each chunk written is whole lines; a writer waits while the socket is behind.
    let next = 0;
    let stop = false;
    const out = new ExportChunks(x, EXPORT_CHUNK_BYTES);
    const filter: ExportFilter = { ...this.c.reads.readRuleOf(user), types, views };
    // A caller who may read every content, without views asked for, exports every content read:
    // its versions come with the snapshots (a round trip to Redis and one to the renderer fewer a step).
    const withVersions = views === null && this.c.reads.readsEverything(user);
    // The lines are chosen for the caller's roles: once the token is revoked or expired, or the
    // roles change, the export is cut (never ended as if complete); the client starts again.
    const unwatch = this.d.tokens.watch(x.header('x-auth-token')!, user, () => {
      stop = true;
      if (!x.aborted) x.res.close();
    });
    const scanner = async () => {
      for (let p = next++; p < this.d.settings.PARTITIONS && !x.aborted && !stop; p = next++) {
        // A partition's lines in content-key order, whatever else the partition holds (the
        // catalog's own order told how much content the caller may not read shares it).
        const cids = await this.d.store.catalogKeys(p, types ?? undefined);
        for (let at = 0; at < cids.length && !x.aborted && !stop; at += EXPORT_BATCH) {
          if (!(await this.exportLines(out, p, cids.slice(at, at + EXPORT_BATCH), filter, withVersions, () => x.aborted || stop))) await x.drained();
        }
      }
    };
    const scanners = Array.from({ length: EXPORT_SCANNERS }, () =>
      scanner().catch((e: unknown) => {
        stop = true; // the others end at their next step
        throw e;
      }),
    );
    const failed = (await Promise.allSettled(scanners)).find((r) => r.status === 'rejected');
    unwatch();
    if (x.aborted) return;
    if (failed) {
      // The status line is out: a client must see a cut stream, never a complete-looking export.
      this.d.log.error({ err: failed.reason, requestId: x.requestId }, 'export failed');
      if (!x.aborted) x.res.close();
      return;
    }
    out.flush();
    x.endChunked();
  }

  /**
   * Writes the export lines of some contents: those the filter keeps (the caller may read them,
   * of the types and on the views asked for). False when the socket is behind (wait for `drained`).
   * Their snapshots, and then their versions, are read EXPORT_STEP_BYTES at a time, the client
   * taking each part before the next is read; `stopped` ends it between parts. `withVersions` (the
   * caller reads every content and asked for no views): the first part of the versions of each
   * part of the snapshots is read with them.
   */
  private async exportLines(
    out: ExportChunks,
    partition: number,
    cids: string[],
    filter: ExportFilter,
    withVersions: boolean,
    stopped: () => boolean,
  ): Promise<boolean> {
    // The snapshots first: the renderer keeps those the filter keeps, and only their versions are
    // read. Read with every snapshot, the versions of content the caller may not read (or that is
    // on no view asked for) came to the gateway and its renderer: a sportseditor's export that
    // answered 650 bytes made Redis send 40 MB of culture content, every time (review 16).
    // The snapshots too are read EXPORT_STEP_BYTES at a time (at least one content): a content's
    // metadata may hold 256 Ki characters and more, and a step of 500 such culture contents made
    // a sportseditor's export that answered nothing hold 138 MB at once (review s23c).
    return inParts(out, cids.length, stopped, async (at) => {
      const stored = await this.d.store.storedForExport(
        partition,
        cids.slice(at),
        withVersions ? { budget: EXPORT_STEP_BYTES, snapshotBudget: EXPORT_STEP_BYTES } : { versions: false, snapshotBudget: EXPORT_STEP_BYTES },
      );
      return { taken: Math.max(1, stored.length / 2), ok: await this.exportStored(out, partition, stored, filter, stopped) };
    });
  }

  /** `exportLines` of the contents read (`storedForExport`): their lines, then the versions they want, EXPORT_STEP_BYTES at a time. */
  private async exportStored(out: ExportChunks, partition: number, stored: (Buffer | null)[], filter: ExportFilter, stopped: () => boolean): Promise<boolean> {
    const { lines, wanting } = await exportRenderer.render(stored, filter);
    // The versions of the contents kept (from the archive where the archiver moved them). A
    // content deleted meanwhile has no version, and is left out.
    return inParts(
      out,
      wanting.length,
      stopped,
      async (at) => {
        const versions = await this.d.store.storedVersionsWithin(
          partition,
          wanting.slice(at).map((w) => [w.cid, w.head] as const),
          EXPORT_STEP_BYTES,
        );
        const part = wanting.slice(at, at + versions.length);
        const again = await exportRenderer.render(
          part.flatMap((w, i) => (versions[i] ? [w.snapshot, versions[i]] : [])),
          filter,
        );
        return { taken: versions.length, ok: out.write(again.lines) };
      },
      out.write(lines),
    );
  }
}

/**
 * Takes `n` items of an export step in parts (`part(at)`: how many it took, at least one, and
 * whether the socket took what it wrote): while the socket is behind, the client takes what was
 * written before the next part is read; `stopped` ends it between parts. `ok`: whether the socket
 * took what came before. False when the socket is behind at the end (wait for `drained`).
 */
async function inParts(
  out: ExportChunks,
  n: number,
  stopped: () => boolean,
  part: (at: number) => Promise<{ taken: number; ok: boolean }>,
  ok = true,
): Promise<boolean> {
  for (let at = 0; at < n && !stopped(); ) {
    if (!ok) {
      await out.drained();
      if (stopped()) return true;
    }
    const r = await part(at);
    at += r.taken;
    ok = r.ok;
  }
  return ok;
}

/**
 * An export's lines as HTTP chunks of exactly `size` bytes, the last one shorter (a line may
 * span two). A chunk per scan step made the chunks' number and sizes follow how the catalog
 * scan met content the caller may not read; these follow only the bytes the caller receives.
 */
class ExportChunks {
  /** The chunk being filled. */
  private chunk: Buffer;
  private held = 0;

  constructor(
    private readonly x: Exchange,
    private readonly size: number,
  ) {
    this.chunk = Buffer.allocUnsafe(size);
  }

  /** Adds whole lines (UTF-8); false when the socket is behind (wait for `drained`). */
  write(bytes: Buffer): boolean {
    let ok = true;
    for (let at = 0; at < bytes.length; ) {
      const n = Math.min(this.size - this.held, bytes.length - at);
      bytes.copy(this.chunk, this.held, at, at + n);
      this.held += n;
      at += n;
      if (this.held === this.size) {
        ok = this.x.writeChunk(this.chunk) && ok;
        this.chunk = Buffer.allocUnsafe(this.size); // uWS may still hold the one written
        this.held = 0;
      }
    }
    return ok;
  }

  /** Settles once the client took what was handed over (`Exchange.drained`). */
  drained(): Promise<void> {
    return this.x.drained();
  }

  /** Writes what is held (the last, shorter chunk). */
  flush(): void {
    if (this.held) this.x.writeChunk(this.chunk.subarray(0, this.held));
    this.held = 0;
  }
}

/** A comma-separated list parameter, each name checked; null when absent or empty. */
function listParam(x: Exchange, name: string, schema: z.ZodString): string[] | null {
  const raw = x.query.get(name);
  if (raw === null || raw.trim() === '') return null;
  const names = [...new Set(raw.split(',').map((s) => s.trim()))].filter(Boolean);
  if (names.length > 100) throw new AppError('BAD_REQUEST', `${name} lists at most 100 names`);
  for (const n of names) if (!schema.safeParse(n).success) throw new AppError('BAD_REQUEST', `Invalid name in ${name}: '${n.slice(0, 100)}'`);
  return names;
}

interface ImportLimits {
  maxLines: number;
  window: number;
  maxLineBytes: number;
  log: (err: unknown) => void;
}

/** A line's place in the answer: answered lines wait here for the earlier ones. */
interface Slot {
  n: number;
  bytes: number;
  text: string | null;
}

/**
 * One bulk import: splits the body into lines, sends each through ContentWrites as soon as the
 * content's earlier lines are done, and answers in input order. At most `window` lines (and
 * WINDOW_BYTES of them) are between read and answered; while the window is full the body is not
 * read, so the socket is paused (Exchange.bodyStream) and a slow platform slows the upload.
 */
class ImportRun {
  private readonly slots: Slot[] = [];
  private bytes = 0;
  private counted = 0;
  /** The last line (its completion) of each content name in flight: a later line of the same name waits for it. */
  private readonly tails = new Map<string, Promise<void>>();
  private wake: (() => void) | null = null;
  /** The socket is behind with the answers: no more lines are taken until it drains. */
  private outBlocked = false;
  /** Waiting for the last line taken to be answered (end of the body). */
  private idle: (() => void) | null = null;
  /** Answers taken in order and not yet written, and whether a flush is scheduled. */
  private out = '';
  private flushing = false;

  constructor(
    private readonly x: Exchange,
    private readonly writes: ContentWrites,
    /** The caller as they are now; null once the token was revoked or expired. */
    private user: Principal | null,
    private readonly limits: ImportLimits,
  ) {}

  /** The caller's token now names `now` (other roles), or nothing (null): lines not yet run act so. */
  actAs(now: Principal | null): void {
    this.user = now;
  }

  /**
   * Reads the whole body; resolves when every line taken is answered (or the client went away):
   * true when every line was taken, false when a fault stopped the reading.
   */
  async consume(body: Readable): Promise<boolean> {
    let complete = true;
    const max = this.limits.maxLineBytes;
    let carry: Buffer[] = [];
    let carried = 0;
    let tooLong = false;
    let n = 0;
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        let start = 0;
        for (;;) {
          const nl = chunk.indexOf(10, start);
          const part = chunk.subarray(start, nl < 0 ? chunk.length : nl);
          if (!tooLong && carried + part.length > max) {
            tooLong = true;
            carry = [];
            carried = 0;
          }
          if (nl < 0) {
            if (!tooLong && part.length) {
              carry.push(part);
              carried += part.length;
            }
            break;
          }
          n++;
          await this.take(n, tooLong ? null : carried ? Buffer.concat([...carry, part]) : part);
          carry = [];
          carried = 0;
          tooLong = false;
          start = nl + 1;
        }
        if (this.x.aborted) break;
      }
      // The last line may end without a newline.
      if (!this.x.aborted && (tooLong || carried)) await this.take(n + 1, tooLong ? null : Buffer.concat(carry));
    } catch (e) {
      // The client went away mid-body (the stream fails): the part of a line read so far is
      // never applied; the lines taken still finish, each committed whole or not at all.
      // Anything else is a fault: the lines taken are answered, then the answer is cut.
      if (!this.x.aborted) {
        this.limits.log(e);
        complete = false;
      }
    }
    while (this.slots.length) {
      await new Promise<void>((r) => {
        this.idle = r;
      });
    }
    return complete;
  }

  /** Takes one line (null: longer than a request body may be) once the window has room. */
  private async take(n: number, buf: Buffer | null): Promise<void> {
    if (buf !== null && isBlank(buf)) return;
    this.counted++;
    // Also while the socket is behind with the answers, whether or not lines are in flight: a line
    // answered at once (unreadable, too long, past BULK_MAX_LINES) leaves no slot, and a client
    // that sends such lines without reading its answer held the gateway's memory without bound.
    while ((this.slots.length >= this.limits.window || this.bytes >= WINDOW_BYTES || this.outBlocked) && !this.x.aborted) {
      await new Promise<void>((r) => {
        this.wake = r;
      });
    }
    if (this.x.aborted) return;
    const slot: Slot = { n, bytes: buf?.length ?? 0, text: null };
    this.slots.push(slot);
    this.bytes += slot.bytes;
    if (!this.user) return this.answer(slot, errorAnswer(revoked())); // as its single request: the token first
    if (buf === null) return this.answer(slot, errorAnswer(new AppError('PAYLOAD_TOO_LARGE', `Line longer than ${this.limits.maxLineBytes} bytes`)));
    if (this.counted > this.limits.maxLines) {
      return this.answer(
        slot,
        errorAnswer(new AppError('PAYLOAD_TOO_LARGE', `More than ${this.limits.maxLines} lines (BULK_MAX_LINES): this line was not applied`)),
      );
    }
    let line: Line;
    const weighed = { weight: buf.length };
    try {
      line = parseLine(buf, weighed);
    } catch (e) {
      return this.answer(slot, errorAnswer(errorOf(e, this.limits.log)));
    }
    // The line as it is held until answered: what it holds parsed.
    this.bytes += weighed.weight - slot.bytes;
    slot.bytes = weighed.weight;
    const names = namesOf(line);
    const before = names.map((k) => this.tails.get(k)).filter((t): t is Promise<void> => t !== undefined);
    const run = before.length ? Promise.all(before).then(() => this.apply(n, line)) : this.apply(n, line);
    const done = run.then(
      (a) => this.answer(slot, a),
      (e: unknown) => this.answer(slot, errorAnswer(errorOf(e, this.limits.log))),
    );
    for (const k of names) this.tails.set(k, done);
    void done.then(() => {
      for (const k of names) if (this.tails.get(k) === done) this.tails.delete(k);
    });
  }

  /** The line as its single request, sent now: create, update (unsafe without ifMatch) or delete. */
  private async apply(n: number, line: Line): Promise<Record<string, unknown>> {
    if (!this.user) throw revoked();
    const w: WriteContext = { user: this.user, requestId: `${this.x.requestId}:${n}`, via: 'bulk' };
    if (line.op === 'create') return writeAnswer(201, await this.writes.create(w, line.content));
    const ref = refOf(line.id);
    if (line.op === 'update') {
      const ifMatch = line.ifMatch ?? null;
      this.writes.checkUpdatePreconditions(ifMatch, ifMatch === null);
      const mode = updateModeOf(line.mode ?? null);
      return writeAnswer(200, await this.writes.update(w, ref, { ifMatch, unsafe: ifMatch === null, mode }, line.content));
    }
    const cid = await this.writes.delete(w, ref, line.ifMatch);
    return { status: 204, id: mainAlias(cid) };
  }

  /**
   * Records a line's answer and takes every answer now complete, in input order, for the next
   * write. Lines answered in the same turn of the event loop (one Redis reply completes many)
   * go out in one write (`flush`, on setImmediate): a write per line was a socket write (a
   * system call) per line. The last answer of the lines taken is written at once.
   */
  private answer(slot: Slot, a: Record<string, unknown>): void {
    slot.text = `${JSON.stringify({ line: slot.n, ...a })}\n`;
    while (this.slots.length && this.slots[0].text !== null) {
      const s = this.slots.shift()!;
      this.out += s.text;
      this.bytes -= s.bytes;
    }
    this.resume();
    if (!this.slots.length) {
      this.flush();
      const idle = this.idle;
      this.idle = null;
      idle?.();
    } else if (this.out && !this.flushing) {
      this.flushing = true;
      setImmediate(() => this.flush());
    }
  }

  /** Writes the answers taken; while the socket is behind, no more lines are taken (outBlocked). */
  private flush(): void {
    this.flushing = false;
    const out = this.out;
    this.out = '';
    if (out && !this.x.writeChunk(out) && !this.outBlocked) {
      this.outBlocked = true;
      void this.x.drained().then(() => {
        this.outBlocked = false;
        this.resume();
      });
    }
  }

  private resume(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}

const revoked = (): AppError => new AppError('NOT_AUTHENTICATED', 'The token was revoked or expired: this line was not applied');

const isBlank = (b: Buffer): boolean => {
  for (const c of b) if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return false;
  return true;
};

/** The keys of a line beside its request's body. */
const LINE_KEYS = 5;

function parseLine(buf: Buffer, weighed?: { weight: number }): Line {
  // A line holds its request's body one level down (`{op, content: <body>}`): it may be one level
  // deeper than a body, and hold one object and its keys (op, id, ifMatch, mode, content) more, so
  // that whatever a single request stores (and an export writes) imports.
  const value = parseJsonBody(buf, MAX_BODY_DEPTH + 1, MAX_CONTAINERS_PER_BODY + 1, MAX_KEYS_PER_BODY + LINE_KEYS, weighed);
  const parsed = lineSchema.safeParse(value);
  if (!parsed.success) throw invalid(parsed.error);
  return parsed.data;
}

/** `<ns>/<alias>` as the path of its single request names it; 400 without a namespace. */
function refOf(id: string): AliasRef {
  const i = id.indexOf('/');
  if (i <= 0) throw new AppError('BAD_REQUEST', `id must be <namespace>/<alias>, as in /content/alias/<namespace>/<alias>: '${id.slice(0, 100)}'`);
  return { ns: id.slice(0, i), alias: id.slice(i + 1) };
}

/**
 * The content names a line touches: the alias it names and the aliases it sets. Lines sharing a
 * name run in input order (a create that sets `news/a`, then an update of `news/a`); others run
 * at once. A content named two different ways in one batch may see those lines in either order.
 */
function namesOf(line: Line): string[] {
  const names = line.op === 'create' ? [] : [line.id];
  if (line.op !== 'delete') {
    const ops = (line.content as { operations?: unknown } | null)?.operations;
    if (Array.isArray(ops)) {
      for (const op of ops as { _type?: unknown; namespace?: unknown; alias?: unknown }[]) {
        if (op?._type === 'svcSetAlias' && typeof op.namespace === 'string' && typeof op.alias === 'string') names.push(`${op.namespace}/${op.alias}`);
      }
    }
  }
  return [...new Set(names)];
}

function writeAnswer(status: number, res: WriteResult): Record<string, unknown> {
  const { cid, rev } = res.snapshot;
  return {
    status,
    id: mainAlias(cid),
    version: versionId(cid, res.version.key),
    etag: etagOf(cid, rev),
    ...(res.subResults.length ? { subResults: partialCreated(res.subResults).subResults } : {}),
  };
}

function errorAnswer(e: AppError): Record<string, unknown> {
  return { status: e.http, error: e.toBody() };
}

const _ERROR_BODY_SCHEMA = {
  type: 'object',
  required: ['message', 'statusCode', 'extraInfo'],
  properties: { message: { type: 'string' }, statusCode: { type: 'string', pattern: '^[0-9]{5}$' }, extraInfo: { type: 'object' } },
};
