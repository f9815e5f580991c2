import { createConnection } from 'node:net';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { scheduleOwner, readSse, wsSession } from './feed-clients.js';

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
  });
});
