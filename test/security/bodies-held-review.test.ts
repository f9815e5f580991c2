import net from 'node:net';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

/**
 * An attacker's review of the bound on what collected request bodies hold (bodies-held.ts,
 * SECURITY.md "Bodies and limits"). What is held must come back to nothing once every request is
 * answered, whatever the requests were and however their clients behaved: a count that leaks
 * grows until every body of the process answers 503, for good.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;
const T = `bhr${Date.now().toString(36)}`;
const PASSWORD = `${T}-password`;
const MAX_BODY = 64 * 1024;
const REPLY_TIMEOUT_MS = 1200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Sent {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Announce this Content-Length rather than the body's. */
  length?: number;
  /** Send the body chunked (Transfer-Encoding), in parts of this size. */
  chunked?: number;
  /**
   * How the client behaves: waits for the answer (default); goes away in the head, half-way
   * through the body, or once the body is sent before the answer; sends half the body, waits for
   * the answer, then sends the rest (`early`).
   */
  cut?: 'head' | 'mid' | 'after' | 'early';
  /** With `early`: sent whole on the same connection once the rest of the body is (keep-alive). */
  next?: Sent;
}

/** Sends one request on a connection of its own: the status answered, or 0 when the client went away first. */
async function send(port: number, s: Sent): Promise<number> {
  const sock = net.connect(port, '127.0.0.1');
  sock.on('error', () => undefined);
  await new Promise((r) => sock.once('connect', r));
  let got = Buffer.alloc(0);
  let closed = false;
  const answered = new Promise<number>((resolve) => {
    sock.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got.toString('latin1'));
      if (m && got.includes('\r\n\r\n')) resolve(Number(m[1]));
    });
    sock.on('close', () => {
      closed = true;
      resolve(0);
    });
  });
  const body = s.body === undefined ? undefined : Buffer.from(s.body);
  const lines = [`${s.method} ${s.path} HTTP/1.1`, 'Host: x'];
  for (const [k, v] of Object.entries(s.headers ?? {})) lines.push(`${k}: ${v}`);
  if (s.chunked) lines.push('Transfer-Encoding: chunked');
  else if (body !== undefined || s.length !== undefined) lines.push(`Content-Length: ${s.length ?? body!.length}`);
  const head = `${lines.join('\r\n')}\r\n\r\n`;
  const frame = (b: Buffer): Buffer => {
    if (!s.chunked) return b;
    const parts: Buffer[] = [];
    for (let i = 0; i < b.length; i += s.chunked) {
      const c = b.subarray(i, i + s.chunked);
      parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
    }
    return Buffer.concat(parts);
  };
  const end = s.chunked ? Buffer.from('0\r\n\r\n') : Buffer.alloc(0);
  if (s.cut === 'head') {
    sock.write(head.slice(0, head.length >> 1));
    await sleep(30);
    sock.destroy();
    return 0;
  }
  sock.write(head);
  const b = body ?? Buffer.alloc(0);
  if (s.cut === 'mid' || s.cut === 'early') {
    sock.write(frame(b.subarray(0, b.length >> 1)));
    if (s.cut === 'mid') {
      await sleep(60);
      sock.destroy();
      return 0;
    }
    const status = await Promise.race([answered, sleep(3000).then(() => -1)]);
    if (!closed) sock.write(Buffer.concat([frame(b.subarray(b.length >> 1)), end]));
    if (s.next && !closed) {
      const n = s.next;
      const nb = Buffer.from(n.body ?? '');
      const nh = Object.entries(n.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`);
      const seen = got.length;
      sock.write(`${n.method} ${n.path} HTTP/1.1\r\nHost: x\r\n${nh.join('')}Content-Length: ${nb.length}\r\n\r\n`);
      sock.write(nb);
      await until(async () => closed || /HTTP\/1\.1 \d{3}/.test(got.subarray(seen).toString('latin1')), REPLY_TIMEOUT_MS + 3000, 'the second answer');
    }
    await sleep(30);
    sock.destroy();
    return status;
  }
  sock.write(Buffer.concat([frame(b), end]));
  if (s.cut === 'after') {
    await sleep(150);
    sock.destroy();
    return 0;
  }
  const status = await Promise.race([answered, sleep(REPLY_TIMEOUT_MS + 5000).then(() => -1)]);
  sock.destroy();
  return status;
}

/** A small seeded generator (mulberry32), so that a failing sequence can be sent again. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('bodies held: an attacker review (bodies-held.ts)', function () {
  this.timeout(180_000);
  let p: P;
  let port: number;
  let editor: Client;
  let reader: Client;

  const held = async (): Promise<number> => {
    const text = await (await fetch(`${p.url}/metrics`)).text();
    const m = /^gateway_request_bodies_held_bytes (-?[\d.e+]+|NaN)$/m.exec(text);
    if (!m) throw new Error('no gateway_request_bodies_held_bytes in /metrics');
    return Number(m[1]);
  };

  before(async () => {
    p = await startTestPlatform(
      {
        MAX_BODY_BYTES: String(MAX_BODY),
        ACTOR_REPLY_TIMEOUT_MS: String(REPLY_TIMEOUT_MS),
        ACTOR_DEADLINE_GRACE_MS: '0',
      },
      ['web'],
    );
    port = Number(new URL(p.url).port);
    await p.tokens!.createAccount(`${T}-editor`, PASSWORD, { __global__: ['editor'] });
    await p.tokens!.createAccount(`${T}-reader`, PASSWORD, { __global__: ['reader'] });
    editor = await new Client(p.base).login(`${T}-editor`, PASSWORD);
    reader = await new Client(p.base).login(`${T}-reader`, PASSWORD);
  });
  after(async () => p?.stop());

  it('after any sequence of requests of every kind, once all are answered or gone, nothing is held', async () => {
    const json = { 'Content-Type': 'application/json' };
    const ed = () => ({ ...json, 'X-Auth-Token': editor.token! });
    const rd = () => ({ ...json, 'X-Auth-Token': reader.token! });
    const article = JSON.stringify({
      system: { contentType: 'article' },
      aspects: { body: { _type: 'body', title: 'x', v: Array.from({ length: 500 }, () => ({})) } },
    });
    const big = `[${'0,'.repeat(MAX_BODY / 2 - 8)}0]`;
    const form = 'q=*:*&rows=1&fq=x'.padEnd(2000, 'x');
    // Tokens this process has not looked up yet (or not for longer than its cache keeps one).
    const fresh: string[] = [];
    for (let i = 0; i < 8; i++) fresh.push((await new Client(p.base).login(`${T}-editor`, PASSWORD)).token!);
    let nextFresh = 0;
    const kinds: Record<string, () => Sent> = {
      create: () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: article }),
      'create cut mid-body': () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: article, cut: 'mid' }),
      'create cut after body': () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: article, cut: 'after' }),
      'create cut in head': () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: article, cut: 'head' }),
      'create by a reader (403)': () => ({ method: 'POST', path: '/content-service/content', headers: rd(), body: article }),
      'create without token, answered before the body is whole': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: json,
        body: article,
        cut: 'early',
      }),
      'create with a token that is not valid': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, 'X-Auth-Token': 'nope' },
        body: article,
        cut: 'early',
      }),
      'create not JSON': () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: '{"system":' }),
      'create empty': () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: '' }),
      'create chunked': () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: article, chunked: 1000 }),
      'create announced past MAX_BODY_BYTES': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: ed(),
        body: 'x',
        length: MAX_BODY + 1,
        cut: 'early',
      }),
      'create chunked past MAX_BODY_BYTES': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: ed(),
        body: `${big}${' '.repeat(MAX_BODY)}`,
        chunked: 16384,
      }),
      'update of a content that is not there': () => ({
        method: 'PUT',
        path: '/content-service/content/alias/none/nothing',
        headers: { ...ed(), 'If-Match': '"x"' },
        body: article,
      }),
      'update with heavy body': () => ({
        method: 'PUT',
        path: '/content-service/content/alias/none/nothing',
        headers: { ...ed(), 'If-Match': '"x"' },
        body: big,
      }),
      'delete with a body': () => ({ method: 'DELETE', path: '/content-service/content/alias/none/nothing', headers: ed(), body: article }),
      'patch (405)': () => ({ method: 'PATCH', path: '/content-service/content', headers: ed(), body: article }),
      'view put': () => ({ method: 'PUT', path: '/content-service/view/web', headers: { ...ed(), 'If-Match': '"x"' }, body: '{"alias":"a"}' }),
      'workspace create': () => ({ method: 'POST', path: '/content-service/content/workspace/w1', headers: ed(), body: article }),
      'workspace promote with a body': () => ({
        method: 'POST',
        path: '/content-service/content/workspace/w1/alias/none/nothing/promote',
        headers: ed(),
        body: article,
      }),
      'restore with a body': () => ({ method: 'POST', path: '/content-service/content/alias/none/nothing/restore', headers: ed(), body: article }),
      'reindex with a body': () => ({ method: 'POST', path: '/content-service/index/reindex', headers: rd(), body: article }),
      'webhook create (403)': () => ({ method: 'POST', path: '/content-service/webhooks', headers: rd(), body: '{"url":"http://x"}' }),
      login: () => ({
        method: 'POST',
        path: '/content-service/security/token',
        headers: json,
        body: JSON.stringify({ username: `${T}-reader`, password: PASSWORD }),
      }),
      'login refused': () => ({
        method: 'POST',
        path: '/content-service/security/token',
        headers: json,
        body: JSON.stringify({ username: `${T}-reader`, password: 'wrong' }),
      }),
      'login past its 64 KiB, chunked': () => ({
        method: 'POST',
        path: '/content-service/security/token',
        headers: json,
        body: ' '.repeat(MAX_BODY - 100),
        chunked: 8192,
      }),
      'create, the token checked, then the client goes': () => ({ method: 'POST', path: '/content-service/content', headers: ed(), body: big, cut: 'mid' }),
      'two on one connection, the first answered before its body is whole': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: json,
        body: article,
        cut: 'early',
        next: { method: 'POST', path: '/content-service/content', headers: ed(), body: '{"system":' },
      }),
      'login cut mid-body': () => ({ method: 'POST', path: '/content-service/security/token', headers: json, body: article, cut: 'mid' }),
      'logout with a body': () => ({ method: 'DELETE', path: '/content-service/security/token', headers: { 'X-Auth-Token': 'nope' }, body: article }),
      'search form': () => ({
        method: 'POST',
        path: '/search-service/content/select',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: form,
      }),
      'search form cut': () => ({
        method: 'POST',
        path: '/search-service/content/select',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: form,
        cut: 'mid',
      }),
      'health post': () => ({ method: 'POST', path: '/health', body: article }),
      'metrics post': () => ({ method: 'POST', path: '/metrics', body: article, cut: 'early' }),
      'openapi put': () => ({ method: 'PUT', path: '/openapi.json', body: article }),
      'console post': () => ({ method: 'POST', path: '/console/', body: article }),
      'taxonomy put': () => ({ method: 'PUT', path: '/taxonomy-service/structure', body: article }),
      'file service put (collected)': () => ({ method: 'PUT', path: '/file-service/file/s/h/p', headers: ed(), body: article }),
      'file service delete with a body': () => ({ method: 'DELETE', path: '/file-service/file/s/h/p', headers: ed(), body: article }),
      'file service bare post': () => ({ method: 'POST', path: '/file-service', headers: ed(), body: article }),
      'delivery put': () => ({ method: 'PUT', path: '/file-delivery-service/version/x/y', body: article }),
      'changes post': () => ({ method: 'POST', path: '/content-service/changes', headers: ed(), body: article, cut: 'early' }),
      'unknown service': () => ({ method: 'POST', path: '/nothing/here', body: article, cut: 'early' }),
      'bad path': () => ({ method: 'POST', path: '/content-service/%zz', body: article }),
      'head with a body': () => ({ method: 'HEAD', path: '/content-service/content', headers: ed(), body: article }),
      // Review 3: the paths the fixes of the second review added.
      'delete chunked with a body': () => ({
        method: 'DELETE',
        path: '/content-service/content/alias/none/nothing',
        headers: ed(),
        body: article,
        chunked: 500,
      }),
      'delete chunked, empty': () => ({
        method: 'DELETE',
        path: '/content-service/content/alias/none/nothing',
        headers: { ...ed(), 'If-Match': '"x"' },
        body: '',
        chunked: 500,
      }),
      'delete chunked past MAX_BODY_BYTES, anonymous': () => ({
        method: 'DELETE',
        path: '/content-service/content/alias/none/nothing',
        body: big + big,
        chunked: 16384,
      }),
      'delete with Content-Length: 0': () => ({
        method: 'DELETE',
        path: '/content-service/content/alias/none/nothing',
        headers: { ...ed(), 'If-Match': '"x"' },
        body: '',
        length: 0,
      }),
      'delete announced, answered before its body is whole': () => ({
        method: 'DELETE',
        path: '/content-service/webhooks/x',
        headers: ed(),
        body: article,
        cut: 'early',
      }),
      'login past its 64 KiB, announced': () => ({
        method: 'POST',
        path: '/content-service/security/token',
        headers: json,
        body: 'x',
        length: MAX_BODY + 1,
        cut: 'early',
      }),
      'login past its 64 KiB, chunked, the rest sent after the 413': () => ({
        method: 'POST',
        path: '/content-service/security/token',
        headers: json,
        body: ' '.repeat(3 * MAX_BODY),
        chunked: 8192,
        cut: 'early',
      }),
      'create with a token not cached yet (its unchecked share, then its user)': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, 'X-Auth-Token': fresh[nextFresh++ % fresh.length] },
        body: article,
        chunked: 700,
      }),
      'create with a token not cached yet, the client gone after the check': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, 'X-Auth-Token': fresh[nextFresh++ % fresh.length] },
        body: big,
        cut: 'mid',
      }),
      'create with a token not valid, chunked, the rest after its 401': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, 'X-Auth-Token': `nope${nextFresh++}` },
        body: big,
        chunked: 4096,
        cut: 'early',
      }),
      'create chunked past MAX_BODY_BYTES, the rest sent after the 413': () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: ed(),
        body: big + big + big,
        chunked: 16384,
        cut: 'early',
      }),
    };
    const names = Object.keys(kinds);
    // Every kind alone first, then random batches of them at once.
    for (const name of names) {
      const st = await send(port, kinds[name]());
      if (process.env.BHR_LOG) console.log(name, st);
      await until(async () => (await held()) === 0, REPLY_TIMEOUT_MS + 4000, `nothing held after "${name}" (held: ${await held()})`).catch(async (e: Error) => {
        throw new Error(`${e.message}; held ${await held()}`);
      });
    }
    const next = random(20261128);
    for (let round = 0; round < 12; round++) {
      const batch = Array.from({ length: 8 }, () => names[Math.floor(next() * names.length)]);
      await Promise.all(batch.map((n) => send(port, kinds[n]())));
      await until(async () => (await held()) === 0, REPLY_TIMEOUT_MS + 4000, `nothing held after ${JSON.stringify(batch)}`).catch(async (e: Error) => {
        throw new Error(`${e.message}; held ${await held()}`);
      });
    }
  });
});

describe('bodies held: callers at one address, and bodies outside the count (bodies-held.ts)', function () {
  this.timeout(60_000);
  const MiB = 1024 * 1024;
  const LOGIN_MAX = 64 * 1024;
  let p: P;
  let port: number;
  let editor: Client;

  before(async () => {
    p = await startTestPlatform({ MAX_BODY_BYTES: String(8 * MiB), BODIES_HELD_PER_CALLER_BYTES: String(MiB) }, ['web']);
    port = Number(new URL(p.url).port);
    await p.tokens!.createAccount(`${T}-writer`, PASSWORD, { __global__: ['editor'] });
    editor = await new Client(p.base).login(`${T}-writer`, PASSWORD);
  });
  after(async () => p?.stop());

  /**
   * A login whose body stops short of its Content-Length (`length`, `sent` of it sent): held
   * under the client address while the connection lasts.
   */
  const stalledLogin = async (
    sent: number,
    headers: Record<string, string> = {},
    length = LOGIN_MAX,
  ): Promise<{ sock: net.Socket; answer: Promise<string> }> => {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => undefined);
    await new Promise((r) => sock.once('connect', r));
    let got = '';
    const answer = new Promise<string>((resolve) => {
      sock.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        if (got.includes('\r\n\r\n')) resolve(got.slice(9, 12));
      });
      sock.on('close', () => resolve('closed'));
    });
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    sock.write(`POST /content-service/security/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}Content-Length: ${length}\r\n\r\n`);
    if (sent) sock.write(Buffer.alloc(sent, ' '));
    return { sock, answer };
  };
  const held = async () => Number(/^gateway_request_bodies_held_bytes (\d+)$/m.exec(await (await fetch(`${p.url}/metrics`)).text())![1]);

  it('a login body is at most 64 KiB (413 past it): anonymous bodies that never finish held up to MAX_BODY_BYTES each', async () => {
    const big = await stalledLogin(0, {}, LOGIN_MAX + 1);
    try {
      expect(await Promise.race([big.answer, sleep(2000).then(() => 'none')])).to.equal('413');
    } finally {
      big.sock.destroy();
    }
    // A login of the largest fields, escaped, still fits.
    const field = '\\u00e9'.repeat(4096);
    const r = await fetch(`${p.base}/security/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: `{"username": "${field}", "password": "${field}"}`,
    });
    expect(r.status).to.equal(401);
  });

  it('a DELETE with a body of a Content-Length is answered 400 at once, one chunked is measured, not held: an anonymous one was held up to MAX_BODY_BYTES before its 401', async () => {
    for (const path of ['/content-service/content/alias/none/nothing', '/file-service/file/s/h/p']) {
      const sock = net.connect(port, '127.0.0.1');
      sock.on('error', () => undefined);
      await new Promise((r) => sock.once('connect', r));
      let got = '';
      sock.on('data', (d: Buffer) => {
        got += d.toString('latin1');
      });
      try {
        sock.write(`DELETE ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${4 * MiB}\r\n\r\n`);
        sock.write(Buffer.alloc(MiB, ' '));
        await until(async () => got.includes('\r\n\r\n'), 3000, `the answer of DELETE ${path} before its body is whole`);
        expect(got).to.match(/^HTTP\/1\.1 400 /);
        expect(await held()).to.equal(0);
      } finally {
        sock.destroy();
      }
    }
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => undefined);
    await new Promise((r) => sock.once('connect', r));
    let got = '';
    sock.on('data', (d: Buffer) => {
      got += d.toString('latin1');
    });
    try {
      sock.write('DELETE /content-service/content/alias/none/nothing HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
      for (let i = 0; i < 8; i++) await new Promise((r) => sock.write(`20000\r\n${' '.repeat(0x20000)}\r\n`, r));
      await sleep(200);
      expect(await held(), 'a chunked DELETE body held').to.equal(0);
      sock.write('0\r\n\r\n');
      await until(async () => got.includes('\r\n\r\n'), 3000, 'the answer of the chunked DELETE');
      expect(got).to.match(/^HTTP\/1\.1 400 /);
    } finally {
      sock.destroy();
    }
  });

  it("anonymous bodies still arriving fill their address's share: a signed-in writer there is not refused for them, another anonymous body is", async () => {
    // Sixteen logins of 64,536 bytes and one of 15,000 leave 1,000 bytes of the address's share.
    const attackers = await Promise.all([...Array.from({ length: 16 }, () => stalledLogin(LOGIN_MAX - 1000)), stalledLogin(15_000)]);
    try {
      await until(async () => (await held()) === 16 * (LOGIN_MAX - 1000) + 15_000, 3000, "the attacker's bodies held");
      // Past the token cache's 2 s: the writer's token is looked up when its request comes.
      await sleep(2100);
      const write = await editor.req('POST', '/content', { raw: `{"system": ${' '.repeat(4000)}`, headers: { 'Content-Type': 'application/json' } });
      expect(write.status, JSON.stringify(write.json)).to.equal(400);
      // The address's share holds for anonymous bodies, with a token that is not valid too.
      const second = await stalledLogin(4000);
      expect(await Promise.race([second.answer, sleep(3000).then(() => 'none')])).to.equal('429');
      second.sock.destroy();
      const garbage = await stalledLogin(4000, { 'X-Auth-Token': 'not-a-token' });
      expect(await Promise.race([garbage.answer, sleep(3000).then(() => 'none')])).to.equal('429');
      garbage.sock.destroy();
    } finally {
      for (const a of attackers) a.sock.destroy();
    }
    await until(async () => (await held()) === 0, 3000, 'nothing held');
  });

  it("a body sent to the change feed's routes, which read none, is not held: it is outside the bound and outside MAX_IN_FLIGHT", async () => {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', () => undefined);
    await new Promise((r) => sock.once('connect', r));
    let got = '';
    sock.on('data', (d: Buffer) => {
      got += d.toString('latin1');
    });
    try {
      sock.write(`POST /content-service/changes HTTP/1.1\r\nHost: x\r\nContent-Length: ${8 * MiB}\r\n\r\n`);
      await until(async () => got.includes('\r\n\r\n'), 3000, 'the 405');
      expect(got).to.match(/^HTTP\/1\.1 405 /);
      const part = Buffer.alloc(MiB, ' ');
      const before = process.memoryUsage().arrayBuffers;
      for (let i = 0; i < 7; i++) await new Promise((r) => sock.write(part, r));
      await sleep(300);
      const grown = process.memoryUsage().arrayBuffers - before;
      expect(grown, `${grown} bytes more held`).to.be.below(3 * MiB);
    } finally {
      sock.destroy();
    }
  });
});
