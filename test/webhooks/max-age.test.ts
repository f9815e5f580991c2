import { expect } from 'chai';
import { article, Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { eventOf, Receiver } from './receiver.js';

/**
 * CONTRACT §14 "Retries" and "Log": a delivery past WEBHOOK_MAX_AGE_HOURS is `failed`, its last
 * status and (at most 1 KB of) the answer in the log; the content's next event goes after it; a
 * redelivery sends it again; /metrics counts the outcomes.
 */
describe('webhooks: failed past the maximum age, redelivered (CONTRACT §14)', function () {
  this.timeout(30_000);
  let platform: Awaited<ReturnType<typeof startTestPlatform>>;
  let receiver: Receiver;
  let admin: Client;
  let hookId = '';

  before(async () => {
    platform = await startTestPlatform({
      WEBHOOK_ALLOW_PRIVATE: 'true',
      // 5.4 s: the first event's retries (every 200-400 ms) run out while the receiver refuses it;
      // long enough that a fan-out late on a loaded machine still leaves it more than one attempt.
      WEBHOOK_MAX_AGE_HOURS: '0.0015',
      WEBHOOK_RETRY_BASE_MS: '200',
      WEBHOOK_RETRY_MAX_MS: '400',
    });
    admin = await new Client(platform.base).login('sysadmin');
  });
  after(async () => {
    if (hookId) await admin.req('DELETE', `/webhooks/${hookId}`);
    await receiver?.stop();
    await platform?.stop();
  });

  it('failed after the maximum age; the next event of the content goes; redeliver sends it again', async () => {
    let refuseRevision1 = true;
    receiver = await new Receiver((body) => (refuseRevision1 && eventOf({ body }).revision === 1 ? 500 : 200)).start();
    const h = await admin.req('POST', '/webhooks', { body: { url: receiver.url } });
    hookId = h.json.id;
    const editor = await new Client(platform.base).login('editor');
    const c = await editor.create(article('aging'));
    const id: string = c.json.system.id;
    const u = await editor.update(id, article('aging 2'), c.headers.get('etag'));
    expect(u.status).to.equal(200);
    const mine = () => receiver.got.filter((x) => eventOf(x).id === id);
    await until(async () => mine().some((x) => eventOf(x).revision === 2), 15_000, 'revision 2 after revision 1 failed');
    // Revision 2 came only after revision 1's last attempt.
    const firstOf2 = mine().findIndex((x) => eventOf(x).revision === 2);
    expect(
      mine()
        .slice(firstOf2)
        .every((x) => eventOf(x).revision === 2),
    ).to.equal(true);
    expect(firstOf2).to.be.greaterThan(1);
    const failed = await admin.req('GET', `/webhooks/${hookId}/deliveries?status=failed`);
    expect(failed.json.deliveries).to.have.length(1);
    const d = failed.json.deliveries[0];
    expect(d).to.include({ status: 'failed', lastStatus: 500, nextAttempt: null });
    expect(d.attempts).to.equal(firstOf2);
    expect(d.lastError).to.match(/^HTTP 500: x+$/);
    expect(d.lastError.length).to.be.at.most(1024);
    // Each process adds its counts to Redis once a second.
    const count = (text: string, outcome: string) => Number(new RegExp(`webhook_deliveries_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    await until(
      async () => {
        const m = (await new Client(platform.base).metrics()).text;
        return count(m, 'failed') > 0 && count(m, 'retried') > 0 && count(m, 'delivered') > 0;
      },
      5000,
      'the outcomes in /metrics',
    );

    refuseRevision1 = false;
    const before = mine().length;
    expect((await admin.req('POST', `/webhooks/${hookId}/deliveries/${d.id}/redeliver`)).status).to.equal(202);
    await until(async () => mine().length > before && mine()[mine().length - 1].status === 200, 10_000, 'the redelivery');
    expect(eventOf(mine()[mine().length - 1]).revision).to.equal(1);
    await until(
      async () => (await admin.req('GET', `/webhooks/${hookId}/deliveries?status=failed`)).json.deliveries.length === 0,
      5000,
      'the failed delivery to be delivered',
    );
    const all = await admin.req('GET', `/webhooks/${hookId}/deliveries`);
    expect(all.json.deliveries.map((x: { status: string }) => x.status)).to.deep.equal(['delivered', 'delivered']);
  });
});
