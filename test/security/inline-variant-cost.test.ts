import { expect } from 'chai';
import { startFakeSolr, type FakeSolr } from '../support/fake-solr.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';
import { redisSettled, sentByRedis } from '../support/redis-bytes.js';
import { backfillHeadD, headDMarker } from '../../src/actors/head-d-backfill.js';

/**
 * Finding H4 (the eighteenth session's second review): the indexing variant's categorization
 * composer asks, for each `contentHierarchy.contents` entity of a content, whether that content
 * exists (`taxonomyContentOf` → `resolveContentRefs`), and the answer was found by reading and
 * decoding the whole head of every content named. Any content key can be named, so an anonymous
 * `inlineData=true&variant=svcIndexing` search over 20 public contents naming 500 contents of
 * 32 KB made Redis send 331.5 MB for a 1.15 MB answer (0.5 MB without the variant). Now the commit
 * keeps `d` beside each head and `ContentStore.liveContents` reads only that (live-heads-n.lua);
 * heads an older build committed get theirs once, when an actor process starts
 * (src/actors/head-d-backfill.ts).
 *
 * A sportseditor makes TARGETS contents with heads of about PAD bytes (a padded metadata aspect;
 * they need not be public), deletes one, and CARRIERS public contents each categorized under all
 * of them and a key that names nothing. The engine is the fake Solr answering the carriers' ids,
 * as Solr would answer an anonymous `q=*:*`; the platform has a Redis of its own, so what Redis
 * sends is what the search costs.
 */
