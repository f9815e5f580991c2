import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.js';
import { until } from '../support/wait.js';
import { newWriters, runWriters, verifyWriters } from '../support/writers.js';
import { report } from '../faults/report.js';
import { fileKeyOfUri } from '../../src/security/file-access.js';
import { ASIDE_GRACE_MS } from '../../src/security/unclaimed-files.js';

/**
 * The platform on a real 3-master Redis Cluster (issue "scale-out", part 2): every command and
 * Lua script stays in one slot (keys of a content and its partition share the hash tag `{p}`),
 * and slots resharded while writes run (clients get MOVED and ASK) lose and double nothing.
 * Commands go through the streams (LOCAL_DISPATCH=false), as between separate processes.
 */
describe('Redis Cluster: 3 masters (issue scale-out)', function () {
  this.timeout(180_000);
  let cluster: TestRedisCluster;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;

  before(async () => {
    cluster = await startRedisCluster(3);
    p = await startTestPlatform({ REDIS_CLUSTER_NODES: cluster.nodes, LOCAL_DISPATCH: 'false' });
    editor = await new Client(p.base).login('editor');
  });
  after(async () => {
    await p?.stop();
    await cluster?.stop();
  });

  it('content, aliases, views and workspaces work with keys spread over the masters', async () => {
    const alias = `a${Date.now()}`;
    const c = await editor.create({ ...article('on a cluster'), operations: [{ _type: 'svcSetAlias', namespace: 'clustertest', alias }] });
    expect(c.status, c.text).to.equal(201);
    const id = c.json.system.id as string;
    expect((await editor.read(`/content/alias/${id}`)).json.aspects.body.title).to.equal('on a cluster');
    const u = await editor.req('PUT', `/content/alias/${id}`, { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
    expect(u.status, u.text).to.equal(200);
    const v = await editor.req('PUT', '/view/svcPublic', { body: { version: c.json.system.version }, headers: { 'If-Match': u.headers.get('etag')! } });
    expect(v.status, v.text).to.equal(200);
    expect((await editor.read(`/content/view/svcPublic/alias/${id}`)).json.aspects.body.title).to.equal('on a cluster');
    // a categorization's entity ids are looked up together: heads by partition, aliases in slots of their own
    const tagged = await editor.create({
      system: { contentType: 'article' },
      aspects: {
        body: { title: 'tagged' },
        svcCategorization: {
          dimensions: [
            {
              id: 'contentHierarchy.contents',
              entities: [
                { id, name: 'by id' },
                { id: `clustertest/${alias}`, name: 'by alias' },
                { id: 'contentid/nothing', name: 'none' },
              ],
            },
            { id: 'topics', entities: [{ id: 'no-such-entity', name: 'none' }] },
          ],
        },
      },
    });
    expect(tagged.status, tagged.text).to.equal(201);
    const indexing = await editor.read(`/content/alias/${tagged.json.system.id}?variant=svcIndexing`);
    expect(indexing.json.aspects.svcSolrDocument.svc_tag_id_contentHierarchy_contents_ss, indexing.text).to.deep.equal([id, `clustertest/${alias}`]);
    const ws = `ws${Date.now()}`;
    const draft = await editor.req('POST', `/content/workspace/${ws}`, { body: article('draft in a workspace') });
    expect(draft.status, draft.text).to.equal(201);
    // the listing reads the drafts' summaries and heads with one script per partition
    const listed = await editor.req('GET', `/content/workspace/${ws}`);
    expect(listed.json, listed.text).to.deep.equal({ workspaceId: ws, drafts: { [draft.json.system.id]: {} } });
    const keys = await Promise.all(cluster.servers.map(async (s) => (await fetchKeys(s.port)).length));
    for (const n of keys) expect(n, 'every master holds keys').to.be.above(0);
  });

  it('files no content claimed expire, a claimed one stays: marks, claims through the streams and the sweep in the slots of their partitions', async () => {
    const uploaded = await Promise.all(
      ['mapped.txt', 'unmapped.txt'].map(async (name) => {
        const r = await editor.upload(`content/editor/${name}`, Buffer.from(name), 'text/plain');
        expect(r.status, r.text).to.equal(201);
        return r.json.URI as string;
      }),
    );
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'maps a file' }, svcFiles: { files: { 'mapped.txt': { fileUri: uploaded[0], filePath: 'mapped.txt' } } } },
    });
    expect(c.status, c.text).to.equal(201);
    const ttl = p.settings.TMP_TTL_SECONDS * 1000;
    const past = Date.now() + ttl + 60_000;
    await p.unclaimed!.sweep(p.files!, past, ttl);
    expect(await p.unclaimed!.sweep(p.files!, past + ASIDE_GRACE_MS + 60_000, ttl)).to.equal(1);
    const [mapped, unmapped] = await Promise.all(uploaded.map((u) => p.files!.stat(fileKeyOfUri(u)!)));
    expect(mapped, 'claimed by the create').to.not.equal(null);
    expect(unmapped, 'never mapped').to.equal(null);
  });

  it('writes under load while 2,000 slots move between masters: nothing lost or applied twice', async () => {
    const writers = await newWriters(editor, 12);
    const statuses: Record<string, number> = {};
    const l = runWriters(writers, () => [{ base: p.base, token: editor.token! }], statuses);
    await until(async () => l.count() > 100, 30_000, 'load to start');
    const t = Date.now();
    await cluster.reshard(2000);
    const reshardMs = Date.now() - t;
    const before = l.count();
    await until(async () => l.count() > before + 100, 30_000, 'writes to go on after the resharding');
    await l.stop();
    const revisions = await verifyWriters(writers, editor);
    report('redis-cluster-reshard', {
      command: 'npm test -- test/cluster/redis-cluster.test.ts',
      fault: '2,000 hash slots moved from master 1 to master 2 (redis-cli --cluster reshard) under write load (12 writers, If-Match, through the streams)',
      reshardMs,
      statuses,
      revisions,
    });
    expect(
      Object.keys(statuses).every((s) => s === '200' || s === '409'),
      JSON.stringify(statuses),
    ).to.equal(true);
  });
});

async function fetchKeys(port: number): Promise<string[]> {
  const { Redis } = await import('ioredis');
  const c = new Redis(port, '127.0.0.1');
  try {
    return await c.keys('*');
  } finally {
    c.disconnect();
  }
}
