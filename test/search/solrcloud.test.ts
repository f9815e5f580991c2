import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import { loadSettings } from '../../config/settings.js';
import { javaAndMavenAvailable, startSolr, type SolrHandle } from '../../src/dev/solr-server.js';
import { startPlatform } from '../../src/main.js';
import { Client } from '../support/platform.js';
import { eventually } from '../support/wait.js';
import { checked } from '../support/openapi-check.js';

/**
 * SolrCloud mode (issue "search", README "SolrCloud"): the platform pointed at one node of a
 * two-node SolrCloud (embedded ZooKeeper, `content` collection in two shards from the same
 * configset, tools/solr EmbeddedSolrCloud), as a deployment points SOLR_URL at a node. Documents
 * spread over both shards, every change ends up searchable through either node, updates and
 * deletes remove stale documents whatever shard holds them, child documents live in their
 * parent's shard, permissions filter, and a full re-index completes.
 */
describe('search on SolrCloud: two nodes, two shards (README "SolrCloud")', function () {
  this.timeout(240_000);
  let solr: SolrHandle;
  let dir: string;
  let p: Awaited<ReturnType<typeof startPlatform>>;
  let editor: Client;
  let sysadmin: Client;
  let anon: Client;
  let search: string;
  const lines: string[] = [];
  const T = `cloud${Date.now()}`;

  before(async function () {
    if (process.env.TEST_SOLR_URL) return this.skip(); // the tests were pointed at a Solr of someone else's
    if (!javaAndMavenAvailable()) throw new Error('The SolrCloud test needs Java 17 and Maven');
    dir = mkdtempSync(join(tmpdir(), 'test-solrcloud-'));
    solr = await startSolr({ dataDir: dir, cloud: { nodes: 2, shards: 2 }, log: (m) => console.log(`[test setup] ${m}`) });
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l).msg);
        cb();
      },
    });
    const settings = loadSettings({ ...process.env, PORT: '0', PARTITIONS: '8', LEASE_MS: '2000', SOLR_URL: solr.nodes[0] });
    p = checked(await startPlatform({ settings, log: pino({ level: 'info' }, sink) }));
    const base = `${p.url}/content-service`;
    search = `${p.url}/search-service/content/select`;
    editor = await new Client(base).login('editor');
    sysadmin = await new Client(base).login('sysadmin');
    anon = new Client(base);
  });
  after(async () => {
    await p?.stop();
    await solr?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function create(title: string, type: string, ops: unknown[] = [], aspects: Record<string, unknown> = {}) {
    const r = await editor.create({ system: { contentType: type }, aspects: { body: { title }, ...aspects }, operations: ops });
    expect(r.status, r.text).to.equal(201);
    return { id: r.json.system.id as string, version: r.json.system.version as string, etag: r.headers.get('etag')! };
  }
  const ids = async (c: Client, q: string) => {
    const r = await c.req('GET', `${search}?${new URLSearchParams({ q, rows: '500', fl: 'id' })}`);
    expect(r.status, r.text).to.equal(200);
    return (r.json.response.docs as { id: string }[]).map((d) => d.id).sort();
  };
  /** Straight to a node: per-shard counts of a query (`shards.info`; the proxy refuses `shards*`). */
  const perShard = async (node: string, q: string) => {
    const r = (await (await fetch(`${node}/content/select?${new URLSearchParams({ q, rows: '0', 'shards.info': 'true', wt: 'json' })}`)).json()) as {
      response: { numFound: number };
      'shards.info': Record<string, { numFound: number }>;
    };
    return { total: r.response.numFound, shards: Object.values(r['shards.info']).map((s) => s.numFound) };
  };

  it('indexes through one node; documents spread over both shards and are found through either node', async () => {
    const made = [];
    for (let i = 0; i < 20; i++) made.push(await create(`doc ${i}`, `${T}a`));
    const want = made.map((c) => c.version).sort();
    await eventually(async () => expect(await ids(editor, `svc_type_s:${T}a`)).to.deep.equal(want), 10_000);
    for (const node of solr.nodes) {
      const counts = await perShard(node, `svc_type_s:${T}a`);
      expect(counts.total).to.equal(20);
      expect(counts.shards).to.have.length(2);
      for (const n of counts.shards) expect(n, 'each shard holds some').to.be.above(0);
    }
  });

  it('an update and a delete remove the stale documents from whatever shard holds them', async () => {
    const c = await create('v1', `${T}b`);
    await eventually(async () => expect(await ids(editor, `svc_type_s:${T}b`)).to.deep.equal([c.version]), 10_000);
    const u = await editor.req('PUT', `/content/alias/${c.id}`, { body: { aspects: { body: { title: 'v2' } } }, headers: { 'If-Match': c.etag } });
    expect(u.status, u.text).to.equal(200);
    await eventually(async () => expect(await ids(editor, `svc_type_s:${T}b`)).to.deep.equal([u.json.system.version]), 10_000);
    await editor.req('DELETE', `/content/alias/${c.id}`, { headers: { 'If-Match': u.headers.get('etag')! } });
    await eventually(async () => expect(await ids(editor, `svc_type_s:${T}b`)).to.deep.equal([]), 10_000);
  });

  it("child documents live in their parent's shard and go with it", async () => {
    const c = await create('parent', `${T}c`, [], { svcSolrDocument: { parts: [{ part_s: 'one' }, { part_s: 'two' }] } });
    const node = solr.nodes[1];
    await eventually(async () => {
      const r = (await (
        await fetch(`${node}/content/select?${new URLSearchParams({ q: `id:${JSON.stringify(c.version)}`, fl: '*,[child]', wt: 'json' })}`)
      ).json()) as {
        response: { docs: { parts?: { id: string }[] }[] };
      };
      expect(r.response.docs).to.have.length(1);
      expect((r.response.docs[0].parts ?? []).map((d) => d.id).sort()).to.deep.equal([`${c.version}/parts/0`, `${c.version}/parts/1`]);
    }, 10_000);
    // the children are in the parent's shard: a block join on one shard finds them
    const counts = await perShard(node, `part_s:*`);
    expect(counts.total).to.equal(2);
    expect(counts.shards.filter((n) => n > 0)).to.deep.equal([2]);
    await editor.req('DELETE', `/content/alias/${c.id}`, { headers: { 'If-Match': c.etag } });
    await eventually(async () => expect((await perShard(node, `part_s:*`)).total).to.equal(0), 10_000);
  });

  it('permission filters apply: anonymous callers see public content only', async () => {
    const pub = await create('public', `${T}d`, [{ _type: 'svcAssignToViews', views: ['svcPublic'] }]);
    const priv = await create('private', `${T}d`);
    // one document per version: the public version is on svcLatest and svcPublic
    await eventually(async () => expect(await ids(editor, `svc_type_s:${T}d`)).to.deep.equal([pub.version, priv.version].sort()), 10_000);
    const seen = await ids(anon, `svc_type_s:${T}d`);
    expect(seen).to.deep.equal([pub.version]);
    expect(seen).to.not.include(priv.version);
  });

  it('a full re-index session completes against SolrCloud', async () => {
    const before = await ids(sysadmin, `svc_type_s:${T}a`);
    const r = await sysadmin.req('POST', '/index/reindex/full');
    expect(r.status, r.text).to.equal(200);
    const session = /session (\S+)/.exec(r.text)?.[1];
    await eventually(
      async () =>
        expect(
          lines.some((l) => l.startsWith(`Re-indexing session ${session} complete.`)),
          lines.join('\n'),
        ).to.equal(true),
      30_000,
    );
    expect(await ids(sysadmin, `svc_type_s:${T}a`)).to.deep.equal(before);
  });
});
