import { unpack } from '../adapters/codec.js';
import { ModuleWorker, serveJobs } from '../adapters/module-worker.js';
import { mainAlias, type Snapshot, type VersionRecord, versionId } from '../content/model.js';
import type { Principal, SecurityConfig } from '../content/permissions.js';
import { resolveView, viewsOfVersion } from '../content/views.js';
import { mayRead } from '../content/visibility.js';
import { contentEnvelope } from './envelope.js';

/**
 * Export lines (CONTRACT §16), chosen and rendered on a thread of their own. An export is bound
 * by CPU: decoding each content and writing its line as JSON was most of the gateway's work per
 * content. The gateway's thread reads Redis and writes the socket; this worker decodes the stored
 * bytes, keeps the contents the caller may read (the read rule of `Reads.mayRead`, given to it as
 * data by `Reads.readRuleOf`), and turns them into lines.
 */

/** One export line, without its newline: the current version of a content with its aliases, views and metadata. */
export function exportLine(h: Snapshot, version: VersionRecord): string {
  return JSON.stringify({
    id: mainAlias(h.cid),
    version: versionId(h.cid, h.head),
    aliases: [mainAlias(h.cid), ...h.aliases],
    views: viewsOfVersion(h, h.head),
    metadata: h.meta,
    content: contentEnvelope(h, version),
  });
}

/** Which contents an export holds: the caller's read rule, and the types and views asked for (null: all). */
export interface ExportFilter {
  security: SecurityConfig;
  user: Principal;
  types: readonly string[] | null;
  views: readonly string[] | null;
}

/** Is this content in the export: not deleted, of a type and on a view asked for, and readable by the caller? */
export function exported(h: Snapshot, f: ExportFilter): boolean {
  return (
    !h.deleted &&
    (f.types === null || f.types.includes(h.type)) &&
    (f.views === null || f.views.some((v) => resolveView(h, v) !== null)) &&
    mayRead(f.security, f.user, h)
  );
}

/** A content the export keeps whose version was not read with it: its head's version key, and its snapshot as stored. */
export interface VersionWanted {
  cid: string;
  head: string;
  snapshot: Uint8Array;
}

/** What the worker makes of a batch: the lines (UTF-8, each ending in a newline), and the kept contents without a version. */
export interface Rendered {
  lines: Buffer;
  wanting: VersionWanted[];
}

const ROLE = 'export-render';

/** A batch for the worker: the stored snapshot and version of each content, one after the other, and where each ends. */
interface Job {
  data: ArrayBuffer;
  /** Per content: where its snapshot ends, then where its version ends (an empty one: not read). */
  ends: Uint32Array;
  filter: ExportFilter;
}
interface Done {
  lines: ArrayBuffer;
  size: number;
  wanting: VersionWanted[];
}

/** The worker's side: renders each batch it is sent. */
serveJobs<Job, Done>(ROLE, (job) => {
  const data = new Uint8Array(job.data);
  // Each line is written as UTF-8 into the answer as it is made: joining the lines into one
  // string first made the encoder flatten a rope of hundreds of KB.
  let out = Buffer.from(new ArrayBuffer(Math.max(4096, data.length * 2)));
  let size = 0;
  const wanting: VersionWanted[] = [];
  for (let i = 0, at = 0; i < job.ends.length; i += 2) {
    const s = data.subarray(at, job.ends[i]);
    const v = data.subarray(job.ends[i], job.ends[i + 1]);
    at = job.ends[i + 1];
    if (!s.length) continue; // the content is gone
    const h = unpack<Snapshot>(s);
    if (!exported(h, job.filter)) continue;
    // Not read with it, or not its head's: a field h left behind by a commit of an earlier
    // build, which kept none (a rolling deploy, a rollback) names an older version.
    // The lines stay in the contents' order: once one kept content lacks its version, it and
    // every kept content after it are wanting (read in order after), their versions read or not.
    const version = v.length && !wanting.length ? unpack<VersionRecord>(v) : null;
    if (version?.key !== h.head) {
      wanting.push({ cid: h.cid, head: h.head, snapshot: s.slice() });
      continue;
    }
    const line = exportLine(h, version);
    // At most 3 bytes of UTF-8 per UTF-16 unit, and the newline.
    if (out.length - size < line.length * 3 + 1) {
      const grown = Buffer.from(new ArrayBuffer(Math.max(out.length * 2, size + line.length * 3 + 1)));
      out.copy(grown, 0, 0, size);
      out = grown;
    }
    size += out.write(line, size);
    out[size++] = 0x0a;
  }
  // Its own ArrayBuffer, handed over with the length used.
  const lines = out.buffer as ArrayBuffer;
  return { done: { lines, size, wanting }, transfer: [lines] };
});

/**
 * The gateway's side: one worker per process (`exportRenderer`, a ModuleWorker). A worker that
 * fails fails the batches it held (their exports are cut, never ended as if complete).
 */
export class ExportRenderer {
  private readonly worker = new ModuleWorker<Job, Done>(import.meta.url, ROLE, 'export rendering');

  /**
   * The lines of the contents the filter keeps, of these: per content its stored snapshot, then
   * its stored version (null: not read; the content comes back in `wanting` if it is kept), flat.
   */
  async render(stored: readonly (Buffer | Uint8Array | null)[], filter: ExportFilter): Promise<Rendered> {
    if (!stored.length) return { lines: Buffer.alloc(0), wanting: [] };
    let size = 0;
    for (const b of stored) size += b?.length ?? 0;
    const data = new Uint8Array(size);
    const ends = new Uint32Array(stored.length);
    let at = 0;
    stored.forEach((b, i) => {
      if (b) data.set(b, at);
      ends[i] = at += b?.length ?? 0;
    });
    const done = await this.worker.run({ data: data.buffer, ends, filter }, [data.buffer, ends.buffer]);
    return { lines: Buffer.from(done.lines, 0, done.size), wanting: done.wanting };
  }

  close(): Promise<void> {
    return this.worker.close();
  }
}

/** The process's renderer: every export of every gateway in this process shares its worker. */
export const exportRenderer = new ExportRenderer();
