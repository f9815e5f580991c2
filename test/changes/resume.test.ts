import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { type FeedEvent, readSse, wsSession } from './feed-clients.js';

const WRITERS = 20;
const COMMITS_PER_WRITER = 75;

/** A small seeded generator: the random resume points are the same on every run. */
function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s % n;
  };
}

/**
 * CONTRACT §13 "Guarantee": a subscriber that disconnects and resumes at random points while 20
 * writers commit gets every event exactly once, in commit order per content, over each transport.
 */
describe('change feed: resume exactly once while writers commit (CONTRACT §13)', function () {
  this.timeout(90000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;

  before(async () => {
    p = await startTestPlatform();
    c = await new Client(p.base).login('editor');
  });
  after(async () => p.stop());

  it('pages, long poll, server-sent events and WebSocket each deliver every commit once, in order per content', async () => {
    const start: string = (await c.req('GET', '/changes?since=now')).json.last;
    /** content id -> revisions acknowledged to the writers. */
    const committed = new Map<string, number>();
    let writing = true;
    let total = 0;

    const writer = async (w: number) => {
      const wc = new Client(p.base, c.token);
      let id = '';
      let etag: string | null = null;
      for (let i = 0; i < COMMITS_PER_WRITER; i++) {
        if (i % 25 === 0) {
          const r = await wc.create({ system: { contentType: w % 2 ? 'article' : 'gallery' }, aspects: { body: { _type: 'body', title: `${w}/${i}` } } });
          expect(r.status, r.text).to.equal(201);
          id = r.json.system.id;
          etag = r.headers.get('etag');
          committed.set(id, 1);
        } else {
          const r = await wc.update(id, { aspects: { body: { _type: 'body', title: `${w}/${i}` } } }, etag);
          expect(r.status, r.text).to.equal(200);
          etag = r.headers.get('etag');
          committed.set(id, (committed.get(id) ?? 0) + 1);
        }
        total++;
      }
    };

    const deadline = Date.now() + 60000;
    const mine = (e: FeedEvent) => committed.has(e.id);
    const complete = (got: FeedEvent[]) => !writing && got.filter(mine).length >= total;

    /** Pages: each page is processed up to a random event, and the next starts from that event's cursor. */
    const pages = async (longpoll: boolean) => {
      const r = rng(longpoll ? 7 : 3);
      const got: FeedEvent[] = [];
      let since = start;
      while (!complete(got) && Date.now() < deadline) {
        const q = `/changes?since=${since}&limit=${1 + r(200)}${longpoll ? '&feed=longpoll&timeout=500' : ''}`;
        const res = await c.req('GET', q);
        expect(res.status, res.text).to.equal(200);
        const changes: FeedEvent[] = res.json.changes;
        if (changes.length && r(3) === 0) {
          const upto = r(changes.length);
          got.push(...changes.slice(0, upto + 1));
          since = changes[upto].cursor;
        } else {
          got.push(...changes);
          since = res.json.last;
        }
        if (!changes.length && !longpoll) await new Promise((res) => setTimeout(res, 20));
      }
      return got;
    };

    /** Server-sent events: dropped after a random number of events, resumed with Last-Event-ID. */
    const sse = async () => {
      const r = rng(11);
      const got: FeedEvent[] = [];
      let last: string | undefined;
      while (!complete(got) && Date.now() < deadline) {
        let n = 1 + r(300);
        const url = `${p.base}/changes?${last ? '' : `since=${start}&`}feed=sse`;
        const res = await readSse(
          url,
          c.token!,
          last,
          (e) => {
            got.push(e);
            return --n === 0 || complete(got);
          },
          2000,
        );
        expect(res.status).to.equal(200);
        if (got.length) last = got[got.length - 1].cursor;
      }
      return got;
    };

    /** WebSocket: cut after a random number of events, resumed from the last cursor. */
    const ws = async () => {
      const r = rng(13);
      const got: FeedEvent[] = [];
      let since = start;
      while (!complete(got) && Date.now() < deadline) {
        let n = 1 + r(300);
        const s = wsSession(`${p.url.replace('http', 'ws')}/content-service/changes/ws`, { token: c.token, since }, (m, sess) => {
          if ('error' in m) return;
          got.push(m as unknown as FeedEvent);
          if (--n === 0 || complete(got)) sess.ws.terminate();
        });
        const idle = setTimeout(() => s.ws.terminate(), 2000);
        const closed = await s.closed;
        clearTimeout(idle);
        expect(
          s.messages.filter((m) => 'error' in m),
          JSON.stringify(closed),
        ).to.deep.equal([]);
        if (got.length) since = got[got.length - 1].cursor;
      }
      return got;
    };

    const subscribers = Promise.all([pages(false), pages(true), sse(), ws()]);
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    writing = false;
    const results = await subscribers;

    expect(total).to.equal(WRITERS * COMMITS_PER_WRITER);
    for (const [name, got] of ['pages', 'long poll', 'sse', 'websocket'].map((n, i) => [n, results[i]] as const)) {
      const byContent = new Map<string, FeedEvent[]>();
      for (const e of got.filter(mine)) byContent.set(e.id, [...(byContent.get(e.id) ?? []), e]);
      expect(byContent.size, name).to.equal(committed.size);
      for (const [id, events] of byContent) {
        const want = Array.from({ length: committed.get(id)! }, (_, i) => i + 1);
        expect(
          events.map((e) => e.revision),
          `${name}: ${id}`,
        ).to.deep.equal(want);
        expect(events.map((e) => e.kind)).to.deep.equal(want.map((r) => (r === 1 ? 'create' : 'update')));
      }
      const cursors = new Set(got.map((e) => e.cursor));
      expect(cursors.size, `${name}: every cursor once`).to.equal(got.length);
    }
    // Every subscriber went away: nothing is left behind in the gateway.
    const gw = p.gateway!;
    const stats = () => gw.changes.stats();
    const end = Date.now() + 5000;
    while (stats().subscribers > 0 && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
    expect(stats().subscribers).to.equal(0);
  });

  it('with no subscriber the fan-out seals no cursor; a subscriber that comes later gets events whose cursors resume exactly', async () => {
    const gw = p.gateway!;
    const stats = () => gw.changes.stats();
    const end = Date.now() + 5000;
    while (stats().subscribers > 0 && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
    // A page request starts the fan-out (it goes on reading with nobody subscribed).
    const since: string = (await c.req('GET', '/changes?since=now')).json.last;
    const seal = gw.changes.source.cursors;
    const encode = seal.encode.bind(seal);
    const sealCheckpoint = seal.sealCheckpoint.bind(seal);
    let sealed = 0;
    seal.encode = (positions) => {
      sealed++;
      return encode(positions);
    };
    seal.sealCheckpoint = (...args) => {
      sealed++;
      return sealCheckpoint(...args);
    };
    try {
      const seen = JSON.stringify(gw.changes.fanout.seenIds());
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) ids.push((await c.create({ system: { contentType: 'article' }, aspects: {} })).json.system.id);
      const until = Date.now() + 5000;
      while (JSON.stringify(gw.changes.fanout.seenIds()) === seen && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
      await new Promise((res) => setTimeout(res, 300));
      // The code before sealed one for each of the 30 commits here.
      expect(sealed, 'cursors sealed by the fan-out with no subscriber').to.equal(0);
      // A subscriber from before them gets the 30 (catch-up, then live), and a commit after them live.
      const got: FeedEvent[] = [];
      let later = '';
      const s = wsSession(`${p.url.replace('http', 'ws')}/content-service/changes/ws`, { token: c.token, since }, (m, sess) => {
        const e = m as unknown as FeedEvent;
        if (!ids.includes(e.id) && e.id !== later) return;
        got.push(e);
        if (got.length === 30) void c.create({ system: { contentType: 'article' }, aspects: {} }).then((r) => (later = r.json.system.id));
        if (got.length === 31) sess.ws.close();
      });
      const timer = setTimeout(() => s.ws.terminate(), 10000);
      await s.closed;
      clearTimeout(timer);
      // The feed orders commits of one millisecond by partition, not as they were made: the 30 in any
      // order, each once, then the one made after they came.
      expect(got.map((e) => e.id).sort()).to.deep.equal([...ids, later].sort());
      expect(got[30].id).to.equal(later);
      // Live, the event's cursor names the fan-out's record of it (FeedCheckpoints): 68 characters
      // where one of every partition's position is 560.
      expect(got[30].cursor).to.have.length(68);
      const after = await c.req('GET', `/changes?since=${got[30].cursor}&limit=1000`);
      expect((after.json.changes as FeedEvent[]).filter((e) => e.id === later || ids.includes(e.id))).to.deep.equal([]);
      // Each cursor resumes after its own event: from the 30th, the next event of these is the later one.
      const resumed = await c.req('GET', `/changes?since=${got[29].cursor}&limit=1000`);
      expect((resumed.json.changes as FeedEvent[]).filter((e) => e.id === later || ids.includes(e.id)).map((e) => e.id)).to.deep.equal([later]);
    } finally {
      seal.encode = encode;
      seal.sealCheckpoint = sealCheckpoint;
    }
  });
});
