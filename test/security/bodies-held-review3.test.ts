import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import type { Principal } from '../../src/content/permissions.js';
import { BodiesHeld } from '../../src/gateway/bodies-held.js';
import type { BodyAccounting } from '../../src/gateway/http.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { uwsExchange } from '../support/uws-exchange.js';

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

/** An Exchange of a chunked body with a token on a uWS response that takes answers; `data` hands it `n` bytes. */
function exchange(bodies: BodyAccounting, maxBody: number, method = 'post') {
  const e = uwsExchange(bodies, { maxBody, method, headers: { 'x-auth-token': 'tok', 'transfer-encoding': 'chunked' } });
  return { x: e.x, data: (n: number, last = false) => e.send(n, last) };
}

describe('bodies held, review 3: what is given back is let go of (bodies-held.ts)', () => {
  const accounting = (held: BodiesHeld): BodyAccounting => ({
    held,
    callerOf: (e, u: Principal | null) => (u ? `user:${u.userId}` : `address:${e.clientAddress(null)}`),
  });

  for (const how of ['answered before its body is whole (a token not valid: 401)', 'refused past its limit (413), chunked'] as const) {
    it(`a request ${how} keeps none of its body while its client goes on sending it`, async () => {
      const held = new BodiesHeld(64 * MiB, 64 * MiB, 10_000);
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

describe('bodies held, review 3, on a platform', function () {
  this.timeout(120_000);
  const T = `bh3${Date.now().toString(36)}`;
  const PASSWORD = `${T}-password`;
  const MAX_BODY = 4 * MiB;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let port: number;
  let editor: Client;

  before(async () => {
    p = await startTestPlatform({ MAX_BODY_BYTES: String(MAX_BODY) }, ['web']);
    port = Number(new URL(p.url).port);
    await p.tokens!.createAccount(`${T}-editor`, PASSWORD, { __global__: ['editor', 'sysadmin'] });
    editor = await new Client(p.base).login(`${T}-editor`, PASSWORD);
  });
  after(async () => p?.stop());

  /** Opens a connection, sends `head`, then `body`; the status of the first answer, and the socket. */
  async function open(head: string, body: Buffer[]): Promise<{ sock: net.Socket; status: Promise<number>; closed: () => boolean }> {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => undefined);
    await new Promise((r) => sock.once('connect', r));
    let got = '';
    let closed = false;
    sock.on('close', () => {
      closed = true;
    });
    const status = new Promise<number>((resolve) => {
      sock.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
        if (m && got.includes('\r\n\r\n')) resolve(Number(m[1]));
      });
      sock.on('close', () => resolve(0));
    });
    sock.write(head);
    for (const b of body) sock.write(b);
    return { sock, status, closed: () => closed };
  }

  it('a body refused 413 whose client trickles more is not kept by the gateway (8 connections of 4 MiB)', async () => {
    const before = external();
    const conns = [];
    for (let i = 0; i < 8; i++) {
      const head = `POST /content-service/content HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${editor.token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
      const part = 256 * 1024;
      const body: Buffer[] = [];
      for (let n = 0; n <= MAX_BODY; n += part)
        body.push(Buffer.concat([Buffer.from(`${part.toString(16)}\r\n`), Buffer.alloc(part, 32), Buffer.from('\r\n')]));
      conns.push(await open(head, body));
    }
    expect(await Promise.all(conns.map((c) => c.status))).to.deep.equal(Array(8).fill(413));
    // The clients go on sending, a little at a time: uWS keeps their connections and data handlers.
    for (let t = 0; t < 4; t++) {
      for (const c of conns) c.sock.write(Buffer.from(`4000\r\n${' '.repeat(0x4000)}\r\n`));
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(conns.filter((c) => c.closed()).length, 'connections closed by the gateway').to.equal(0);
    const grown = external() - before;
    for (const c of conns) c.sock.destroy();
    expect(grown, 'bytes the gateway still holds of the refused bodies').to.be.below(12 * MiB);
  });

  it('a DELETE with Content-Length: 0 or an empty chunked body is answered as one without a body; HEAD too', async () => {
    const token = editor.token!;
    const cases: [string, string, Record<string, string>][] = [
      ['content delete', '/content-service/content/alias/none/nothing', { 'X-Auth-Token': token, 'If-Match': '"x"' }],
      ['release', '/content-service/content/alias/none/nothing/release', { 'X-Auth-Token': token }],
      ['workspace draft delete', '/content-service/content/workspace/w1/alias/none/nothing', { 'X-Auth-Token': token }],
      ['file delete', '/file-service/file/nothing/x.txt', { 'X-Auth-Token': token }],
      ['webhook delete', '/content-service/webhooks/nothing', { 'X-Auth-Token': token }],
      ['view removal', '/content-service/view/web/alias/none/nothing', { 'X-Auth-Token': token, 'If-Match': '"x"' }],
      ['workspace clear', '/content-service/content/workspace/nothing', { 'X-Auth-Token': token }],
      ['logout with a token not valid', '/content-service/security/token', { 'X-Auth-Token': 'nope' }],
    ];
    for (const [what, path, headers] of cases) {
      const h = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      const ask = async (extra: string, body = '') => {
        const c = await open(`DELETE ${path} HTTP/1.1\r\nHost: x\r\n${h}${extra}\r\n`, [Buffer.from(body)]);
        const s = await Promise.race([c.status, new Promise<number>((r) => setTimeout(() => r(-1), 5000))]);
        c.sock.destroy();
        return s;
      };
      const plain = await ask('');
      expect(plain, what).to.not.equal(400);
      expect(await ask('Content-Length: 0\r\n'), `${what}, Content-Length: 0`).to.equal(plain);
      expect(await ask('Transfer-Encoding: chunked\r\n', '0\r\n\r\n'), `${what}, chunked and empty`).to.equal(plain);
      expect(await ask('Content-Length: 2\r\n', '{}'), `${what}, a body`).to.equal(400);
    }
    // A logout with Content-Length: 0, and with an empty chunked body, logs out.
    for (const extra of ['Content-Length: 0\r\n', 'Transfer-Encoding: chunked\r\n']) {
      const c = await new Client(p.base).login(`${T}-editor`, PASSWORD);
      const o = await open(`DELETE /content-service/security/token HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${c.token}\r\n${extra}\r\n`, [
        Buffer.from(extra.startsWith('Transfer') ? '0\r\n\r\n' : ''),
      ]);
      expect(await o.status, extra).to.equal(204);
      o.sock.destroy();
    }
    const head = await open(`HEAD /content-service/content/alias/none/nothing HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${token}\r\nContent-Length: 0\r\n\r\n`, []);
    expect(await head.status).to.equal(404);
    head.sock.destroy();
  });
});

describe('bodies held, review 3: anonymous bodies cannot hold the whole process bound', () => {
  it("anonymous bodies past their first 64 KiB hold at most a quarter of BODIES_HELD_BYTES together (503 past it): a signed-in writer's body still passes", () => {
    const KiB = 1024;
    // 16 requests in flight at most: each anonymous body's first 4096 KiB / 4 / 16 = 64 KiB are held to the process's bound only.
    const held = new BodiesHeld(4096 * KiB, 1024 * KiB, 16);
    expect(held.small).to.equal(64 * KiB);
    // Anonymous search bodies (2 MiB each at most) from four addresses, each within its share.
    let refusedAt = -1;
    for (let a = 0; a < 4 && refusedAt < 0; a++) {
      let mine = 0;
      for (let i = 0; i < 16; i++) {
        const e = held.take(`address:198.51.100.${a}`, 64 * KiB, mine);
        if (e) {
          expect(e.http).to.equal(503);
          refusedAt = held.total;
          break;
        }
        mine += 64 * KiB;
      }
    }
    expect(refusedAt, 'anonymous bodies refused once they hold a quarter').to.be.within(1024 * KiB, 1024 * KiB + 64 * KiB);
    // A signed-in writer's body, and a body whose token is not checked yet, are not refused for them.
    expect(held.take('user:w', 2048 * KiB, 0)).to.equal(undefined);
    expect(held.take('unchecked address:198.51.100.9', 512 * KiB, 0)).to.equal(undefined);
    // A small anonymous body (a login) is held to the process's bound only.
    expect(held.take('address:198.51.100.7', 2 * KiB, 0)).to.equal(undefined);
    // Moved to its user, an anonymous body leaves the anonymous pool.
    held.move('address:198.51.100.0', 'user:s', 512 * KiB);
    expect(held.take('address:198.51.100.8', 128 * KiB, 0)).to.equal(undefined);
  });
});
