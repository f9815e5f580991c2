import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { keys } from '../../src/adapters/redis.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { bulk } from '../bulk/ndjson.js';
import { retainedBytes } from '../support/heap.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * What a bulk import holds while the actors are slow to answer (the twenty-first session's
 * review): its window of lines in flight (BULK_IN_FLIGHT, WINDOW_BYTES 32 MiB) counted each line
 * by its bytes, but a JSON text of empty objects (`{},`, three bytes) holds about 21 times its
 * length parsed: one sportseditor's import of 200 lines of 99,000 empty objects (297 KB each)
 * took the gateway's heap up by 757 MiB, and imports per user were not bounded. A first weighing,
 * on the bytes (objects and keys), missed numbers in arrays (the third review: about 24 bytes each
 * parsed for 4 of text). Now a line weighs what the check of the parsed line counted, and a user
 * runs at most IMPORT_MAX_PER_USER imports at once.
 *
 * The platform here is a web process alone, its commands going through the streams to no actor:
 * every line stays in flight until its deadline.
 */
describe('a bulk import holds a bounded window of parsed lines', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let own: RedisServerHandle;
  let sports: Client;
  let editor: Client;

  before(async () => {
    own = await startRedisServer({ appendonly: false });
    // A web process alone: its commands wait in the streams, no actor takes them.
    p = await startTestPlatform({ REDIS_URL: own.url, LOCAL_DISPATCH: 'false', ACTOR_REPLY_TIMEOUT_MS: '30000', IMPORT_MAX_PER_USER: '2' }, ['web']);
    sports = await new Client(p.base).login('sportseditor');
    // Another user for the bound of imports: the sportseditor's imports above still wait for their lines.
    editor = await new Client(p.base).login('editor');
  });
  after(async () => {
    await p?.stop();
    await own?.stop();
  });

  /** Lines in flight: the commands the gateway sent to the streams, which no actor takes. */
  const commands = async () => {
    let n = 0;
    for (let i = 0; i < p.settings.PARTITIONS; i++) n += await p.redis.xlen(keys.commands(i));
    return n;
  };

  /** Sends 200 copies of `line`, lets the window fill, and answers how many lines it took and what this process holds more. */
  async function fill(line: string): Promise<{ taken: number; grownMiB: number }> {
    const before = retainedBytes();
    const sentBefore = await commands();
    let sent = 0;
    const body = new Readable({
      read() {
        if (sent >= 200) return void this.push(null);
        sent++;
        this.push(line);
      },
    });
    const run = bulk(p.base, sports.token!, body);
    // The window fills and the upload stops being read; give it time to take all it will.
    await sleep(6000);
    const grownMiB = (retainedBytes() - before) / 2 ** 20;
    const taken = (await commands()) - sentBefore;
    console.log(`      ${sent} lines of ${(line.length / 1e6).toFixed(2)} MB sent, ${taken} taken, this process holds ${grownMiB.toFixed(0)} MiB more`);
    body.destroy();
    await Promise.race([run, sleep(1000)]);
    return { taken, grownMiB };
  }

  it('200 lines of 99,000 empty objects (297 KB), no actor answering: three in flight, under 128 MiB held', async () => {
    const line = `${JSON.stringify({ op: 'create', content: { system: { contentType: 'article' }, aspects: { body: { a: Array.from({ length: 99_000 }, () => ({})) } } } })}\n`;
    const { taken, grownMiB } = await fill(line);
    // Each line holds about 11 MB while in flight (13 MB weighed): the window of 32 MiB takes three.
    expect(taken, 'lines in flight').to.be.at.most(4);
    expect(grownMiB, 'MiB held').to.be.below(128);
  });

  it('200 lines of an object and 500,000 numbers (1.9 MB), no actor answering: at most two in flight', async () => {
    const line = `{"op":"create","content":{"system":{"contentType":"article"},"aspects":{"body":{"a":[{},${Array(500_000).fill('0.5').join(',')}]}}}}\n`;
    // The client runs in this process too (the lines it sent may sit in its own buffers): lines in flight are what is asserted.
    const { taken } = await fill(line);
    // Each such line holds about 44 MB while in flight: the window of 32 MiB takes two at most.
    expect(taken, 'lines in flight').to.be.at.most(2);
  });

  it('a user runs at most IMPORT_MAX_PER_USER imports at once: 429 with Retry-After past it', async () => {
    const open = [0, 1].map(() => {
      const body = new Readable({ read() {} });
      body.push('not a line\n'); // answered 400 by the gateway: no actor here
      return { body, run: bulk(p.base, editor.token!, body) };
    });
    await sleep(500);
    const third = await editor.req('POST', '/bulk', {
      body: 'not a line\n',
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(third.status, third.text).to.equal(429);
    expect(third.headers.get('retry-after')).to.not.equal(null);
    for (const o of open) o.body.push(null);
    await Promise.all(open.map((o) => o.run));
    const fourth = await editor.req('POST', '/bulk', { body: '', headers: { 'Content-Type': 'application/x-ndjson' } });
    expect(fourth.status, fourth.text).to.equal(200);
  });
});

describe('bulk imports of every user together on a web process: at most IMPORT_MAX', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let own: RedisServerHandle;

  before(async () => {
    own = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: own.url, LOCAL_DISPATCH: 'false', IMPORT_MAX_PER_USER: '2', IMPORT_MAX: '3' }, ['web']);
  });
  after(async () => {
    await p?.stop();
    await own?.stop();
  });

  it('three imports of two users run; a fourth, of a user running none, answers 503 with Retry-After; once they end it runs', async () => {
    const [editor, sports, other] = await Promise.all(['editor', 'sportseditor', 'sysadmin'].map((u) => new Client(p.base).login(u)));
    const open = [editor, editor, sports].map((c) => {
      const body = new Readable({ read() {} });
      body.push('not a line\n'); // answered 400 by the gateway: no actor here
      return { body, run: bulk(p.base, c.token!, body) };
    });
    await sleep(500);
    const ndjson = { 'Content-Type': 'application/x-ndjson' };
    const shed = await other.req('POST', '/bulk', { body: 'not a line\n', headers: ndjson });
    expect(shed.status, shed.text).to.equal(503);
    expect(shed.headers.get('retry-after')).to.not.equal(null);
    expect((shed.json as { message: string }).message).to.contain('At most 3 imports');
    for (const o of open) o.body.push(null);
    await Promise.all(open.map((o) => o.run));
    const again = await other.req('POST', '/bulk', { body: '', headers: ndjson });
    expect(again.status, again.text).to.equal(200);
  });
});
