import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { article, Client, startTestPlatform } from '../support/platform.js';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.js';
import { until } from '../support/wait.js';
import { eventOf, perContentOrder, Receiver } from './receiver.js';

/**
 * Webhooks on a 3-master Redis Cluster: the fan-out reads each partition's stream on its own,
 * and every delivery script touches one slot (a cross-slot command fails with CROSSSLOT there):
 * management, retries, order and the log work with the partitions spread over the masters.
 */
describe('webhooks on Redis Cluster (CONTRACT §14)', function () {
  this.timeout(60_000);
  let cluster: TestRedisCluster;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let receiver: Receiver;

  before(async () => {
    cluster = await startRedisCluster(3);
    p = await startTestPlatform({
      REDIS_CLUSTER_NODES: cluster.nodes,
      LOCAL_DISPATCH: 'false',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_BASE_MS: '200',
      WEBHOOK_RETRY_MAX_MS: '500',
    });
    const start = Date.now();
    receiver = await new Receiver(() => (Date.now() - start < 4000 ? 503 : 200)).start();
  });
  after(async () => {
    await receiver?.stop();
    await p?.stop();
    await cluster?.stop();
  });

  it('every event delivered in order per content, signed, logged, after retries', async () => {
    const admin = await new Client(p.base).login('sysadmin');
    const editor = await new Client(p.base).login('editor');
    const h = await admin.req('POST', '/webhooks', { body: { url: receiver.url } });
    expect(h.status, h.text).to.equal(201);
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) {
      const c = await editor.create(article(`cl${i}`));
      expect(c.status, c.text).to.equal(201);
      ids.push(c.json.system.id);
      const u = await editor.update(c.json.system.id, article(`cl${i} 2`), c.headers.get('etag'));
      expect(u.status, u.text).to.equal(200);
    }
    await until(async () => receiver.delivered().length >= 32, 30_000, 'every event delivered');
    const order = perContentOrder(receiver.got);
    for (const id of ids) expect(order.get(id), id).to.deep.equal([1, 2]);
    const v = new Webhook(h.json.secret);
    for (const x of receiver.got) expect((v.verify(x.body, x.headers as Record<string, string>) as { id: string }).id).to.equal(eventOf(x).id);
    const log = await admin.req('GET', `/webhooks/${h.json.id}/deliveries?status=delivered&limit=100`);
    expect(log.status).to.equal(200);
    expect(log.json.deliveries).to.have.length(32);
    const re = await admin.req('POST', `/webhooks/${h.json.id}/deliveries/${log.json.deliveries[0].id}/redeliver`);
    expect(re.status).to.equal(202);
    await until(async () => receiver.delivered().length >= 33, 10_000, 'the redelivery');
    expect((await admin.req('DELETE', `/webhooks/${h.json.id}`)).status).to.equal(204);
  });
});
