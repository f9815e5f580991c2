import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

/**
 * A fourth review of the bound on what collected request bodies hold (bodies-held.ts,
 * SECURITY.md "Bodies and limits"), of the gaps SECURITY.md listed under "Known and not yet
 * bounded", as an attacker would use them.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;
const T = `bh4${Date.now().toString(36)}`;
const PASSWORD = `${T}-password`;
const KiB = 1024;
const MiB = 1024 * KiB;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A request whose body stops short of its Content-Length (`sent` of `length` bytes sent): held while the connection lasts. */
async function stalled(
  port: number,
  path: string,
  length: number,
  sent: Buffer | number,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<{ sock: net.Socket; answer: Promise<string> }> {
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
  sock.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\n${extra}Content-Length: ${length}\r\n\r\n`);
  sock.write(typeof sent === 'number' ? Buffer.alloc(sent, ' ') : sent);
  return { sock, answer };
}

/** The answer of `a` if it came within `ms`, else 'none' (the request is still held). */
const within = (a: Promise<string>, ms: number) => Promise.race([a, sleep(ms).then(() => 'none')]);

describe('bodies held, review 4: a flood of anonymous logins cannot deny signed-in bodies, nor real logins (bodies-held.ts)', function () {
  this.timeout(60_000);
  const IN_FLIGHT = 64;
  let p: P;
  let port: number;
  let editor: Client;
  const held = async () => Number(/^gateway_request_bodies_held_bytes (\d+)$/m.exec(await (await fetch(`${p.url}/metrics`)).text())![1]);

  before(async () => {
    // The process's bound at its smallest (1 MiB), requests in flight at 64: each anonymous
    // body holds at most its first 1 MiB / 4 / 64 = 4 KiB outside the anonymous quarter.
    p = await startTestPlatform(
      {
        BODIES_HELD_BYTES: String(MiB),
        BODIES_HELD_PER_CALLER_BYTES: String(MiB),
        MAX_IN_FLIGHT: String(IN_FLIGHT),
        TRUSTED_PROXIES: '127.0.0.1',
      },
      ['web'],
    );
    port = Number(new URL(p.url).port);
    await p.tokens!.createAccount(`${T}-editor`, PASSWORD, { __global__: ['editor'] });
    await p.tokens!.createAccount(`${T}-reader`, PASSWORD, { __global__: ['reader'] });
    editor = await new Client(p.base).login(`${T}-editor`, PASSWORD);
  });
  after(async () => p?.stop());

  it("slow logins of 60 KiB from 24 addresses, and of 1 KiB from 8 more, hold at most half of BODIES_HELD_BYTES: a signed-in writer's body and a real login still pass", async () => {
    // Each login's body stops 4 KiB short of its 64 KiB (LOGIN_MAX_BODY_BYTES), each from an
    // address of its own (behind the trusted proxy: an IPv6 attacker holds many /64s).
    const attackers = [];
    for (let i = 0; i < 24; i++)
      attackers.push(
        await stalled(port, '/content-service/security/token', 64 * KiB, 60 * KiB, {
          'Content-Type': 'application/json',
          'X-Forwarded-For': `198.51.100.${i + 1}`,
        }),
      );
    // Then small ones, of 1 KiB of 2, to fill what the large ones left.
    for (let i = 0; i < 8; i++)
      attackers.push(
        await stalled(port, '/content-service/security/token', 2 * KiB, KiB, {
          'Content-Type': 'application/json',
          'X-Forwarded-For': `198.51.100.${i + 101}`,
        }),
      );
    try {
      // Every login is either held or refused; then the held ones stay.
      await sleep(500);
      const answered = await Promise.all(attackers.map((a) => within(a.answer, 10)));
      const holding = await held();
      // A signed-in writer's body of 300 KB is read whole (400: it is not JSON), not refused 503.
      const write = await editor.req('POST', '/content', { raw: `{"system": ${' '.repeat(300_000)}`, headers: { 'Content-Type': 'application/json' } });
      // A real login from another address passes.
      const login = await fetch(`${p.base}/security/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': '203.0.113.7' },
        body: JSON.stringify({ username: `${T}-reader`, password: PASSWORD }),
      });
      const seen = { holding, logins: answered.join(' '), write: write.status, login: login.status };
      if (process.env.BH4_LOG) console.log(seen);
      expect(seen, JSON.stringify(seen)).to.deep.include({ write: 400, login: 200 });
      expect(holding, JSON.stringify(seen)).to.be.at.most(MiB / 2);
      expect(
        answered.filter((s) => s !== 'none' && s !== '503'),
        'logins refused otherwise than 503',
      ).to.deep.equal([]);
    } finally {
      for (const a of attackers) a.sock.destroy();
    }
    await until(async () => (await held()) === 0, 3000, 'nothing held');
  });
});

