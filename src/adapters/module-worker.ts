import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, type Transferable, Worker, workerData } from 'node:worker_threads';

/**
 * CPU-bound work of the gateway moved to a thread of its own (export lines, change-feed cursor
 * seals), so that the event loop goes on with requests while the other core does it. A module
 * serves one role: the thread loads the module that asked for it (its own `import.meta.url`) and
 * that module answers each job through `serveJobs`. One thread per role and process, started by
 * the first job and not holding the process open. A thread that fails fails the jobs it held (its
 * callers decide what then: an export is cut, a cursor is sealed on the event loop instead); the
 * next job starts another.
 */
export class ModuleWorker<J, D> {
  private current: { worker: Worker; pending: Map<number, { resolve: (d: D) => void; reject: (e: Error) => void }> } | null = null;
  private seq = 0;

  constructor(
    /** The `import.meta.url` of the module that serves the role. */
    private readonly moduleUrl: string,
    private readonly role: string,
    /** What the thread does, for errors: "export rendering failed: ...". */
    private readonly work: string,
  ) {}

  /** Runs one job on the thread; `transfer` hands buffers over instead of copying them. */
  run(job: J, transfer: Transferable[] = []): Promise<D> {
    const { worker, pending } = this.start();
    const id = this.seq++;
    return new Promise<D>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, job }, transfer);
    });
  }

  async close(): Promise<void> {
    const c = this.current;
    this.current = null;
    await c?.worker.terminate();
  }

  private start(): NonNullable<ModuleWorker<J, D>['current']> {
    if (this.current) return this.current;
    const file = fileURLToPath(this.moduleUrl);
    const data = { role: this.role };
    // Run from TypeScript sources (tests, tsx): the thread registers tsx before it loads the module.
    const w = file.endsWith('.ts')
      ? new Worker(`import('tsx/esm/api').then((t) => t.register()).then(() => import(${JSON.stringify(this.moduleUrl)}))`, { eval: true, workerData: data })
      : new Worker(file, { workerData: data });
    w.unref();
    const c: NonNullable<ModuleWorker<J, D>['current']> = { worker: w, pending: new Map() };
    w.on('message', (m: Answer<D>) => {
      const p = c.pending.get(m.id);
      if (!p) return;
      c.pending.delete(m.id);
      if ('error' in m) p.reject(new Error(`${this.work} failed: ${m.error}`));
      else p.resolve(m.done);
    });
    const fail = (e: Error) => {
      if (this.current === c) this.current = null;
      for (const p of c.pending.values()) p.reject(e);
      c.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`the ${this.work} thread stopped (exit code ${code})`)));
    this.current = c;
    return c;
  }
}

type Answer<D> = { id: number; done: D } | { id: number; error: string };

/**
 * The thread's side, called at the top level of the module that serves `role`: when this is that
 * role's thread, answers every job with `handle` (its result, and the buffers to hand back).
 */
export function serveJobs<J, D>(role: string, handle: (job: J) => { done: D; transfer?: Transferable[] }): void {
  if (isMainThread || (workerData as { role?: string } | null)?.role !== role) return;
  const port = parentPort!;
  port.on('message', ({ id, job }: { id: number; job: J }) => {
    try {
      const { done, transfer } = handle(job);
      port.postMessage({ id, done } satisfies Answer<D>, transfer ?? []);
    } catch (e) {
      port.postMessage({ id, error: (e as Error).message ?? String(e) } satisfies Answer<D>);
    }
  });
}
