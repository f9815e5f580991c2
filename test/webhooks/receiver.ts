import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a test receiver got. */
export interface Received {
  at: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** The request's path and query. */
  path: string;
  /** The status it answered (null: it never answered). */
  status: number | null;
}

/**
 * A local webhook receiver: records every request, and answers what `answer` says for it
 * (a status, or 'hang' to never answer).
 */
export class Receiver {
  readonly got: Received[] = [];
  private server!: Server;
  url = '';

  constructor(public answer: (body: string, r: Received) => number | 'hang' = () => 204) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const r: Received = { at: Date.now(), path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString(), status: null };
        this.got.push(r);
        const a = this.answer(r.body, r);
        if (a === 'hang') return;
        r.status = a;
        res.writeHead(a, { 'content-type': 'text/plain' }).end(a >= 300 ? 'x'.repeat(5000) : 'ok');
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  /** Requests answered 2xx. */
  delivered(): Received[] {
    return this.got.filter((r) => r.status !== null && r.status >= 200 && r.status < 300);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** The feed event of a request. */
export const eventOf = (r: { body: string }): { id: string; revision: number; kind: string; contentType: string; view?: string } => JSON.parse(r.body);

/**
 * Checks that, per content, the revisions delivered (2xx) are consecutive from `from` and that no
 * request ever carried a revision below one already delivered (a later event waits while an earlier
 * one is retried). Answers the contents' delivered revisions.
 */
export function perContentOrder(got: Received[]): Map<string, number[]> {
  const delivered = new Map<string, number[]>();
  const highest = new Map<string, number>();
  for (const r of got) {
    const e = eventOf(r);
    const top = highest.get(e.id) ?? 0;
    if (e.revision < top) throw new Error(`${e.id}: revision ${e.revision} sent after ${top} was delivered`);
    if (r.status !== null && r.status >= 200 && r.status < 300) {
      const list = delivered.get(e.id) ?? [];
      list.push(e.revision);
      delivered.set(e.id, list);
      highest.set(e.id, e.revision);
    }
  }
  return delivered;
}
