import { createConnection, type Socket } from 'node:net';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { openWs, scheduleOwner, readSse, wsSession } from './feed-clients.js';

/**
 * CONTRACT §13 bad input: WebSocket sessions without a token, with a wrong first message or an
 * expired cursor; server-sent events' framing; and subscribers that never read, which are closed
 * while the gateway's memory for them stays bounded.
 */
describe('change feed bad input and slow subscribers (CONTRACT §13)', function () {
  this.timeout(60000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;
  let wsUrl: string;

  before(async () => {
    p = await startTestPlatform({ CHANGES_SUBSCRIBER_BUFFER: '20', CHANGES_STALL_SECONDS: '1' });
    c = await new Client(p.base).login('editor');
    wsUrl = `${p.url.replace('http', 'ws')}/content-service/changes/ws`;
  });
  after(async () => p.stop());

  const closeOf = async (first: unknown) => {
    const s = wsSession(wsUrl, first);
    const closed = await s.closed;
    return { ...closed, messages: s.messages };
  };

  it('WebSocket: a bad token closes with 4401, a wrong first message with 4400, an expired cursor with 4410, each after an error message', async () => {
    const noToken = await closeOf({ since: 'now' });
    expect(noToken.code).to.equal(4401);
    expect((noToken.messages[0].error as { statusCode: string }).statusCode).to.equal('40100');
    const badToken = await closeOf({ token: 'nope' });
    expect(badToken.code).to.equal(4401);
    expect(badToken.messages).to.have.length(1);
    for (const first of [
      'not json',
      '[1]',
      { token: c.token, kinds: ['created'] },
      { token: c.token, since: '!!' },
      { token: c.token, extra: 1 },
      { token: c.token, types: 'a b' },
      { token: c.token, pad: 'x'.repeat(70 * 1024) },
    ]) {
      const bad = await closeOf(first);
      expect(bad.code, JSON.stringify(first)).to.equal(4400);
      expect((bad.messages[0].error as { statusCode: string }).statusCode).to.equal('40000');
    }
    // An expired cursor: events after it were trimmed by retention.
    const early: string = (await c.req('GET', '/changes?since=now')).json.last;
    expect((await c.create({ system: { contentType: 'article' }, aspects: {} })).status).to.equal(201);
    await (await scheduleOwner(p)).trim(Date.now() + 1);
    const gone = await closeOf({ token: c.token, since: early });
    expect(gone.code).to.equal(4410);
    expect((gone.messages[0].error as { statusCode: string }).statusCode).to.equal('41000');
    expect((await c.req('GET', `/changes?since=${early}&feed=sse`)).status).to.equal(410);
  });

  it('a token revoked while its streams are open ends them (WebSocket 4401, SSE closed, a long poll 401)', async () => {
    const other = await new Client(p.base).login('reader');
    const ws = wsSession(wsUrl, { token: other.token, since: 'now' });
    const sse = readSse(`${p.base}/changes?since=now`, other.token!, undefined, () => false, 20000);
    const since: string = (await other.req('GET', '/changes?since=now')).json.last;
    const poll = other.req('GET', `/changes?since=${since}&feed=longpoll&timeout=20000`);
    await until(async () => p.gateway!.changes.stats().subscribers === 3, 5000, 'three subscribers');
    expect((await other.req('DELETE', '/security/token')).status).to.equal(204);
    const closed = await ws.closed;
    expect(closed.code).to.equal(4401);
    expect((ws.messages[0].error as { statusCode: string }).statusCode).to.equal('40100');
    const ended = await sse;
    expect(ended.ended).to.equal(true);
    // A long poll went on waiting, and would have answered events chosen for the revoked token.
    const polled = await poll;
    expect(polled.status, polled.text).to.equal(401);
    expect(polled.json.statusCode).to.equal('40100');
  });

  it("a change of the user's roles ends its open streams (WebSocket 1001, SSE closed): they deliver what the caller may read now", async () => {
    const user = `feed${Date.now()}`;
    await p.tokens!.createAccount(user, 'a password', { sports: ['editor'] });
    const other = await new Client(p.base).login(user, 'a password');
    const ws = wsSession(wsUrl, { token: other.token, since: 'now' });
    const sse = readSse(`${p.base}/changes?since=now`, other.token!, undefined, () => false, 20000);
    await until(async () => p.gateway!.changes.stats().subscribers === 2, 5000, 'both subscribers');
    // the same roles written again: the streams stay open
    await p.tokens!.createAccount(user, 'a password', { sports: ['editor'] });
    await new Promise((r) => setTimeout(r, 7000));
    expect(p.gateway!.changes.stats().subscribers).to.equal(2);
    // the sports roles taken away: both end, the token stays valid
    await p.tokens!.createAccount(user, 'a password', {});
    const closed = await ws.closed;
    expect(closed.code).to.equal(1001);
    expect((await sse).ended).to.equal(true);
    expect((await other.req('GET', '/changes?since=now')).status).to.equal(200);
  });

  it('server-sent events: id, event and data records, resumed from Last-Event-ID; 401 without a token', async () => {
    expect((await c.req('GET', '/changes?feed=sse', { token: null })).status).to.equal(401);
    const since: string = (await c.req('GET', '/changes?since=now')).json.last;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await c.create({ system: { contentType: 'article' }, aspects: {} });
      ids.push(r.json.system.id);
    }
    const first = await readSse(`${p.base}/changes?since=${since}`, c.token!, undefined, () => true);
    expect(first.events).to.have.length(1);
    expect(first.comments).to.be.greaterThanOrEqual(1);
    // Last-Event-ID wins over since: the rest, without the first again.
    const seen = new Set(first.events.map((e) => e.id));
    const rest = await readSse(`${p.base}/changes?since=${since}`, c.token!, first.events[0].cursor, (e) => {
      seen.add(e.id);
      return ids.every((i) => seen.has(i));
    });
    expect([...first.events, ...rest.events].map((e) => e.id).sort()).to.deep.equal([...ids].sort());
  });

  it('a WebSocket subscriber that never reads is closed; what the gateway holds for it stays bounded', async () => {
    // Events with many aliases are large: the socket's buffers fill after fewer commits.
    const ops = Array.from({ length: 60 }, (_, i) => ({
      _type: 'svcSetAlias',
      namespace: 'slow',
      alias: `a-long-alias-name-for-a-large-event-${Date.now()}-${i}`,
    }));
    const created = await c.create({ system: { contentType: 'article' }, aspects: {}, operations: ops });
    expect(created.status, created.text).to.equal(201);
    const id: string = created.json.system.id;
    let etag = created.headers.get('etag');
    const s = wsSession(wsUrl, { token: c.token, since: 'now' });
    let opened = false;
    s.ws.on('open', () => {
      opened = true;
      // Stop reading from the socket right after the first message is out.
      setTimeout(() => s.ws._socket?.pause(), 50);
    });
    await until(async () => opened && p.gateway!.changes.stats().subscribers === 1, 5000, 'the subscriber');
    let maxQueued = 0;
    let commits = 0;
    while (p.gateway!.changes.stats().subscribers > 0 && commits < 4000) {
      const u = await c.update(id, { aspects: { body: { _type: 'body', n: commits } } }, etag);
      expect(u.status, u.text).to.equal(200);
      etag = u.headers.get('etag');
      commits++;
      maxQueued = Math.max(maxQueued, p.gateway!.changes.stats().queued);
    }
    await until(async () => p.gateway!.changes.stats().subscribers === 0, 5000, 'the slow subscriber to be closed');
    expect(maxQueued).to.be.at.most(21);
    expect(p.gateway!.changes.stats().queued).to.equal(0);
    s.ws.terminate();
    // The gateway still serves others.
    expect((await c.req('GET', '/changes?since=now')).status).to.equal(200);
  });

  it('a server-sent-events client that never reads is cut as well', async () => {
    const created = await c.create({
      system: { contentType: 'article' },
      aspects: {},
      operations: Array.from({ length: 60 }, (_, i) => ({
        _type: 'svcSetAlias',
        namespace: 'slow',
        alias: `sse-alias-name-for-a-large-event-${Date.now()}-${i}`,
      })),
    });
    const id: string = created.json.system.id;
    let etag = created.headers.get('etag');
    const u = new URL(p.base);
    const sock = createConnection({ host: u.hostname, port: Number(u.port) });
    await new Promise((r) => sock.once('connect', r));
    sock.write(`GET /content-service/changes?since=now&feed=sse HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${c.token}\r\n\r\n`);
    let closed = false;
    sock.on('close', () => {
      closed = true;
    });
    sock.on('error', () => undefined);
    await until(async () => p.gateway!.changes.stats().subscribers === 1, 5000, 'the subscriber');
    sock.pause();
    let commits = 0;
    while (p.gateway!.changes.stats().subscribers > 0 && commits < 4000) {
      const r = await c.update(id, { aspects: { body: { _type: 'body', n: commits } } }, etag);
      etag = r.headers.get('etag');
      commits++;
    }
    await until(async () => p.gateway!.changes.stats().subscribers === 0, 5000, 'the slow subscriber to be closed');
    sock.resume();
    await until(async () => closed, 5000, 'the connection to be cut');
    // The stream cut for not reading gave its slot back.
    await until(async () => p.gateway!.changes.stats().streams === 0, 5000, 'the slot to be given back');
  });
});

