import net from 'node:net';
import { expect } from 'chai';
import sharp from 'sharp';
import type { FileKey, FileRead, FileStore, StoredFile } from '../../src/adapters/file-store.js';
import type { FileDeliveryService } from '../../src/gateway/file-service.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Renders of one caller at once (SECURITY.md "Renditions"): at most RENDITION_AT_ONCE_PER_CALLER
 * (2) of a caller's renders are in flight on a web process, counted by user id for a signed-in
 * caller and by client address for anonymous ones; past it 429 with Retry-After and the
 * platform's error body, before the source is read. The process's RENDITION_MAX_CONCURRENT (4)
 * stays for all callers together. A kept rendition, or one another request is already making,
 * is no render and takes no slot.
 *
 * Before (the security review of the twentieth session, F3), only RENDITION_MAX_CONCURRENT
 * bounded renders: one anonymous client asking for new widths of a public image, six at once, held
 * every slot, and an editor's new renditions answered 503 (20 of 20 in 10 s).
 *
 * The renders are held in flight by the test: reads of the attacked image's source wait until it
 * lets them go, so "in flight" is decided by the test, not by the clock. So are the lookups of the
 * source before a render (its stat), to let clients go away before their render would begin.
 */
describe('renders of one caller at once: at most RENDITION_AT_ONCE_PER_CALLER, past it 429', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let attacked: string;
  let own: string;
  /** Reads of the attacked image's source wait for `release` while it is set. */
  let held: Promise<void> | null = null;
  let release: () => void = () => undefined;
  /** Reads of the attacked image's source that have begun. */
  let reads = 0;
  /** Every request of the case, answered or not. */
  const sent: Promise<unknown>[] = [];
  /** Lookups (stat) of the attacked image's source wait for `releaseStats` while it is set. */
  let statsHeld: Promise<void> | null = null;
  let releaseStats: () => void = () => undefined;
  /** Lookups of the attacked image's source waiting. */
  let statsWaiting = 0;

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    const picture = await sharp({ create: { width: 400, height: 300, channels: 3, background: '#3a6' } })
      .jpeg()
      .toBuffer();
    async function publicImage(host: string): Promise<{ version: string; storageKey: string }> {
      const up = await editor.req('POST', `${p.url}/file-service/file/content/${host}/pic.jpg`, { raw: picture, headers: { 'Content-Type': 'image/jpeg' } });
      expect(up.status, up.text).to.equal(201);
      const c = await editor.create({
        system: { contentType: 'image' },
        aspects: { svcFiles: { files: { 'pic.jpg': { fileUri: up.json.URI, filePath: 'pic.jpg' } } } },
        operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
      });
      expect(c.status, c.text).to.equal(201);
      return { version: c.json.system.version as string, storageKey: (up.json.URI as string).replace('://', '/') };
    }
    const a = await publicImage(`slots-a-${Date.now().toString(36)}`);
    const b = await publicImage(`slots-b-${Date.now().toString(36)}`);
    attacked = `${p.url}/file-delivery-service/version/${a.version}/pic.jpg`;
    own = `${p.url}/file-delivery-service/version/${b.version}/pic.jpg`;
    // The render reads its source with `get` of the platform's file store.
    const files = p.files as FileStore;
    const get = files.get.bind(files);
    files.get = async (key: FileKey, range?: { start: number; end?: number }): Promise<FileRead> => {
      if (`${key.space}/${key.host}/${key.path}` === a.storageKey && held) {
        reads++;
        await held;
      }
      return get(key, range);
    };
    const stat = files.stat.bind(files);
    files.stat = async (key: FileKey): Promise<StoredFile | null> => {
      if (`${key.space}/${key.host}/${key.path}` === a.storageKey && statsHeld) {
        statsWaiting++;
        await statsHeld;
      }
      return stat(key);
    };
  });
  after(async () => {
    release();
    await p?.stop();
  });
  afterEach(async () => {
    // Nothing held, nothing under way for the next case, whatever this one did.
    releaseStats();
    release();
    await Promise.allSettled(sent.splice(0));
  });

  function hold(): void {
    reads = 0;
    held = new Promise<void>((resolve) => {
      release = () => {
        held = null;
        resolve();
      };
    });
  }

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  function get(url: string, token?: string): Promise<{ status: number; retryAfter: string | null; body: Buffer }> {
    const answer = (async () => {
      const r = await fetch(url, { headers: token ? { 'X-Auth-Token': token } : {} });
      const body = Buffer.from(await r.arrayBuffer());
      return { status: r.status, retryAfter: r.headers.get('retry-after'), body };
    })();
    sent.push(answer);
    return answer;
  }

  it("six new renditions of one anonymous client at once: two render, four answer 429 with Retry-After; another caller's render still gets a slot", async () => {
    const renders = () => (p.gateway as unknown as { delivery: FileDeliveryService }).delivery.renditions.renders;
    const before = renders();
    hold();
    const widths = [101, 102, 103, 104, 105, 106];
    const attack = widths.map((w) => get(`${attacked}?w=${w}&fm=webp`));
    // Two renders hold their slots (their source reads wait); the others have had time to come.
    while (reads < 2) await sleep(20);
    await sleep(500);
    // The editor's new rendition, while the anonymous client's renders are in flight.
    const mine = await get(`${own}?w=120&fm=webp`, editor.token);
    expect(mine.status, `the editor's render: ${mine.body.toString()}`).to.equal(200);
    expect((await sharp(mine.body).metadata()).width).to.equal(120);
    release();
    const answers = await Promise.all(attack);
    expect(answers.map((r) => r.status).sort()).to.deep.equal([200, 200, 429, 429, 429, 429]);
    for (const r of answers.filter((x) => x.status === 429)) {
      expect(r.retryAfter).to.equal('1');
      const body = JSON.parse(r.body.toString());
      expect(body.statusCode).to.equal('42900');
      expect(body.message).to.contain('RENDITION_AT_ONCE_PER_CALLER');
      expect(body.extraInfo).to.be.an('object');
    }
    expect(renders() - before, "the editor's render and two of the anonymous client's").to.equal(3);
  });

  it('kept renditions, and requests joining a render of the same rendition under way, take no slot', async () => {
    const renders = () => (p.gateway as unknown as { delivery: FileDeliveryService }).delivery.renditions.renders;
    expect((await get(`${attacked}?w=170&fm=webp`)).status, 'kept from now on').to.equal(200);
    hold();
    // The anonymous client's whole bound: two new renditions in flight.
    const inFlight = [160, 161].map((w) => get(`${attacked}?w=${w}&fm=webp`));
    while (reads < 2) await sleep(20);
    const before = renders();
    // A kept one is answered, and so are requests for the same two renditions, joining their renders.
    const kept = await Promise.all([170, 170, 170, 170].map((w) => get(`${attacked}?w=${w}&fm=webp`)));
    expect(kept.map((r) => r.status)).to.deep.equal([200, 200, 200, 200]);
    const joining = [160, 161, 160].map((w) => get(`${attacked}?w=${w}&fm=webp`));
    await sleep(500);
    expect(reads, 'no other read of the source began').to.equal(2);
    release();
    expect((await Promise.all([...inFlight, ...joining])).map((r) => r.status)).to.deep.equal([200, 200, 200, 200, 200]);
    expect(renders() - before, 'two renders').to.equal(2);
  });

  it('requests whose client went away before their render began make nothing and take no slot', async () => {
    const renders = () => (p.gateway as unknown as { delivery: FileDeliveryService }).delivery.renditions.renders;
    const before = renders();
    // Four anonymous requests sent on sockets of their own, closed while the gateway looks up their source.
    statsWaiting = 0;
    statsHeld = new Promise<void>((resolve) => {
      releaseStats = () => {
        statsHeld = null;
        resolve();
      };
    });
    const { hostname, port } = new URL(p.url);
    const sockets = [201, 202, 203, 204].map((w) => {
      const socket = net.connect(Number(port), hostname, () => socket.write(`GET ${new URL(attacked).pathname}?w=${w}&fm=webp HTTP/1.1\r\nHost: x\r\n\r\n`));
      socket.on('error', () => undefined);
      return socket;
    });
    while (statsWaiting < 4) await sleep(20);
    for (const socket of sockets) socket.destroy();
    await sleep(500);
    hold();
    releaseStats();
    await sleep(500);
    // The client's own renders: its whole bound is free.
    const two = [211, 212].map((w) => get(`${attacked}?w=${w}&fm=webp`));
    while (reads < 2) await sleep(20);
    await sleep(500);
    const mine = await get(`${own}?w=220&fm=webp`, editor.token);
    expect(mine.status, `the editor's render: ${mine.body.toString()}`).to.equal(200);
    release();
    expect((await Promise.all(two)).map((r) => r.status)).to.deep.equal([200, 200]);
    expect(renders() - before, "the client's two and the editor's; none for the clients gone").to.equal(3);
  });
});
