import { expect } from 'chai';
import { pack } from '../../src/adapters/codec.js';
import { ContentStore } from '../../src/adapters/content-store.js';
import { partitionOf } from '../../src/adapters/ids.js';
import { connectRedis, keys } from '../../src/adapters/redis.js';
import type { ViewEvent } from '../../src/content/model.js';
import type { AnyJson } from '../../src/client/index.js';
import { bulk } from '../bulk/ndjson.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';
import { redisSettled, sentByRedis } from '../support/redis-bytes.js';

/**
 * The history and metadata of a revision list what the content had up to that revision: the
 * versions (`vi:{p}:<cid>`) and view assignments (`vh:{p}:<cid>`) of revisions 1..r. The read
 * took the whole list from Redis and dropped what came after r, and each revision is its own
 * cache entry, so a reader walking revisions 1, 2, 3, … of a content with many revisions paid the
 * whole list every time: for a content given 20,001 revisions by one bulk import of 1.9 MB, a
 * history read of revisions 1..40 (answers of about 4 KB) made Redis send 1.6 MB and cost the
 * gateway 62.6 ms of CPU, a metadata read of revisions 41..80 2.4 MB and 67.4 ms. Now Redis sends
 * the entries up to r only (history-count-1.lua, `ContentStore.historyList`).
 *
 * A Redis of the platform's own, so that what it sends is what the reads cost.
 */
describe('security: the history and metadata of an early revision read the entries up to it, not the whole list', function () {
  this.timeout(180_000);
  /** Revisions the bulk import adds: each a version on svcLatest and svcPublic (two view entries). */
  const N = 2_000;
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let reader: Client;
  let id = '';
  /** Bytes of the whole version index and view history in Redis. */
  const whole = { history: 0, metadata: 0 };

  before(async () => {
    p = await startIsolatedPlatform();
    const editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
    const c = await editor.create({ system: { contentType: 'article' }, aspects: { b: { n: 0 } } });
    expect(c.status, c.text).to.equal(201);
    id = c.json.system.id as string;
    const lines = Array.from(
      { length: N },
      (_, i) =>
        `${JSON.stringify({ op: 'update', id, content: { aspects: { b: { n: i + 1 } }, operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }] } })}\n`,
    );
    const imported = await bulk(p.base, editor.token!, lines);
    expect(imported.status, imported.text).to.equal(200);
    expect(imported.answers.filter((a) => a.status !== 200)).to.deep.equal([]);
    const cid = id.split('/')[1];
    const part = partitionOf(cid, p.settings.PARTITIONS);
    const bytes = async (key: string) => (await p.redis.lrangeBuffer(key, 0, -1)).reduce((n, b) => n + b.length, 0);
    whole.history = await bytes(keys.versionIndex(part, cid));
    whole.metadata = await bytes(keys.viewHistory(part, cid));
    await redisSettled(p.redis);
  });
  after(async () => p?.stop());

  /**
   * A reader's read of revision `rev`'s history or metadata, and what Redis sent for it: the
   * least of three reads, since the platform's own background work (its indexer, its audit
   * trail, catching up on the import under a loaded CI) may read from Redis during one of them
   * (a full run measured 84 KB for one read that costs 3 KB alone).
   */
  async function read(rev: number, kind: 'history' | 'metadata') {
    let least: { json: AnyJson; sent: number } | undefined;
    for (let i = 0; i < 3; i++) {
      const before = await sentByRedis(p.redis);
      const r = await reader.req('GET', `/content/alias/${id}/${rev}/${kind}`);
      const sent = (await sentByRedis(p.redis)) - before;
      expect(r.status, r.text.slice(0, 300)).to.equal(200);
      if (!least || sent < least.sent) least = { json: r.json, sent };
    }
    return least!;
  }

  it('reading the history of revisions 1..20 makes Redis send far less than the whole version index each time (before: all of it), with the same answers', async () => {
    expect(whole.history, 'the version index').to.be.above(100_000);
    let most = 0;
    for (let rev = 1; rev <= 20; rev++) {
      const { json, sent } = await read(rev, 'history');
      most = Math.max(most, sent);
      expect(json.versions.map((v: { revision: { revisionNumber: number } }) => v.revision.revisionNumber)).to.deep.equal(
        Array.from({ length: rev }, (_, i) => i + 1),
      );
      expect(sent, `revision ${rev}: Redis sent ${sent} B; the whole list is ${whole.history} B`).to.be.below(whole.history / 10);
    }
    // the head's history lists every version
    const head = await read(N + 1, 'history');
    expect(head.json.versions).to.have.length(N + 1);
    console.log(
      `      history of revisions 1..20: Redis sent at most ${most} B a read; the version index is ${whole.history} B, the head's history ${head.sent} B`,
    );
  });

  it('reading the metadata of revisions 21..40 makes Redis send far less than the whole view history each time (before: all of it), with the same answers', async () => {
    expect(whole.metadata, 'the view history').to.be.above(100_000);
    let most = 0;
    for (let rev = 21; rev <= 40; rev++) {
      const { json, sent } = await read(rev, 'metadata');
      most = Math.max(most, sent);
      const views = json.aspects.svcViewInfo.views;
      expect(views.svcLatest.history.map((e: { revision: number }) => e.revision)).to.deep.equal(Array.from({ length: rev }, (_, i) => i + 1));
      expect(views.svcPublic.history.map((e: { revision: number }) => e.revision)).to.deep.equal(Array.from({ length: rev - 1 }, (_, i) => i + 2));
      expect(sent, `revision ${rev}: Redis sent ${sent} B; the whole list is ${whole.metadata} B`).to.be.below(whole.metadata / 10);
    }
    const head = await read(N + 1, 'metadata');
    expect(head.json.aspects.svcViewInfo.views.svcPublic.history).to.have.length(N);
    console.log(
      `      metadata of revisions 21..40: Redis sent at most ${most} B a read; the view history is ${whole.metadata} B, the head's metadata ${head.sent} B`,
    );
  });
});

