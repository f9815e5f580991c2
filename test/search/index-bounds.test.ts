import { expect } from 'chai';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { readdirSync, readFileSync } from 'node:fs';
import { pack } from '../../src/adapters/codec.js';
import type { ContentStore } from '../../src/adapters/content-store.js';
import { partitionOf } from '../../src/adapters/ids.js';
import { keys } from '../../src/adapters/redis.js';
import type { Aspects, Json } from '../../src/content/model.js';
import type { AnyJson } from '../../src/client/index.js';
import type { Client } from '../support/platform.js';
import { type IndexingPlatform, type SolrDoc, solrSelect, startIndexingPlatform } from '../support/indexing-platform.js';
import { eventually } from '../support/wait.js';

type P = IndexingPlatform;
type Answer = { status: number; json: AnyJson; text: string };

/**
 * Bounds of search documents (SECURITY.md "Index documents"), found by the hunt of 2026-11-27:
 * a content's own `*_drange` values (4,000 made the embedded Solr run out of memory), the tag
 * paths of its categorization (each entity's path repeats its parents' names: 45 KB of body
 * cost 4-5 s of Solr CPU, 194 KB a RangeError the indexer retried for ever) and its views (each
 * a field of the document and of the collection: 10,000 in one create cost 5-6 s). A write past
 * a bound is refused with 400 naming the bound and the figure, on every write path, storing
 * nothing; a content stored before the bounds is indexed held to them.
 */
