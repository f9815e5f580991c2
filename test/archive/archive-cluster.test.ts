import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.js';

/**
 * The version archive on Redis Cluster (issue 25): the archiver's reads (MULTI), its fenced move
 * (archive-move-8.lua) and the readers' history reads touch one partition's slot each, so they
 * run on a three-master cluster; archived history then reads as before through a fresh gateway.
 */
describe('version archive on Redis Cluster (issue 25)', function () {
  this.timeout(120_000);
  let cluster: TestRedisCluster;
  let dir: string;
  let env: Record<string, string>;

  before(async () => {
    cluster = await startRedisCluster(3);
    dir = mkdtempSync(join(tmpdir(), 'test-archive-cluster-'));
    env = {
      REDIS_CLUSTER_NODES: cluster.nodes,
      LOCAL_DISPATCH: 'false',
      FILES_DIR: dir,
      ARCHIVE_KEEP_REVISIONS: '1',
      ARCHIVE_AFTER_DAYS: '3650',
      ARCHIVE_INTERVAL_SECONDS: '86400',
    };
  });
  after(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('moves old history on a cluster and answers every read of it as before', async () => {
    const a = await startTestPlatform(env, ['web', 'actors', 'archiver']);
    const ids: { id: string; versions: string[]; revs: number }[] = [];
    let before: string[];
    try {
      const editor = await new Client(a.base).login('editor');
      for (let i = 0; i < 8; i++) {
        const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: `c${i}` } } });
        expect(c.status, c.text).to.equal(201);
        const m = { id: c.json.system!.id as string, versions: [c.json.system!.version as string], revs: 1 };
        let etag = c.headers.get('etag')!;
        for (let v = 1; v < 3; v++) {
          const u = await editor.update(m.id, { system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: `c${i} v${v}` } } }, etag);
          expect(u.status, u.text).to.equal(200);
          m.versions.push(u.json.system!.version as string);
          etag = u.headers.get('etag')!;
          m.revs++;
        }
        ids.push(m);
      }
      before = await readAll(editor, ids);
      expect(before.filter((r) => r.startsWith('200 '))).to.have.length(before.length);
      const stats = await a.archiver!.runOnce();
      expect(stats.failed).to.equal(0);
      expect(stats.moved).to.equal(ids.length);
      expect(stats.versions).to.equal(ids.length * 2);
    } finally {
      await a.stop();
    }
    const b = await startTestPlatform(env, ['web']);
    try {
      expect(await readAll(await new Client(b.base).login('editor'), ids)).to.deep.equal(before);
    } finally {
      await b.stop();
    }
  });
});

async function readAll(c: Client, ids: { id: string; versions: string[]; revs: number }[]): Promise<string[]> {
  const out: string[] = [];
  for (const m of ids) {
    for (let rev = 1; rev <= m.revs; rev++) {
      for (const kind of ['', '/metadata', '/history']) {
        const r = await c.req('GET', `/content/alias/${m.id}/${rev}${kind}`);
        out.push(`${r.status} ${r.text}`);
      }
    }
    const r = await c.req('GET', `/content/alias/${m.id}/compare?from=${encodeURIComponent(m.versions[0])}&to=${encodeURIComponent(m.versions[1])}`);
    out.push(`${r.status} ${r.text}`);
  }
  return out;
}
