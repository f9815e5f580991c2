import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

/**
 * Review s23b of the fourth bodies-held review's commits (bca2626..3cd501c): what is held comes
 * back to nothing on the paths those commits added, whatever the clients do. A search whose
 * token is checked before its body (`requestCaller`: its body moved from the unchecked share to
 * `searchBodyKey`, checked there, possibly refused), a search with a token that is not valid
 * (401 before its body), a reader's write refused 403 at the first token check (before its body,
 * also with a token not cached yet), each whole, cut in its body, cut after it, or answered
 * before it is whole while the client goes on sending. test/security/bodies-held-review.test.ts
 * has the same harness for the kinds of the earlier reviews.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;
const T = `s23b${Date.now().toString(36)}`;
const PASSWORD = `${T}-password`;
const KiB = 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Sent {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body: string;
  chunked?: number;
  /** Waits for the answer (default); goes away half-way through the body, or once it is sent; or sends half, waits for the answer, then the rest (`early`). */
  cut?: 'mid' | 'after' | 'early';
}

/** Sends one request on a connection of its own: the status answered, 0 when the client went away first. */
async function send(port: number, s: Sent): Promise<number> {
  const sock = net.connect(port, '127.0.0.1');
  sock.on('error', () => undefined);
  await new Promise((r) => sock.once('connect', r));
  let got = '';
  let closed = false;
  const answered = new Promise<number>((resolve) => {
    sock.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m && got.includes('\r\n\r\n')) resolve(Number(m[1]));
    });
    sock.on('close', () => {
      closed = true;
      resolve(0);
    });
  });
  const body = Buffer.from(s.body);
  const lines = [`${s.method} ${s.path} HTTP/1.1`, 'Host: x'];
  for (const [k, v] of Object.entries(s.headers ?? {})) lines.push(`${k}: ${v}`);
  lines.push(s.chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${body.length}`);
  const frame = (b: Buffer): Buffer => {
    if (!s.chunked || b.length === 0) return b;
    const parts: Buffer[] = [];
    for (let i = 0; i < b.length; i += s.chunked) {
      const c = b.subarray(i, i + s.chunked);
      parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
    }
    return Buffer.concat(parts);
  };
  const end = s.chunked ? Buffer.from('0\r\n\r\n') : Buffer.alloc(0);
  sock.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (s.cut === 'mid' || s.cut === 'early') {
    sock.write(frame(body.subarray(0, body.length >> 1)));
    if (s.cut === 'mid') {
      await sleep(60);
      sock.destroy();
      return 0;
    }
    const status = await Promise.race([answered, sleep(3000).then(() => -1)]);
    if (!closed) sock.write(Buffer.concat([frame(body.subarray(body.length >> 1)), end]));
    await sleep(30);
    sock.destroy();
    return status;
  }
  sock.write(Buffer.concat([frame(body), end]));
  if (s.cut === 'after') {
    await sleep(100);
    sock.destroy();
    return 0;
  }
  const status = await Promise.race([answered, sleep(8000).then(() => -1)]);
  sock.destroy();
  return status;
}

/** mulberry32, so that a failing sequence can be sent again. */
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

describe('review s23b: nothing held after the paths of the fourth bodies-held review (token before body, 403 before body, searches in the anonymous part)', function () {
  this.timeout(180_000);
  let engine: http.Server;
  let p: P;
  let port: number;
  let editor: Client;
  let reader: Client;
  const held = async (): Promise<number> => {
    const m = /^gateway_request_bodies_held_bytes (-?[\d.e+]+|NaN)$/m.exec(await (await fetch(`${p.url}/metrics`)).text());
    if (!m) throw new Error('no gateway_request_bodies_held_bytes in /metrics');
    return Number(m[1]);
  };

  before(async () => {
    // An engine that answers every select with nothing found, a little later.
    engine = http.createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        setTimeout(() => {
          res.writeHead(200, { 'Content-Type': 'application/json;charset=utf-8' });
          res.end(JSON.stringify({ responseHeader: { status: 0, QTime: 1 }, response: { numFound: 0, start: 0, docs: [] } }));
        }, 20),
      );
    });
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
    const SOLR_URL = `http://127.0.0.1:${(engine.address() as AddressInfo).port}/solr`;
    // Small bounds, so that moves into a user's share or the anonymous part are refused at times.
    p = await startTestPlatform(
      {
        SOLR_URL,
        ACTOR_REPLY_TIMEOUT_MS: '1200',
        ACTOR_DEADLINE_GRACE_MS: '0',
        MAX_BODY_BYTES: String(64 * KiB),
        BODIES_HELD_BYTES: String(1024 * KiB),
        BODIES_HELD_PER_CALLER_BYTES: String(1024 * KiB),
        MAX_IN_FLIGHT: '64',
      },
      ['web'],
    );
    port = Number(new URL(p.url).port);
    await p.tokens!.createAccount(`${T}-editor`, PASSWORD, { __global__: ['editor'] });
    await p.tokens!.createAccount(`${T}-reader`, PASSWORD, { __global__: ['reader'] });
    editor = await new Client(p.base).login(`${T}-editor`, PASSWORD);
    reader = await new Client(p.base).login(`${T}-reader`, PASSWORD);
  });
  after(async () => {
    await p?.stop();
    engine?.closeAllConnections();
    await new Promise((r) => engine?.close(r));
  });

  it('after any sequence of such requests, once all are answered or gone, nothing is held', async () => {
    // Tokens this process has not looked up yet: their bodies start in the unchecked share.
    const fresh = async (who: 'editor' | 'reader') => (await new Client(p.base).login(`${T}-${who}`, PASSWORD)).token!;
    const freshEditors: string[] = [];
    const freshReaders: string[] = [];
    for (let i = 0; i < 24; i++) {
      freshEditors.push(await fresh('editor'));
      freshReaders.push(await fresh('reader'));
    }
    let nextFresh = 0;
    const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
    const json = { 'Content-Type': 'application/json' };
    const searchBody = `q=*:*&rows=1&fq=${'x'.repeat(60 * KiB)}`;
    const small = 'q=*:*&rows=1';
    const article = JSON.stringify({ system: { contentType: 'article' }, aspects: { body: { title: 'x', pad: 'y'.repeat(40 * KiB) } } });
    const search =
      (headers: Record<string, string>, body: string, more: Partial<Sent> = {}): (() => Sent) =>
      () => ({
        method: 'POST',
        path: '/search-service/content/select',
        headers: { ...form, ...headers },
        body,
        ...more,
      });
    const tok = (t: string) => ({ 'X-Auth-Token': t });
    const kinds: Record<string, () => Sent> = {
      'signed-in search': search(tok(editor.token!), searchBody),
      'signed-in search, small': search(tok(editor.token!), small),
      'signed-in search chunked': search(tok(editor.token!), searchBody, { chunked: 4096 }),
      'signed-in search cut mid': search(tok(editor.token!), searchBody, { cut: 'mid' }),
      'signed-in search cut after': search(tok(editor.token!), searchBody, { cut: 'after' }),
      "reader's search": search(tok(reader.token!), searchBody),
      'search, a token not cached yet': () => search(tok(freshReaders[nextFresh++ % freshReaders.length]), searchBody)(),
      'search, a token not cached yet, chunked': () => search(tok(freshEditors[nextFresh++ % freshEditors.length]), searchBody, { chunked: 1000 })(),
      'search, a token not cached yet, cut mid': () => search(tok(freshReaders[nextFresh++ % freshReaders.length]), searchBody, { cut: 'mid' })(),
      'search, a token not valid (401 before the body), the rest after': search(tok(`nope${T}`), searchBody, { chunked: 2048, cut: 'early' }),
      'search, a token not valid, whole': search(tok(`nope${T}x`), searchBody),
      'anonymous search': search({}, searchBody),
      'anonymous search cut mid': search({}, searchBody, { cut: 'mid' }),
      'search of another collection with a token': () => ({ ...search(tok(editor.token!), searchBody)(), path: '/search-service/other/select' }),
      "reader's create (403 before the body), the rest after": () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, ...tok(reader.token!) },
        body: article,
        chunked: 2048,
        cut: 'early',
      }),
      "reader's create, a token not cached yet": () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, ...tok(freshReaders[nextFresh++ % freshReaders.length]) },
        body: article,
        chunked: 700,
      }),
      "reader's update, a token not cached yet, cut mid": () => ({
        method: 'PUT',
        path: '/content-service/content/alias/none/nothing',
        headers: { ...json, 'If-Match': '"x"', ...tok(freshReaders[nextFresh++ % freshReaders.length]) },
        body: article,
        cut: 'mid',
      }),
      "reader's view, whole": () => ({
        method: 'PUT',
        path: '/content-service/view/svcPublic',
        headers: { ...json, 'If-Match': '"x"', ...tok(reader.token!) },
        body: article,
      }),
      "reader's draft update, the rest after": () => ({
        method: 'PUT',
        path: '/content-service/content/workspace/w1/alias/none/nothing',
        headers: { ...json, ...tok(reader.token!) },
        body: article,
        cut: 'early',
      }),
      "reader's promote, cut after": () => ({
        method: 'POST',
        path: '/content-service/content/workspace/w1/alias/none/nothing/promote',
        headers: { ...json, ...tok(reader.token!) },
        body: article,
        cut: 'after',
      }),
      "reader's webhook delete with a body, chunked": () => ({
        method: 'DELETE',
        path: '/content-service/webhooks/x',
        headers: tok(reader.token!),
        body: article,
        chunked: 4096,
      }),
      "writer's create, a token not cached yet (moved into its user's share, maybe refused)": () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, ...tok(freshEditors[nextFresh++ % freshEditors.length]) },
        body: article,
      }),
      "writer's create cut mid": () => ({
        method: 'POST',
        path: '/content-service/content',
        headers: { ...json, ...tok(editor.token!) },
        body: article,
        cut: 'mid',
      }),
      'login with a token header (moved to the address)': () => ({
        method: 'POST',
        path: '/content-service/security/token',
        headers: { ...json, ...tok(freshReaders[nextFresh++ % freshReaders.length]) },
        body: JSON.stringify({ username: `${T}-reader`, password: PASSWORD, pad: 'z'.repeat(30 * KiB) }),
        chunked: 3000,
      }),
    };
    const names = Object.keys(kinds);
    const statuses: Record<string, number[]> = {};
    const sendKind = async (n: string) => {
      const st = await send(port, kinds[n]());
      statuses[n] = [...(statuses[n] ?? []), st];
    };
    for (const name of names) {
      await sendKind(name);
      await until(async () => (await held()) === 0, 6000, `nothing held after "${name}"`).catch(async (e: Error) => {
        throw new Error(`${e.message}; held ${await held()}`);
      });
    }
    const next = random(20261129);
    let most = 0;
    for (let round = 0; round < 16; round++) {
      const batch = Array.from({ length: 12 }, () => names[Math.floor(next() * names.length)]);
      const sampler = setInterval(
        () =>
          void held().then(
            (h) => (most = Math.max(most, h)),
            () => undefined,
          ),
        5,
      );
      await Promise.all(batch.map(sendKind));
      clearInterval(sampler);
      await until(async () => (await held()) === 0, 6000, `nothing held after ${JSON.stringify(batch)}`).catch(async (e: Error) => {
        throw new Error(`${e.message}; held ${await held()}`);
      });
    }
    if (process.env.S23B_LOG) console.log({ most, statuses });
    // No answer is a 500, and no request was left unanswered.
    const bad = Object.entries(statuses).filter(([, s]) => s.some((x) => x === 500 || x === -1));
    expect(bad, JSON.stringify(statuses)).to.deep.equal([]);
    // The 403 before the body, and the 401 of a search's token, are what these kinds answer.
    expect(statuses["reader's create (403 before the body), the rest after"]).to.satisfy((s: number[]) => s.every((x) => x === 403));
    expect(statuses['search, a token not valid (401 before the body), the rest after']).to.satisfy((s: number[]) => s.every((x) => x === 401));
  });
});
