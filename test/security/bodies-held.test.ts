import net from 'node:net';
import { expect } from 'chai';
import { checkStorable, parsedWeight } from '../../src/gateway/body-limits.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

/**
 * What the request bodies under way in a gateway hold (src/gateway/bodies-held.ts, SECURITY.md
 * "Bodies and limits"). The finding (twenty-first session, "What single writes in flight hold
 * decoded"): a writer's hundred PUTs at once of 300 KB of empty objects, while the actors were
 * slow to answer, held about 600 MB of the gateway's heap; only MAX_IN_FLIGHT and MAX_BODY_BYTES
 * bounded it. The platform here runs without actors, so every write that reaches them waits for
 * its reply until ACTOR_REPLY_TIMEOUT_MS, holding its parsed body, as under slow actors.
 */

const T = `bh${Date.now().toString(36)}`;
const PASSWORD = `${T}-password`;
/** 50,000 empty objects: 150 KB of JSON that weighs about 3.35 MB parsed. */
const HEAVY = {
  system: { contentType: 'article' },
  aspects: { body: { _type: 'body', title: 'heavy', v: Array.from({ length: 50_000 }, () => ({})) } },
};
const HEAVY_TEXT = JSON.stringify(HEAVY);
const W = parsedWeight(Buffer.byteLength(HEAVY_TEXT), checkStorable(HEAVY));
const REPLY_TIMEOUT_MS = 6000;

describe('request bodies under way: bounded per caller and per process (bodies-held.ts)', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  const editors: Client[] = [];

  const held = async (): Promise<number> => {
    const text = await (await fetch(`${p.url}/metrics`)).text();
    const m = /^gateway_request_bodies_held_bytes (\d+)$/m.exec(text);
    if (!m) throw new Error('no gateway_request_bodies_held_bytes in /metrics');
    return Number(m[1]);
  };

  before(async () => {
    p = await startTestPlatform(
      {
        BODIES_HELD_PER_CALLER_BYTES: String(Math.floor(2.5 * W)),
        BODIES_HELD_BYTES: String(Math.floor(4.5 * W)),
        ACTOR_REPLY_TIMEOUT_MS: String(REPLY_TIMEOUT_MS),
        ACTOR_DEADLINE_GRACE_MS: '0',
      },
      ['web'],
    );
    for (let i = 0; i < 3; i++) {
      await p.tokens!.createAccount(`${T}-editor${i}`, PASSWORD, { __global__: ['editor'] });
      editors.push(await new Client(p.base).login(`${T}-editor${i}`, PASSWORD));
    }
  });
  after(async () => p?.stop());

  it('a writer past its share answers 429, another writer still gets in, the process past its bound answers 503; all is given back', async () => {
    expect(await held()).to.equal(0);
    const settled = new Set<Promise<unknown>>();
    const send = (c: Client) => {
      const a = c.req('POST', '/content', { raw: HEAVY_TEXT, headers: { 'Content-Type': 'application/json' } });
      const tracked = a.then((r) => r);
      settled.add(tracked);
      return tracked;
    };

    // One writer, four heavy creates at once: two fit in its share (2 W of 2.5 W), two answer 429.
    const first = [0, 1, 2, 3].map(() => send(editors[0]));
    const refused = await Promise.race([Promise.all(first), new Promise<null>((r) => setTimeout(() => r(null), REPLY_TIMEOUT_MS - 1500))]);
    expect(refused, 'the in-flight writes answered before the reply timeout').to.equal(null);
    const early = await Promise.all(first.map((a) => Promise.race([a, Promise.resolve(null)])));
    const tooMany = early.filter((a) => a?.status === 429);
    expect(tooMany, JSON.stringify(early.map((a) => a?.status ?? 'waiting'))).to.have.length(2);
    expect(tooMany[0]!.headers.get('retry-after')).to.equal('1');
    expect((tooMany[0]!.json as { statusCode: string }).statusCode).to.equal('42900');
    expect((tooMany[0]!.json as { message: string }).message).to.contain('BODIES_HELD_PER_CALLER_BYTES');
    expect(await held()).to.equal(2 * W);

    // Another writer is not refused for the first one's share.
    const second = send(editors[1]);
    await until(async () => (await held()) === 3 * W, 3000, "the second writer's body held");

    // The process: the third writer's first body fits (4 W of 4.5 W), its second answers 503.
    const third = [send(editors[2])];
    await until(async () => (await held()) === 4 * W, 3000, "the third writer's first body held");
    third.push(send(editors[2]));
    const shed = await third[1];
    expect(shed.status).to.equal(503);
    expect(shed.headers.get('retry-after')).to.equal('1');
    expect((shed.json as { message: string }).message).to.contain('BODIES_HELD_BYTES');
    expect(await held()).to.equal(4 * W);

    // The writes that went in flight answer when their reply times out (no actor runs), and
    // give back what they held.
    const answers = await Promise.all([...first, second, ...third]);
    expect(answers.filter((a) => a.status === 503).length).to.equal(1 + 4);
    expect(await held()).to.equal(0);
  });

  it('a body cut off by its client gives back what it held; one answered before it arrived whole holds nothing more', async () => {
    expect(await held()).to.equal(0);
    const url = new URL(p.url);
    const bytes = Buffer.from(HEAVY_TEXT);
    const half = bytes.subarray(0, bytes.length >> 1);
    const head = (token: string | null) =>
      `POST /content-service/content HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${token ? `X-Auth-Token: ${token}\r\n` : ''}Content-Length: ${bytes.length}\r\n\r\n`;
    const connect = async () => {
      const s = net.connect(Number(url.port), url.hostname);
      await new Promise((r) => s.once('connect', r));
      return s;
    };

    const cut = await connect();
    cut.write(head(editors[0].token ?? null));
    cut.write(half);
    await until(async () => (await held()) >= half.length, 3000, 'the half body held');
    cut.destroy();
    await until(async () => (await held()) === 0, 3000, 'the cut body given back');

    // Without a token: 401 at once, before the body is whole; what comes after it is dropped.
    const early = await connect();
    let answer = '';
    early.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
    });
    early.write(head(null));
    early.write(half);
    await until(async () => answer.includes('\r\n\r\n'), 3000, 'the 401');
    expect(answer).to.match(/^HTTP\/1\.1 401 /);
    early.write(bytes.subarray(half.length));
    await new Promise((r) => setTimeout(r, 300));
    expect(await held()).to.equal(0);
    early.destroy();
  });
});
