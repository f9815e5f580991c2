import { expect } from 'chai';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { bulk, exportChunks, type ExportLine as Line } from '../bulk/ndjson.js';

/**
 * Review s23c of bef950f: the lines of an export by a reader of everything (versions read with
 * the snapshots within EXPORT_STEP_BYTES, the rest after, in parts) are the lines, in the order, of
 * the two-step export (views asked for, or a caller who may not read everything), whatever the
 * sizes of the versions and heads written by older builds.
 */
describe('export: a reader of everything gets the same lines in the same order (review s23c)', function () {
  this.timeout(120_000);
  it('big and small versions, heads without h or naming an older version: editor, editor with views and sportseditor export alike', async () => {
    const redis = await startRedisServer({ appendonly: false });
    const c = await startTestPlatform({ REDIS_URL: redis.url, PARTITIONS: '1' });
    const r = new Redis(redis.url);
    try {
      const editor = await new Client(c.base).login('editor');
      const sports = await new Client(c.base).login('sportseditor');
      const content = (i: number) => ({
        system: { contentType: 'mix' },
        aspects: { body: { _type: 'body', title: i % 3 === 1 ? `big${i}`.padEnd(1_500_000, 'x') : `t${i}` } },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
      });
      const made = await bulk(
        c.base,
        editor.token!,
        Array.from({ length: 30 }, (_, i) => `${JSON.stringify({ op: 'create', content: content(i) })}\n`),
      );
      expect(made.answers.filter((l) => l.status === 201)).to.have.length(30);
      const check = async (what: string) => {
        const a = await exportChunks(c.base, editor.token!, 'types=mix');
        const b = await exportChunks(c.base, editor.token!, 'types=mix&views=svcLatest');
        const s = await exportChunks(c.base, sports.token!, 'types=mix');
        expect(a.lines, what).to.equal(30);
        expect(new Set(a.parsed.map((l) => l.id)).size, what).to.equal(30);
        const ids = (x: { parsed: Line[] }) => x.parsed.map((l) => l.id);
        expect(ids(a), `${what}: editor vs editor with views`).to.deep.equal(ids(b));
        expect(ids(a), `${what}: editor vs sportseditor`).to.deep.equal(ids(s));
        expect(a.parsed.map((l) => JSON.stringify(l))).to.deep.equal(s.parsed.map((l) => JSON.stringify(l)));
        return a;
      };
      const before = await check('as written');
      const cids = before.parsed.map((l) => l.id.replace('contentid/', ''));
      for (const cid of cids.filter((_, i) => i % 4 === 2)) await r.hdel(`ct:{0}:${cid}`, 'h');
      for (const at of [0, 5, 13]) {
        const first = before.parsed[at];
        const read = await editor.readContent(first.id);
        const updated = await editor.update(
          first.id,
          { aspects: { body: { _type: 'body', title: `changed${at}`.padEnd(at === 5 ? 2_000_000 : 10, 'y') } } },
          read.headers.get('etag'),
        );
        expect(updated.status).to.equal(200);
        await r.hset(`ct:{0}:${cids[at]}`, 'h', first.version.split(':')[2]);
      }
      await check('heads of older builds');
    } finally {
      r.disconnect();
      await c.stop();
      await redis.stop();
    }
  });
});
