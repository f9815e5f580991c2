import http from 'node:http';
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
