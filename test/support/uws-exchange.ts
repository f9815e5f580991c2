import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { type BodyAccounting, Exchange } from '../../src/gateway/http.js';

/**
 * An Exchange of a collected body on a uWS request and response that behave as uWebSockets.js
 * 20.30 does for one: the body's chunks are handed in by `send` (to the handler `onData` set),
 * also after the answer, and any use of the response after a successful answer throws (in uWS
 * the process then stops). For the tests of what a body holds (bodies-held.ts).
 */
export function uwsExchange(bodies: BodyAccounting, opts: { maxBody?: number; method?: string; url?: string; headers?: Record<string, string> } = {}) {
  let data: ((ab: ArrayBuffer, isLast: boolean) => void) | undefined;
  let done = false;
  const use = <T>(v: T): T => {
    if (done) throw new Error('uWS.HttpResponse must not be accessed after a successful response');
    return v;
  };
  const res = {
    onAborted: () => res,
    onData: (f: (ab: ArrayBuffer, isLast: boolean) => void) => {
      data = f;
      return res;
    },
    cork: (f: () => void) => {
      f();
      return res;
    },
    writeStatus: () => use(res),
    writeHeader: () => use(res),
    end: () => {
      use(res);
      done = true;
      return res;
    },
    getRemoteAddressAsText: () => use(new TextEncoder().encode('192.0.2.1').buffer),
  } as unknown as HttpResponse;
  const req = {
    getMethod: () => opts.method ?? 'post',
    getUrl: () => opts.url ?? '/content-service/content',
    getQuery: () => '',
    getHeader: (h: string) => opts.headers?.[h] ?? '',
  } as unknown as HttpRequest;
  const x = new Exchange(res, req, opts.maxBody ?? 1 << 20, false, bodies);
  /** Hands the body `n` bytes (spaces), or raw bytes. */
  const send = (n: number | ArrayBuffer, last = false) => data!(typeof n === 'number' ? new Uint8Array(n).fill(32).buffer : n, last);
  const sendText = (text: string) => send(new TextEncoder().encode(text).buffer as ArrayBuffer, true);
  return { x, send, sendText };
}
