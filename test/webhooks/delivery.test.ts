import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { article, Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { eventOf, perContentOrder, Receiver } from './receiver.js';

type Platform = Awaited<ReturnType<typeof startTestPlatform>>;

/**
 * CONTRACT §14 "Delivery", "Retries", "Log": a receiver that fails for a while, then answers 2xx,
 * gets every event, in commit order per content, each signature valid by the standardwebhooks
 * package; the log shows the attempts; a hanging receiver is cut at the timeout and holds up no
 * other webhook; filters by type, view and kind; redelivery.
 */
describe('webhooks: delivery, retries, order, signatures (CONTRACT §14)', function () {
  this.timeout(60_000);
  let platform: Platform;
  let admin: Client;
  let editor: Client;
  const receivers: Receiver[] = [];
  const created: string[] = [];

  before(async () => {
    platform = await startTestPlatform({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_BASE_MS: '300',
      WEBHOOK_RETRY_MAX_MS: '1500',
      WEBHOOK_TIMEOUT_MS: '1500',
      // 8 in flight per process, at most 2 per webhook: a hanging receiver must leave the rest to others.
      WEBHOOK_CONCURRENCY: '8',
    });
    admin = await new Client(platform.base).login('sysadmin');
    editor = await new Client(platform.base).login('editor');
  });
  after(async () => {
    for (const id of created) await admin.req('DELETE', `/webhooks/${id}`);
    for (const r of receivers) await r.stop();
    await platform?.stop();
  });

  const receiver = async (answer?: ConstructorParameters<typeof Receiver>[0]) => {
    const r = await new Receiver(answer).start();
    receivers.push(r);
    return r;
  };
  const hook = async (body: Record<string, unknown>) => {
    const res = await admin.req('POST', '/webhooks', { body });
    expect(res.status, res.text).to.equal(201);
    created.push(res.json.id);
    return res.json as { id: string; secret: string };
  };
  /** n contents, each created then updated `updates` times: answers their ids and expected revisions. */
  const commit = async (n: number, updates: number, type = 'article') => {
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const c = await editor.create({ ...article(`c${i}`), system: { contentType: type } });
        expect(c.status, c.text).to.equal(201);
        let etag = c.headers.get('etag')!;
        const id: string = c.json.system.id;
        ids.push(id);
        for (let u = 0; u < updates; u++) {
          const r = await editor.update(id, { ...article(`c${i} u${u}`), system: { contentType: type } }, etag);
          expect(r.status, r.text).to.equal(200);
          etag = r.headers.get('etag')!;
        }
      }),
    );
    return ids;
  };

  it('a receiver failing for 5 s then answering 2xx gets every event, in order per content, each signature valid', async () => {
    const start = Date.now();
    const r = await receiver(() => (Date.now() - start < 5000 ? 500 : 204));
    const h = await hook({ url: r.url, description: 'flaky' });
    expect(h.secret).to.match(/^whsec_[A-Za-z0-9+/=]+$/);
    const ids = await commit(6, 4);
    const mine = (x: { body: string }) => ids.includes(eventOf(x).id);
    await until(async () => r.delivered().filter(mine).length >= 30, 40_000, 'every event delivered');
    const order = perContentOrder(r.got.filter(mine));
    for (const id of ids) expect(order.get(id), id).to.deep.equal([1, 2, 3, 4, 5]);
    expect(r.got.filter((x) => x.status === 500).length, 'failed attempts before the receiver recovered').to.be.greaterThan(0);
    const verifier = new Webhook(h.secret);
    for (const x of r.got) {
      const e = verifier.verify(x.body, x.headers as Record<string, string>) as { id: string };
      expect(e.id).to.equal(eventOf(x).id);
      expect(x.headers['content-type']).to.equal('application/json');
    }
    // The webhook-id is the event's: the same on every retry, different between events.
    const idsByBody = new Map<string, Set<string>>();
    for (const x of r.got) idsByBody.set(x.body, (idsByBody.get(x.body) ?? new Set()).add(String(x.headers['webhook-id'])));
    for (const s of idsByBody.values()) expect(s.size).to.equal(1);
    expect(new Set([...idsByBody.values()].map((s) => [...s][0])).size).to.equal(idsByBody.size);

    const log = await admin.req('GET', `/webhooks/${h.id}/deliveries?status=delivered&limit=1000`);
    expect(log.status).to.equal(200);
    expect(log.json.deliveries).to.have.length(30);
    const retried = log.json.deliveries.filter((d: { attempts: number }) => d.attempts > 1);
    expect(retried.length).to.be.greaterThan(0);
    for (const d of log.json.deliveries) {
      expect(d).to.have.keys('id', 'eventId', 'status', 'attempts', 'lastStatus', 'lastError', 'nextAttempt', 'time');
      expect(d.status).to.equal('delivered');
      expect(d.lastStatus).to.equal(204);
    }
    const pending = await admin.req('GET', `/webhooks/${h.id}/deliveries?status=pending`);
    expect(pending.json.deliveries).to.deep.equal([]);

    // Redelivery: the same event, the same webhook-id, signed again.
    const one = log.json.deliveries[0];
    const before = r.got.length;
    const re = await admin.req('POST', `/webhooks/${h.id}/deliveries/${one.id}/redeliver`);
    expect(re.status).to.equal(202);
    await until(async () => r.got.length > before, 10_000, 'the redelivery');
    const again = r.got[r.got.length - 1];
    expect(again.headers['webhook-id']).to.equal(one.eventId);
    verifier.verify(again.body, again.headers as Record<string, string>);
    expect((await admin.req('POST', `/webhooks/${h.id}/deliveries/0_nope/redeliver`)).status).to.equal(404);
  });

  it('a receiver that hangs is cut at the timeout and does not hold up another webhook', async () => {
    const hung = await receiver(() => 'hang');
    const fine = await receiver();
    const h1 = await hook({ url: hung.url, description: 'hangs' });
    await hook({ url: fine.url });
    const t0 = Date.now();
    const ids = await commit(20, 1);
    const mine = (x: { body: string }) => ids.includes(eventOf(x).id);
    await until(async () => fine.delivered().filter(mine).length >= 40, 10_000, 'the other webhook to get every event');
    expect(Date.now() - t0).to.be.lessThan(8000);
    // What the log showed last, for the failure's message: a full run once waited 10 s in vain.
    let seen = '';
    await until(
      async () => {
        const log = await admin.req('GET', `/webhooks/${h1.id}/deliveries?status=pending`);
        const ds = log.json.deliveries as { attempts: number; lastError: string | null }[];
        seen = JSON.stringify(ds.filter((d) => d.attempts > 0 || d.lastError).map((d) => [d.attempts, d.lastError]));
        return ds.some((d) => /no answer within 1500 ms/.test(d.lastError ?? ''));
      },
      20_000,
      'the hanging delivery to be cut at the timeout',
    ).catch((e: Error) => {
      throw new Error(
        `${e.message}; the receiver got ${hung.got.filter(mine).length} requests; pending deliveries attempted [attempts, lastError]: ${seen.slice(0, 1500)}`,
      );
    });
    // Only the first event of each content was sent: the second waits behind it.
    const sent = hung.got.filter(mine).map(eventOf);
    expect(sent.every((e) => e.revision === 1)).to.equal(true);
  });

  it('filters by type, view and kind', async () => {
    const byType = await receiver();
    const byKind = await receiver();
    const byView = await receiver();
    await hook({ url: byType.url, types: ['gallery'] });
    await hook({ url: byKind.url, kinds: ['delete'] });
    await hook({ url: byView.url, views: ['svcPublic'] });
    const [a] = await commit(1, 0, 'gallery');
    const created = await editor.create(article('b'));
    const b: string = created.json.system.id;
    const pub = await editor.putView('svcPublic', { version: created.json.system.version }, created.headers.get('etag')!);
    expect(pub.status, pub.text).to.equal(200);
    const del = await editor.remove(a, (await editor.read(`/content/alias/${a}`)).headers.get('etag')!);
    expect(del.status, del.text).to.equal(204);
    const mine = (x: { body: string }) => [a, b].includes(eventOf(x).id);
    await until(
      async () => byType.got.filter(mine).length >= 2 && byKind.got.filter(mine).length >= 1 && byView.got.filter(mine).length >= 1,
      10_000,
      'the filtered events',
    );
    await new Promise((r) => setTimeout(r, 500)); // anything that should not come has had time to
    expect(byType.got.filter(mine).map((x) => [eventOf(x).kind, eventOf(x).contentType])).to.deep.equal([
      ['create', 'gallery'],
      ['delete', 'gallery'],
    ]);
    expect(byKind.got.filter(mine).map((x) => [eventOf(x).kind, eventOf(x).id])).to.deep.equal([['delete', a]]);
    expect(byView.got.filter(mine).map((x) => [eventOf(x).kind, eventOf(x).view])).to.deep.equal([['view', 'svcPublic']]);
  });
});
