import { expect } from 'chai';
import { Redis } from 'ioredis';
import { Client, startIsolatedPlatform } from '../support/platform.js';

/**
 * The fifteenth session's security review: the file-reference check of a write (`readableFileUris`, run by the gateway
 * BEFORE the actor checks Create/Update) reads and decodes the whole head version of the host
 * content once per distinct URI (`fileAccess` -> `headMaps` -> `store.version`), all at once
 * (Promise.all), for every URI naming a file uploaded to that content before it existed (a
 * draft's files). A reader, who may write nothing, sends one small create whose `svcFiles` names
 * such files many times (two spellings per file, `content://h/p` and `content:h/p`): the gateway
 * pulls the multi-megabyte version from Redis once per URI and decodes each copy, then the actor
 * answers 403. The safe behaviour: the work of a refused write does not grow with the size of
 * another content's version times the URIs named (a version read once per content at most).
 */
describe("security: a write's svcFiles check reads each host's version at most once (review 15)", function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let redisUrl = '';

  before(async () => {
    p = await startIsolatedPlatform();
    redisUrl = p.settings.REDIS_URL ?? '';
  });
  after(async () => p?.stop());

  it("a reader's refused create naming 40 early files of a 4 MB content makes Redis send about one copy of it, not 40", async () => {
    const editor = await new Client(p.base).login('editor');
    const reader = await new Client(p.base).login('reader');
    // A draft of new content: its key is known before the content exists, so files uploaded to
    // content/<key>/ now are older than the content (the ordinary draft-with-files workflow).
    const d = await editor.createDraft('w', { system: { contentType: 'article' }, aspects: { body: { title: 'draft' } } });
    expect(d.status, d.text).to.equal(201);
    const cid = d.json.system!.id!.split('/')[1];
    const FILES = 20;
    const uris: string[] = [];
    for (let i = 0; i < FILES; i++) {
      const u = await editor.upload(`content/${cid}/f${i}.txt`, `file ${i}`, 'text/plain');
      expect(u.status, u.text).to.equal(201);
      const uri = u.json.URI as string; // content://<cid>/<object id>/f<i>.txt
      uris.push(uri, uri.replace('content://', 'content:'));
    }
    // Its version is large (4 MB of aspects): promoted, the content exists with those early files.
    const big = await editor.updateDraft('w', `contentid/${cid}`, { aspects: { body: { title: 'big', filler: 'x'.repeat(4 * 1024 * 1024) } } });
    expect(big.status, big.text).to.equal(200);
    const pr = await editor.promote('w', `contentid/${cid}`);
    expect(pr.status, pr.text).to.equal(200);

    const redis = new Redis(redisUrl);

    const sent = async () => Number(/total_net_output_bytes:(\d+)/.exec(await redis.info('stats'))![1]);
    try {
      const files = Object.fromEntries(uris.map((u, i) => [`p${i}`, { fileUri: u, filePath: `p${i}` }]));
      const body = { system: { contentType: 'article' }, aspects: { body: { title: 't' }, svcFiles: { files } } };
      const size = JSON.stringify(body).length;
      const before = await sent();
      const cpu0 = process.cpuUsage();
      const rss0 = process.memoryUsage().rss;
      let peak = rss0;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
      const r = await reader.create(body);
      clearInterval(sampler);
      const cpu = process.cpuUsage(cpu0);
      const out = (await sent()) - before;
      console.log(
        `      request ${size} B -> ${r.status}; Redis sent ${(out / 1e6).toFixed(1)} MB; process CPU ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s; RSS +${((peak - rss0) / 1e6).toFixed(0)} MB at peak`,
      );
      expect(r.status, r.text).to.equal(403); // the reader may create nothing
      // Safe: a refused write reads at most about one copy of the host's version (4 MB), not one per URI.
      expect(out, 'bytes Redis sent for one refused create').to.be.below(12 * 1024 * 1024);
    } finally {
      await redis.quit();
    }
  });
});
