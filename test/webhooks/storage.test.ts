import { expect } from 'chai';
import type { LRUCache } from 'lru-cache';
import { Webhook } from 'standardwebhooks';
import type { RedisClient } from '../../src/adapters/redis.js';
import { whKeys } from '../../src/webhooks/keys.js';
import { withScripts } from '../../src/webhooks/scripts.js';
import { article, Client, startIsolatedPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { eventOf, Receiver } from './receiver.js';

type Platform = Awaited<ReturnType<typeof startIsolatedPlatform>>;

/** Every `wh:*` key of the platform's own Redis: how many, and their MEMORY USAGE in all. */
async function keysMatching(redis: RedisClient, match = 'wh:*'): Promise<{ keys: string[]; bytes: number }> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  let bytes = 0;
  for (const k of keys) bytes += Number((await redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0')) ?? 0);
  return { keys, bytes };
}

/** Members of the partitions' `wh:{p}:due` and `wh:{p}:pending` sets that name a webhook. */
async function indexMembersOf(redis: RedisClient, ids: string[]): Promise<string[]> {
  const out: string[] = [];
  for (let p = 0; p < 8; p++) {
    for (const key of [`wh:{${p}}:due`, `wh:{${p}}:pending`]) {
      for (const m of await redis.zrange(key, '0', '-1')) if (ids.some((id) => m.startsWith(id))) out.push(`${key} ${m}`);
    }
  }
  return out;
}

/**
 * CONTRACT §14 and SECURITY.md: what Redis keeps for webhook deliveries does not grow with the
 * size of the events times the webhooks. A content with 64 KB of aliases on view `w` and 48
 * symbolic views following it makes 49 `view` events of 64 KB each time `w` moves; the delivery
 * records hold no body (it is made from the event stream at each attempt, and on a redelivery),
 * and a removed webhook's records and queues go with it. Before, each record held its event's
 * whole body for WEBHOOK_LOG_HOURS after delivery, and a removed webhook's records stayed.
 */
describe('webhooks: what Redis keeps per delivery (CONTRACT §14)', function () {
  this.timeout(120_000);
  let platform: Platform;
  let admin: Client;
  let editor: Client;
  const receivers: Receiver[] = [];

  before(async () => {
    // A Redis of its own: the test measures every wh:* key and deletes an event stream entry.
    platform = await startIsolatedPlatform({ WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_RETRY_MAX_MS: '400' });
    admin = await new Client(platform.base).login('sysadmin');
    editor = await new Client(platform.base).login('editor');
  });
  after(async () => {
    for (const r of receivers) await r.stop();
    await platform?.stop();
  });

  const receiver = async (answer?: ConstructorParameters<typeof Receiver>[0]) => {
    const r = await new Receiver(answer).start();
    receivers.push(r);
    return r;
  };

  it('a commit of 49 view events of 64 KB each to 2 webhooks: the records hold no bodies, a redelivery sends the same body, removed webhooks leave nothing', async () => {
    // The content: 63,000 characters of aliases (MAX_ALIAS_CHARS is 65,536), on `w` and 48 symbolic views following `@w`.
    const c = await editor.create(article('heavy'));
    expect(c.status, c.text).to.equal(201);
    const id: string = c.json.system.id;
    const va: string = c.json.system.version;
    let etag = c.headers.get('etag')!;
    let n = 0;
    for (let round = 0; round < 3; round++) {
      const operations = Array.from({ length: 84 }, () => ({
        _type: 'svcSetAlias',
        namespace: 'n',
        alias: `a${String(n++).padStart(4, '0')}`.padEnd(250, 'a'),
      }));
      const u = await editor.update(id, { ...article(`r${round}`), operations }, etag);
      expect(u.status, u.text.slice(0, 300)).to.equal(200);
      etag = u.headers.get('etag')!;
    }
    const sym = Array.from({ length: 48 }, (_, i) => `s${i}`);
    const s = await editor.update(
      id,
      {
        ...article('sym'),
        operations: [
          { _type: 'svcAssignToViews', views: ['w'] },
          { _type: 'svcAssignToSymbolicViews', views: sym, targetView: '@w' },
        ],
      },
      etag,
    );
    expect(s.status, s.text.slice(0, 300)).to.equal(200);
    etag = s.headers.get('etag')!;
    const vb = s.json.system?.version as string;

    // Two webhooks from here on: they receive the view events below only.
    await new Promise((r) => setTimeout(r, 20));
    const r = await receiver();
    const hooks: { id: string; secret: string }[] = [];
    for (let i = 0; i < 2; i++) {
      const h = await admin.req('POST', '/webhooks', { body: { url: `${r.url}?hook=${i}` } });
      expect(h.status, h.text).to.equal(201);
      hooks.push(h.json);
    }
    const base = await keysMatching(platform.redis);

    // `w` moves 4 times: 4 × 49 view events, each carrying the 63 KB of aliases, to each webhook.
    const moves = 4;
    for (let i = 0; i < moves; i++) {
      const v = await editor.putView('w', { version: i % 2 === 0 ? va : vb }, etag);
      expect(v.status, v.text).to.equal(200);
      etag = v.headers.get('etag')!;
    }
    const want = moves * 49 * hooks.length;
    const mine = () => r.delivered().filter((x) => eventOf(x).id.endsWith(id) && eventOf(x).kind === 'view');
    await until(async () => mine().length >= want, 60_000, `${want} deliveries (got ${mine().length})`);
    for (const h of hooks) {
      await until(async () => (await admin.req('GET', `/webhooks/${h.id}/deliveries?status=pending`)).json.deliveries.length === 0, 10_000, 'nothing pending');
    }
    const bodies = mine().reduce((sum, x) => sum + x.body.length, 0);
    expect(mine().length).to.equal(want);
    expect(bodies / want, 'bytes of one event').to.be.greaterThan(60_000);

    const after = await keysMatching(platform.redis);
    const kept = after.bytes - base.bytes;
    // Before: every record kept its body for WEBHOOK_LOG_HOURS, 392 × 64 KB ≈ 25 MB (about all the bytes delivered).
    // Now: a record of a few hundred bytes per delivery, whatever the event weighs.
    console.log(`      wh:* keeps ${kept} bytes for ${want} deliveries of ${bodies} bytes (${Math.round(kept / want)} a delivery)`);
    expect(kept, `wh:* keeps ${kept} bytes for ${want} deliveries of ${bodies} bytes`).to.be.lessThan(Math.min(1_000_000, bodies / 50));

    // The delivery log lists every delivery; a redelivery makes the same body again, signed again.
    const log = await admin.req('GET', `/webhooks/${hooks[0].id}/deliveries?status=delivered&limit=1000`);
    expect(log.json.deliveries).to.have.length(moves * 49);
    const one = log.json.deliveries[7];
    const first = mine().find((x) => x.headers['webhook-id'] === one.eventId && x.path.endsWith('hook=0'))!;
    const count = r.got.length;
    expect((await admin.req('POST', `/webhooks/${hooks[0].id}/deliveries/${one.id}/redeliver`)).status).to.equal(202);
    await until(async () => r.got.length > count, 10_000, 'the redelivery');
    const again = r.got[r.got.length - 1];
    expect(again.headers['webhook-id']).to.equal(one.eventId);
    expect(again.body).to.equal(first.body);
    new Webhook(hooks[0].secret).verify(again.body, again.headers as Record<string, string>);

    // Removing the webhooks removes their records, logs and queues.
    for (const h of hooks) expect((await admin.req('DELETE', `/webhooks/${h.id}`)).status).to.equal(204);
    const left = await keysMatching(platform.redis);
    const theirs = left.keys.filter((k) => hooks.some((h) => k.includes(h.id)));
    expect(theirs.length, `keys of the removed webhooks left: ${theirs.slice(0, 5).join(', ')}`).to.equal(0);
    expect(
      await indexMembersOf(
        platform.redis,
        hooks.map((h) => h.id),
      ),
    ).to.deep.equal([]);
    expect(left.bytes, `wh:* bytes after removing the webhooks (before them ${base.bytes})`).to.be.lessThan(base.bytes + 20_000);

    // A process that had not yet reloaded the webhooks enqueues one more delivery for a removed
    // one: the dispatcher that claims it drops it, record and all, and sends nothing.
    const [p, pos] = [Number(one.id.split('_')[0]), one.id.slice(one.id.indexOf('_') + 1)];
    const scripts = withScripts(platform.redis);
    const sent = r.got.length;
    await until(
      async () => {
        const token = await platform.redis.get(whKeys.lock(p));
        if (!token) return false;
        const added = await scripts.enqueueDeliveries(
          whKeys.lock(p),
          whKeys.due(p),
          whKeys.pending(p),
          token,
          whKeys.prefix(p),
          3_600_000,
          hooks[0].id,
          id,
          pos,
          one.eventId,
          Date.now(),
        );
        return added === 1;
      },
      5000,
      'the late delivery',
    );
    await until(
      async () =>
        (await keysMatching(platform.redis, `wh:*${hooks[0].id}*`)).keys.length === 0 && (await indexMembersOf(platform.redis, [hooks[0].id])).length === 0,
      5000,
      'the late delivery dropped',
    );
    expect(r.got.length).to.equal(sent);
  });
});

/**
 * SECURITY.md: the webhooks process's cache of stream entries (WebhookDispatcher.entries) counts
 * what it holds. A delete event carries the aliases of the revision before it, while its snapshot
 * has none: before, an entry was counted at its snapshot's size (about 1 KB) and held 63 KB of
 * aliases, so the cache's 20,000 entries could hold 1.4 GB while its 64 MB bound counted 24 MB.
 */
describe('webhooks: what the dispatcher caches of delete events (SECURITY.md)', function () {
  this.timeout(120_000);
  let platform: Platform;
  const receivers: Receiver[] = [];

  before(async () => {
    platform = await startIsolatedPlatform({ WEBHOOK_ALLOW_PRIVATE: 'true' });
  });
  after(async () => {
    for (const r of receivers) await r.stop();
    await platform?.stop();
  });

  it('deletes of contents with 63,000 characters of aliases to a delete-only webhook: the cache counts at least the JSON it holds', async () => {
    const admin = await new Client(platform.base).login('sysadmin');
    const editor = await new Client(platform.base).login('editor');
    const r = await new Receiver().start();
    receivers.push(r);
    const h = await admin.req('POST', '/webhooks', { body: { url: r.url, kinds: ['delete'] } });
    expect(h.status, h.text).to.equal(201);
    await new Promise((res) => setTimeout(res, 20));

    // 6 contents of 63,000 characters of aliases each, then deleted.
    const N = 6;
    const made: [string, string][] = [];
    let n = 0;
    for (let i = 0; i < N; i++) {
      const c = await editor.create(article(`gone${i}`));
      expect(c.status, c.text).to.equal(201);
      let etag = c.headers.get('etag')!;
      for (let round = 0; round < 3; round++) {
        const operations = Array.from({ length: 84 }, () => ({
          _type: 'svcSetAlias',
          namespace: 'n',
          alias: `d${String(n++).padStart(5, '0')}`.padEnd(250, 'a'),
        }));
        const u = await editor.update(c.json.system.id, { ...article(`r${round}`), operations }, etag);
        expect(u.status, u.text.slice(0, 300)).to.equal(200);
        etag = u.headers.get('etag')!;
      }
      made.push([c.json.system.id, etag]);
    }
    for (const [id, etag] of made) expect((await editor.remove(id, etag)).status).to.be.lessThan(300);
    await until(async () => r.delivered().length >= N, 60_000, `${N} delete deliveries (got ${r.delivered().length})`);
    expect(r.delivered().map((x) => eventOf(x).kind)).to.deep.equal(Array(N).fill('delete'));
    expect(Math.min(...r.delivered().map((x) => x.body.length)), 'bytes of one delete event').to.be.greaterThan(60_000);

    // What the cache holds: its entries' events as JSON (bodies, or events made into JSON here), a byte a character.
    const entries = (platform.webhooks as unknown as { entries: LRUCache<string, unknown[]> }).entries;
    let held = 0;
    for (const v of entries.values()) for (const e of v) held += (typeof e === 'string' ? e : JSON.stringify(e)).length;
    const counted = entries.calculatedSize;
    // Before: the 6 entries were counted 7,704 bytes while their events' JSON was 387,324 characters.
    console.log(`      the dispatcher's cache: ${entries.size} entries, counted ${counted} bytes, holding ${held} characters of JSON`);
    expect(entries.size).to.equal(N);
    expect(held).to.be.greaterThan(N * 60_000);
    expect(counted, `counted ${counted} bytes for ${held} characters held`).to.be.at.least(held);
    expect(counted).to.be.lessThan(2 * held);
  });
});

/**
 * A delivery's body is made from its event's stream entry: once the change feed's retention has
 * trimmed the entry, a delivery not yet made fails with a clear error, and a redelivery answers
 * 404 as for an unknown delivery.
 */
describe('webhooks: deliveries whose event left the stream (CONTRACT §14)', function () {
  this.timeout(60_000);
  let platform: Platform;
  const receivers: Receiver[] = [];

  before(async () => {
    // One delivery at a time: a receiver that hangs holds the only slot while the test trims.
    platform = await startIsolatedPlatform({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_CONCURRENCY: '1',
      WEBHOOK_TIMEOUT_MS: '3000',
      WEBHOOK_RETRY_BASE_MS: '200',
      WEBHOOK_RETRY_MAX_MS: '400',
    });
  });
  after(async () => {
    for (const r of receivers) await r.stop();
    await platform?.stop();
  });

  it('a pending delivery whose event is gone fails with a clear error; its redelivery answers 404', async () => {
    const admin = await new Client(platform.base).login('sysadmin');
    const editor = await new Client(platform.base).login('editor');
    const hung = await new Receiver(() => 'hang').start();
    const fine = await new Receiver(() => 204).start();
    receivers.push(hung, fine);
    const h1 = await admin.req('POST', '/webhooks', { body: { url: hung.url, types: ['article'] } });
    const h2 = await admin.req('POST', '/webhooks', { body: { url: fine.url, types: ['gallery'] } });
    expect([h1.status, h2.status]).to.deep.equal([201, 201]);
    await new Promise((res) => setTimeout(res, 20));
    const a = await editor.create(article('holds the slot'));
    expect(a.status, a.text).to.equal(201);
    // A fresh attempt to the receiver that hangs holds the only slot for 3 s.
    await until(async () => hung.got.length > 0, 10_000, 'the first attempt');
    const seen = hung.got.length;
    await until(async () => hung.got.length > seen, 10_000, 'the next attempt');
    const g = await editor.create({ ...article('trimmed'), system: { contentType: 'gallery' } });
    expect(g.status, g.text).to.equal(201);
    let pending: { id: string }[] = [];
    await until(
      async () => {
        pending = (await admin.req('GET', `/webhooks/${h2.json.id}/deliveries?status=pending`)).json.deliveries;
        return pending.length === 1;
      },
      2000,
      'the delivery of the gallery',
    );
    // Its stream entry goes before its first attempt (as the change feed's retention would trim it).
    const [p, pos] = pending[0].id.split('_');
    const [ms, seq] = pos.split('-').map(Number);
    expect(await platform.redis.xdel(`events:{${p}}`, `${ms}-${seq}`)).to.equal(1);
    await until(
      async () => (await admin.req('GET', `/webhooks/${h2.json.id}/deliveries?status=failed`)).json.deliveries.length === 1,
      15_000,
      'the delivery whose event is gone to fail',
    );
    const failed = (await admin.req('GET', `/webhooks/${h2.json.id}/deliveries?status=failed`)).json.deliveries[0];
    expect(failed).to.include({ id: pending[0].id, status: 'failed', attempts: 1, lastStatus: null, nextAttempt: null });
    expect(failed.lastError).to.match(/no longer in the event stream/);
    expect(fine.got).to.deep.equal([]);

    const re = await admin.req('POST', `/webhooks/${h2.json.id}/deliveries/${failed.id}/redeliver`);
    expect(re.status).to.equal(404);
    expect(re.json.message).to.match(/no longer in the event stream/);
    const unknown = await admin.req('POST', `/webhooks/${h2.json.id}/deliveries/0_nope/redeliver`);
    expect(unknown.status).to.equal(404);
    expect(re.json.statusCode).to.equal(unknown.json.statusCode);
    for (const h of [h1, h2]) expect((await admin.req('DELETE', `/webhooks/${h.json.id}`)).status).to.equal(204);
  });
});
