import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import sharp from 'sharp';
import type { FileDeliveryService } from '../../src/gateway/file-service.js';
import { fileKeyOfUri } from '../../src/security/file-access.js';
import { Client, startTestPlatform } from '../support/platform.js';

/** Bytes of the files under `dir` (0 when it does not exist). */
async function du(dir: string): Promise<number> {
  let n = 0;
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const e of entries) if (e.isFile()) n += (await stat(join(e.parentPath, e.name))).size;
  return n;
}

/**
 * Review s23d: kept renditions are bounded per source file (RENDITION_MAX_PER_SOURCE, 64), and
 * nothing removes them when their source goes: a DELETE of the file (its uploader, or a writer of
 * its host content), a tmp file's expiry, an unclaimed file's sweep. They are evicted only when
 * the same source is rendered again, which a deleted source never is, so they stay in the
 * rendition store and their index in Redis for good. With free parameters (no
 * RENDITION_SIGNING_KEY, the default) one source also keeps far more than itself: a 2048×2048
 * JPEG of noise (4.0 MB) made 4 PNG renditions `w=4093..4096&h=4096&fit=fill` of 181.8 MB
 * together (45 MB each; 64 would be 2.9 GB), and after the sportseditor deleted the source all
 * 181.8 MB stayed (measured 10 s after the DELETE, the eviction grace set to 0.5 s). Uploading,
 * rendering and deleting again keeps adding: the store grows without bound while the uploader
 * holds nothing.
 *
 * Fixed in the twenty-fourth session: a source's renditions go to its trash when the source is
 * deleted, on every path that deletes it (`condemnRenditions` through `FileStore.beforeDelete`: the
 * file service, the tmp sweeper, the unclaimed sweep; a tmp source's expiry, S3's lifecycle rule
 * included, through `rendition-tmp-sources`), and the index keeps only a mark that expires. This
 * test failed on the old code (all 181.8 MB left); test/renditions/rendition-sources.test.ts
 * covers each path on the disk and S3 stores.
 */
describe('security: renditions outlive their source (review s23d)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  after(async () => {
    await p?.stop();
  });

  it("a deleted source's kept renditions are removed once the grace is over", async () => {
    p = await startTestPlatform();
    const renditions = (p.gateway as unknown as { delivery: FileDeliveryService }).delivery.renditions;
    renditions.evictionGraceMs = 500;
    const sports = await new Client(p.base).login('sportseditor');
    const noise = await sharp({ create: { width: 2048, height: 2048, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 60 } } })
      .jpeg({ quality: 95 })
      .toBuffer();
    const up = await sports.req('POST', `${p.url}/file-service/file/content/sportseditor/noise.jpg`, { raw: noise, headers: { 'Content-Type': 'image/jpeg' } });
    expect(up.status, up.text).to.equal(201);
    const location = up.headers.get('location')!;
    const c = await sports.create({
      system: { contentType: 'article' },
      aspects: {
        body: { _type: 'body', title: 'noise' },
        svcFiles: { _type: 'svcFiles', files: { 'noise.jpg': { fileUri: up.json.URI, filePath: 'noise.jpg' } } },
      },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
    });
    expect(c.status, c.text).to.equal(201);
    const version = c.json.system.version as string;
    const store = join(p.settings.FILES_DIR, 'renditions');
    for (let w = 4096; w > 4092; w--) {
      const r = await sports.download(`${p.url}/file-delivery-service/version/${encodeURIComponent(version)}/noise.jpg?w=${w}&h=4096&fit=fill&fm=png`);
      expect(r.status, r.body.toString().slice(0, 200)).to.equal(200);
    }
    const kept = await du(store);
    const source = (await p.files!.stat(fileKeyOfUri(up.json.URI)!))!;
    const tag = createHash('sha256').update(`${source.storageKey}\n${source.objectId}`).digest('hex').slice(0, 32);
    expect(await p.redis.hlen(`rendition:{${tag}}`), 'four renditions in the index').to.equal(4);
    const del = await sports.req('DELETE', location);
    expect(del.status, del.text).to.equal(200);
    await new Promise((r) => setTimeout(r, 10_000));
    const left = await du(store);
    console.log(`      source ${noise.length} bytes; 4 renditions kept ${kept} bytes; 10 s after the source's DELETE ${left} bytes`);
    expect(left, 'bytes of renditions left after their source was deleted').to.be.below(kept / 100);
    // The index keeps only the mark of a deleted source (it expires); no use records, no trash.
    expect(Object.keys(await p.redis.hgetall(`rendition:{${tag}}`))).to.deep.equal(['!gone']);
    expect(await p.redis.pttl(`rendition:{${tag}}`)).to.be.above(0);
    expect(await p.redis.exists(`rendition-lru:{${tag}}`, `rendition-trash:{${tag}}`)).to.equal(0);
  });
});
