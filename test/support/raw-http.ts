import net from 'node:net';
import type { AnyJson } from '../../src/client/index.js';
import { checkRawAnswer, readsBody } from './openapi-check.js';

/**
 * A raw HTTP/1.1 client for tests that must send what fetch would not: `..` segments kept
 * as they are, wrong Content-Length, chunked bodies in chosen sizes, control characters.
 */

export interface RawRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Send the body with Transfer-Encoding: chunked, in chunks of this size. */
  chunked?: number;
  /** Announce this Content-Length instead of the body's real length. */
  contentLength?: number;
}

export interface RawResponse {
  status: number;
  /** Header lines exactly as received (without the status line). */
  headerLines: string[];
  headers: Record<string, string>;
  body: string;
  json: AnyJson;
}

/**
 * The status line and headers at the start of `buf` (header names lowercased), and where the
 * body begins; null until the head is complete.
 */
export function parseHead(buf: Buffer): { status: number; headerLines: string[]; headers: Record<string, string>; bodyStart: number } | null {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine, ...headerLines] = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3})(?: .*)?$/.exec(statusLine);
  if (!m) throw new Error(`bad status line ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status: Number(m[1]), headerLines, headers, bodyStart: end + 4 };
}

/** One request on its own connection; an answer of a test platform is checked against its OpenAPI document (openapi-check.ts). */
export async function rawRequest(port: number, r: RawRequest, timeoutMs = 15000): Promise<RawResponse> {
  const res = await rawExchange(port, r, timeoutMs);
  await checkRawAnswer(port, r.method, r.path, res.status, res.headers, readsBody(res.headers['content-type'], res.status) ? res.body : undefined);
  return res;
}

function rawExchange(port: number, r: RawRequest, timeoutMs: number): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let done = false;
    const timer = setTimeout(() => finish(new Error(`no complete response to ${r.method} ${r.path} in ${timeoutMs} ms`)), timeoutMs);

    function finish(err: Error | null, res?: RawResponse) {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(res!);
    }

    /** Parses the buffer; returns the response once it is complete (or `final` and head seen). */
    function tryParse(final: boolean): RawResponse | null {
      const head = parseHead(buf);
      if (!head) return null;
      const { status, headerLines, headers } = head;
      let rest = buf.subarray(head.bodyStart);
      let body: Buffer | null = null;
      if (status === 204 || status === 304 || r.method === 'HEAD') body = Buffer.alloc(0);
      else if (headers['content-length'] !== undefined) {
        const n = Number(headers['content-length']);
        if (rest.length >= n) body = rest.subarray(0, n);
      } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        const parts: Buffer[] = [];
        for (;;) {
          const le = rest.indexOf('\r\n');
          if (le < 0) break;
          const size = parseInt(rest.subarray(0, le).toString('latin1'), 16);
          if (size === 0) {
            body = Buffer.concat(parts);
            break;
          }
          if (rest.length < le + 2 + size + 2) break;
          parts.push(rest.subarray(le + 2, le + 2 + size));
          rest = rest.subarray(le + 2 + size + 2);
        }
      } else if (final) body = rest;
      if (body === null) {
        if (final) throw new Error(`connection closed before the response body was complete (${r.method} ${r.path})`);
        return null;
      }
      const text = body.toString('utf8');
      let json: AnyJson;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      return { status, headerLines, headers, body: text, json };
    }

    function onData(final: boolean) {
      try {
        const res = tryParse(final);
        if (res) finish(null, res);
        else if (final) finish(new Error(`connection closed without a response to ${r.method} ${r.path}`));
      } catch (e) {
        finish(e as Error);
      }
    }

    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      onData(false);
    });
    sock.on('end', () => onData(true));
    sock.on('close', () => onData(true));
    // The server may answer (413) and close while the body is still being sent.
    sock.on('error', () => onData(true));

    sock.on('connect', async () => {
      const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body, 'utf8');
      let head = `${r.method} ${r.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n`;
      for (const [k, v] of Object.entries(r.headers ?? {})) head += `${k}: ${v}\r\n`;
      if (body !== undefined && r.chunked) head += 'Transfer-Encoding: chunked\r\n';
      else if (r.contentLength !== undefined) head += `Content-Length: ${r.contentLength}\r\n`;
      else if (body !== undefined) head += `Content-Length: ${body.length}\r\n`;
      head += '\r\n';
      const write = (b: Buffer | string) =>
        new Promise<void>((res) => {
          if (done || sock.destroyed) return res();
          if (sock.write(b)) res();
          else {
            sock.once('drain', () => res());
            sock.once('close', () => res());
          }
        });
      await write(head);
      if (body === undefined) return;
      if (r.chunked) {
        for (let i = 0; i < body.length && !done; i += r.chunked) {
          const c = body.subarray(i, i + r.chunked);
          await write(Buffer.concat([Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')]));
        }
        await write('0\r\n\r\n');
      } else if (body.length) await write(body);
    });
  });
}
