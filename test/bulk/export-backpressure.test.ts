import net from 'node:net';
import { expect } from 'chai';
import { Exchange } from '../../src/gateway/http.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';
import { bulk } from './ndjson.js';

/**
 * An export streams with flat memory for a client that reads slowly (CONTRACT §16, SECURITY.md).
 * uWS sends what it holds for an answer with an `onWritable` handler only when it is written to
 * again, and takes every write whole: when each writable event let the scanners go, each wrote a
 * batch, and the backlog grew at every event while the client took a little. A reader's token
 * could so make a gateway hold a whole export, once per connection.
 */
describe('export to clients that read slowly or not at all (security review 14)', function () {
  this.timeout(180_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  const LINES = 3000;
  const TYPE = 'slowexport';
  before(async function () {
    this.timeout(120_000);
    // One partition: the export is one scanner's batches (500 contents), one after another.
    p = await startIsolatedPlatform({ PARTITIONS: '1', EXPORT_MAX_PER_USER: '2', EXPORT_MAX: '3' });
    const sysadmin = await new Client(p.base).login('sysadmin');
    const title = 'x'.repeat(16384);
    const lines = Array.from(
      { length: LINES },
      (_, i) =>
        `${JSON.stringify({ op: 'create', content: { system: { contentType: TYPE }, aspects: { body: { _type: 'body', title: `${i}${title}` } } } })}\n`,
    );
    const imported = await bulk(p.base, sysadmin.token!, lines);
    expect(imported.answers.filter((l) => l.status === 201)).to.have.length(LINES);
  });
  after(async () => {
    await p?.stop();
  });

  /** GET /export over a raw socket, read only as the caller says. */
  const openExport = async (token: string) => {
    const url = new URL(p.base);
    const sock = net.connect({ host: url.hostname, port: Number(url.port) });
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.on('error', () => undefined);
    sock.write(`GET ${url.pathname}/export?types=${TYPE} HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${token}\r\n\r\n`);
    return sock;
  };

  it('the gateway makes at most about a batch of lines ahead of what a slow client took, and the client gets all of it', async () => {
    const reader = await new Client(p.base).login('reader');
    // What the export makes (each chunk, before the socket's back-pressure decides where it waits).
    let made = 0;
    const original = Exchange.prototype.writeChunk;
    Exchange.prototype.writeChunk = function (this: Exchange, data: string | Buffer) {
      made += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
      return original.call(this, data);
    };
    let received = 0;
    let maxAhead = 0;
    const sock = await openExport(reader.token!);
    try {
      // About 400 KB/s: 4 KB every 10 ms, for 10 s (never a pause the stall timer would cut).
      const started = Date.now();
      while (Date.now() - started < 10_000) {
        await new Promise((r) => setTimeout(r, 10));
        const b = sock.read(4096) as Buffer | null;
        if (b) received += b.length;
        maxAhead = Math.max(maxAhead, made - received);
      }
      // Then fast: the rest arrives, ended by the last chunk.
      sock.on('data', (b: Buffer) => (received += b.length));
      let tail = '';
      sock.on('data', (b: Buffer) => (tail = (tail + b.toString('latin1')).slice(-16)));
      // A bound of waiting only (what is asserted is that the export ends whole): a loaded full run took longer than 30 s.
      const end = Date.now() + 75_000;
      while (!tail.endsWith('\r\n0\r\n\r\n') && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(tail.endsWith('\r\n0\r\n\r\n'), 'the export ended').to.equal(true);
    } finally {
      Exchange.prototype.writeChunk = original;
      sock.destroy();
    }
    const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MB`;
    // One batch is 500 lines of about 16 KB (8 MB), besides the sockets' kernel buffers; before,
    // the export ran a batch further ahead at every writable event (24 MB after 10 s).
    expect(maxAhead, `most made ahead of the client: ${mb(maxAhead)} (made ${mb(made)}, the client took ${mb(received)})`).to.be.below(14 * 2 ** 20);
    expect(made).to.be.greaterThan(LINES * 16384);
  });

  it('one user runs at most EXPORT_MAX_PER_USER exports at once (429 with Retry-After); another user is not refused, every user together at most EXPORT_MAX (503), and an ended export frees its place', async () => {
    const reader = await new Client(p.base).login('reader');
    const held = [await openExport(reader.token!), await openExport(reader.token!)];
    try {
      await new Promise((r) => setTimeout(r, 300));
      const refused = await reader.req('GET', `/export?types=${TYPE}`);
      expect(refused.status, refused.text).to.equal(429);
      expect(refused.json.statusCode).to.equal('42900');
      expect(Number(refused.headers.get('retry-after'))).to.be.greaterThan(0);
      const editor = await new Client(p.base).login('editor');
      const other = await editor.req('GET', '/export?types=nothing-of-this-type');
      expect(other.status, other.text).to.equal(200);
      // Every user together: a third export on the process (EXPORT_MAX 3) runs, a fourth of a
      // user running none answers 503.
      held.push(await openExport(editor.token!));
      await new Promise((r) => setTimeout(r, 300));
      const sysadmin = await new Client(p.base).login('sysadmin');
      const shed = await sysadmin.req('GET', `/export?types=${TYPE}`);
      expect(shed.status, shed.text).to.equal(503);
      expect(shed.json.message).to.contain('At most 3 exports');
      expect(Number(shed.headers.get('retry-after'))).to.be.greaterThan(0);
    } finally {
      for (const s of held) s.destroy();
    }
    // The two closed: their places come back (the closes are seen as the scanners stop).
    const end = Date.now() + 10_000;
    for (;;) {
      const again = await reader.req('GET', '/export?types=nothing-of-this-type');
      if (again.status === 200) break;
      expect(Date.now() < end, `still ${again.status} 10 s after the exports closed`).to.equal(true);
      await new Promise((r) => setTimeout(r, 200));
    }
  });
});

/**
 * An export step reads 500 contents: their versions are read EXPORT_STEP_BYTES (4 MiB) of what
 * Redis holds at a time, each part handed to the client before the next is read. Before, a step's
 * versions came in one reply whatever they weighed: 40 contents of 1 MB were made 40 MB ahead of a
 * client reading 400 KB/s, and 500 contents of MAX_BODY_BYTES would have been 5 GB at once.
 */
describe('export of large contents to a slow client', function () {
  this.timeout(180_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  const N = 40;
  const TYPE = 'bigexport';
  before(async function () {
    this.timeout(120_000);
    // One partition: every content is in one step of one scanner.
    p = await startIsolatedPlatform({ PARTITIONS: '1' });
    const sysadmin = await new Client(p.base).login('sysadmin');
    const blob = 'y'.repeat(1_000_000);
    const lines = Array.from(
      { length: N },
      (_, i) => `${JSON.stringify({ op: 'create', content: { system: { contentType: TYPE }, aspects: { body: { _type: 'body', title: `${i}`, blob } } } })}\n`,
    );
    const imported = await bulk(p.base, sysadmin.token!, lines);
    expect(imported.answers.filter((l) => l.status === 201)).to.have.length(N);
  });
  after(async () => {
    await p?.stop();
  });

  it('is made at most a few megabytes ahead of the client, whatever a step of 500 contents weighs, and arrives whole', async () => {
    const reader = await new Client(p.base).login('reader');
    let made = 0;
    const original = Exchange.prototype.writeChunk;
    Exchange.prototype.writeChunk = function (this: Exchange, data: string | Buffer) {
      made += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
      return original.call(this, data);
    };
    const url = new URL(p.base);
    const sock = net.connect({ host: url.hostname, port: Number(url.port) });
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.on('error', () => undefined);
    sock.write(`GET ${url.pathname}/export?types=${TYPE} HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${reader.token}\r\n\r\n`);
    let received = 0;
    let maxAhead = 0;
    try {
      // About 400 KB/s for 6 s.
      const started = Date.now();
      while (Date.now() - started < 6_000) {
        await new Promise((r) => setTimeout(r, 10));
        const b = sock.read(4096) as Buffer | null;
        if (b) received += b.length;
        maxAhead = Math.max(maxAhead, made - received);
      }
      let tail = '';
      sock.on('data', (b: Buffer) => {
        received += b.length;
        tail = (tail + b.toString('latin1')).slice(-16);
      });
      const end = Date.now() + 75_000;
      while (!tail.endsWith('\r\n0\r\n\r\n') && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      expect(tail.endsWith('\r\n0\r\n\r\n'), 'the export ended').to.equal(true);
    } finally {
      Exchange.prototype.writeChunk = original;
      sock.destroy();
    }
    const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MB`;
    // A part is 4 MiB of versions and the one that passes it (1 MB), as lines of about the same size.
    expect(maxAhead, `most made ahead of the client: ${mb(maxAhead)} (made ${mb(made)}, the client took ${mb(received)})`).to.be.below(12 * 2 ** 20);
    expect(made).to.be.greaterThan(N * 1_000_000);
  });
});
