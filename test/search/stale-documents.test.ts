import { expect } from 'chai';
import { pino } from 'pino';
import { IndexWriter } from '../../src/actors/index-writer.js';
import { newContentKey, partitionOf } from '../../src/adapters/ids.js';
import { connectRedis, keys, type RedisClient } from '../../src/adapters/redis.js';
import { type ContentDocs, type SearchDoc, SolrEngine } from '../../src/adapters/search-engine.js';
import { type IndexingPlatform, solrSelect, startIndexingPlatform } from '../support/indexing-platform.js';
import type { Client } from '../support/platform.js';
import { startRedisCluster } from '../support/redis-cluster.js';
import { eventually } from '../support/wait.js';

/**
 * The index holds exactly a content's documents now, also when a write follows the last
 * indexing within the soft commit (`commitWithin`, 500 ms). Before, the indexer looked up a
 * content's documents with a search, which sees only what a soft commit made searchable: a
 * content deleted, taken off its view or given a new version within half a second kept its old
 * document in the index for good (found by the hunt "one read rule on every path": anonymous
 * searches found deleted content, and replaced public versions, by their text). Then a
 * delete-by-query per batch; now the indexer deletes by id the documents it recorded sending
 * (`ixd:{p}`): the cases below hold it to that record through crashes, failures, contents
 * indexed before records were kept and two writers at once.
 */
