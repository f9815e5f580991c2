import net from 'node:net';
import { checkRawAnswer, readsBody } from './openapi-check.js';
import { parseHead } from './raw-http.js';

/**
 * A raw HTTP/1.1 client over keep-alive connections, for tests that send many hostile requests
 * fast: the request line, headers and body go out exactly as given (no URL normalisation, no
 * header validation), one request at a time per connection, and a connection the server closed
 * is opened again for the next request. The answer is parsed by Content-Length or chunked
 * framing (HEAD and 204/304 carry no body).
 */

export interface WireRequest {
  method: string;
  /** The request target as sent (it may hold anything but CR, LF and space). */
  target: string;
  /** Header lines as sent, in order. */
  headers: [string, string][];
  body?: Buffer;
  /** Send the body chunked, in pieces of this size (no Content-Length). */
  chunked?: number;
}

export interface WireResponse {
  status: number;
  headers: Record<string, string>;
  /** Header lines exactly as received (without the status line). */
  headerLines: string[];
  body: Buffer;
  /** How long the answer took, in milliseconds. */
  ms: number;
}

/** What came back: an answer, or the connection closed (or timed out) without one. */
export type WireOutcome = { ok: true; res: WireResponse } | { ok: false; reason: string };

export class KeepAliveConnection {
  private sock: net.Socket | null = null;
  private buf: Buffer = Buffer.alloc(0);
  private waiter: ((final: boolean) => void) | null = null;
  private closed = true;

  constructor(
    private readonly port: number,
    private readonly host = '127.0.0.1',
  ) {}

  /** How the last connection ended (for failure messages). */
  private ending = '';

  private connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      const sock = net.connect(this.port, this.host);
      sock.setNoDelay(true);
      this.buf = Buffer.alloc(0);
      this.closed = false;
      this.ending = '';
      // Events of a socket this connection has moved on from are ignored.
      const current = () => this.sock === sock;
      sock.on('data', (d: Buffer) => {
        if (!current()) return;
        this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
        this.waiter?.(false);
      });
      const gone = (how: string) => {
        if (!current()) return;
        this.ending ||= how;
        this.closed = true;
        this.waiter?.(true);
      };
      sock.on('end', () => gone('the server ended the connection'));
      sock.on('error', (e: NodeJS.ErrnoException) => gone(`connection error ${e.code ?? e.message}`));
      sock.on('close', () => gone('connection closed'));
      sock.once('connect', () => resolve());
      sock.once('error', (e) => reject(e));
      this.sock = sock;
    });
  }

  close(): void {
    this.sock?.destroy();
    this.sock = null;
    this.closed = true;
  }

  /**
   * Sends one request and waits for its whole answer (or the connection's end). An answer of a
   * test platform is checked against its OpenAPI document (openapi-check.ts).
   */
  async send(r: WireRequest, timeoutMs = 10000): Promise<WireOutcome> {
    const o = await this.exchange(r, timeoutMs);
    if (o.ok) {
      const text = readsBody(o.res.headers['content-type'], o.res.status) ? o.res.body.toString('utf8') : undefined;
      await checkRawAnswer(this.port, r.method, r.target, o.res.status, o.res.headers, text);
    }
    return o;
  }

  private async exchange(r: WireRequest, timeoutMs: number): Promise<WireOutcome> {
    if (this.closed || !this.sock) await this.connect();
    const sock = this.sock!;
    const started = performance.now();
    let head = `${r.method} ${r.target} HTTP/1.1\r\nHost: 127.0.0.1\r\n`;
    for (const [k, v] of r.headers) head += `${k}: ${v}\r\n`;
    const parts: Buffer[] = [];
    if (r.body !== undefined && r.chunked) {
      head += 'Transfer-Encoding: chunked\r\n\r\n';
      parts.push(Buffer.from(head, 'latin1'));
      for (let i = 0; i < r.body.length; i += r.chunked) {
        const c = r.body.subarray(i, i + r.chunked);
        parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
      }
      parts.push(Buffer.from('0\r\n\r\n'));
    } else {
      if (r.body !== undefined) head += `Content-Length: ${r.body.length}\r\n`;
      head += '\r\n';
      parts.push(Buffer.from(head, 'latin1'));
      if (r.body?.length) parts.push(r.body);
    }
    const isHead = r.method === 'HEAD';
    return new Promise<WireOutcome>((resolve) => {
      let done = false;
      const finish = (o: WireOutcome, keep: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.waiter = null;
        if (!keep) this.close();
        resolve(o);
      };
      const timer = setTimeout(() => finish({ ok: false, reason: `no answer in ${timeoutMs} ms` }, false), timeoutMs);
      const attempt = (final: boolean) => {
        let parsed: { res: WireResponse; used: number; keep: boolean } | null;
        try {
          parsed = parseResponse(this.buf, isHead, final, started);
        } catch (e) {
          finish({ ok: false, reason: (e as Error).message }, false);
          return;
        }
        if (parsed) {
          this.buf = this.buf.subarray(parsed.used);
          finish({ ok: true, res: parsed.res }, parsed.keep && !final);
        } else if (final) {
          finish(
            {
              ok: false,
              reason: this.buf.length
                ? `closed mid-answer (${this.ending}): ${JSON.stringify(this.buf.subarray(0, 200).toString('latin1'))}`
                : `closed without an answer (${this.ending})`,
            },
            false,
          );
        }
      };
      this.waiter = attempt;
      sock.write(Buffer.concat(parts));
      // Anything already buffered (it should not be: one request at a time).
      if (this.buf.length) attempt(false);
    });
  }
}

/** Parses one answer at the start of `buf`; null until it is complete. */
function parseResponse(buf: Buffer, isHead: boolean, final: boolean, started: number): { res: WireResponse; used: number; keep: boolean } | null {
  const head = parseHead(buf);
  if (!head) return null;
  const { status, headers, headerLines: lines, bodyStart: rest } = head;
  const keep = !/close/i.test(headers.connection ?? '');
  const ms = performance.now() - started;
  if (isHead || status === 204 || status === 304)
    return { res: { status, headers, headerLines: lines, body: Buffer.alloc(0), ms }, used: rest, keep: keep && !isHead };
  if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    if (buf.length - rest < n) return null;
    return { res: { status, headers, headerLines: lines, body: buf.subarray(rest, rest + n), ms }, used: rest + n, keep };
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    let at = rest;
    for (;;) {
      const le = buf.indexOf('\r\n', at);
      if (le < 0) return null;
      const size = parseInt(buf.subarray(at, le).toString('latin1'), 16);
      if (size === 0) {
        const trailerEnd = buf.indexOf('\r\n', le + 2);
        if (trailerEnd < 0) return null;
        return { res: { status, headers, headerLines: lines, body: Buffer.concat(parts), ms }, used: trailerEnd + 2, keep };
      }
      if (buf.length < le + 2 + size + 2) return null;
      parts.push(buf.subarray(le + 2, le + 2 + size));
      at = le + 2 + size + 2;
    }
  }
  // No framing: the body runs to the end of the connection.
  if (!final) return null;
  return { res: { status, headers, headerLines: lines, body: buf.subarray(rest), ms }, used: buf.length, keep: false };
}