describe('security: inlined content in the svcIndexing variant costs Redis what the results hold, not what they name (H4)', function () {
  this.timeout(300_000);
  const TARGETS = 100;
  const CARRIERS = 10;
  const PAD = 32 * 1024;
  const NOWHERE = 'NOSUCHCONTENTKEY0';
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let fake: FakeSolr;
  const targets: string[] = [];
  let deleted = '';

  before(async () => {
    let etag = '';
    fake = await startFakeSolr();
    p = await startIsolatedPlatform({ SOLR_URL: fake.url });
    const sports = await new Client(p.base).login('sportseditor');
    for (let i = 0; i < TARGETS; i += 10) {
      const made = await Promise.all(
        Array.from({ length: Math.min(10, TARGETS - i) }, async (_, k) => {
          const r = await sports.create({
            system: { contentType: 'article' },
            aspects: { body: { _type: 'body', title: `t${i + k}` } },
            operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] }, pad: { _type: 'pad', x: 'x'.repeat(PAD) } } }],
          });
          expect(r.status, r.text.slice(0, 300)).to.equal(201);
          return [r.json.system.id as string, r.headers.get('etag')!] as const;
        }),
      );
      if (!i) etag = made[0][1];
      targets.push(...made.map(([id]) => id));
    }
    deleted = targets[0];
    const gone = await sports.remove(deleted, etag);
    expect(gone.status, gone.text.slice(0, 300)).to.equal(204);
    const named = [...targets.map((id) => id.split('/')[1]), NOWHERE];
    const categorization = {
      dimensions: [{ id: 'contentHierarchy.contents', entities: named.map((key, i) => ({ id: `contentid/${key}`, name: `n${i}` })) }],
    };
    const carriers: string[] = [];
    for (let i = 0; i < CARRIERS; i++) {
      const r = await sports.create({
        system: { contentType: 'article' },
        aspects: { body: { _type: 'body', title: `carrier ${i}` }, svcCategorization: categorization },
        operations: [
          { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } },
          { _type: 'svcAssignToViews', views: ['svcPublic'] },
        ],
      });
      expect(r.status, r.text.slice(0, 300)).to.equal(201);
      carriers.push(r.json.system.version as string);
    }
    fake.docs = carriers.map((id) => ({ id }));
  });
  after(async () => {
    await p?.stop();
    await fake?.close();
  });

  const search = async (query: string) => {
    await redisSettled(p.redis);
    const before = await sentByRedis(p.redis);
    const r = await fetch(`${p.url}/search-service/content/select?${query}`);
    const text = await r.text();
    return { status: r.status, text, redis: (await sentByRedis(p.redis)) - before };
  };

  it('the search sends a small multiple of what it sends without the variant, far less than the named heads (before: every head, CARRIERS × TARGETS × PAD)', async () => {
    const q = 'q=*:*&rows=1000&fl=id&inlineData=true';
    const plain = await search(q);
    const indexing = await search(`${q}&variant=svcIndexing`);
    console.log(
      `      Redis sent ${(plain.redis / 1e3).toFixed(0)} KB without the variant, ${(indexing.redis / 1e3).toFixed(0)} KB with it (answer ${(indexing.text.length / 1e3).toFixed(0)} KB; named heads ${((TARGETS * PAD) / 1e6).toFixed(1)} MB per result)`,
    );
    expect(plain.status).to.equal(200);
    expect(indexing.status).to.equal(200);
    expect(indexing.redis, 'bytes Redis sent with the variant').to.be.below(2 * plain.redis + 64 * 1024);
    expect(indexing.redis, 'bytes Redis sent with the variant').to.be.below((TARGETS * PAD) / 10);

    expectTheTags(indexing.text);
  });

  it('heads an older build committed (no d) cost their snapshots again, until the backfill an actor process runs as it starts writes their d: then the same bound and tags', async () => {
    const q = 'q=*:*&rows=1000&fl=id&inlineData=true';
    // What a deployment upgraded from an older build holds: heads without d.
    const heads: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await p.redis.scan(cursor, 'MATCH', 'ct:*', 'COUNT', 1000);
      heads.push(...found);
      cursor = next;
    } while (cursor !== '0');
    for (const h of heads) expect(await p.redis.hdel(h, 'd')).to.equal(1);
    const plain = await search(q);
    const before = await search(`${q}&variant=svcIndexing`);
    expect(before.redis, 'bytes Redis sent for heads without d: every named head').to.be.above(CARRIERS * TARGETS * PAD * 0.9);
    expectTheTags(before.text);

    // This platform's actors went through their partitions as they started, on an empty Redis, and
    // marked them; the first start after an upgrade finds them unmarked.
    const partitions = Array.from({ length: p.settings.PARTITIONS }, (_, k) => k);
    for (const k of partitions) await p.redis.del(headDMarker(k));
    const counts = await backfillHeadD(p.redis, partitions);
    const after = await search(`${q}&variant=svcIndexing`);
    console.log(
      `      heads without d: Redis sent ${(before.redis / 1e6).toFixed(1)} MB with the variant; after the backfill (${counts.ms} ms) ${(after.redis / 1e3).toFixed(0)} KB (${(plain.redis / 1e3).toFixed(0)} KB without it)`,
    );
    expect(after.status).to.equal(200);
    expect(after.redis, 'bytes Redis sent with the variant').to.be.below(2 * plain.redis + 64 * 1024);
    expect(after.redis, 'bytes Redis sent with the variant').to.be.below((TARGETS * PAD) / 10);
    expectTheTags(after.text);
    expect(counts.written.live + counts.written.deleted).to.equal(heads.length);
    expect(counts.written.deleted).to.equal(1);
  });

  /** The same answers as before: every live content named has content, the deleted one and a key naming nothing do not. */
  function expectTheTags(text: string): void {
    const docs = (JSON.parse(text) as { response: { docs: { _content: { aspects: { svcSolrDocument: Record<string, unknown> } } }[] } }).response.docs;
    expect(docs).to.have.length(CARRIERS);
    const live = targets.slice(1).map((id) => id.split('/')[1]);
    for (const d of docs) {
      const doc = d._content.aspects.svcSolrDocument;
      const field = Object.keys(doc).find((k) => k.startsWith('svc_tag_id_'));
      expect(field, Object.keys(doc).join(',')).to.be.a('string');
      const ids = (doc[field!] as string[]).join('\n');
      for (const key of live) expect(ids).to.include(key);
      expect(ids).not.to.include(deleted.split('/')[1]);
      expect(ids).not.to.include(NOWHERE);
    }
  }
});
