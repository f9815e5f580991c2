import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { CheckedTarget } from './ssrf.js';

/** What one delivery attempt got: the HTTP status (none when no answer came), the start of the answer, or why it failed. */
export interface PostResult {
  status: number | null;
  /** At most RESPONSE_KEPT bytes of the answer's body (CONTRACT §14: at most 1 KB in the log). */
  response: string;
  error: string | null;
}

export const RESPONSE_KEPT = 1024;
/** An answer longer than this is cut off (the connection is not kept for reuse). */
const RESPONSE_READ = 64 * 1024;

// Connections are kept for reuse per target: a receiver takes thousands of deliveries a second.
const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 128 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 128 }),
};

/**
 * POSTs a body to a checked target, connected to the address the SSRF guard checked (the
 * client's own lookup answers that address, so a DNS answer that changed since cannot send the
 * request elsewhere); the Host header and TLS name stay the URL's. The whole exchange is cut at
 * `timeoutMs`.
 */
export function post(target: CheckedTarget, body: string, headers: Record<string, string>, timeoutMs: number): Promise<PostResult> {
  const pinned: LookupFunction = (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all)
      (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: target.address, family: target.family }]);
    else cb(null, target.address, target.family);
  };
  const lib = target.url.protocol === 'https:' ? https : http;
  return new Promise<PostResult>((resolve) => {
    let settled = false;
    const finish = (r: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = lib.request(
      target.url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'content-platform-webhooks/1' },
        lookup: pinned,
        agent: agents[target.url.protocol as 'http:' | 'https:'],
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size <= RESPONSE_KEPT + c.length) chunks.push(c);
          if (size > RESPONSE_READ) {
            res.destroy();
            done();
          }
        });
        const done = () => finish({ status: res.statusCode ?? null, response: Buffer.concat(chunks).subarray(0, RESPONSE_KEPT).toString('utf8'), error: null });
        res.on('end', done);
        res.on('error', done);
        res.on('close', done);
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (e) => finish({ status: null, response: '', error: e.message.slice(0, RESPONSE_KEPT) }));
    req.end(body);
  });
}
