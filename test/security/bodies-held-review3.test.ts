import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Principal } from '../../src/content/permissions.js';
import { BodiesHeld } from '../../src/gateway/bodies-held.js';
import { type BodyAccounting, Exchange } from '../../src/gateway/http.js';

/**
 * A third review of the bound on what collected request bodies hold (bodies-held.ts): what the
 * count gives back must also be let go of. uWS keeps a request's data handler, and with it what
 * that handler's closure holds, for as long as the client goes on sending the body, also after
 * the request was answered.
 */

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const external = (): number => {
  gc();
  gc();
  return process.memoryUsage().arrayBuffers;
};

const MiB = 1024 * 1024;

/** An Exchange of a collected body on a uWS response that takes answers; `data` hands it a chunk as uWS would. */
function exchange(bodies: BodyAccounting, maxBody: number, method = 'post') {
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
    getMethod: () => method,
    getUrl: () => '/content-service/content',
    getQuery: () => '',
    getHeader: (h: string) => (h === 'x-auth-token' ? 'tok' : h === 'transfer-encoding' ? 'chunked' : ''),
  } as unknown as HttpRequest;
  const x = new Exchange(res, req, maxBody, false, bodies);
  return { x, data: (n: number, last = false) => data!(new Uint8Array(n).fill(32).buffer, last) };
}

describe('bodies held, review 3: what is given back is let go of (bodies-held.ts)', () => {
  const accounting = (held: BodiesHeld): BodyAccounting => ({
    held,
    callerOf: (e, u: Principal | null) => (u ? `user:${u.userId}` : `address:${e.clientAddress(null)}`),
  });

  for (const how of ['answered before its body is whole (a token not valid: 401)', 'refused past its limit (413), chunked'] as const) {
    it(`a request ${how} keeps none of its body while its client goes on sending it`, async () => {
      const held = new BodiesHeld(64 * MiB, 64 * MiB);
      const before = external();
      const kept: ReturnType<typeof exchange>[] = [];
      for (let i = 0; i < 8; i++) {
        const e = exchange(accounting(held), 4 * MiB);
        for (let j = 0; j < 4; j++) e.data(MiB);
        if (how.startsWith('answered')) e.x.sendJson(401, { message: 'no' });
        else {
          e.data(1);
          await e.x.body().catch(() => undefined);
          e.x.sendJson(413, { message: 'too large' });
        }
        e.x.release();
        // The client goes on sending, slowly: uWS keeps the handler.
        e.data(16);
        kept.push(e);
      }
      expect(held.total).to.equal(0);
      const grown = external() - before;
      expect(kept.length).to.equal(8);
      expect(grown, 'bytes still referenced by the requests answered').to.be.below(4 * MiB);
    });
  }
});