describe('ContentStore: the history lists up to a revision are exactly the entries of revisions up to it', () => {
  it('several entries a revision, revisions without any, an empty list, and entries cmsgpack cannot read (the whole list then, kept up to the revision)', async () => {
    const redis = connectRedis({ REDIS_URL: process.env.REDIS_URL });
    try {
      const store = new ContentStore(redis, 8, 1000, 60);
      const cid = `HISTORYUPTO${Date.now().toString(36).toUpperCase()}`;
      const list = keys.viewHistory(store.partitionOf(cid), cid);
      const event = (rev: number, view: string): ViewEvent => ({ view, userId: 'editor', version: `v${rev}`, rev, ts: 1_700_000_000_000 + rev });
      const check = async (events: ViewEvent[]) => {
        for (let upTo = 0; upTo <= 9; upTo++) expect(await store.viewHistory(cid, upTo), `up to ${upTo}`).to.deep.equal(events.filter((e) => e.rev <= upTo));
        expect(await store.viewHistory(cid)).to.deep.equal(events);
      };
      await check([]);
      const events = [
        event(1, 'svcLatest'),
        event(1, 'svcPublic'),
        event(1, 'web'),
        event(2, 'svcLatest'),
        event(4, 'svcLatest'),
        event(4, 'web'),
        event(7, 'svcLatest'),
      ];
      await redis.rpush(list, ...events.map((e) => pack(e)));
      await check(events);
      // a field cmsgpack cannot read (a bin, as msgpackr writes a Buffer) where the halving looks first, then in the middle
      const unreadable = (e: ViewEvent) => ({ ...e, extra: Buffer.from([1, 2, 3]) });
      await redis.rpush(list, pack(unreadable(event(8, 'svcLatest'))));
      await check([...events, unreadable(event(8, 'svcLatest'))] as ViewEvent[]);
      await redis.del(list);
      const middle = events.map((e, i) => (i === 3 ? unreadable(e) : e)) as ViewEvent[];
      await redis.rpush(list, ...middle.map((e) => pack(e)));
      await check(middle);
    } finally {
      redis.disconnect();
    }
  });
});