/**
 * A GET of the feed on a raw socket (as the report's client did, and outside the fetch check): the
 * answer's status, headers and body once its head (a stream) or its whole body (any other answer)
 * arrived. The socket stays open until the test destroys it.
 */
function rawFeed(
  base: string,
  query: string,
  token: string,
): { sock: Socket; response: Promise<{ status: number; headers: Record<string, string>; body: string }> } {
  const u = new URL(base);
  const sock = createConnection({ host: u.hostname, port: Number(u.port) });
  sock.on('error', () => undefined);
  sock.write(`GET ${u.pathname}/changes?${query} HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${token}\r\n\r\n`);
  const response = new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [line, ...rest] = buf.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const h of rest) headers[h.slice(0, h.indexOf(':')).toLowerCase()] = h.slice(h.indexOf(':') + 1).trim();
      const status = Number(line.split(' ')[1]);
      const body = buf.subarray(end + 4);
      if ((headers['content-type'] ?? '').startsWith('text/event-stream')) {
        sock.off('data', onData);
        return resolve({ status, headers, body: '' });
      }
      if (body.length < Number(headers['content-length'] ?? 0)) return;
      sock.off('data', onData);
      resolve({ status, headers, body: body.toString('utf8') });
    };
    sock.on('data', onData);
    sock.once('close', () => reject(new Error(`the connection closed before an answer to ${query}`)));
  });
  response.catch(() => undefined);
  return { sock, response };
}

