import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { unpack } from '../adapters/codec.js';
import { mainAlias, type Snapshot, type VersionRecord, versionId } from '../content/model.js';
import { viewsOfVersion } from '../content/views.js';
import { contentEnvelope } from './envelope.js';

/**
 * Export lines (CONTRACT §16), rendered on a thread of their own. An export is bound by one
 * core: decoding each content's version and writing its line as JSON was half of the gateway's
 * CPU per content. The gateway's thread reads Redis, decides what the caller may read, and
 * writes the socket; this worker turns the stored bytes of the contents kept into lines.
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

const ROLE = 'export-render';

/** A batch for the worker: the stored snapshot and version of each content, one after the other, and where each ends. */
interface Job {
  id: number;
  data: ArrayBuffer;
  /** Per content: where its snapshot ends, then where its version ends. */
  ends: Uint32Array;
}
type Done = { id: number; lines: ArrayBuffer } | { id: number; error: string };

/** The worker's side: renders each batch it is sent. */
function serve(): void {
  const port = parentPort!;
  port.on('message', (job: Job) => {
    try {
      const data = new Uint8Array(job.data);
      let text = '';
      for (let i = 0, at = 0; i < job.ends.length; i += 2) {
        const h = unpack<Snapshot>(data.subarray(at, job.ends[i]));
        const v = unpack<VersionRecord>(data.subarray(job.ends[i], job.ends[i + 1]));
        at = job.ends[i + 1];
        text += `${exportLine(h, v)}\n`;
      }
      const lines = new TextEncoder().encode(text); // its own ArrayBuffer, to hand over
      port.postMessage({ id: job.id, lines: lines.buffer } satisfies Done, [lines.buffer]);
    } catch (e) {
      port.postMessage({ id: job.id, error: (e as Error).message ?? String(e) } satisfies Done);
    }
  });
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === ROLE) serve();

/**
 * The gateway's side: one worker per process (`exportRenderer`), started on the first export and
 * not holding the process open. A worker that fails fails the batches it held (their exports are cut, never
 * ended as if complete); the next batch starts another.
 */
export class ExportRenderer {
  /** The worker, with the batches it holds. */
  private current: { worker: Worker; pending: Map<number, { resolve: (b: Buffer) => void; reject: (e: Error) => void }> } | null = null;
  private seq = 0;

  /** The lines (UTF-8, each ending in a newline) of these contents: `[stored snapshot, stored version]` each. */
  render(contents: [Buffer, Buffer][]): Promise<Buffer> {
    if (!contents.length) return Promise.resolve(Buffer.alloc(0));
    let size = 0;
    for (const [s, v] of contents) size += s.length + v.length;
    const data = new Uint8Array(size);
    const ends = new Uint32Array(contents.length * 2);
    let at = 0;
    contents.forEach(([s, v], i) => {
      data.set(s, at);
      ends[2 * i] = at += s.length;
      data.set(v, at);
      ends[2 * i + 1] = at += v.length;
    });
    const { worker, pending } = this.start();
    const id = this.seq++;
    return new Promise<Buffer>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, data: data.buffer, ends } satisfies Job, [data.buffer, ends.buffer]);
    });
  }

  async close(): Promise<void> {
    const c = this.current;
    this.current = null;
    await c?.worker.terminate();
  }

  private start(): NonNullable<ExportRenderer['current']> {
    if (this.current) return this.current;
    const file = fileURLToPath(import.meta.url);
    // Run from TypeScript sources (tests, tsx): the worker registers tsx before it loads this module.
    const w = file.endsWith('.ts')
      ? new Worker(`import('tsx/esm/api').then((t) => t.register()).then(() => import(${JSON.stringify(import.meta.url)}))`, {
          eval: true,
          workerData: { role: ROLE },
        })
      : new Worker(file, { workerData: { role: ROLE } });
    w.unref();
    const c: NonNullable<ExportRenderer['current']> = { worker: w, pending: new Map() };
    w.on('message', (m: Done) => {
      const p = c.pending.get(m.id);
      if (!p) return;
      c.pending.delete(m.id);
      if ('error' in m) p.reject(new Error(`export rendering failed: ${m.error}`));
      else p.resolve(Buffer.from(m.lines));
    });
    const fail = (e: Error) => {
      if (this.current === c) this.current = null;
      for (const p of c.pending.values()) p.reject(e);
      c.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`the export renderer stopped (exit code ${code})`)));
    this.current = c;
    return c;
  }
}

/** The process's renderer: every export of every gateway in this process shares its worker. */
export const exportRenderer = new ExportRenderer();
