import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import type * as Minio from 'minio';
import sharp from 'sharp';
import { fileKeyOf, type FileStore, type StoredFile } from '../../src/adapters/file-store.js';
import type { FileDeliveryService } from '../../src/gateway/file-service.js';
import { condemnRenditions } from '../../src/gateway/renditions.js';
import { fileKeyOfUri } from '../../src/security/file-access.js';
import { ASIDE_GRACE_MS } from '../../src/security/unclaimed-files.js';
import { sleep } from '../../src/wait.js';
import { Client, startIsolatedPlatform, startTestPlatform } from '../support/platform.js';
import { startRedisCluster, type TestRedisCluster } from '../support/redis-cluster.js';
import { ensureTestS3 } from '../support/s3.js';

/**
 * A source's kept renditions (their files in the rendition store, their index in Redis) go when
 * the source is deleted, on every path that deletes it (SECURITY.md, "Renditions of deleted
 * sources"; review s23d, test/security/review-s23d-rendition-orphans.test.ts): the file
 * service's DELETE, the tmp sweeper, a tmp file's expiry that no code of ours sees (S3's
 * lifecycle rule), the unclaimed-files sweep; a render in flight when its source goes keeps
 * nothing; a process that stops once it has condemned them leaves them to another's sweep. On
 * the disk and S3 stores, and on a Redis Cluster.
 * On the old code every case left every rendition and its index entry.
 */
