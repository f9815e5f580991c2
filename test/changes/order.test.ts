import { expect } from 'chai';
import { partitionOf } from '../../src/adapters/ids.js';
import { keys } from '../../src/adapters/redis.js';
import { bulk } from '../bulk/ndjson.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';
import { wsSession } from './feed-clients.js';

/**
 * The order of a caller's own events does not depend on content it may not read (CONTRACT §20;
 * SECURITY.md: the feed's order). Found by review on 2026-11-27; both failed on the code before:
 * - pages ordered partitions by stream id `ms-seq`, whose `seq` counts every entry of the
 *   partition in that millisecond: one hidden commit put the caller's event after its event of
 *   another partition in the same millisecond;
 * - a resumed stream attached to the fan-out (all after its cursor still buffered, at most 256
 *   entries a partition) got the buffers partition by partition, and one that read pages first
 *   got them in id order: 256 hidden commits in one partition changed the order.
 * The feed's order is now by millisecond, partition, then the stream's order (compareFeedOrder).
 */
describe('change feed: the order of a caller own events tells nothing of hidden commits', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let editor: Client;
  let sports: Client;
  const owners = (o: string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: o } } });
  const keyOf = (id: string) => id.replace('contentid/', '');

  before(async () => {
    // A Redis of its own: the first case sets streams' last ids an hour ahead, and every later
    // entry of those streams would carry that time (other tests read times off stream ids).
    p = await startIsolatedPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => p?.stop());

  it('a culture commit in the same millisecond does not reorder the sportseditor own events', async () => {
    const P = p.settings.PARTITIONS;
    const made = async (c: Client, owner: string) => {
      const r = await c.create({ system: { contentType: 'article' }, aspects: { body: { title: owner } }, operations: [owners([owner])] });
      expect(r.status, r.text).to.equal(201);
      return { id: r.json.system.id as string, etag: r.headers.get('etag')! };
    };
    // Sports contents X (partition a) and Y (partition b > a); culture content C in partition a.
    const byPart = new Map<number, { id: string; etag: string }>();
    while (byPart.size < 2) {
      const m = await made(sports, 'sports');
      const part = partitionOf(keyOf(m.id), P);
      if (!byPart.has(part)) byPart.set(part, m);
    }
    const [a, b] = [...byPart.keys()].sort((x, y) => x - y);
    const X = byPart.get(a)!;
    const Y = byPart.get(b)!;
    let C: { id: string; etag: string };
    do C = await made(editor, 'culture');
    while (partitionOf(keyOf(C.id), P) !== a);

    let ahead = Date.now() + 3_600_000;
    /** The next entries of partition `q` fall in one millisecond, as in a burst of commits. */
    const pin = async (q: number) => {
      const id = `${ahead}-0`;
      await p.redis.xadd(keys.events(q), id, 'e', 'x');
      await p.redis.xdel(keys.events(q), id);
    };
    const label = (id: string) => (id === X.id ? 'X' : id === Y.id ? 'Y' : id);
    const bump = async (c: Client, t: { id: string; etag: string }, title: string) => {
      const u = await c.update(t.id, { aspects: { body: { title } } }, t.etag);
      expect(u.status, u.text).to.equal(200);
      t.etag = u.headers.get('etag')!;
    };
    /** The sportseditor's feed after `since`, as labels. */
    const feed = async (since: string) => {
      const r = await sports.req('GET', `/changes?since=${since}&limit=100`);
      expect(r.status, r.text).to.equal(200);
      return (r.json.changes as { id: string; kind: string }[]).map((e) => `${e.kind} ${label(e.id)}`);
    };
    const run = async (hidden: boolean) => {
      const start = (await sports.req('GET', '/changes?since=now')).json.last as string;
      ahead += 1000;
      await pin(a);
      await pin(b);
      if (hidden) await bump(editor, C, 'culture, changed');
      await bump(sports, X, 'x');
      await bump(sports, Y, 'y');
      return feed(start);
    };
    const without = await run(false);
    expect(without).to.deep.equal(['update X', 'update Y']);
    // The sportseditor does the same; only the culture commit is added. The old code
    // answered ['update Y', 'update X'].
    expect(await run(true)).to.deep.equal(without);
  });

  it('the order of a resumed WebSocket stream does not tell that 256 hidden commits were made', async () => {
    const P = p.settings.PARTITIONS;
    const byPart = new Map<number, { id: string; etag: string }>();
    while (byPart.size < 2) {
      const r = await sports.create({ system: { contentType: 'article' }, aspects: { body: { title: 's' } }, operations: [owners(['sports'])] });
      expect(r.status, r.text).to.equal(201);
      const part = partitionOf(keyOf(r.json.system.id), P);
      if (!byPart.has(part)) byPart.set(part, { id: r.json.system.id, etag: r.headers.get('etag')! });
    }
    const [lo, hi] = [...byPart.keys()].sort((x, y) => x - y);
    // X in the higher partition is committed first, Y in the lower one second.
    const X = byPart.get(hi)!;
    const Y = byPart.get(lo)!;
    const label = (id: unknown) => (id === X.id ? 'X' : id === Y.id ? 'Y' : String(id));
    const bump = async (t: { id: string; etag: string }, title: string) => {
      const u = await sports.update(t.id, { aspects: { body: { title } } }, t.etag);
      expect(u.status, u.text).to.equal(200);
      t.etag = u.headers.get('etag')!;
    };
    const stream = async (since: string) => {
      const s = wsSession(`${p.url.replace('http', 'ws')}/content-service/changes/ws`, { token: sports.token, since }, (_m, session) => {
        if (session.messages.length >= 2) session.ws.close();
      });
      await s.closed;
      return s.messages.slice(0, 2).map((m) => `${m.kind} ${label(m.id)}`);
    };
    const run = async (hidden: boolean) => {
      const since = (await sports.req('GET', '/changes?since=now')).json.last as string;
      if (hidden) {
        // Culture content: about 275 commits a partition, none the sportseditor may read.
        const lines = Array.from(
          { length: 2200 },
          (_, i) =>
            `${JSON.stringify({ op: 'create', content: { system: { contentType: 'article' }, aspects: { body: { title: `c${i}` } }, operations: [owners(['culture'])] } })}\n`,
        );
        const r = await bulk(p.base, editor.token!, lines);
        expect(r.answers.filter((a) => a.status === 201)).to.have.length(2200);
      }
      await bump(X, `x ${hidden}`);
      await bump(Y, `y ${hidden}`);
      await new Promise((r) => setTimeout(r, 500)); // the fan-out has read them
      return stream(since);
    };
    const without = await run(false);
    expect(without).to.have.length(2);
    // The same requests of the sportseditor; only culture content was added. The old code gave
    // ['update Y', 'update X'] without it, ['update X', 'update Y'] with it.
    expect(await run(true)).to.deep.equal(without);
  });
});