describe('change feed: open streams per user and per process (CONTRACT §13, SECURITY.md "Change feed")', function () {
  this.timeout(60000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let wsUrl: string;
  const SSE = 'since=now&feed=sse';
  const subscribers = () => p.gateway!.changes.stats().subscribers;
  /** Stream slots the gateway holds. */
  const held = () => p.gateway!.changes.stats().streams;
  /** Every connection a test opened, closed after it whatever its outcome. */
  const opened: { destroy(): void }[] = [];
  const feed = (query: string, token: string) => {
    const r = rawFeed(p.base, query, token);
    opened.push(r.sock);
    return r;
  };
  const session = (first: unknown) => {
    const s = wsSession(wsUrl, first);
    opened.push({ destroy: () => s.ws.terminate() });
    return s;
  };

  before(async () => {
    p = await startTestPlatform({ CHANGES_MAX_STREAMS_PER_USER: '3', CHANGES_MAX_SUBSCRIBERS: '5' });
    wsUrl = `${p.url.replace('http', 'ws')}/content-service/changes/ws`;
  });
  after(async () => p.stop());
  afterEach(async () => {
    for (const o of opened.splice(0)) o.destroy();
    await until(async () => held() === 0 && subscribers() === 0, 5000, 'every stream to end');
  });

  /** The answer of a feed request whose socket is closed once it answered. */
  const answerOf = async (query: string, token: string) => {
    const r = feed(query, token);
    try {
      return await r.response;
    } finally {
      r.sock.destroy();
    }
  };
  const expectRefused = (r: { status: number; headers: Record<string, string>; body: string }, status: number, statusCode: string, what: string) => {
    expect(r.status, `${what}: ${r.body}`).to.equal(status);
    expect(JSON.parse(r.body).statusCode, what).to.equal(statusCode);
    expect(Number(r.headers['retry-after']), `${what}: Retry-After`).to.be.greaterThan(0);
  };

  it('a user holds at most CHANGES_MAX_STREAMS_PER_USER streams (SSE, WebSocket and waiting long polls together, whatever its token): past it 429 (42900) with Retry-After, a WebSocket 4429 after an error message; a stream that ends frees its slot', async () => {
    const reader = await new Client(p.base).login('reader');
    const token = reader.token!;
    const sse = feed(SSE, token);
    expect((await sse.response).status).to.equal(200);
    let ws = session({ token, since: 'now' });
    let poll = feed('since=now&feed=longpoll&timeout=60000', token);
    await until(async () => subscribers() === 3, 5000, 'three streams');
    expect(held()).to.equal(3);

    // A fourth of any kind is refused, also with another token of the same user.
    const again = (await new Client(p.base).login('reader')).token!;
    expectRefused(await answerOf(SSE, token), 429, '42900', 'SSE');
    expectRefused(await answerOf(SSE, again), 429, '42900', 'SSE, another token');
    expectRefused(await answerOf('since=now&feed=longpoll&timeout=1000', again), 429, '42900', 'long poll');
    const refused = session({ token: again, since: 'now' });
    expect((await refused.closed).code).to.equal(4429);
    expect((refused.messages[0].error as { statusCode: string }).statusCode).to.equal('42900');
    // Pages are not streams; another user is not held back.
    expect((await new Client(p.base).req('GET', '/changes?since=now', { token: again })).status).to.equal(200);
    const other = (await new Client(p.base).login('sportseditor')).token!;
    const otherSse = feed(SSE, other);
    expect((await otherSse.response).status).to.equal(200);
    otherSse.sock.destroy();

    // The SSE client leaves: its slot is free, and only that one.
    sse.sock.destroy();
    await until(async () => held() === 2, 5000, 'the SSE stream to end');
    const sse2 = feed(SSE, again);
    expect((await sse2.response).status).to.equal(200);
    expectRefused(await answerOf(SSE, again), 429, '42900', 'SSE after one left');

    // The long poll is answered (an event it may read): its slot is free.
    const editor = await new Client(p.base).login('editor');
    expect((await editor.create({ system: { contentType: 'article' }, aspects: {} })).status).to.equal(201);
    expect((await poll.response).status).to.equal(200);
    poll.sock.destroy();
    poll = feed('since=now&feed=longpoll&timeout=60000', token);
    await until(async () => subscribers() === 3, 5000, 'the next long poll');
    expectRefused(await answerOf(SSE, again), 429, '42900', 'SSE after the long poll');

    // The WebSocket client closes: its slot is free.
    ws.ws.close();
    await ws.closed;
    await until(async () => held() === 2, 5000, 'the WebSocket to end');
    ws = session({ token, since: 'now' });
    await until(async () => subscribers() === 3, 5000, 'a new WebSocket');
    expectRefused(await answerOf(SSE, again), 429, '42900', 'SSE after the WebSocket');

    // The first token revoked ends its streams (WebSocket, long poll) and frees their slots.
    expect((await reader.req('DELETE', '/security/token')).status).to.equal(204);
    expect((await ws.closed).code).to.equal(4401);
    expect((await poll.response).status).to.equal(401);
    poll.sock.destroy();
    await until(async () => held() === 1, 5000, 'the revoked streams to end');
    const more = [feed(SSE, again), feed(SSE, again)];
    for (const m of more) expect((await m.response).status).to.equal(200);
    expectRefused(await answerOf(SSE, again), 429, '42900', 'SSE after the revocation');
    for (const s of [sse2, ...more]) s.sock.destroy();
    await until(async () => subscribers() === 0, 5000, 'every stream to end');
  });

  it('a process holds at most CHANGES_MAX_SUBSCRIBERS streams of all users: past it 503 (50300) with Retry-After, a WebSocket 1013 after an error message', async () => {
    const tokens = await Promise.all(['reader', 'sportseditor', 'editor'].map(async (u) => (await new Client(p.base).login(u)).token!));
    const open = [feed(SSE, tokens[0]), feed(SSE, tokens[0]), feed(SSE, tokens[0]), feed(SSE, tokens[1]), feed(SSE, tokens[1])];
    for (const o of open) expect((await o.response).status).to.equal(200);
    expectRefused(await answerOf(SSE, tokens[1]), 503, '50300', 'SSE past the process bound');
    expectRefused(await answerOf('since=now&feed=longpoll&timeout=1000', tokens[2]), 503, '50300', 'long poll past the process bound');
    const refused = session({ token: tokens[2], since: 'now' });
    expect((await refused.closed).code).to.equal(1013);
    expect((refused.messages[0].error as { statusCode: string }).statusCode).to.equal('50300');
    open[0].sock.destroy();
    await until(async () => held() === 4, 5000, 'a stream to end');
    const next = feed(SSE, tokens[2]);
    expect((await next.response).status).to.equal(200);
    for (const o of [...open, next]) o.sock.destroy();
    await until(async () => subscribers() === 0, 5000, 'every stream to end');
  });

  it('WebSockets waiting for their first message are bounded by CHANGES_MAX_SUBSCRIBERS too: past it an upgrade answers 503', async () => {
    // They hold no stream slot (their user is not known yet): before, any number of them could be
    // held open, each for up to 10 s, and opened again (security review).
    const token = (await new Client(p.base).login('reader')).token!;
    const upgrade = () =>
      new Promise<{ ws: ReturnType<typeof openWs>; error?: string }>((resolve) => {
        const ws = openWs(wsUrl);
        opened.push({ destroy: () => ws.terminate() });
        ws.on('open', () => resolve({ ws }));
        ws.on('error', (e) => resolve({ ws, error: e.message }));
      });
    const waiting = [];
    for (let i = 0; i < 5; i++) waiting.push(await upgrade());
    for (const w of waiting) expect(w.error).to.equal(undefined);
    expect((await upgrade()).error).to.contain('503');
    // One sends its first message: it is a subscriber now, and another may wait.
    waiting[0].ws.send(JSON.stringify({ token, since: 'now' }));
    await until(async () => subscribers() === 1, 5000, 'the first message to be taken');
    expect((await upgrade()).error).to.equal(undefined);
    // One that closes gives its place back too.
    waiting[1].ws.terminate();
    await new Promise((r) => setTimeout(r, 100));
    expect((await upgrade()).error).to.equal(undefined);
    expect((await upgrade()).error).to.contain('503');
  });

  it('no slot is lost: requests aborted while they start, WebSockets closed right after their first message, long polls that time out', async () => {
    const token = (await new Client(p.base).login('reader')).token!;
    for (let i = 0; i < 30; i++) {
      const s = feed(i % 2 ? SSE : 'since=now&feed=longpoll&timeout=60000', token);
      setTimeout(() => s.sock.destroy(), i % 6);
      const w = openWs(wsUrl);
      w.on('error', () => undefined);
      w.on('open', () => {
        w.send(JSON.stringify({ token, since: 'now' }));
        setTimeout(() => w.terminate(), i % 4);
      });
      // One at a time, so that most take a slot before they are gone.
      await new Promise((r) => setTimeout(r, 15));
    }
    await until(async () => held() === 0 && subscribers() === 0, 10000, 'every slot to be given back');
    for (const r of await Promise.all([1, 2, 3].map(() => answerOf('since=now&feed=longpoll&timeout=300', token)))) expect(r.status).to.equal(200);
    await until(async () => held() === 0, 5000, 'the long polls to give their slots back');
    const open = [feed(SSE, token), feed(SSE, token), feed(SSE, token)];
    for (const o of open) expect((await o.response).status).to.equal(200);
    expectRefused(await answerOf(SSE, token), 429, '42900', 'a fourth');
    for (const o of open) o.sock.destroy();
    await until(async () => subscribers() === 0, 5000, 'every stream to end');
  });
});