const STORES = { disk: 'disk store', s3: 'S3 store', cluster: 'disk store, 3-master Redis Cluster' } as const;
for (const kind of ['disk', 's3', 'cluster'] as const) {
  describe(`renditions go with their source, on every path that deletes it (${STORES[kind]})`, function () {
    this.timeout(180_000);
    let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
    let cluster: TestRedisCluster | undefined;
    let editor: Client;

    before(async () => {
      if (kind === 's3') p = await startIsolatedPlatform({ ...(await ensureTestS3()).env, S3_BUCKET: `rsources-${Date.now().toString(36)}` });
      else if (kind === 'disk') p = await startIsolatedPlatform();
      else {
        // Every command and script of a source's renditions stays in one slot (CROSSSLOT otherwise).
        cluster = await startRedisCluster(3);
        p = await startTestPlatform({ REDIS_CLUSTER_NODES: cluster.nodes });
      }
      editor = await new Client(p.base).login('editor');
      renditions().evictionGraceMs = 500;
    });
    after(async () => {
      await p?.stop();
      await cluster?.stop();
    });

    const renditions = () => (p.gateway as unknown as { delivery: FileDeliveryService }).delivery.renditions;
    const tagOf = (f: StoredFile) => createHash('sha256').update(`${f.storageKey}\n${f.objectId}`).digest('hex').slice(0, 32);
    const keysOf = (tag: string) => ({ index: `rendition:{${tag}}`, lru: `rendition-lru:{${tag}}`, trash: `rendition-trash:{${tag}}` });

    async function png(): Promise<Buffer> {
      return sharp({ create: { width: 300, height: 200, channels: 3, background: { r: 10, g: 200, b: 30 } } })
        .png()
        .toBuffer();
    }
    /** Uploads a PNG to `where` (`content/<host>/<path>`, `tmp`, ...): its stored file. */
    async function upload(where: string): Promise<StoredFile> {
      const r = await editor.upload(where, await png(), 'image/png');
      expect(r.status, r.text).to.equal(201);
      return (await p.files!.stat(fileKeyOfUri(r.json.URI)!))!;
    }
    /** Makes three renditions of `source` (as a delivery read does): the index entries it kept (id → stored path). */
    async function render(source: StoredFile): Promise<Record<string, string>> {
      for (const w of [40, 50, 60]) await renditions().renditionOf(source, { fit: 'inside', w }, 'png', 'user:editor');
      const kept = await p.redis.hgetall(keysOf(tagOf(source)).index);
      expect(Object.keys(kept), 'three kept').to.have.length(3);
      for (const [id, path] of Object.entries(kept)) expect(await stored(id, path), 'kept in the rendition store').to.equal(true);
      return kept;
    }
    async function stored(id: string, path: string): Promise<boolean> {
      const store: FileStore = await renditions().store();
      return (await store.stat(fileKeyOf('content', id, path))) !== null;
    }
    /**
     * Waits (at most 10 s) until the renditions `kept` of `source` are gone from the rendition
     * store, their trash swept and the source out of the sweep: what is left in Redis is the index's
     * `!gone` mark, which expires by itself.
     */
    async function expectGone(source: StoredFile, kept: Record<string, string>): Promise<void> {
      const tag = tagOf(source);
      const k = keysOf(tag);
      const left = async () => {
        let n = 0;
        for (const [id, path] of Object.entries(kept)) if (await stored(id, path)) n++;
        return n + (await p.redis.zcard(k.trash)) + ((await p.redis.zscore('rendition-trash-sources', tag)) === null ? 0 : 1);
      };
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && (await left()) > 0) await sleep(100);
      for (const [id, path] of Object.entries(kept)) expect(await stored(id, path), `rendition ${id} removed from the store`).to.equal(false);
      expect(await p.redis.zcard(k.trash), 'the trash swept').to.equal(0);
      expect(await p.redis.zscore('rendition-trash-sources', tag), 'the source out of the sweep').to.equal(null);
      expect(await p.redis.exists(k.lru), 'no use records').to.equal(0);
      expect(Object.keys(await p.redis.hgetall(k.index)), 'the index holds only the mark').to.deep.equal(['!gone']);
      const ttl = await p.redis.pttl(k.index);
      expect(ttl, 'the mark expires').to.be.within(1, 3600_000);
      expect(await p.redis.zscore('rendition-tmp-sources', tag), 'not left as a tmp source').to.equal(null);
    }

    it("the file service's DELETE of a content file: its renditions (made by delivery reads) go", async () => {
      const r = await editor.upload('content/owner/del.png', await png(), 'image/png');
      expect(r.status, r.text).to.equal(201);
      const c = await editor.create({
        system: { contentType: 'article' },
        aspects: { body: { title: 'pictures' }, svcFiles: { files: { 'del.png': { fileUri: r.json.URI, filePath: 'del.png' } } } },
      });
      expect(c.status, c.text).to.equal(201);
      const version = c.json.system.version as string;
      for (const w of [40, 50, 60]) {
        const d = await editor.download(`${p.url}/file-delivery-service/version/${encodeURIComponent(version)}/del.png?w=${w}&fm=png`);
        expect(d.status, d.body.toString()).to.equal(200);
      }
      const source = (await p.files!.stat(fileKeyOfUri(r.json.URI)!))!;
      const kept = await p.redis.hgetall(keysOf(tagOf(source)).index);
      expect(Object.keys(kept)).to.have.length(3);
      const del = await editor.deleteFile(`content/owner/${source.key.path}`);
      expect(del.status, del.text).to.equal(200);
      await expectGone(source, kept);
      const again = await editor.download(`${p.url}/file-delivery-service/version/${encodeURIComponent(version)}/del.png?w=40&fm=png`);
      expect(again.status, 'the source is gone').to.equal(404);
    });

    it("the tmp sweeper's removal of an expired tmp file: its renditions go", async () => {
      const source = await upload('tmp');
      const kept = await render(source);
      const ttl = p.settings.TMP_TTL_SECONDS * 1000;
      expect(await p.files!.sweepExpired(Date.now() + ttl + 1000)).to.be.at.least(1);
      expect(await p.files!.stat(source.key), 'the source swept').to.equal(null);
      await expectGone(source, kept);
    });

    it('a tmp file past its TTL that no code of ours removes (S3 lifecycle rule): its renditions go when the TTL is over', async () => {
      const source = await upload('tmp');
      const kept = await render(source);
      const tag = tagOf(source);
      expect(await p.redis.zscore('rendition-tmp-sources', tag), 'registered as a tmp source, by its upload time').to.equal(String(source.creationTime));
      // The object goes behind the store's back, as S3's lifecycle rule removes it.
      if (kind === 's3') {
        const s3 = p.files as unknown as { client: Minio.Client; bucket: string };
        await s3.client.removeObject(s3.bucket, source.storageKey);
      } else {
        const dir = join(p.settings.FILES_DIR, 'tmp', source.key.host);
        await rm(join(dir, `${source.objectId}.json`));
        await rm(join(dir, `${source.objectId}.data`));
      }
      await sleep(1500);
      for (const [id, path] of Object.entries(kept)) expect(await stored(id, path), 'kept while the TTL is not over').to.equal(true);
      // The TTL is over (the renditions' sweeper reads it on each pass; the settings refuse under a minute).
      const r = renditions() as unknown as { d: { settings: typeof p.settings } };
      const settings = r.d.settings;
      r.d.settings = { ...settings, TMP_TTL_SECONDS: 1 };
      try {
        await expectGone(source, kept);
      } finally {
        r.d.settings = settings;
      }
    });

    it('the unclaimed-files sweep of a file no write mapped: its renditions go', async () => {
      // No content maps it (a write that did would have claimed it): rendered directly.
      const source = await upload(`content/no-such-host-${Date.now().toString(36)}/orphan.png`);
      const kept = await render(source);
      const ttl = p.settings.TMP_TTL_SECONDS * 1000;
      const past = Date.now() + ttl + 60_000;
      await p.unclaimed!.sweep(p.files!, past, ttl);
      await p.unclaimed!.sweep(p.files!, past + ASIDE_GRACE_MS + 60_000, ttl);
      expect(await p.files!.stat(source.key), 'the source swept').to.equal(null);
      await expectGone(source, kept);
    });

    it('a render in flight when its source is deleted keeps nothing: it is answered, and its file goes with the trash', async () => {
      const source = await upload('content/owner/inflight.png');
      const kept = await render(source);
      // The delete's first step (before the source goes); the render below read the source before it went.
      await condemnRenditions(p.redis, source.key);
      const late = await renditions().renditionOf(source, { fit: 'inside', w: 70 }, 'png', 'user:editor');
      expect(late.length).to.be.above(0);
      const id = late.key.host;
      expect(await p.redis.hget(keysOf(tagOf(source)).index, id), 'not named by the index').to.equal(null);
      expect(await p.files!.delete(source.key)).to.equal(true);
      await expectGone(source, { ...kept, [id]: late.key.path });
    });

    it('what a process that stops right after condemning the renditions leaves (the source not yet deleted): the periodic sweep removes them', async () => {
      const source = await upload('content/owner/crash.png');
      const kept = await render(source);
      // What the first step leaves when the process dies right after it: condemned, the source not yet deleted.
      await condemnRenditions(p.redis, source.key);
      expect(await p.files!.stat(source.key), 'the source is still there').to.not.equal(null);
      await expectGone(source, kept);
      // The source, still there, is rendered when asked (answered, not kept while the mark lasts).
      const again = await renditions().renditionOf(source, { fit: 'inside', w: 40 }, 'png', 'user:editor');
      expect(again.length).to.be.above(0);
    });
  });
}