describe('stale search documents: a write right after indexing leaves no old document behind (SECURITY.md "Index documents")', function () {
  this.timeout(120_000);
  let p: IndexingPlatform;
  let solr: string;
  let editor: Client;
  let anon: Client;
  const T = `stale${Date.now()}`;

  before(async () => {
    ({ p, solr, editor, anon } = await startIndexingPlatform());
  });
  after(async () => p?.stop());

  const solrIds = async (q: string): Promise<string[]> => (await solrSelect(solr, q, 'id')).map((d) => d.id);
  const anonFinds = async (q: string): Promise<number> => {
    const r = await anon.req('GET', `${p.url}/search-service/content/select?${new URLSearchParams({ q, rows: '0' })}`, { token: null });
    expect(r.status, r.text).to.equal(200);
    return r.json.response.numFound as number;
  };
  const publicContent = (title: string) => ({
    system: { contentType: T },
    aspects: { body: { title }, svcSolrDocument: { title_s: title } },
    operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
  });

  it('contents deleted, and public versions replaced by a new public version, 0-300 ms after they were written: the index holds none of the old documents', async () => {
    const gone: string[] = [];
    const replaced: { old: string; now: string }[] = [];
    for (const gap of [0, 30, 100, 200, 300]) {
      const a = await editor.create(publicContent(`${T} deleted ${gap}`));
      expect(a.status, a.text).to.equal(201);
      const b = await editor.create(publicContent(`${T} old ${gap}`));
      expect(b.status, b.text).to.equal(201);
      // The first indexing of both, then the next write within the soft commit.
      await eventually(async () => expect(await solrIds(`title_s:"${T} old ${gap}" OR title_s:"${T} deleted ${gap}"`)).to.have.length(2), 20_000);
      await new Promise((r) => setTimeout(r, gap));
      expect((await editor.remove(a.json.system.id, a.headers.get('etag')!)).status).to.equal(204);
      const u = await editor.update(b.json.system.id, publicContent(`${T} new ${gap}`), b.headers.get('etag'));
      expect(u.status, u.text).to.equal(200);
      gone.push(`${T} deleted ${gap}`);
      replaced.push({ old: `${T} old ${gap}`, now: `${T} new ${gap}` });
    }
    // The new versions indexed, and a soft commit and more after them.
    for (const { now } of replaced) await eventually(async () => expect(await solrIds(`title_s:"${now}"`)).to.have.length(1), 20_000);
    await new Promise((r) => setTimeout(r, 1500));
    for (const title of gone) {
      expect(await solrIds(`title_s:"${title}"`), title).to.deep.equal([]);
      expect(await anonFinds(`title_s:"${title}"`), `anonymous search for ${title}`).to.equal(0);
    }
    for (const { old } of replaced) {
      expect(await solrIds(`title_s:"${old}"`), old).to.deep.equal([]);
      expect(await anonFinds(`title_s:"${old}"`), `anonymous search for ${old}`).to.equal(0);
    }
  });

  // ---- the record of what the indexer sent (src/actors/index-writer.ts) ----

  /** The record of a content: the root ids kept (null: no record) and the writers in flight. */
  const recordOf = async (cid: string, redis: RedisClient = p.redis): Promise<{ k: string[]; w?: Record<string, unknown> } | null> => {
    const raw = await redis.hget(keys.indexedDocs(partitionOf(cid, p.settings.PARTITIONS)), cid);
    if (raw === null) return null;
    const rec = JSON.parse(raw) as { k: string[] | Record<string, never>; w?: Record<string, unknown> };
    return { ...rec, k: Array.isArray(rec.k) ? rec.k : [] };
  };
  /** Every document of a content in the engine (roots and children), made searchable first. */
  const docsIn = async (cid: string): Promise<string[]> => {
    await new SolrEngine(solr, 'content').commit();
    return (await solrIds(`id:c\\:${cid}\\:*`)).sort();
  };
  /** A root document of content `cid`, version `key`, with one child document. */
  const doc = (cid: string, key: string): SearchDoc => {
    const id = `c:${cid}:${key}`;
    return {
      id,
      root: id,
      svc_type_s: `${T}w`,
      svc_views_ss: ['svcLatest', 'svcPublic'],
      title_s: `${T} ${key}`,
      parts: [{ id: `${id}/parts/0`, root: id, part_s: key }],
    };
  };
  const block = (cid: string, key: string) => [`c:${cid}:${key}`, `c:${cid}:${key}/parts/0`];
  const silent = pino({ level: 'silent' });
  const writerOf = (engine: ConstructorParameters<typeof IndexWriter>[0] = new SolrEngine(solr, 'content'), leaseMs?: number) =>
    new IndexWriter(engine, p.redis, p.settings.PARTITIONS, silent, leaseMs);
  /** An engine whose `method` throws after reaching the engine (`after`) or before (`before`): a process dying there. */
  const dyingAt = (method: 'remove' | 'add' | 'deleteStale', when: 'before' | 'after') => {
    const real = new SolrEngine(solr, 'content');
    const engine = {
      add: real.add.bind(real),
      remove: real.remove.bind(real),
      deleteStale: real.deleteStale.bind(real),
    };
    engine[method] = async (arg: never) => {
      if (when === 'after') await real[method](arg);
      throw new Error(`the indexer died ${when} ${method}`);
    };
    return engine;
  };

  it('a content updated ten times within 500 ms, then deleted: none of its documents is found, and its record leaves Redis; one updated as often keeps only its last version', async () => {
    const a = await editor.create(publicContent(`${T} burst-gone 0`));
    expect(a.status, a.text).to.equal(201);
    const b = await editor.create(publicContent(`${T} burst-kept 0`));
    expect(b.status, b.text).to.equal(201);
    let [etagA, etagB] = [a.headers.get('etag')!, b.headers.get('etag')!];
    const t0 = Date.now();
    for (let i = 1; i <= 10; i++) {
      const ua = await editor.update(a.json.system.id, publicContent(`${T} burst-gone ${i}`), etagA);
      expect(ua.status, ua.text).to.equal(200);
      etagA = ua.headers.get('etag')!;
      const ub = await editor.update(b.json.system.id, publicContent(`${T} burst-kept ${i}`), etagB);
      expect(ub.status, ub.text).to.equal(200);
      etagB = ub.headers.get('etag')!;
    }
    expect((await editor.remove(a.json.system.id, etagA)).status).to.equal(204);
    console.log(`      20 updates and a delete in ${Date.now() - t0} ms`);
    const [cidA, cidB] = [a.json.system.id.split('/')[1], b.json.system.id.split('/')[1]];
    const last = (await editor.readContent(b.json.system.id)).json.system!.version as string;
    await eventually(async () => expect(await recordOf(cidA), 'the deleted content leaves no record').to.equal(null), 20_000);
    await eventually(async () => expect(await recordOf(cidB)).to.deep.equal({ k: [last.split(':')[2]] }), 20_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await docsIn(cidA)).to.deep.equal([]);
    expect(await docsIn(cidB)).to.deep.equal([last]);
    for (let i = 0; i <= 10; i++) {
      expect(await anonFinds(`title_s:"${T} burst-gone ${i}"`), `burst-gone ${i}`).to.equal(0);
      expect(await anonFinds(`title_s:"${T} burst-kept ${i}"`), `burst-kept ${i}`).to.equal(i === 10 ? 1 : 0);
    }
  });

  it('an indexer dying after it recorded a batch, before the engine took anything: the next write deletes what the record kept', async () => {
    const cid = newContentKey();
    await writerOf().write([{ cid, docs: [doc(cid, 'v1')], firstRevision: true }]);
    expect(await recordOf(cid)).to.deep.equal({ k: ['v1'] });
    // A lease of 1.5 s instead of 10 minutes, so that the test can outlive it.
    let failed = await writerOf(dyingAt('remove', 'before'), 1500)
      .write([{ cid, docs: [doc(cid, 'v2')] }])
      .catch((e: Error) => e);
    const died = Date.now();
    expect(String(failed)).to.contain('died before remove');
    expect((await recordOf(cid))!.k, 'recorded before anything was sent').to.have.members(['v1', 'v2']);
    // Another process takes the events over; the content has moved on meanwhile.
    await writerOf().write([{ cid, docs: [doc(cid, 'v3')] }]);
    expect(await docsIn(cid)).to.deep.equal(block(cid, 'v3'));
    // While the dead writer's claim stands (until its lease ends) the record keeps more than the index, never less.
    expect((await recordOf(cid))!.k).to.include('v3');

    // Dying right after the engine took the documents, with a short lease.
    failed = await writerOf(dyingAt('add', 'after'), 300)
      .write([{ cid, docs: [doc(cid, 'v4')] }])
      .catch((e: Error) => e);
    expect(String(failed)).to.contain('died after add');
    expect(await docsIn(cid)).to.deep.equal(block(cid, 'v4'));
    expect((await recordOf(cid))!.k).to.include('v4');
    // The content is deleted; past the dead writers' leases the one writer left shrinks the record to nothing.
    await new Promise((r) => setTimeout(r, Math.max(400, died + 1600 - Date.now())));
    await writerOf().write([{ cid, docs: [], gone: true }]);
    expect(await docsIn(cid)).to.deep.equal([]);
    expect(await recordOf(cid)).to.equal(null);
  });

  it('an engine failing mid-batch (it answered: nothing more can land), then the batch retried: no stale document, the record exact', async () => {
    const cids = [newContentKey(), newContentKey(), newContentKey()];
    const writer = writerOf();
    await writer.write(cids.map((cid) => ({ cid, docs: [doc(cid, 'v1')], firstRevision: true })));
    // The stale ones deleted, then the adds answered 404 (a collection the engine does not have).
    const real = new SolrEngine(solr, 'content');
    const missing = new SolrEngine(solr, `${T}missing`);
    const failing = { remove: real.remove.bind(real), deleteStale: real.deleteStale.bind(real), add: missing.add.bind(missing) };
    const batch: ContentDocs[] = [
      { cid: cids[0], docs: [doc(cids[0], 'v2')] },
      { cid: cids[1], docs: [], gone: true },
      { cid: cids[2], docs: [doc(cids[2], 'v1'), doc(cids[2], 'v2')] },
    ];
    const failed = await writerOf(failing)
      .write(batch)
      .catch((e: Error) => e);
    expect(String(failed)).to.contain('404');
    expect(await docsIn(cids[0])).to.deep.equal([]);
    // The claim was released (the engine answered): the retry alone on these contents makes the record exact.
    expect((await recordOf(cids[0]))!.w).to.equal(undefined);
    await writer.write(batch);
    expect(await docsIn(cids[0])).to.deep.equal(block(cids[0], 'v2'));
    expect(await docsIn(cids[1])).to.deep.equal([]);
    expect(await docsIn(cids[2])).to.deep.equal([...block(cids[2], 'v1'), ...block(cids[2], 'v2')].sort());
    expect(await recordOf(cids[0])).to.deep.equal({ k: ['v2'] });
    expect(await recordOf(cids[1])).to.equal(null);
    expect((await recordOf(cids[2]))!.k).to.have.members(['v1', 'v2']);
  });

  it('a content indexed before records were kept (none in Redis) has its stale documents deleted by one query, then is recorded', async () => {
    const cid = newContentKey();
    const other = newContentKey();
    // What the indexer of an earlier release left: v1 (stale since v2, kept by the search-then-delete bug), v2.
    await new SolrEngine(solr, 'content').add([doc(cid, 'v1'), doc(cid, 'v2'), doc(other, 'v1')]);
    // The first try dies before its query: the record made by its claim must not stand for a swept one.
    const failed = await writerOf(dyingAt('deleteStale', 'before'), 300)
      .write([{ cid, docs: [doc(cid, 'v3')] }])
      .catch((e: Error) => e);
    expect(String(failed)).to.contain('died before deleteStale');
    await writerOf().write([{ cid, docs: [doc(cid, 'v3')] }]);
    expect(await docsIn(cid)).to.deep.equal(block(cid, 'v3'));
    await new Promise((r) => setTimeout(r, 400));
    await writerOf().write([{ cid, docs: [doc(cid, 'v3')] }]);
    expect(await recordOf(cid)).to.deep.equal({ k: ['v3'] });
    expect(await docsIn(other), 'another content is untouched').to.deep.equal(block(other, 'v1'));
    // A content on its first revision has nothing older: its one version is kept.
    await writerOf().write([{ cid: other, docs: [doc(other, 'v1')], firstRevision: true }]);
    expect(await docsIn(other)).to.deep.equal(block(other, 'v1'));
    // Deleted: nothing in the engine, nothing in Redis; deleted again (a re-index), still nothing.
    for (let i = 0; i < 2; i++) {
      await writerOf().write([{ cid, docs: [], gone: true }]);
      expect(await docsIn(cid)).to.deep.equal([]);
      expect(await recordOf(cid)).to.equal(null);
    }
    // A live content with no documents (off every indexed view) keeps an empty record: no query next time.
    await writerOf().write([{ cid: other, docs: [] }]);
    expect(await docsIn(other)).to.deep.equal([]);
    expect(await recordOf(other)).to.deep.equal({ k: [] });
  });

  it("two writers on one content at once (the slower one's documents reach the engine after the other deleted them): the record keeps both, and the deletion removes both", async () => {
    const cid = newContentKey();
    await writerOf().write([{ cid, docs: [doc(cid, 'v1')], firstRevision: true }]);
    // Writer A claims v2, then waits before its add; writer B claims v3, deletes v1 and v2, adds v3.
    const real = new SolrEngine(solr, 'content');
    let claimed!: () => void;
    const aClaimed = new Promise<void>((r) => (claimed = r));
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const slow = {
      deleteStale: real.deleteStale.bind(real),
      remove: async (ids: string[]) => {
        await real.remove(ids);
        claimed();
      },
      add: async (docs: SearchDoc[]) => {
        await gate;
        await real.add(docs);
      },
    };
    const a = writerOf(slow).write([{ cid, docs: [doc(cid, 'v2')] }]);
    await aClaimed;
    await writerOf().write([{ cid, docs: [doc(cid, 'v3')] }]);
    open();
    await a;
    // The index holds both (the engine took v2 last); the record must name both.
    expect(await docsIn(cid)).to.deep.equal([...block(cid, 'v2'), ...block(cid, 'v3')].sort());
    expect((await recordOf(cid))!.k).to.include.members(['v2', 'v3']);
    expect((await recordOf(cid))!.w).to.equal(undefined);
    await writerOf().write([{ cid, docs: [], gone: true }]);
    expect(await docsIn(cid)).to.deep.equal([]);
    expect(await recordOf(cid)).to.equal(null);
  });
  it('on Redis Cluster (a script stays in one slot): a batch over every partition is recorded, updated and deleted exactly, one script call a partition', async function () {
    this.timeout(180_000);
    const cluster = await startRedisCluster(3);
    const redis = connectRedis({ REDIS_URL: '', REDIS_CLUSTER_NODES: cluster.nodes }, { name: 'stale-documents-cluster', log: silent });
    try {
      const P = p.settings.PARTITIONS;
      const cids = Array.from({ length: 40 }, () => newContentKey());
      const partitions = new Set(cids.map((cid) => partitionOf(cid, P)));
      expect(partitions.size, 'the batch spans partitions').to.be.greaterThan(4);
      const writer = new IndexWriter(new SolrEngine(solr, 'content'), redis, P, silent);
      await writer.write(cids.map((cid) => ({ cid, docs: [doc(cid, 'v1')], firstRevision: true })));
      for (const cid of cids) expect(await recordOf(cid, redis), cid).to.deep.equal({ k: ['v1'] });
      await writer.write(cids.map((cid, i) => (i % 2 ? { cid, docs: [], gone: true } : { cid, docs: [doc(cid, 'v2')] })));
      for (const [i, cid] of cids.entries()) {
        expect(await docsIn(cid), cid).to.deep.equal(i % 2 ? [] : block(cid, 'v2'));
        expect(await recordOf(cid, redis), cid).to.deep.equal(i % 2 ? null : { k: ['v2'] });
      }
    } finally {
      redis.disconnect();
      await cluster.stop();
    }
  });
});
