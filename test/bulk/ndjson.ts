import http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';
import { Readable } from 'node:stream';
import type { BulkAnswer } from '../../src/client/bulk.js';

/** An answer line of POST /bulk: the client's type of it. */
export type AnswerLine = BulkAnswer;

export interface BulkOptions {
  /** Called with each answer line as it arrives; answers are not kept when it returns false. */
  onAnswer?: (a: AnswerLine, req: http.ClientRequest) => boolean | undefined;
  contentType?: string;
}

/**
 * POST /bulk over node:http, which reads the answer while the body is still sent (fetch
 * would not): the body from `body`, each answer line parsed as it comes.
 */
export function bulk(base: string, token: string | null, body: Iterable<string> | AsyncIterable<string> | Readable, opts: BulkOptions = {}) {
  return new Promise<{ status: number; answers: AnswerLine[]; text: string; error?: Error }>((resolve) => {
    const url = new URL(`${base}/bulk`);
    const headers: Record<string, string> = { 'Content-Type': opts.contentType ?? 'application/x-ndjson', 'Transfer-Encoding': 'chunked' };
    if (token) headers['X-Auth-Token'] = token;
    const answers: AnswerLine[] = [];
    let text = '';
    let status = 0;
    let settled = false;
    const done = (error?: Error) => {
      if (settled) return;
      settled = true;
      resolve({ status, answers, text, error });
    };
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent: false }, (res) => {
      status = res.statusCode ?? 0;
      let carry = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => {
        if (status !== 200) {
          text += s;
          return;
        }
        carry += s;
        let nl = carry.indexOf('\n');
        while (nl >= 0) {
          const a = JSON.parse(carry.slice(0, nl)) as AnswerLine;
          carry = carry.slice(nl + 1);
          if (opts.onAnswer?.(a, req) !== false) answers.push(a);
          nl = carry.indexOf('\n');
        }
      });
      res.on('end', () => done());
      res.on('error', (e) => done(e));
      res.on('close', () => done(new Error('closed')));
    });
    req.on('error', (e) => done(e));
    const src = body instanceof Readable ? body : Readable.from(body as Iterable<string>);
    src.pipe(req);
  });
}

/** An export line (CONTRACT §16). */
export type ExportLine = {
  id: string;
  version: string;
  aliases: string[];
  views: string[];
  metadata: Record<string, unknown>;
  content: { system: { contentType: string }; aspects: Record<string, unknown> };
};

/** GET /export over a raw socket: the sizes of its HTTP chunks, as sent, and its line count. */
export async function exportChunks(base: string, token: string, query: string): Promise<{ sizes: number[]; lines: number; parsed: ExportLine[] }> {
  const url = new URL(`${base}/export?${query}`);
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    const s = net.connect(Number(url.port), url.hostname, () => {
      s.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nX-Auth-Token: ${token}\r\nConnection: close\r\n\r\n`);
    });
    s.on('data', (b: Buffer) => parts.push(b));
    s.on('end', () => resolve(Buffer.concat(parts)));
    s.on('error', reject);
  });
  let at = raw.indexOf('\r\n\r\n') + 4;
  const head = raw.subarray(0, at).toString();
  expect(head).to.match(/^HTTP\/1\.1 200/);
  // An export that wrote no line ends without a chunk: uWS then answers a length of 0.
  if (!/transfer-encoding: chunked/i.test(head)) {
    expect(head).to.match(/content-length: 0\r\n/i);
    return { sizes: [], lines: 0, parsed: [] };
  }
  const sizes: number[] = [];
  const body: Buffer[] = [];
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    const size = Number.parseInt(raw.subarray(at, eol).toString(), 16);
    if (size === 0) break;
    sizes.push(size);
    body.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  const lines = Buffer.concat(body).toString().split('\n').filter(Boolean);
  const parsed = lines.map((l) => JSON.parse(l) as ExportLine);
  for (const l of parsed) expect(l).to.have.property('id');
  return { sizes, lines: lines.length, parsed };
}