describe("bodies held, review 4: a signed-in user's POST search counts under its user, not its address (search-service.ts)", function () {
  this.timeout(60_000);
  let engine: http.Server;
  let p: P;
  let port: number;
  let editor: Client;
  const readers: string[] = [];
  const held = async () => Number(/^gateway_request_bodies_held_bytes (\d+)$/m.exec(await (await fetch(`${p.url}/metrics`)).text())![1]);

  before(async () => {
    // An engine that answers every select at once with nothing found.
    engine = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'Content-Type': 'application/json;charset=utf-8' });
        res.end(JSON.stringify({ responseHeader: { status: 0, QTime: 1 }, response: { numFound: 0, start: 0, docs: [] } }));
      });
    });
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
    const SOLR_URL = `http://127.0.0.1:${(engine.address() as AddressInfo).port}/solr`;
    // A quarter of the process's bound, 2 MiB, for bodies of logins and searches past their first bytes.
    p = await startTestPlatform({ SOLR_URL, BODIES_HELD_BYTES: String(8 * MiB), BODIES_HELD_PER_CALLER_BYTES: String(MiB) }, ['web']);
    port = Number(new URL(p.url).port);
    await p.tokens!.createAccount(`${T}-searcher`, PASSWORD, { __global__: ['editor'] });
    editor = await new Client(p.base).login(`${T}-searcher`, PASSWORD);
    for (let i = 0; i < 9; i++) {
      await p.tokens!.createAccount(`${T}-sr${i}`, PASSWORD, { __global__: ['reader'] });
      readers.push((await new Client(p.base).login(`${T}-sr${i}`, PASSWORD)).token!);
    }
  });
  after(async () => {
    await p?.stop();
    engine?.closeAllConnections();
    await new Promise((r) => engine?.close(r));
  });

  const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
  const search = (token: string | null, body: string) =>
    fetch(`${p.url}/search-service/content/select`, { method: 'POST', headers: { ...form, ...(token ? { 'X-Auth-Token': token } : {}) }, body });

  it("anonymous searches that fill their address's share do not have a signed-in user's POST search there refused 429; another anonymous one is", async () => {
    // An anonymous search of 2 MB whose first 1,000,000 bytes came: its address's share of 1 MiB nearly full.
    const anonymous = await stalled(port, '/search-service/content/select', 2_000_000, Buffer.from(`q=${'x'.repeat(999_998)}`), form);
    try {
      await until(async () => (await held()) >= 1_000_000, 3000, "the anonymous search's body held");
      expect(await within(anonymous.answer, 10)).to.equal('none');
      // The signed-in user's search of 100 KB from the same address.
      const body = `q=${'y'.repeat(100_000)}&rows=1`;
      const signedIn = await search(editor.token!, body);
      expect(signedIn.status, await signedIn.text()).to.equal(200);
      // Another anonymous one of the address is refused for its share.
      const other = await search(null, body);
      expect(other.status).to.equal(429);
      // A token that is not valid is answered 401, its body not waited for.
      const bad = await stalled(port, '/search-service/content/select', 200_000, 1000, { ...form, 'X-Auth-Token': 'not-a-token' });
      expect(await within(bad.answer, 3000)).to.equal('401');
      bad.sock.destroy();
    } finally {
      anonymous.sock.destroy();
    }
    await until(async () => (await held()) === 0, 3000, 'nothing held');
  });

  it("signed-in searches hold no more than anonymous ones may: readers' accounts' searches that never finish cannot fill the bound and have a writer's body refused", async () => {
    // Nine readers, each a search of 2 MB whose first 1,000,000 bytes came (within its share of
    // 1 MiB), one after the other: each held, or refused, before the next.
    const attackers = [];
    for (const token of readers) {
      const before = await held();
      const a = await stalled(port, '/search-service/content/select', 2_000_000, Buffer.from(`q=${'x'.repeat(999_998)}`), { ...form, 'X-Auth-Token': token });
      attackers.push(a);
      await until(async () => (await held()) >= before + 1_000_000 || (await within(a.answer, 0)) !== 'none', 5000, 'the search held or refused');
    }
    try {
      await sleep(500);
      const answered = await Promise.all(attackers.map((a) => within(a.answer, 10)));
      const holding = await held();
      const write = await editor.req('POST', '/content', { raw: `{"system": ${' '.repeat(600_000)}`, headers: { 'Content-Type': 'application/json' } });
      const seen = { holding, searches: answered.join(' '), write: write.status };
      if (process.env.BH4_LOG) console.log(seen);
      expect(seen.write, JSON.stringify(seen)).to.equal(400);
      expect(holding, JSON.stringify(seen)).to.be.at.most(2 * MiB + 1_000_000);
      // Refused for the process (503), or while their tokens were looked up for the address's share of such bodies (429).
      expect(
        answered.filter((a) => !['none', '503', '429'].includes(a)),
        JSON.stringify(seen),
      ).to.deep.equal([]);
    } finally {
      for (const a of attackers) a.sock.destroy();
    }
    await until(async () => (await held()) === 0, 3000, 'nothing held');
  });
});

