import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.js';
import { until } from '../support/wait.js';
import { auditWriters, newWriters, runWriters } from '../support/writers.js';
import { report } from './report.js';

/**
 * A Redis Cluster master killed (kill -9) under write load; its replica takes over (issue
 * "scale-out", part 2: "a master failover with a replica"). 3 masters with one replica each,
 * cluster-node-timeout 1 s, the platform on REDIS_CLUSTER_NODES with every command through the
 * streams. Redis replicates asynchronously, so a write the dead master acknowledged in its last
 * moments may not have reached the replica: what is lost must be the tail of what it
 * acknowledged before the kill (how long before is reported, not asserted). Nothing is ever
 * applied twice, and writes go on once the replica serves.
 */
describe('fault: a Redis Cluster master killed under load, its replica promoted', function () {
  this.timeout(240_000);
  const NODE_TIMEOUT_MS = 1000;
  let cluster: TestRedisCluster;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;

  before(async () => {
    cluster = await startRedisCluster(3, { replicas: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });
    p = await startTestPlatform({ REDIS_CLUSTER_NODES: cluster.nodes, LOCAL_DISPATCH: 'false', ACTOR_REPLY_TIMEOUT_MS: '3000' });
  });
  after(async () => {
    await p?.stop();
    await cluster?.stop();
  });

  it('loses at most what the dead master acknowledged just before the kill, applies nothing twice, and recovers', async () => {
    const editor = await new Client(p.base).login('editor');
    const writers = await newWriters(editor, 12);
    const statuses: Record<string, number> = {};
    const events: { at: number; what: string }[] = [];
    const l = runWriters(writers, () => [{ base: p.base, token: editor.token! }], statuses, events);
    await until(async () => l.count() > 300, 30_000, 'load to start');

    const [victim] = await cluster.masters();
    const killedAt = Date.now();
    victim.kill9();
    await victim.exited;
    await until(
      async () => {
        const masters = await cluster.masters();
        return masters.length === 3 && !masters.includes(victim) && (await cluster.healthy());
      },
      60_000,
      'a replica to take the dead master over',
    );
    const promotedAt = Date.now();
    const before = l.count();
    await until(async () => l.count() > before + 300, 60_000, 'writes to go on after the failover').catch((e: Error) => {
      throw new Error(`${e.message}; clients saw ${JSON.stringify(statuses)}`);
    });
    await l.stop();

    const firstOk = events.find((e) => e.at > promotedAt && e.what === '200')?.at ?? NaN;
    const during: Record<string, number> = {};
    for (const e of events) if (e.at >= killedAt && e.at < promotedAt) during[e.what] = (during[e.what] ?? 0) + 1;
    const { markers, lost } = await auditWriters(writers, editor);
    for (const w of writers) {
      const sent = new Set([...w.acked.map((a) => a.marker), ...w.unknown]);
      for (const m of markers.get(w)!) expect(sent.has(m), `${w.id}: revision marker ${m} was sent`).to.equal(true);
    }
    const acknowledged = writers.reduce((s, w) => s + w.acked.length, 0);
    const oldestLostBeforeKill = lost.length ? Math.max(...lost.map((x) => killedAt - x.at)) : 0;
    report('redis-cluster-failover', {
      command: 'npm run test:faults',
      fault: `a master of a 3-master Redis Cluster with one replica each killed -9 under write load (12 writers, If-Match, through the streams), cluster-node-timeout ${NODE_TIMEOUT_MS} ms`,
      msToReplicaPromoted: promotedAt - killedAt,
      clientsSawUntilPromoted: during,
      msFromPromotionToFirstWrite: firstOk - promotedAt,
      statuses,
      acknowledged,
      acknowledgedLost: lost.length,
      lostWereAcknowledgedWithinMsBeforeKill: oldestLostBeforeKill,
    });
    // Asynchronous replication loses only the tail of what the dead master acknowledged: nothing
    // acknowledged after the promotion, and per content (sequential writes with If-Match, each
    // replicated after the one before) no write survives that came after a lost one. How long
    // before the kill the lost writes were acknowledged is a figure, reported above.
    expect(
      lost.filter((x) => x.at >= promotedAt).map((x) => x.marker),
      'writes acknowledged after the promotion and lost',
    ).to.deep.equal([]);
    for (const w of writers) {
      const lostOfW = new Set(lost.filter((x) => x.w === w).map((x) => x.marker));
      const beforePromotion = w.acked.filter((a) => a.at < promotedAt).map((a) => lostOfW.has(a.marker));
      const firstLost = beforePromotion.indexOf(true);
      if (firstLost >= 0) expect(beforePromotion.slice(firstLost), `${w.id}: a write acknowledged after a lost one survived`).to.not.include(false);
    }
    expect(
      Object.keys(statuses).filter((s) => !['200', '409', '503', 'read 503', 'connection error'].includes(s)),
      JSON.stringify(statuses),
    ).to.deep.equal([]);
    expect(firstOk, 'a write succeeded after the promotion').to.be.a('number').and.not.NaN;
  });
});
