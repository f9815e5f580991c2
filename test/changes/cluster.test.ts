import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.js';
import { until } from '../support/wait.js';
import { scheduleOwner, wsSession } from './feed-clients.js';

/**
 * The change feed on a 3-master Redis Cluster: its reads, the time-state scripts and retention
 * touch one slot per command (CONTRACT §13 "Valid on Redis Cluster"; a cross-slot script fails
 * with CROSSSLOT there).
 */
describe('change feed on Redis Cluster (CONTRACT §13)', function () {
  this.timeout(60_000);
  let cluster: TestRedisCluster;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;

  before(async () => {
    cluster = await startRedisCluster(3);
    p = await startTestPlatform({ REDIS_CLUSTER_NODES: cluster.nodes, LOCAL_DISPATCH: 'false' });
    c = await new Client(p.base).login('editor');
  });
  after(async () => {
    await p?.stop();
    await cluster?.stop();
  });

  it('pages, WebSocket, timestate and retention work with the partitions spread over the masters', async () => {
    const since: string = (await c.req('GET', '/changes?since=now')).json.last;
    const ws = wsSession(`${p.url.replace('http', 'ws')}/content-service/changes/ws`, { token: c.token, since });
    const on = Date.now() + 1000;
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) {
      const r = await c.create({
        system: { contentType: 'article' },
        aspects: {},
        operations:
          i === 0
            ? [
                { _type: 'svcAssignToViews', views: ['svcPublic'] },
                { _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { onTime: new Date(on).toISOString() } } } } },
              ]
            : [],
      });
      expect(r.status, r.text).to.equal(201);
      ids.push(r.json.system.id);
    }
    const got: { id: string; kind: string }[] = [];
    let cursor = since;
    await until(
      async () => {
        const r = await c.req('GET', `/changes?since=${cursor}`);
        expect(r.status, r.text).to.equal(200);
        got.push(...r.json.changes);
        cursor = r.json.last;
        return got.some((e) => e.kind === 'timestate');
      },
      10_000,
      'the timestate event',
    );
    expect(
      got
        .filter((e) => e.kind === 'create')
        .map((e) => e.id)
        .sort(),
    ).to.deep.equal([...ids].sort());
    expect(got.filter((e) => e.kind === 'timestate').map((e) => e.id)).to.deep.equal([ids[0]]);
    await until(async () => ws.messages.length >= 17, 10_000, 'the WebSocket events');
    ws.ws.close();
    await (await scheduleOwner(p)).trim(Date.now() + 1);
    expect((await c.req('GET', `/changes?since=${since}`)).status).to.equal(410);
    expect((await c.req('GET', `/changes?since=${cursor}`)).status).to.equal(200);
  });
});
