import { expect } from 'chai';
import { partitionOf } from '../../src/adapters/ids.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { type FeedEvent, wsSession } from './feed-clients.js';

const owners = (o: string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: o } } });
const strip = ({ cursor: _c, ...e }: FeedEvent) => e;

/**
 * CONTRACT §13 "Permissions" and §20: an event reaches only a token that may Read the content at
 * that revision (its type and contexts then), and the feed a sportseditor gets is the same
 * whether or not content it may not read exists.
 */
describe('change feed permissions (CONTRACT §13, §20)', function () {
  this.timeout(60000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => p.stop());

  async function all(c: Client, since: string): Promise<FeedEvent[]> {
    const out: FeedEvent[] = [];
    let s = since;
    for (;;) {
      const r = await c.req('GET', `/changes?since=${s}&limit=37`);
      expect(r.status, r.text).to.equal(200);
      out.push(...r.json.changes);
      s = r.json.last;
      if (!r.json.changes.length) return out;
    }
  }

  it('a sportseditor gets exactly the events of content in sports at that revision', async () => {
    const start: string = (await editor.req('GET', '/changes?since=now')).json.last;
    /** content id -> owners at each revision (index = revision). */
    const ownersAt = new Map<string, string[][]>();
    const contexts = [['sports'], ['culture'], [], ['culture', 'sports']];
    await Promise.all(
      Array.from({ length: 12 }, async (_, w) => {
        const first = contexts[w % contexts.length];
        const r = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: 't' } }, operations: [owners(first)] });
        expect(r.status, r.text).to.equal(201);
        const id: string = r.json.system.id;
        const revs: string[][] = [[], first];
        ownersAt.set(id, revs);
        let etag = r.headers.get('etag');
        let version: string = r.json.system.version;
        for (let i = 0; i < 6; i++) {
          const step = (w + i) % 4;
          const cur = revs[revs.length - 1];
          if (step === 0) {
            // moves between contexts: out of sports, into it
            const next = cur.includes('sports') ? (w % 2 ? ['culture'] : []) : w % 2 ? ['sports'] : ['culture', 'sports'];
            const u = await editor.update(id, { aspects: {}, operations: [owners(next)] }, etag);
            expect(u.status, u.text).to.equal(200);
            etag = u.headers.get('etag');
            revs.push(next);
          } else if (step === 1) {
            const v = await editor.putView('svcPublic', { version }, etag!);
            expect(v.status, v.text).to.equal(200);
            etag = v.headers.get('etag');
            revs.push(cur);
          } else {
            const u = await editor.update(id, { aspects: { body: { _type: 'body', title: `${i}` } } }, etag);
            expect(u.status, u.text).to.equal(200);
            etag = u.headers.get('etag');
            version = u.json.system!.version!;
            revs.push(cur);
          }
        }
        if (w % 3 === 0) {
          expect((await editor.remove(id, etag!)).status).to.equal(204);
          revs.push(revs[revs.length - 1]);
        }
      }),
    );
    const full = await all(editor, start);
    const mine = full.filter((e) => ownersAt.has(e.id));
    const expected = mine.filter((e) => ownersAt.get(e.id)![e.revision].includes('sports'));
    expect(expected.length).to.be.greaterThan(10);
    expect(expected.length).to.be.lessThan(mine.length);

    const perContent = (events: FeedEvent[]) => {
      const m = new Map<string, unknown[]>();
      for (const e of events) m.set(e.id, [...(m.get(e.id) ?? []), strip(e)]);
      return m;
    };
    const got = (await all(sports, start)).filter((e) => ownersAt.has(e.id));
    for (const e of got) expect(ownersAt.get(e.id)![e.revision], `${e.id}@${e.revision}`).to.include('sports');
    expect(perContent(got)).to.deep.equal(perContent(expected));

    // The same over WebSocket.
    const ws = wsSession(`${p.url.replace('http', 'ws')}/content-service/changes/ws`, { token: sports.token, since: start }, (_m, s) => {
      if (s.messages.filter((m) => ownersAt.has(m.id as string)).length >= expected.length) s.ws.close();
    });
    const timer = setTimeout(() => ws.ws.close(), 10000);
    await ws.closed;
    clearTimeout(timer);
    const overWs = (ws.messages as unknown as FeedEvent[]).filter((e) => ownersAt.has(e.id));
    expect(perContent(overWs)).to.deep.equal(perContent(expected));
  });

  it('which events a page holds does not depend on commits the caller may not read (pages of 1, 2 and 3)', async () => {
    // Sports content A and B in two partitions, culture content C in A's. A page used to read a
    // few entries of each partition and sort them: culture commits between A's two updates
    // pushed A's second one out of the first page, behind B's (found in a security review).
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const P = p.settings.PARTITIONS;
    const partition = (id: string) => partitionOf(id.slice(id.indexOf('/') + 1), P);
    const make = async (ctx: string[]) => {
      const r = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: 't' } }, operations: [owners(ctx)] });
      expect(r.status, r.text).to.equal(201);
      return { id: r.json.system.id as string, etag: r.headers.get('etag')! };
    };
    const touch = async (c: { id: string; etag: string }, n: number) => {
      const u = await editor.update(c.id, { aspects: { body: { _type: 'body', title: `t${n}` } } }, c.etag);
      expect(u.status, u.text).to.equal(200);
      c.etag = u.headers.get('etag')!;
      await sleep(3); // distinct stream ids across partitions: the order is the commits'
    };
    /** The pages a sportseditor gets, as `A@rev`/`B@rev`, with `culture` commits of C between A's two updates. */
    const pages = async (culture: number, limit: number): Promise<string[][]> => {
      const a = await make(['sports']);
      let b = await make(['sports']);
      while (partition(b.id) === partition(a.id)) b = await make(['sports']);
      let c = await make(['culture']);
      while (partition(c.id) !== partition(a.id)) c = await make(['culture']);
      await sleep(5);
      let since: string = (await sports.req('GET', '/changes?since=now')).json.last;
      await touch(a, 1);
      for (let i = 0; i < culture; i++) await touch(c, i);
      await touch(a, 2);
      await touch(b, 1);
      await touch(a, 3);
      const out: string[][] = [];
      for (;;) {
        const r = await sports.req('GET', `/changes?since=${since}&limit=${limit}`);
        expect(r.status, r.text).to.equal(200);
        if (!r.json.changes.length) return out;
        out.push((r.json.changes as FeedEvent[]).map((e) => `${e.id === a.id ? 'A' : e.id === b.id ? 'B' : '?'}@${e.revision}`));
        since = r.json.last;
      }
    };
    for (const limit of [1, 2, 3]) {
      const alone = await pages(0, limit);
      expect(alone.flat()).to.deep.equal(['A@2', 'A@3', 'B@2', 'A@4']);
      for (const culture of [3, 12]) expect(await pages(culture, limit), `limit ${limit}, ${culture} culture commits`).to.deep.equal(alone);
    }
  });

  it("a page made ahead for one caller is not another caller's answer, even from the same cursor (PagesAhead)", async () => {
    const start: string = (await editor.req('GET', '/changes?since=now')).json.last;
    for (let i = 0; i < 24; i++) {
      const r = await editor.create({ system: { contentType: 'article' }, aspects: {}, operations: [owners([i % 2 ? 'sports' : 'culture'])] });
      expect(r.status).to.equal(201);
    }
    const sportsOnly = (events: FeedEvent[]) => events.map(strip);
    // The editor's first page does not reach the end: its next page is made ahead, for the editor.
    const first = await editor.req('GET', `/changes?since=${start}&limit=6`);
    expect(first.json.changes).to.have.length(6);
    // A cursor is not tied to a caller: the sportseditor pages on from the editor's `last`, at once.
    const cursor: string = first.json.last;
    const theirs = await sports.req('GET', `/changes?since=${cursor}&limit=6`);
    expect(theirs.status, theirs.text).to.equal(200);
    // What it gets is its own page: the same as a page made for it alone, long after.
    await new Promise((r) => setTimeout(r, 3100));
    const again = await sports.req('GET', `/changes?since=${cursor}&limit=6`);
    expect(sportsOnly(theirs.json.changes)).to.deep.equal(sportsOnly(again.json.changes));
    expect(theirs.json.changes.length).to.be.greaterThan(0);
    // The editor's own next page is the page made ahead: the same as one made for it alone.
    const next = await editor.req('GET', `/changes?since=${cursor}&limit=6`);
    const nextAlone = await editor.req('GET', `/changes?since=${cursor}&limit=6`);
    expect(sportsOnly(next.json.changes)).to.deep.equal(sportsOnly(nextAlone.json.changes));
    expect(next.json.changes.map((e: FeedEvent) => e.id)).to.not.deep.equal(theirs.json.changes.map((e: FeedEvent) => e.id));
  });

  it('live subscribers of different users, or of one user with different filters, each get their own events (groups of the fan-out)', async () => {
    // The fan-out chooses a batch's events once for all live subscribers of the same user,
    // contexts and filter: an editor's, a sportseditor's and a sportseditor's with `types` must
    // each get what they alone would (a group key without the user or the filter would not).
    const since: string = (await editor.req('GET', '/changes?since=now')).json.last;
    const url = `${p.url.replace('http', 'ws')}/content-service/changes/ws`;
    const sessions = [
      wsSession(url, { token: editor.token, since }),
      wsSession(url, { token: sports.token, since }),
      wsSession(url, { token: sports.token, since, types: ['gallery'] }),
      wsSession(url, { token: sports.token, since }),
    ];
    await new Promise((r) => setTimeout(r, 300));
    const made: { id: string; type: string; ctx: string }[] = [];
    for (let i = 0; i < 24; i++) {
      const type = i % 3 ? 'article' : 'gallery';
      const ctx = i % 2 ? 'sports' : 'culture';
      const r = await editor.create({ system: { contentType: type }, aspects: {}, operations: [owners([ctx])] });
      expect(r.status).to.equal(201);
      made.push({ id: r.json.system.id, type, ctx });
    }
    const ids = (s: (typeof sessions)[number]) => s.messages.map((m) => m.id as string).filter((id) => made.some((c) => c.id === id));
    const want = [
      made.map((c) => c.id),
      made.filter((c) => c.ctx === 'sports').map((c) => c.id),
      made.filter((c) => c.ctx === 'sports' && c.type === 'gallery').map((c) => c.id),
      made.filter((c) => c.ctx === 'sports').map((c) => c.id),
    ];
    const until = Date.now() + 10000;
    while (Date.now() < until && sessions.some((s, i) => ids(s).length < want[i].length)) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 200));
    for (const s of sessions) s.ws.close();
    for (const [i, s] of sessions.entries()) expect(ids(s), `subscriber ${i}`).to.deep.equal(want[i]);
  });

  it('a long poll is not answered early by events the caller may not read', async () => {
    const since: string = (await sports.req('GET', '/changes?since=now')).json.last;
    const started = Date.now();
    const poll = sports.req('GET', `/changes?since=${since}&feed=longpoll&timeout=1200`);
    const writes = (async () => {
      while (Date.now() - started < 1000) {
        const r = await editor.create({ system: { contentType: 'article' }, aspects: {}, operations: [owners(['culture'])] });
        expect(r.status).to.equal(201);
      }
    })();
    const r = await poll;
    await writes;
    expect(r.status).to.equal(200);
    expect(r.json.changes).to.deep.equal([]);
    expect(Date.now() - started).to.be.greaterThanOrEqual(1150);
    // and a page from its cursor holds nothing of them either
    const after = await sports.req('GET', `/changes?since=${r.json.last}`);
    expect(after.json.changes).to.deep.equal([]);
  });

  it('cursors tell nothing of content the caller may not read: the same answer whether or not it changed; a made-up cursor 400', async () => {
    const empty = async (since: string): Promise<string> => {
      const r = await sports.req('GET', `/changes?since=${since}`);
      expect(r.status, r.text).to.equal(200);
      expect(r.json.changes).to.deep.equal([]);
      return r.json.last;
    };
    const start: string = (await sports.req('GET', '/changes?since=now')).json.last;
    const quiet = await empty(start);
    for (let i = 0; i < 20; i++) {
      const r = await editor.create({ system: { contentType: 'article' }, aspects: {}, operations: [owners(['culture'])] });
      expect(r.status).to.equal(201);
    }
    const busy = await empty(start);
    const now: string = (await sports.req('GET', '/changes?since=now')).json.last;
    // In clear, `busy` and `now` would name the partitions and the times of those 20 commits, and
    // `quiet` would equal `start`. Sealed, every cursor differs and all have the same length.
    expect(new Set([start, quiet, busy, now]).size).to.equal(4);
    expect(new Set([start, quiet, busy, now].map((c) => c.length)).size).to.equal(1);
    // Both go on alike: the next event the caller may read, from either.
    const r = await editor.create({ system: { contentType: 'article' }, aspects: {}, operations: [owners(['sports'])] });
    expect(r.status).to.equal(201);
    const fromQuiet = await sports.req('GET', `/changes?since=${quiet}`);
    const fromBusy = await sports.req('GET', `/changes?since=${busy}`);
    expect(fromQuiet.json.changes.map(strip)).to.deep.equal(fromBusy.json.changes.map(strip));
    expect(fromBusy.json.changes.map((e: FeedEvent) => e.id)).to.deep.equal([r.json.system.id]);
    // A cursor the platform did not write answers 400, never 410 or 200, so positions cannot be
    // probed: a changed character, and a cursor in clear (the format of before 2026-11-26) of
    // positions far ahead, which that format answered 410.
    const changed = busy.slice(0, 60) + (busy[60] === 'A' ? 'B' : 'A') + busy.slice(61);
    const ahead = Buffer.concat([Buffer.from([2, 64]), Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), Buffer.alloc(64, 2)]).toString('base64url');
    for (const since of [changed, ahead]) {
      for (const q of [`since=${since}`, `since=${since}&feed=longpoll&timeout=0`]) {
        const bad = await sports.req('GET', `/changes?${q}`);
        expect(bad.status, q).to.equal(400);
        expect(bad.json.statusCode).to.equal('40000');
      }
    }
  });
});
