import { expect } from 'chai';
import { pino } from 'pino';
import type { ContentStore } from '../../src/adapters/content-store.js';
import { newCommandId, newContentKey, partitionOf } from '../../src/adapters/ids.js';
import { keys } from '../../src/adapters/redis.js';
import { Mailbox } from '../../src/actors/mailbox.js';
import { IndexWriter } from '../../src/actors/index-writer.js';
import { SolrEngine } from '../../src/adapters/search-engine.js';
import type { ContentCommand } from '../../src/actors/content/content-actor.js';
import { Client } from '../support/platform.js';
import type { AnyJson } from '../../src/client/index.js';
import { type IndexingPlatform, type SolrDoc, solrSelect, startIndexingPlatform } from '../support/indexing-platform.js';
import { eventually } from '../support/wait.js';

type P = IndexingPlatform;

/**
 * CONTRACT §20 "Search documents": the indexer owns id, root, version and every svc_ field, on
 * the root document and on children, and derives child ids; a svcSolrDocument the schema does
 * not accept is refused at write time with 400 naming the field; a document the engine still
 * refuses is set aside (dead letter, metric, /health degraded) and never stops the others.
 */
describe("search documents: the indexer's fields, the write-time schema check, documents the engine refuses (CONTRACT §20)", function () {
  this.timeout(300_000);
  let p: P;
  let solr: string;
  let editor: Client;
  let anon: Client;
  let store: ContentStore;
  let lines: { msg: string; [k: string]: unknown }[] = [];
  const T = `poison${Date.now()}`;

  before(async () => {
    ({ p, solr, editor, anon, store, lines } = await startIndexingPlatform());
  });
  after(async () => p?.stop());

  /** Straight to the engine, behind the platform's filters. */
  const select = (q: string, fl = '*') => solrSelect(solr, q, fl, 2000);
  async function solrCount(q: string): Promise<number> {
    const r = await fetch(`${solr}/content/select?${new URLSearchParams({ q, rows: '0', wt: 'json' })}`);
    return ((await r.json()) as { response: { numFound: number } }).response.numFound;
  }
  const anonIds = async (q: string) => {
    const r = await anon.req('GET', `${p.url}/search-service/content/select?${new URLSearchParams({ q, rows: '100' })}`, { token: null });
    expect(r.status, r.text).to.equal(200);
    return (r.json.response.docs as SolrDoc[]).map((d) => d.id);
  };

  describe('the indexer owns the system fields and child ids', () => {
    it("a svcSolrDocument stored with id, root, svc_ and Solr fields (root and children) is indexed with the indexer's values only; anonymous search shows nothing through it", async () => {
      // A private content (svcLatest only) whose identity the poisoned one claims.
      const victim = await editor.create({ system: { contentType: `${T}v` }, aspects: { body: { title: 'private' } } });
      expect(victim.status, victim.text).to.equal(201);
      const victimVersion = victim.json.system.version as string;
      await eventually(async () => expect(await solrCount(`id:"${victimVersion}"`)).to.equal(1), 10_000);

      // Stored as content written before the write-time check (or by a writer around the
      // gateway): the command goes to the content's actor directly.
      const forged = {
        id: victimVersion,
        root: victimVersion,
        version: 99,
        _version_: 1,
        _root_: victimVersion,
        _nest_path_: '/x',
        svc_type_s: `${T}v`,
        svc_views_ss: ['svcPublic'],
        svc_security_context_ss: [],
        svc_contentstate_hidden_b: false,
        svc_timestate__drange: ['[* TO *]'],
        svc_timestate_svcPublic_drange: '[* TO *]',
      };
      const user = await p.tokens!.authenticate(editor.token);
      const mailbox = new Mailbox(p.redis, p.settings, pino({ level: 'silent' }), store);
      mailbox.start();
      const cid = newContentKey();
      try {
        const cmd: ContentCommand = {
          k: 'create',
          id: newCommandId(),
          cid,
          user: user!,
          type: `${T}a`,
          aspects: {
            svcSolrDocument: {
              _type: 'svcSolrDocument',
              ...forged,
              headline_s: `${T} poison`,
              parts: [
                { ...forged, part_s: `${T}child` },
                { part_s: `${T}second`, sub: [{ ...forged, q_s: `${T}grandchild` }] },
              ],
              one: { ...forged, v_s: `${T}single` },
            },
          },
          ops: [],
        };
        await mailbox.send(cmd);
      } finally {
        await mailbox.stop();
      }
      const ownVersion = (await editor.readContent(`contentid/${cid}`)).json.system!.version as string;
      expect(ownVersion.startsWith(`c:${cid}:`), ownVersion).to.equal(true);

      const root = (
        await eventually(async () => {
          const docs = await select(`headline_s:"${T} poison"`);
          expect(docs).to.have.length(1);
          return docs;
        }, 10_000)
      )[0]!;
      expect(root.id).to.equal(ownVersion);
      expect(root.root).to.equal(ownVersion);
      expect(root.version).to.equal(1);
      expect(root.svc_type_s).to.equal(`${T}a`);
      expect(root.svc_views_ss).to.deep.equal(['svcLatest']);
      expect(root.svc_security_context_ss).to.equal(undefined);
      expect(root.svc_timestate__drange).to.deep.equal(['[0000 TO 9999]']);
      expect(root).to.not.have.property('svc_timestate_svcPublic_drange');

      const children = await select(`_root_:"${ownVersion}" AND -id:"${ownVersion}"`, 'id,root,svc_*,part_s,q_s,v_s');
      expect(children.map((c) => c.id).sort()).to.deep.equal([
        `${ownVersion}/one`,
        `${ownVersion}/parts/0`,
        `${ownVersion}/parts/1`,
        `${ownVersion}/parts/1/sub/0`,
      ]);
      for (const c of children) {
        expect(c.root, c.id).to.equal(ownVersion);
        expect(
          Object.keys(c).filter((k) => k.startsWith('svc_')),
          c.id,
        ).to.deep.equal([]);
      }

      // The victim's document is untouched and still the only one with its id.
      const victimDocs = await select(`id:"${victimVersion}"`);
      expect(victimDocs).to.have.length(1);
      expect(victimDocs[0].svc_views_ss).to.deep.equal(['svcLatest']);
      expect(victimDocs[0].svc_type_s).to.equal(`${T}v`);

      // Nothing of either is on a public view for an anonymous caller.
      for (const q of [
        `svc_type_s:${T}v`,
        `svc_type_s:${T}a`,
        `headline_s:"${T} poison"`,
        `part_s:${T}child`,
        `q_s:${T}grandchild`,
        `v_s:${T}single`,
        `id:"${victimVersion}"`,
      ]) {
        expect(await anonIds(q), q).to.deep.equal([]);
      }

      // The svcIndexing variant reads the same document: the indexer's fields, derived child ids.
      const variant = await editor.readContent(`contentid/${cid}`, 'variant=svcIndexing');
      const doc = variant.json.aspects!.svcSolrDocument as unknown as Record<string, unknown> & { parts: { id: string }[] };
      expect(doc.id).to.equal(ownVersion);
      expect(doc.svc_views_ss).to.deep.equal(['svcLatest']);
      expect(doc.parts.map((c) => c.id)).to.deep.equal([`${ownVersion}/parts/0`, `${ownVersion}/parts/1`]);
    });
  });

  describe("the write-time check against the collection's schema", () => {
    /** Every content head and event in Redis: a refused write changes neither. */
    const stored = async () => {
      const heads = (await p.redis.keys('ct:*')).length;
      let events = 0;
      for (let i = 0; i < p.settings.PARTITIONS; i++) events += await p.redis.xlen(keys.events(i));
      return { heads, events };
    };
    const refused = (r: { status: number; json: AnyJson }, field: string, what: string) => {
      expect(r.status, what).to.equal(400);
      expect(r.json.statusCode, what).to.equal('40000');
      expect(r.json.extraInfo?.field, what).to.equal(field);
      expect(r.json.message, what).to.contain(field);
    };
    const bad: [Record<string, unknown>, string][] = [
      [{ headline: 'an unknown field name' }, 'headline'],
      [{ count_i: 'x' }, 'count_i'],
      [{ count_i: 'not-a-number' }, 'count_i'],
      [{ title_s: { an: 'object' } }, 'title_s'],
      [{ title_s: ['a list', 'for a single-valued field'] }, 'title_s'],
      [{ when_dt: 'yesterday' }, 'when_dt'],
      [{ id: 'c:someone:else' }, 'id'],
      [{ root: 'c:someone:else' }, 'root'],
      [{ _root_: 'c:someone:else' }, '_root_'],
      [{ svc_views_ss: ['svcPublic'] }, 'svc_views_ss'],
      [{ svc_security_context_ss: [] }, 'svc_security_context_ss'],
      [{ parts: [{ part_s: 'ok' }, { id: 'c:someone:else' }] }, 'parts.1.id'],
      [{ parts: [{ sub: [{ svc_views_ss: ['svcPublic'] }] }] }, 'parts.0.sub.0.svc_views_ss'],
    ];

    it('create: 400 naming the field, nothing stored', async () => {
      const before = await stored();
      for (const [doc, field] of bad) {
        refused(await editor.create({ system: { contentType: `${T}w` }, aspects: { body: { title: 'x' }, svcSolrDocument: doc } }), field, JSON.stringify(doc));
      }
      expect(await stored()).to.deep.equal(before);
    });

    it('update: 400 naming the field, the content unchanged', async () => {
      const c = await editor.create({
        system: { contentType: `${T}w` },
        aspects: { body: { title: 'x' }, svcSolrDocument: { headline_s: 'fine', count_i: 3 } },
      });
      expect(c.status, c.text).to.equal(201);
      const id = c.json.system.id as string;
      const cid = id.split('/')[1];
      const before = { rev: (await store.head(cid))!.rev, stored: await stored() };
      for (const [doc, field] of bad) {
        for (const mode of ['update', 'replace', 'merge']) {
          refused(
            await editor.update(id, { aspects: { svcSolrDocument: doc } }, c.headers.get('etag'), `updateMode=${mode}`),
            field,
            `${mode} ${JSON.stringify(doc)}`,
          );
        }
      }
      expect({ rev: (await store.head(cid))!.rev, stored: await stored() }).to.deep.equal(before);
    });

    it('workspace draft create and update: 400 naming the field, no draft stored', async () => {
      const c = await editor.create({ system: { contentType: `${T}w` }, aspects: { body: { title: 'x' } } });
      const id = c.json.system.id as string;
      const cid = id.split('/')[1];
      const before = await stored();
      for (const [doc, field] of bad) {
        refused(
          await editor.createDraft(`${T}ws`, { system: { contentType: `${T}w` }, aspects: { svcSolrDocument: doc } }),
          field,
          `draft create ${JSON.stringify(doc)}`,
        );
        refused(
          await editor.req('PUT', `/content/workspace/${T}ws/alias/${id}`, { body: { aspects: { svcSolrDocument: doc } } }),
          field,
          `draft update ${JSON.stringify(doc)}`,
        );
      }
      expect(await p.redis.exists(keys.drafts(partitionOf(cid, p.settings.PARTITIONS), cid))).to.equal(0);
      expect(await stored()).to.deep.equal(before);
    });

    it('accepts what the schema takes: every dynamic field type, child documents without ids', async () => {
      const c = await editor.create({
        system: { contentType: `${T}ok` },
        aspects: {
          svcSolrDocument: {
            headline_s: 'fine',
            tags_ss: ['a', 'b'],
            when_dt: '2024-05-01T10:00:00Z',
            window_drange: ['[2024 TO 2025-06]'],
            big_l: 9007199254740991,
            count_i: 42,
            on_b: true,
            flags_bs: [true, false],
            words_lc: ['Sports/Football'],
            parts: [{ part_s: 'one' }],
          },
        },
      });
      expect(c.status, c.text).to.equal(201);
      await eventually(async () => expect(await solrCount(`svc_type_s:${T}ok AND count_i:42 AND words_lc:football`)).to.equal(1), 10_000);
    });
  });

  describe('a document the engine refuses', () => {
    const metric = async (name: string) => {
      const text = (await editor.metrics()).text;
      let sum = 0;
      for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) sum += Number(m[1]);
      return sum;
    };

    it('hiding content after a writer gave a view a window that can never hold reaches the index (a refused document used to keep the content public)', async () => {
      // The engine refuses a date range whose end is before its start. svcTimeState is the
      // writer's, and such a window made every later re-index of the content refused, so the
      // index kept the document from before: here public after it left svcPublic (found in a
      // security review).
      const c = await editor.create({ system: { contentType: `${T}t` }, aspects: { body: { title: 't' }, svcSolrDocument: { headline_s: `${T} takedown` } } });
      expect(c.status, c.text).to.equal(201);
      const id: string = c.json.system.id;
      const version: string = c.json.system.version;
      const onPublic = await editor.putView('svcPublic', { version }, c.headers.get('etag')!);
      expect(onPublic.status, onPublic.text).to.equal(200);
      await eventually(async () => expect(await anonIds(`headline_s:"${T} takedown"`)).to.deep.equal([version]), 10_000);
      // Any view of the writer's, with onTime after offTime.
      const onX = await editor.putView(`${T}x`, { version }, onPublic.headers.get('etag')!);
      expect(onX.status, onX.text).to.equal(200);
      const window = {
        _type: 'svcContentMetadata',
        aspects: { svcTimeState: { views: { [`${T}x`]: { onTime: '2030-01-01T00:00:00Z', offTime: '2020-01-01T00:00:00Z' } } } },
      };
      const inverted = await editor.update(id, { aspects: {}, operations: [window] }, onX.headers.get('etag')!);
      expect(inverted.status, inverted.text).to.equal(200);
      // The takedown: hidden.
      const hide = { _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: true } } };
      const off = await editor.update(id, { aspects: {}, operations: [hide] }, inverted.headers.get('etag')!);
      expect(off.status, off.text).to.equal(200);
      await eventually(async () => expect(await anonIds(`headline_s:"${T} takedown"`)).to.deep.equal([]), 10_000);
      expect(await solrCount(`id:"${version}" AND svc_contentstate_hidden_b:false`)).to.equal(0);
      expect(await p.redis.hexists(keys.indexerRefused, id.split('/')[1])).to.equal(0);
    });

    it('a document the engine refuses is removed from the index, not left as it was (fail closed)', async () => {
      const writer = new IndexWriter(new SolrEngine(solr, 'content'), p.redis, p.settings.PARTITIONS, pino({ level: 'silent' }));
      const cid = newContentKey();
      const id = `c:${cid}:v1`;
      const doc = { id, root: id, svc_type_s: `${T}f`, svc_views_ss: ['svcLatest', 'svcPublic'], svc_contentstate_hidden_b: false, headline_s: `${T} closed` };
      await writer.write([{ cid, firstRevision: true, docs: [doc] }]);
      await eventually(async () => expect(await solrCount(`id:"${id}"`)).to.equal(1), 10_000);
      // The same version re-indexed (a metadata change), in a shape the engine refuses.
      await writer.write([{ cid, docs: [{ ...doc, svc_contentstate_hidden_b: true, x_drange: '[2030-01-01T00:00:00Z TO 2020-01-01T00:00:00Z]' }] }]);
      await eventually(async () => expect(await solrCount(`id:"${id}"`)).to.equal(0), 10_000);
      expect(await p.redis.hexists(keys.indexerRefused, cid)).to.equal(1);
      await p.redis.hdel(keys.indexerRefused, cid);
    });

    it("1,000 creates with one the engine refuses among them: the 999 are searchable, the one is a dead letter with the engine's reason, counted, and /health says search is degraded until it is indexed", async () => {
      const type = `${T}p`;
      const refusedBefore = await metric('indexer_refused_documents_total');
      const N = 1000;
      const BAD = 500;
      const made: { id: string; version: string; etag: string }[] = new Array(N);
      let next = 0;
      // A date range whose start is after its end: the schema allows the field and the value's
      // type; only the engine refuses it. (An immense term, a value of over 32,766 bytes in a
      // field kept whole, is refused at the write since MAX_TERM_CHARS.)
      const doc = (i: number) => (i === BAD ? { headline_s: `${T} bad`, when_drange: '[2025 TO 2020]' } : { headline_s: `${T} ${i}` });
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          for (let i = next++; i < N; i = next++) {
            const r = await editor.create({ system: { contentType: type }, aspects: { body: { title: `p${i}` }, svcSolrDocument: doc(i) } });
            expect(r.status, r.text).to.equal(201);
            made[i] = { id: r.json.system.id, version: r.json.system.version, etag: r.headers.get('etag')! };
          }
        }),
      );
      const lastCommit = Date.now();
      const deadline = lastCommit + 60_000;
      let searchable = 0;
      for (;;) {
        searchable = await solrCount(`svc_type_s:${type}`);
        if (searchable >= N - 1) break;
        if (Date.now() > deadline) throw new Error(`${searchable} of ${N - 1} documents searchable 60 s after the last create`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const tookMs = Date.now() - lastCommit;
      console.log(`      ${N - 1} of ${N} creates searchable ${tookMs} ms after the last commit (budget 2,000 ms), one refused by the engine`);
      expect(searchable).to.equal(N - 1);
      const bad = made[BAD];
      expect(await solrCount(`id:"${bad.version}"`)).to.equal(0);

      // The dead letter: content id, version and the engine's reason.
      const cid = bad.id.split('/')[1];
      const partition = partitionOf(cid, p.settings.PARTITIONS);
      const letters = await eventually(async () => {
        const entries = (await p.redis.xrange(keys.indexerDeadLetter(partition), '-', '+')).map(
          ([, f]) => Object.fromEntries(f.flatMap((v, i, a) => (i % 2 ? [] : [[v, a[i + 1]]]))) as Record<string, string>,
        );
        const mine = entries.filter((e) => e.cid === cid);
        expect(mine).to.have.length(1);
        return mine;
      });
      expect(letters[0].version).to.equal(bad.version);
      expect(letters[0].reason).to.contain('when_drange');
      expect(Number.isNaN(Date.parse(letters[0].time))).to.equal(false);

      // The log names the content, the version and the reason.
      const logged = lines.find((l) => l.cid === cid && l.msg.includes('refused'));
      expect(logged, 'a log line for the refused document').to.not.equal(undefined);
      expect(logged!.version).to.equal(bad.version);
      expect(String(logged!.reason)).to.contain('when_drange');

      // The metric counts it; /health says search is degraded. (Other suites' contents, indexed
      // by this platform from the shared Redis, may add refusals of their own: hence at least.)
      // (/metrics reads the partitions' streams at most once a second: a scrape may be that old.)
      await eventually(async () => expect(await metric('indexer_refused_documents_total')).to.be.at.least(refusedBefore + 1), 5_000);
      expect(await metric('indexer_refused_contents')).to.be.at.least(1);
      expect(await p.redis.hexists(keys.indexerRefused, cid)).to.equal(1);
      const health = await editor.health();
      expect(health.status).to.equal(200);
      expect(health.json.status).to.equal('degraded');
      expect(health.json.search).to.match(/^degraded: \d+ contents? refused by the search engine/);

      // A re-index of the type completes around it.
      const sysadmin = await new Client(p.base).login('sysadmin');
      const re = await sysadmin.req('POST', `/index/reindex/contentType/${type}`);
      expect(re.status, re.text).to.equal(200);
      const session = /^Re-indexing session (\S+) started/.exec(re.text)![1];
      await eventually(async () => expect(lines.some((l) => l.msg.startsWith(`Re-indexing session ${session} complete.`))).to.equal(true), 60_000);
      expect(await solrCount(`svc_type_s:${type}`)).to.equal(N - 1);

      // Fixed by its writer: indexed, and nothing is outstanding any more.
      const fixed = await editor.update(bad.id, { aspects: { svcSolrDocument: { headline_s: `${T} fixed` } } }, bad.etag);
      expect(fixed.status, fixed.text).to.equal(200);
      await eventually(async () => expect(await solrCount(`svc_type_s:${type}`)).to.equal(N), 10_000);
      await eventually(async () => expect(await p.redis.hexists(keys.indexerRefused, cid)).to.equal(0), 10_000);
      const outstanding = await p.redis.hlen(keys.indexerRefused);
      expect((await editor.health()).json.search).to.equal(
        outstanding ? `degraded: ${outstanding} content${outstanding === 1 ? '' : 's'} refused by the search engine (dead letters in indexer-dead:{p})` : 'ok',
      );
      expect(await metric('indexer_refused_contents')).to.equal(outstanding);
      // a counter: what was refused stays counted (the re-index refused it a second time)
      const mine = (await p.redis.xrange(keys.indexerDeadLetter(partition), '-', '+')).filter(([, f]) => f[f.indexOf('cid') + 1] === cid);
      expect(mine).to.have.length(2);
      await eventually(async () => expect(await metric('indexer_refused_documents_total')).to.be.at.least(refusedBefore + 2), 5_000);
    });
  });
});
