import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { Fleet } from '../../src/fleet.js';
import { article, Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { eventOf, perContentOrder, Receiver } from './receiver.js';

type Platform = Awaited<ReturnType<typeof startTestPlatform>>;

/**
 * CONTRACT §14 "at least once" across a kill: two webhooks processes (the Procfile role, as
 * separate processes) share the deliveries; one is killed (kill -9) in the middle of a burst of
 * commits. The receiver still gets every event, each revision of each content in order.
 */
describe('webhooks: a webhooks process killed mid-burst loses nothing (CONTRACT §14)', function () {
  this.timeout(90_000);
  let platform: Platform;
  let fleet: Fleet;
  let dir: string;
  let receiver: Receiver;
  let admin: Client;
  let hookId = '';

  before(async () => {
    // web and actors here; the webhooks role only in the fleet's processes.
    platform = await startTestPlatform({ WEBHOOK_ALLOW_PRIVATE: 'true' }, ['web', 'actors']);
    admin = await new Client(platform.base).login('sysadmin');
    // Slow enough that deliveries are in flight when the process dies.
    receiver = await new Receiver(() => 204).start();
    dir = mkdtempSync(join(tmpdir(), 'test-webhooks-faults-'));
    fleet = new Fleet({
      env: {
        REDIS_URL: process.env.REDIS_URL,
        FILES_DIR: dir,
        PARTITIONS: '8',
        LOG_LEVEL: 'warn',
        NODE_ENV: 'test',
        SOLR_URL: '',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_TIMEOUT_MS: '2000',
        WEBHOOK_RETRY_BASE_MS: '300',
        WEBHOOK_RETRY_MAX_MS: '1000',
        NODE_OPTIONS: '--import tsx',
      },
      basePort: 0,
      entry: 'src/main.ts',
      output: (name, line) => process.env.TEST_LOG && console.log(name, line),
    });
    fleet.add('webhooks');
    fleet.add('webhooks');
  });
  after(async () => {
    if (hookId) await admin.req('DELETE', `/webhooks/${hookId}`);
    await fleet?.stopAll();
    await receiver?.stop();
    await platform?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every event of the burst arrives, in order per content, signed', async () => {
    const h = await admin.req('POST', '/webhooks', { body: { url: receiver.url } });
    expect(h.status, h.text).to.equal(201);
    hookId = h.json.id;
    // Both processes share the partitions before the burst (heartbeats every second).
    await until(async () => (await platform.redis.zcard('webhooks:members')) >= 2, 30_000, 'both webhooks processes');
    const editor = await new Client(platform.base).login('editor');
    const contents = 20;
    const revisions = 12;
    let killed = false;
    const expected = contents * revisions;
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: contents }, async (_, i) => {
        const c = await editor.create(article(`k${i}`));
        expect(c.status, c.text).to.equal(201);
        const id: string = c.json.system.id;
        ids.push(id);
        let etag = c.headers.get('etag')!;
        for (let u = 1; u < revisions; u++) {
          const r = await editor.update(id, article(`k${i} ${u}`), etag);
          expect(r.status, r.text).to.equal(200);
          etag = r.headers.get('etag')!;
          if (!killed && receiver.delivered().length > expected / 4) {
            killed = true;
            await fleet.kill(fleet.processes.find((p) => p.role === 'webhooks')!);
          }
        }
      }),
    );
    expect(killed, 'a webhooks process was killed during the burst').to.equal(true);
    const mine = (x: { body: string }) => ids.includes(eventOf(x).id);
    const distinct = () =>
      new Set(
        receiver
          .delivered()
          .filter(mine)
          .map((x) => x.headers['webhook-id']),
      ).size;
    await until(async () => distinct() >= expected, 45_000, `all ${expected} events (got ${distinct()})`);
    const order = perContentOrder(receiver.got.filter(mine));
    const want = Array.from({ length: revisions }, (_, i) => i + 1);
    for (const id of ids) {
      // At least once: a delivery in flight when its process died may come twice, never out of order.
      expect([...new Set(order.get(id))], id).to.deep.equal(want);
    }
    const verifier = new Webhook(h.json.secret);
    for (const x of receiver.got.filter(mine)) verifier.verify(x.body, x.headers as Record<string, string>);
  });
});