describe('bodies held, review 4: a caller who may do nothing of what a write needs is refused 403 before its body is read (request-auth.ts)', function () {
  this.timeout(60_000);
  let p: P;
  let port: number;
  let editor: Client;
  const readers: string[] = [];
  const held = async () => Number(/^gateway_request_bodies_held_bytes (\d+)$/m.exec(await (await fetch(`${p.url}/metrics`)).text())![1]);
  /** Every route whose body a reader (Read on every type, nothing else) could hold, and what it needs. */
  const routes: [string, string, Record<string, string>][] = [
    ['create (Create)', '/content-service/content', {}],
    ['update (Update)', '/content-service/content/alias/news/nothing', { 'If-Match': '"x"' }],
    ['merge (Update)', '/content-service/content/alias/news/nothing?updateMode=merge', { 'If-Match': '"x"' }],
    ['view (AssignToView)', '/content-service/view/svcPublic', { 'If-Match': '"x"' }],
    ['draft (Create)', '/content-service/content/workspace/w1', {}],
    ['draft update (Create or Update)', '/content-service/content/workspace/w1/alias/news/nothing', {}],
    ['promote (Create or Update)', '/content-service/content/workspace/w1/alias/news/nothing/promote', {}],
    ['restore (Update)', '/content-service/content/alias/news/nothing/restore?version=c:x:y', { 'If-Match': '"x"' }],
    ['webhook (sysadmin)', '/content-service/webhooks', {}],
    ['webhook update (sysadmin)', '/content-service/webhooks/nothing', {}],
    ['redeliver (sysadmin)', '/content-service/webhooks/nothing/deliveries/nothing/redeliver', {}],
    ['re-index (sysadmin)', '/content-service/index/reindex', {}],
  ];

  before(async () => {
    p = await startTestPlatform({ BODIES_HELD_BYTES: String(2 * MiB), BODIES_HELD_PER_CALLER_BYTES: String(MiB) }, ['web']);
    port = Number(new URL(p.url).port);
    await p.tokens!.createAccount(`${T}-w`, PASSWORD, { __global__: ['editor'] });
    editor = await new Client(p.base).login(`${T}-w`, PASSWORD);
    for (let i = 0; i < routes.length; i++) {
      await p.tokens!.createAccount(`${T}-r${i}`, PASSWORD, { __global__: ['reader'] });
      readers.push((await new Client(p.base).login(`${T}-r${i}`, PASSWORD)).token!);
    }
  });
  after(async () => p?.stop());

  it("readers' writes of every kind that never finish their bodies are answered 403 at once and hold nothing: a writer's body still passes", async () => {
    const attackers: Awaited<ReturnType<typeof stalled>>[] = [];
    try {
      for (let i = 0; i < routes.length; i++) {
        const [, path, headers] = routes[i];
        const method = /\/(nothing|svcPublic)(\?.*)?$/.test(path) && !path.includes('redeliver') ? 'PUT' : 'POST';
        const s = await stalled(port, path, MiB, 512 * KiB, { 'Content-Type': 'application/json', 'X-Auth-Token': readers[i], ...headers }, method);
        attackers.push(s);
      }
      const answers = await Promise.all(attackers.map((a) => within(a.answer, 3000)));
      const holding = await held();
      const write = await editor.req('POST', '/content', { raw: `{"system": ${' '.repeat(300_000)}`, headers: { 'Content-Type': 'application/json' } });
      const seen = { holding, write: write.status, answers: Object.fromEntries(routes.map(([what], i) => [what, answers[i]])) };
      if (process.env.BH4_LOG) console.log(seen);
      expect(seen).to.deep.equal({ holding: 0, write: 400, answers: Object.fromEntries(routes.map(([what]) => [what, '403'])) });
    } finally {
      for (const a of attackers) a.sock.destroy();
    }
    await until(async () => (await held()) === 0, 3000, 'nothing held');
  });
});
