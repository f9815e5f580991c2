import net from 'node:net';
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
  sock.write(`POST ${path} HTTP/1.1\r\nHost: x\r\n${extra}Content-Length: ${length}\r\n\r\n`);
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
