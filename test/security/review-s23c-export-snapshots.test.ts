import { expect } from 'chai';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { bulk, exportChunks } from '../bulk/ndjson.js';

/**
 * Review s23c of bd77d2c (EXPORT_STEP_BYTES): an export step read the versions it writes 4 MiB at
 * a time, but the snapshots of its 500 contents, which the renderer must see to choose, in one
 * reply whatever they weighed; a content's metadata holds up to 256 Ki characters (and its own
 * aspects 64 Ki each), so a step could be some 200 MB. Measured on that code: 500 culture
 * contents of 250 KB of metadata (one partition); one sportseditor export, which answers nothing,
 * made Redis send 138 MB in one reply (1.7 s), four at once 500 MB (3.9 s) and the process's
 * RSS peak 784 MB higher; Redis held up to 308 MB of replies for the gateway at once. Now the snapshots too are read EXPORT_STEP_BYTES at a time (at least
 * one content): what Redis sends is the same, what it and the gateway hold at once is not.
 */
describe('security: an export reads the snapshots of a step EXPORT_STEP_BYTES at a time (review s23c)', function () {
  this.timeout(300_000);
  it('four sportseditor exports over 500 culture contents of 250 KB of metadata: Redis holds a few parts of 4 MiB at once, not the steps, the same (empty) answers', async () => {
    const redis = await startRedisServer({ appendonly: false });
    const c = await startTestPlatform({ REDIS_URL: redis.url, PARTITIONS: '1' });
    const r = new Redis(redis.url);
    try {
      const editor = await new Client(c.base).login('editor');
      const sports = await new Client(c.base).login('sportseditor');
      const content = (i: number) => ({
        system: { contentType: 'heavy' },
        aspects: { body: { _type: 'body', title: `t${i}` } },
        operations: [
          { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] }, pad: { _type: 'pad', x: `${i}`.padEnd(250_000, 'x') } } },
        ],
      });
      for (let k = 0; k < 5; k++) {
        const made = await bulk(
          c.base,
          editor.token!,
          Array.from({ length: 100 }, (_, i) => `${JSON.stringify({ op: 'create', content: content(k * 100 + i) })}\n`),
        );
        expect(made.answers.filter((l) => l.status === 201)).to.have.length(100);
      }
      const stat = async (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(await r.info())![1]);
      const sent0 = await stat('total_net_output_bytes');
      const four = await Promise.all(Array.from({ length: 4 }, () => exportChunks(c.base, sports.token!, '')));
      const most = await stat('client_recent_max_output_buffer');
      const sent = (await stat('total_net_output_bytes')) - sent0;
      expect(four.map((f) => f.lines)).to.deep.equal([0, 0, 0, 0]);
      expect(sent, 'Redis still sends every snapshot (the renderer chooses)').to.be.above(400e6);
      expect(most, `the largest reply Redis held (${(most / 1e6).toFixed(1)} MB; ${(sent / 1e6).toFixed(0)} MB sent)`).to.be.below(32e6); // four exports' parts of 4 MiB, on one connection
      // the editor still exports all 500, in parts
      expect((await exportChunks(c.base, editor.token!, 'types=heavy')).lines).to.equal(500);
    } finally {
      r.disconnect();
      await c.stop();
      await redis.stop();
    }
  });
});
