import { expect } from 'chai';
import { Client, startIsolatedPlatform, startTestPlatform } from '../support/platform.js';
import { redisSettled, sentByRedis } from '../support/redis-bytes.js';
import { partitionOf } from '../../src/adapters/ids.js';
import { keys, type RedisClient } from '../../src/adapters/redis.js';

/**
 * The twentieth session's review (F1, high): anonymous file delivery
 * (`GET /file-delivery-service/alias/contentid/<cid>/<path>`) read the content's whole version
 * from Redis and decoded it on every request, before it looked at the path: for a public article
 * of 8.2 MB of aspects, a 1-byte range of its one file cost 64-76 ms of CPU and 7.5 MB sent by
 * Redis, a path it does not map (404) 35-51 ms and 7.4 MB; 32 such requests at once stalled the
 * event loop 1.2 s. A sportseditor may publish such a content itself. Now what a version maps is
 * read once per version and kept (DeliveryMaps, src/gateway/file-service.ts): the requests after
 * the first cost Redis the head and the file, whatever the version holds.
 *
 * The platform has a Redis of its own, so what Redis sends is what the requests cost.
 */
describe('security: file delivery reads what a version maps, not the whole version, per request (review of the twentieth session, F1)', function () {
  this.timeout(180_000);
  const ITEMS = 95_000;
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let redis: RedisClient;
  let cid = '';
  let version = '';
  let versionBytes = 0;

  before(async () => {
    p = await startIsolatedPlatform();
    redis = p.redis;
    const sports = await new Client(p.base).login('sportseditor');
    const up = await sports.upload('content/host1/note.txt', 'hello world', 'text/plain');
    expect(up.status, up.text).to.equal(201);
    const uri = up.json.URI as string;
    // Several MB of aspects in many small objects (what makes decoding cost), on the public view.
    const r = await sports.create({
      system: { contentType: 'article' },
      aspects: {
        body: { _type: 'body', title: 'big', items: Array.from({ length: ITEMS }, (_, i) => ({ k: `value-${i}-`.padEnd(40, 'x'), n: i })) },
        svcFiles: { _type: 'svcFiles', files: { 'note.txt': { fileUri: uri, filePath: 'note.txt' } } },
      },
      operations: [
        { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } },
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
      ],
    });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    cid = (r.json.system.id as string).split('/')[1];
    version = r.json.system.version as string;
    versionBytes = await redis.hstrlen(keys.versions(partitionOf(cid, p.settings.PARTITIONS), cid), version.split(':')[2]);
    expect(versionBytes, 'the version Redis holds').to.be.above(4 * 2 ** 20);
  });
  after(async () => p?.stop());

  /** Anonymous GETs (`conc` at once), their statuses and bodies, and the bytes Redis sent for them. */
  async function anonymous(url: string, headers: Record<string, string>, n: number, conc = 1) {
    await redisSettled(redis);
    const before = await sentByRedis(redis);
    const answers: { status: number; body: string; headers: Headers }[] = [];
    for (let done = 0; done < n; done += conc) {
      answers.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(conc, n - done) }, async () => {
            const res = await fetch(url, { headers });
            return { status: res.status, body: await res.text(), headers: res.headers };
          }),
        )),
      );
    }
    return { answers, sent: (await sentByRedis(redis)) - before };
  }

  for (const [name, via] of [
    ['by alias', () => `${p.url}/file-delivery-service/alias/contentid/${cid}`],
    ['by version', () => `${p.url}/file-delivery-service/version/${version}`],
  ] as const) {
    it(`${name}: 20 anonymous requests (a 1-byte range of its file, a path it does not map) make Redis send far less than one copy of the version`, async () => {
      // The first request may read the version (once).
      const first = await anonymous(`${via()}/note.txt`, { Range: 'bytes=0-0' }, 1);
      expect(first.answers[0].status).to.equal(206);
      const ranged = await anonymous(`${via()}/note.txt`, { Range: 'bytes=0-0' }, 10);
      const missing = await anonymous(`${via()}/nothing-here`, {}, 10);
      console.log(
        `      version ${(versionBytes / 2 ** 20).toFixed(1)} MB; first request: Redis sent ${(first.sent / 2 ** 20).toFixed(2)} MB; ` +
          `10 ranges: ${(ranged.sent / 1024).toFixed(0)} KB; 10 404s: ${(missing.sent / 1024).toFixed(0)} KB`,
      );
      for (const a of ranged.answers) {
        expect(a.status).to.equal(206);
        expect(a.body).to.equal('h');
        expect(a.headers.get('content-range')).to.equal('bytes 0-0/11');
      }
      for (const a of missing.answers) expect(a.status).to.equal(404);
      expect(first.sent, 'the first request: about one copy of the version at most').to.be.below(versionBytes * 1.5);
      // Before: 20 copies of the version (over 60 MB).
      expect(ranged.sent + missing.sent, 'bytes Redis sent for the 20 requests after the first').to.be.below(2 ** 20);
    });
  }

  it('32 anonymous 404s at once, on a gateway that has not read the version yet, read it once', async () => {
    // A second gateway on the same Redis and files: nothing of the version kept yet.
    const q = await startTestPlatform({ REDIS_URL: p.settings.REDIS_URL!, FILES_DIR: p.settings.FILES_DIR }, ['web']);
    try {
      const url = `${q.url}/file-delivery-service/alias/contentid/${cid}/nothing-here`;
      const { answers, sent } = await anonymous(url, {}, 32, 32);
      for (const a of answers) expect(a.status).to.equal(404);
      console.log(`      32 at once: Redis sent ${(sent / 2 ** 20).toFixed(2)} MB`);
      expect(sent, 'one copy of the version, not 32').to.be.below(versionBytes * 2);
    } finally {
      await q.stop();
    }
  });
});