describe('bounds of search documents: date ranges, tag paths, views (SECURITY.md "Index documents")', function () {
  this.timeout(300_000);
  let p: P;
  let solr: string;
  let editor: Client;
  let anon: Client;
  let store: ContentStore;
  let lines: { msg: string; [k: string]: unknown }[] = [];
  const T = `bounds${Date.now()}`;

  let own: RedisServerHandle;

  // A Redis of its own: "nothing stored" counts every head and event, and on the run's shared
  // Redis this platform's time-state schedule fires the boundaries of earlier suites' contents
  // (an event more, seen under load).
  before(async () => {
    own = await startRedisServer({ appendonly: false });
    ({ p, solr, editor, anon, store, lines } = await startIndexingPlatform({ REDIS_URL: own.url }));
  });
  after(async () => {
    await p?.stop();
    await own?.stop();
  });

  /** Straight to the engine, behind the platform's filters. */
  const select = (q: string, fl = '*') => solrSelect(solr, q, fl, 100);
  /** The one document of a version, once the index holds it. */
  const indexed = (version: string) =>
    eventually(async () => {
      const docs = await select(`id:"${version}"`);
      expect(docs, version).to.have.length(1);
      return docs[0];
    }, 30_000);

  /** Every content head and event in Redis: a refused write changes neither. */
  const stored = async () => {
    const heads = (await p.redis.keys('ct:*')).length;
    let events = 0;
    for (let i = 0; i < p.settings.PARTITIONS; i++) events += await p.redis.xlen(keys.events(i));
    return { heads, events };
  };
  /** A 400 that names the bound and the figure. */
  const refused = (r: { status: number; json?: AnyJson; error?: AnyJson }, limit: number, found: number, what: string) => {
    const body = r.error ?? r.json;
    expect(r.status, `${what}: ${JSON.stringify(body).slice(0, 300)}`).to.equal(400);
    expect(body.statusCode, what).to.equal('40000');
    expect(body.extraInfo?.limit, what).to.equal(limit);
    expect(body.extraInfo?.found, what).to.equal(found);
    expect(body.message, what).to.contain(String(limit)).and.contain(String(found));
  };
  const bulk = async (lines: unknown[]) => {
    const r = await editor.req('POST', '/bulk', {
      raw: lines.map((l) => `${JSON.stringify(l)}\n`).join(''),
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(r.status, r.text).to.equal(200);
    return r.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { status: number; error?: AnyJson });
  };
  const draftUpdate = (ws: string, id: string, body: unknown): Promise<Answer> => editor.req('PUT', `/content/workspace/${ws}/alias/${id}`, { body });

  /** `n` date ranges with millisecond ends (each up to about 2,000 cells of the engine's prefix tree). */
  const ranges = (n: number, from = 0) =>
    Array.from(
      { length: n },
      (_, i) =>
        `[2026-01-01T00:00:${String((i + from) % 60).padStart(2, '0')}.001Z TO 2026-06-01T00:00:00.${String(((i + from) % 997) + 2).padStart(3, '0')}Z]`,
    );
  /** A categorization of `n` entities in one dimension, each of its own name. */
  const flat = (n: number, dim = 'tags') => ({
    dimensions: [{ id: dim, entities: Array.from({ length: n }, (_, i) => ({ id: `${T}-e${i}`, name: `Entity ${i}` })) }],
  });
  /**
   * The hunt's 45 KB categorization: a chain of 28 entities with 1,000-character names and 900
   * leaves under it, each leaf's path repeating the whole chain (about 25 MB of paths, twice).
   */
  const chained = (leaves = 900, depth = 28, nameLength = 1000) => {
    let list: Json[] = Array.from({ length: leaves }, (_, i) => ({ name: `l${i}` }));
    for (let d = depth; d > 0; d--) list = [{ name: `${d}`.padEnd(nameLength, 'n'), entities: list }];
    return { dimensions: [{ id: 'tags', entities: list }] };
  };
  const chainedPathChars = (leaves = 900, depth = 28, nameLength = 1000) => {
    let chars = 0;
    for (let d = 1; d <= depth; d++) chars += d * nameLength + (d - 1);
    for (let i = 0; i < leaves; i++) chars += depth * nameLength + depth + `l${i}`.length;
    return chars;
  };

  describe('refused at write time with 400 naming the bound and the figure, nothing stored', () => {
    it('date ranges: more than 64 *_drange values (child documents included) on create, update in every mode, a merge joining two lists, draft create and update, and bulk lines; 64 are taken and indexed', async () => {
      const ok = await editor.create({ system: { contentType: `${T}d` }, aspects: { svcSolrDocument: { headline_s: `${T} ranges`, a_drange: ranges(40) } } });
      expect(ok.status, ok.text).to.equal(201);
      const id: string = ok.json.system.id;
      const etag = ok.headers.get('etag')!;
      const cid = id.split('/')[1];
      const before = { rev: (await store.head(cid))!.rev, stored: await stored() };
      const over = { a_drange: ranges(40), parts: [{ b_drange: ranges(20) }, { c_drange: ranges(5) }] };
      refused(await editor.create({ system: { contentType: `${T}d` }, aspects: { svcSolrDocument: over } }), 64, 65, 'create');
      refused(
        await editor.create({ system: { contentType: `${T}d` }, aspects: { svcSolrDocument: { x_drange: ranges(4000) } } }),
        64,
        4000,
        'create, the hunt',
      );
      for (const mode of ['update', 'replace', 'merge'])
        refused(await editor.update(id, { aspects: { svcSolrDocument: over } }, etag, `updateMode=${mode}`), 64, 65, mode);
      // 40 stored and 40 sent: a merge joins the lists (the content actor's check)
      refused(await editor.update(id, { aspects: { svcSolrDocument: { a_drange: ranges(40, 40) } } }, etag, 'updateMode=merge'), 64, 80, 'merge of two lists');
      refused(await editor.createDraft(`${T}ws`, { system: { contentType: `${T}d` }, aspects: { svcSolrDocument: over } }), 64, 65, 'draft create');
      refused(await draftUpdate(`${T}ws`, id, { aspects: { svcSolrDocument: over } }), 64, 65, 'draft update');
      const answers = await bulk([
        { op: 'create', content: { system: { contentType: `${T}d` }, aspects: { svcSolrDocument: over } } },
        { op: 'update', id, ifMatch: etag, content: { aspects: { svcSolrDocument: over } } },
        { op: 'update', id, ifMatch: etag, mode: 'merge', content: { aspects: { svcSolrDocument: { a_drange: ranges(40, 40) } } } },
      ]);
      for (const [i, a] of answers.entries()) refused(a, 64, i === 2 ? 80 : 65, `bulk line ${i + 1}`);
      expect({ rev: (await store.head(cid))!.rev, stored: await stored() }).to.deep.equal(before);
      expect(await p.redis.exists(keys.drafts(partitionOf(cid, p.settings.PARTITIONS), cid))).to.equal(0);

      // 64 are taken, and the engine indexes them all
      const at = await editor.update(id, { aspects: { svcSolrDocument: { a_drange: ranges(24, 40) } } }, etag, 'updateMode=merge');
      expect(at.status, at.text).to.equal(200);
      const doc = await indexed(at.json.system!.version as string);
      expect(doc.a_drange).to.have.length(64);
      expect(doc).to.not.have.property('svc_index_trimmed_ss');
    });

    it("tag paths: a categorization of more than 1,000 entities or 200,000 characters of paths (the hunt's 45 KB) on create, update, merge, drafts and bulk lines; 1,000 entities are taken and indexed", async () => {
      const huntChars = chainedPathChars();
      expect(JSON.stringify(chained()).length).to.be.within(35_000, 50_000);
      const before = await stored();
      refused(await editor.create({ system: { contentType: `${T}c` }, aspects: { svcCategorization: flat(1001) } }), 1000, 1001, 'create, 1,001 entities');
      refused(await editor.create({ system: { contentType: `${T}c` }, aspects: { svcCategorization: chained() } }), 200_000, huntChars, 'create, the hunt');
      refused(
        await editor.createDraft(`${T}ws`, { system: { contentType: `${T}c` }, aspects: { svcCategorization: chained() } }),
        200_000,
        huntChars,
        'draft create',
      );
      const answers = await bulk([{ op: 'create', content: { system: { contentType: `${T}c` }, aspects: { svcCategorization: flat(1001) } } }]);
      refused(answers[0], 1000, 1001, 'bulk create line');
      expect(await stored()).to.deep.equal(before);

      const ok = await editor.create({ system: { contentType: `${T}c` }, aspects: { body: { title: 'tagged' }, svcCategorization: flat(600) } });
      expect(ok.status, ok.text).to.equal(201);
      const id: string = ok.json.system.id;
      const etag = ok.headers.get('etag')!;
      const cid = id.split('/')[1];
      const head = { rev: (await store.head(cid))!.rev, stored: await stored() };
      for (const mode of ['update', 'replace', 'merge'])
        refused(await editor.update(id, { aspects: { svcCategorization: chained() } }, etag, `updateMode=${mode}`), 200_000, huntChars, mode);
      // 600 stored and 600 sent: a merge appends the dimension (the content actor's check)
      refused(await editor.update(id, { aspects: { svcCategorization: flat(600) } }, etag, 'updateMode=merge'), 1000, 1200, 'merge of two lists');
      refused(await draftUpdate(`${T}ws`, id, { aspects: { svcCategorization: flat(1001) } }), 1000, 1001, 'draft update');
      const lines2 = await bulk([
        { op: 'update', id, ifMatch: etag, content: { aspects: { svcCategorization: chained() } } },
        { op: 'update', id, ifMatch: etag, mode: 'merge', content: { aspects: { svcCategorization: flat(600) } } },
      ]);
      refused(lines2[0], 200_000, huntChars, 'bulk update line');
      refused(lines2[1], 1000, 1200, 'bulk merge line');
      expect({ rev: (await store.head(cid))!.rev, stored: await stored() }).to.deep.equal(head);

      // 1,000 entities are taken and indexed whole
      const at = await editor.update(id, { aspects: { svcCategorization: flat(1000) } }, etag);
      expect(at.status, at.text).to.equal(200);
      const doc = await indexed(at.json.system!.version as string);
      expect(doc.svc_tag_tags_ss).to.have.length(1000);
      expect(doc).to.not.have.property('svc_index_trimmed_ss');
    });

    it('views: 10,000 names in one create (100 operations of 100), a 51st view by update, symbolic view, PUT view, draft, promote or bulk line; 50 are taken', async () => {
      const names = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${T}${prefix}${i}`);
      const hunt = Array.from({ length: 100 }, (_, i) => ({ _type: 'svcAssignToViews', views: names(100, `h${i}-`) }));
      const before = await stored();
      refused(await editor.create({ system: { contentType: `${T}v` }, aspects: {}, operations: hunt }), 50, 10_001, 'create, the hunt');
      refused(await editor.createDraft(`${T}ws`, { system: { contentType: `${T}v` }, aspects: {}, operations: hunt }), 50, 10_001, 'draft create');
      refused((await bulk([{ op: 'create', content: { system: { contentType: `${T}v` }, aspects: {}, operations: hunt } }]))[0], 50, 10_001, 'bulk line');
      // svcLatest counts: 50 names make 51 views
      const fifty = [{ _type: 'svcAssignToViews', views: names(50, 'd') }];
      refused(await editor.createDraft(`${T}ws`, { system: { contentType: `${T}v` }, aspects: {}, operations: fifty }), 50, 51, 'draft create, 50 names');
      expect(await stored()).to.deep.equal(before);

      // svcLatest and 49 more: 50
      const ok = await editor.create({ system: { contentType: `${T}v` }, aspects: {}, operations: [{ _type: 'svcAssignToViews', views: names(49, 'v') }] });
      expect(ok.status, ok.text).to.equal(201);
      const id: string = ok.json.system.id;
      const version: string = ok.json.system.version;
      const etag = ok.headers.get('etag')!;
      const cid = id.split('/')[1];
      // a draft of it whose pending operation adds a view: stored (drafts are not indexed), refused when promoted
      const draft = await draftUpdate(`${T}ws`, id, { aspects: {}, operations: [{ _type: 'svcAssignToViews', views: [`${T}more`] }] });
      expect(draft.status, draft.text).to.equal(200);
      const head = { rev: (await store.head(cid))!.rev, stored: await stored() };
      refused(await editor.update(id, { aspects: {}, operations: [{ _type: 'svcAssignToViews', views: [`${T}more`] }] }, etag), 50, 51, 'update');
      refused(
        await editor.update(id, { aspects: {}, operations: [{ _type: 'svcAssignToSymbolicViews', views: [`${T}more`], targetView: '@svcLatest' }] }, etag),
        50,
        51,
        'symbolic',
      );
      refused(await editor.putView(`${T}more`, { version }, etag), 50, 51, 'PUT view');
      refused(await editor.promote(`${T}ws`, id), 50, 51, 'promote');
      refused(
        (await bulk([{ op: 'update', id, ifMatch: etag, content: { aspects: {}, operations: [{ _type: 'svcAssignToViews', views: [`${T}more`] }] } }]))[0],
        50,
        51,
        'bulk update line',
      );
      expect({ rev: (await store.head(cid))!.rev, stored: await stored() }).to.deep.equal(head);

      // the 50 are indexed; a view taken off makes room for another
      expect((await indexed(version)).svc_views_ss).to.have.length(50);
      expect((await editor.removeFromView(names(1, 'v')[0], id)).status).to.equal(204);
      const now = await editor.readContent(id);
      const put = await editor.putView(`${T}more`, { version }, now.headers.get('etag')!);
      expect(put.status, put.text).to.equal(200);
    });
  });

  it('a content stored before the bounds (10,000 views, 1,000 date ranges of its own, the 45 KB categorization) is indexed held to them, the public view kept; noted, logged, never retried', async () => {
    const ok = await editor.create({
      system: { contentType: `${T}old` },
      aspects: { body: { title: 'old' }, svcSolrDocument: { headline_s: `${T} stored before` } },
      operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
    });
    expect(ok.status, ok.text).to.equal(201);
    const id: string = ok.json.system.id;
    const version: string = ok.json.system.version;
    const cid = id.split('/')[1];
    await indexed(version);

    // As stored by a build without the bounds: written into Redis as the commit writes them.
    const partition = partitionOf(cid, p.settings.PARTITIONS);
    const head = (await store.head(cid))!;
    const key = head.head;
    const views: Record<string, string> = { ...head.views };
    const windows: Record<string, { onTime: string; offTime: string }> = {};
    for (let i = 0; i < 10_000; i++) {
      views[`${T}old${String(i).padStart(5, '0')}`] = key;
      // millisecond windows on a hundred of them
      if (i < 100) windows[`${T}old${String(i).padStart(5, '0')}`] = { onTime: '2026-01-01T00:00:00.001Z', offTime: '2036-06-01T00:00:00.998Z' };
    }
    const tampered = { ...head, views, meta: { ...head.meta, svcTimeState: { _type: 'svcTimeState', views: windows } } };
    await p.redis.hset(keys.content(partition, cid), 's', pack(tampered));
    const v = (await store.version(cid, key))!;
    const aspects: Aspects = {
      ...v.aspects,
      svcSolrDocument: { _type: 'svcSolrDocument', headline_s: `${T} stored before`, x_drange: ranges(1000) },
      svcCategorization: { _type: 'svcCategorization', ...chained() },
    };
    await p.redis.hset(keys.versions(partition, cid), key, pack({ ...v, aspects }));

    // Any write of it indexes it again: here a view taken off.
    const failedBefore = lines.filter((l) => l.msg.includes('indexing failed')).length;
    const pid = solrPid(solr);
    const cpu0 = pid ? cpuMs(pid) : 0;
    const t0 = Date.now();
    const off = await editor.removeFromView(`${T}old09999`, id);
    expect(off.status, off.text).to.equal(204);
    const doc = await eventually(async () => {
      const d = await indexed(version);
      expect(d.svc_index_trimmed_ss).to.deep.equal(['views', 'date-ranges', 'tags']);
      return d;
    }, 60_000);
    const took = Date.now() - t0;
    await new Promise((r) => setTimeout(r, 1000)); // the engine's commit within 500 ms
    if (pid)
      console.log(
        `      indexed in ${took} ms; the search engine spent ${cpuMs(pid) - cpu0} ms of CPU (from taking the view off until the document was searchable, plus 1 s)`,
      );

    const indexedViews = doc.svc_views_ss as string[];
    expect(indexedViews).to.have.length(50);
    expect(indexedViews).to.include.members(['svcLatest', 'svcPublic']);
    expect(Object.keys(doc).filter((k) => /^svc_timestate_.+_drange$/.test(k))).to.have.length(50);
    expect(doc.x_drange).to.have.length(64);
    const tags = doc.svc_tag_tags_ss as string[];
    expect(tags.length).to.be.at.most(1000);
    expect(tags.reduce((n, t) => n + t.length, 0)).to.be.at.most(200_000);
    // still found where it was: anonymous search on the public view
    const r = await anon.req('GET', `${p.url}/search-service/content/select?${new URLSearchParams({ q: `headline_s:"${T} stored before"` })}`, { token: null });
    expect(r.status, r.text).to.equal(200);
    expect(r.json.response.docs.map((d: SolrDoc) => d.id)).to.deep.equal([version]);
    // logged with what was left out; never retried
    const notes = lines.filter((l) => l.cid === cid && l.msg.includes('held to its bounds')).map((l) => String(l.trimmed));
    expect(notes.some((n) => n.startsWith('views: 50 of'))).to.equal(true);
    expect(notes.some((n) => n.startsWith('svcSolrDocument: 936'))).to.equal(true);
    expect(notes.some((n) => n.startsWith('svcCategorization'))).to.equal(true);
    expect(lines.filter((l) => l.msg.includes('indexing failed')).length).to.equal(failedBefore);
    expect(await p.redis.hexists(keys.indexerRefused, cid)).to.equal(0);
    // and written again it stays editable: an update that adds no view and leaves the aspects alone
    const again = await editor.update(id, { aspects: { body: { title: 'edited' } } }, null);
    expect(again.status, again.text).to.equal(200);
  });
});

/** The embedded Solr's process, found by its port (null for a Solr elsewhere, TEST_SOLR_URL). */
function solrPid(url: string): number | null {
  const port = new URL(url).port;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const args = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      const i = args.indexOf('platform.EmbeddedSolr');
      if (i >= 0 && args[i + 1] === port) return Number(d);
    } catch {
      // a process that ended meanwhile
    }
  }
  return null;
}

/** CPU (user + system) a process has used, in ms. */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}
