import { expect } from 'chai';
import { pack, unpack } from '../../src/adapters/codec.js';
import { partitionOf } from '../../src/adapters/ids.js';
import { keys } from '../../src/adapters/redis.js';
import type { AnyJson } from '../../src/client/index.js';
import { type BulkLine, bulkImport } from '../../src/client/bulk.js';
import type { Aspects, Draft, Snapshot, VersionRecord } from '../../src/content/model.js';
import { buildTaxonomyModel, definitionOf, hierarchyNodeOf, structureOf } from '../../src/content/taxonomy.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * The seventeenth session's review (scratch .cache/sec17b): taxonomy definitions are public
 * (CONTRACT §10) and their strings were unbounded. The taxonomy model of every web process kept
 * them whole and `GET /taxonomy-service/structure` (no token) answered all of them in one JSON
 * string built anew for each request: 20 creates of a sportseditor, each an article of its own
 * with a 4 MB `svcTaxonomyDefinition.name` and its `_taxonomy/<id>` alias, made one 40-byte
 * anonymous request answer 80 MiB (4 at once: +766 MiB RSS), and past about 512 MB of
 * definitions every answer was a 500 (RangeError: Invalid string length).
 *
 * Now (SECURITY.md "Content, workspaces, taxonomy"): every string a definition or a content
 * hierarchy node keeps (id, name, parent, each dimension id, each localization's and attribute's
 * key and value) holds at most 1,000 characters, and a node at most 100 localizations, 100
 * attributes, a taxonomy 100 dimensions. A write past a bound answers 400 naming the field, the
 * bound and the figure on every write path, storing nothing; one stored before the bounds is
 * held to them when the model loads, and a restore or promote of it is refused.
 */
describe('security: taxonomy definitions are bounded in size (review 17)', function () {
  this.timeout(180_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;
  let anon: Client;
  const T = `tsz${Date.now().toString(36)}`;
  const id = (s: string) => `${T}-${s}`;
  const TEXT = 1000;
  const MANY = 100;
  const MB4 = 4 * 1024 * 1024;

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    anon = new Client(p.base);
  });
  after(async () => p?.stop());

  const sportsOwned = { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } };
  /** An envelope of the sportseditor's own content holding `aspects`, with the alias `_taxonomy/<alias>` when given. */
  const envelope = (aspects: Record<string, unknown>, alias?: string) => ({
    system: { contentType: 'article' },
    aspects: { body: { title: 'taxonomy' }, ...aspects },
    operations: [sportsOwned, ...(alias ? [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias }] : [])],
  });
  const entries = (n: number, key = (i: number) => `k${i}`, value = (i: number) => `v${i}`) =>
    Object.fromEntries(Array.from({ length: n }, (_, i) => [key(i), value(i)]));
  const structure = (path = '') => anon.req('GET', `${p.url}/taxonomy-service/structure${path}`, { token: null });

  /** Every content head, draft and event in Redis: a refused write changes none. */
  const stored = async () => {
    const heads = (await p.redis.keys('ct:*')).length;
    const drafts = (await p.redis.keys('dr:*')).length;
    let events = 0;
    for (let i = 0; i < p.settings.PARTITIONS; i++) events += await p.redis.xlen(keys.events(i));
    return { heads, drafts, events };
  };
  /** A 400 that names the field, the bound and the figure. */
  const refused = (r: { status: number; json?: AnyJson; error?: AnyJson }, field: string, limit: number, found: number, what: string) => {
    const body = r.error ?? r.json;
    expect(r.status, `${what}: ${JSON.stringify(body)?.slice(0, 300)}`).to.equal(400);
    expect(body.statusCode, what).to.equal('40000');
    expect(body.extraInfo, what).to.deep.include({ field, limit, found });
    expect(body.message, what).to.contain(field).and.contain(String(limit)).and.contain(String(found));
  };
  const bulk = (lines: unknown[]) => bulkImport(sports, lines as BulkLine[]);

  /** One case past each bound: the aspect, the field the answer names, the bound and the figure. */
  const over: { aspect: string; value: Record<string, unknown>; field: string; limit: number; found: number }[] = [
    {
      aspect: 'svcTaxonomyDefinition',
      value: { id: id('t'), name: 'x'.repeat(MB4), dimensions: [] },
      field: 'svcTaxonomyDefinition.name',
      limit: TEXT,
      found: MB4,
    },
    { aspect: 'svcTaxonomyDefinition', value: { id: id('t'), name: 'x'.repeat(TEXT + 1) }, field: 'svcTaxonomyDefinition.name', limit: TEXT, found: TEXT + 1 },
    {
      aspect: 'svcTaxonomyDefinition',
      value: { id: id('t'), name: 'T', dimensions: Array.from({ length: MANY + 1 }, (_, i) => `d${i}`) },
      field: 'svcTaxonomyDefinition.dimensions',
      limit: MANY,
      found: MANY + 1,
    },
    {
      aspect: 'svcTaxonomyDefinition',
      value: { id: id('t'), name: 'T', dimensions: ['d', 'd'.repeat(TEXT + 1)] },
      field: 'svcTaxonomyDefinition.dimensions[1]',
      limit: TEXT,
      found: TEXT + 1,
    },
    { aspect: 'svcDimensionDefinition', value: { id: 'i'.repeat(TEXT + 1), name: 'D' }, field: 'svcDimensionDefinition.id', limit: TEXT, found: TEXT + 1 },
    {
      aspect: 'svcDimensionDefinition',
      value: { id: id('d'), name: 'D', localizations: entries(MANY + 1) },
      field: 'svcDimensionDefinition.localizations',
      limit: MANY,
      found: MANY + 1,
    },
    {
      aspect: 'svcDimensionDefinition',
      value: { id: id('d'), name: 'D', localizations: { de: 'x'.repeat(TEXT + 1) } },
      field: 'svcDimensionDefinition.localizations.de',
      limit: TEXT,
      found: TEXT + 1,
    },
    {
      aspect: 'svcEntityDefinition',
      value: { id: id('e'), name: 'E', localizations: { ['k'.repeat(TEXT + 1)]: 'v' } },
      field: 'svcEntityDefinition.localizations',
      limit: TEXT,
      found: TEXT + 1,
    },
    {
      aspect: 'svcEntityDefinition',
      value: { id: id('e'), name: 'E', attributes: entries(MANY + 1) },
      field: 'svcEntityDefinition.attributes',
      limit: MANY,
      found: MANY + 1,
    },
    {
      aspect: 'svcEntityDefinition',
      value: { id: id('e'), name: 'E', attributes: { color: 'x'.repeat(TEXT + 1) } },
      field: 'svcEntityDefinition.attributes.color',
      limit: TEXT,
      found: TEXT + 1,
    },
    {
      aspect: 'svcEntityDefinition',
      value: { id: id('e'), name: 'E', parent: 'p'.repeat(TEXT + 1) },
      field: 'svcEntityDefinition.parent',
      limit: TEXT,
      found: TEXT + 1,
    },
    { aspect: 'svcContentHierarchy', value: { name: 'x'.repeat(TEXT + 1) }, field: 'svcContentHierarchy.name', limit: TEXT, found: TEXT + 1 },
    {
      aspect: 'svcContentHierarchy',
      value: { name: 'n', attributes: entries(MANY + 1) },
      field: 'svcContentHierarchy.attributes',
      limit: MANY,
      found: MANY + 1,
    },
    {
      aspect: 'svcContentHierarchy',
      value: { name: 'n', localizations: { fr: 'x'.repeat(TEXT + 1) } },
      field: 'svcContentHierarchy.localizations.fr',
      limit: TEXT,
      found: TEXT + 1,
    },
    {
      aspect: 'svcContentHierarchy',
      value: { name: 'n', parent: `contentid/${'p'.repeat(TEXT)}` },
      field: 'svcContentHierarchy.parent',
      limit: TEXT,
      found: TEXT + 10,
    },
  ];
  /** The small cases (a bulk line is bounded well below 4 MB). */
  const small = over.filter((c) => c.found !== MB4);

  it('a definition or hierarchy node past a bound is refused with 400 naming the field, the bound and the figure on create, update in every mode, a merge, drafts and bulk lines; nothing is stored', async () => {
    // the content every update is tried on: a small entity definition of the sportseditor
    const ok = await sports.create(envelope({ svcEntityDefinition: { id: id('own'), name: 'Own', localizations: entries(60) } }, id('own')));
    expect(ok.status, ok.text).to.equal(201);
    const cid: string = ok.json.system.id;
    const etag = ok.headers.get('etag')!;
    const before = await stored();
    const rev = (await sports.readContent(cid)).json.system?.version;

    for (const c of over) {
      const what = `${c.field} (${c.found})`;
      refused(await sports.create(envelope({ [c.aspect]: c.value }, id('new'))), c.field, c.limit, c.found, `create, ${what}`);
      refused(await sports.createDraft(`${T}ws`, envelope({ [c.aspect]: c.value })), c.field, c.limit, c.found, `draft create, ${what}`);
      for (const mode of ['update', 'replace', 'merge'])
        refused(await sports.update(cid, { aspects: { [c.aspect]: c.value } }, etag, `updateMode=${mode}`), c.field, c.limit, c.found, `${mode}, ${what}`);
      refused(await sports.updateDraft(`${T}ws`, cid, { aspects: { [c.aspect]: c.value } }), c.field, c.limit, c.found, `draft update, ${what}`);
    }
    // 60 localizations stored and 60 sent: a merge joins them (the content actor's check)
    const more = { svcEntityDefinition: { localizations: entries(60, (i) => `m${i}`) } };
    refused(await sports.update(cid, { aspects: more }, etag, 'updateMode=merge'), 'svcEntityDefinition.localizations', MANY, 120, 'merge of two maps');
    const answers = await bulk([
      ...small.map((c) => ({ op: 'create', content: envelope({ [c.aspect]: c.value }) })),
      ...small.map((c) => ({ op: 'update', id: cid, ifMatch: etag, content: { aspects: { [c.aspect]: c.value } } })),
      { op: 'update', id: cid, ifMatch: etag, mode: 'merge', content: { aspects: more } },
    ]);
    const expected = [...small, ...small, { field: 'svcEntityDefinition.localizations', limit: MANY, found: 120 }];
    expect(answers).to.have.length(expected.length);
    for (const [i, a] of answers.entries()) refused(a, expected[i].field, expected[i].limit, expected[i].found, `bulk line ${i + 1}`);

    expect(await stored()).to.deep.equal(before);
    expect((await sports.readContent(cid)).json.system?.version).to.equal(rev);
    expect((await sports.workspace(`${T}ws`)).json.drafts).to.deep.equal({});
  });

  it('a definition and a hierarchy node at every bound are taken (create, bulk line, draft and promote) and answered whole', async () => {
    const at = (c: string) => c.repeat(TEXT);
    const keyAt = (i: number) => `${i}`.padEnd(TEXT, 'k');
    const dims = [id('dim'), ...Array.from({ length: MANY - 1 }, (_, i) => `${i}`.padEnd(TEXT, 'd'))];
    const r1 = await sports.create(envelope({ svcTaxonomyDefinition: { id: id('tax'), name: at('t'), dimensions: dims } }, id('tax')));
    expect(r1.status, r1.text).to.equal(201);
    const [line] = await bulk([
      {
        op: 'create',
        content: envelope(
          { svcDimensionDefinition: { id: id('dim'), name: at('d'), enumerable: true, localizations: entries(MANY, keyAt, () => at('l')) } },
          id('dim'),
        ),
      },
    ]);
    expect(line.status, JSON.stringify(line)).to.equal(201);
    const entity = {
      id: id('ent'),
      name: at('e'),
      parent: id('dim'),
      localizations: entries(MANY, keyAt, () => at('l')),
      attributes: entries(MANY, keyAt, () => at('a')),
    };
    const d = await sports.createDraft(`${T}ws2`, envelope({ svcEntityDefinition: entity }, id('ent')));
    expect(d.status, d.text).to.equal(201);
    const pr = await sports.promote(`${T}ws2`, d.json.system!.id!);
    expect(pr.status, pr.text).to.equal(200);
    const node = await editor.create({
      system: { contentType: 'page' },
      aspects: { svcContentHierarchy: { name: at('h'), localizations: entries(MANY, keyAt, () => at('l')), attributes: entries(MANY, keyAt, () => at('a')) } },
    });
    expect(node.status, node.text).to.equal(201);

    const t = await eventually(async () => {
      const t = await structure(`/${id('tax')}`);
      expect(t.status, t.text.slice(0, 300)).to.equal(200);
      expect(t.json.dimensions[0]?.entities, 'the entity').to.have.length(1);
      return t;
    }, 10_000);
    expect(t.json.name).to.equal(at('t'));
    const dim = t.json.dimensions[0];
    expect(dim).to.deep.include({ id: id('dim'), name: at('d'), localizations: entries(MANY, keyAt, () => at('l')) });
    expect(dim.entities[0]).to.deep.include({ id: id('ent'), name: at('e'), localizations: entity.localizations, attributes: entity.attributes });
    const h = await eventually(async () => {
      const h = await editor.taxonomyStructure(node.json.system.id);
      expect(h.status, h.text.slice(0, 300)).to.equal(200);
      return h;
    }, 10_000);
    expect(h.json.name).to.equal(at('h'));
    expect(Object.keys(h.json.localizations)).to.have.length(MANY);
    expect(h.json.attributes).to.deep.equal({ ...entries(MANY, keyAt, () => at('a')), contentType: 'page' });
  });

  /** Rewrites a content's head version in Redis, as a build without the bounds stored it. */
  const storeBefore = async (cid: string, patch: (aspects: Aspects) => Aspects) => {
    const key = cid.replace(/^contentid\//, '');
    const part = partitionOf(key, p.settings.PARTITIONS);
    const head = unpack<Snapshot>((await p.redis.hgetBuffer(keys.content(part, key), 's'))!);
    const v = unpack<VersionRecord>((await p.redis.hgetBuffer(keys.versions(part, key), head.head))!);
    await p.redis.hset(keys.versions(part, key), head.head, pack({ ...v, aspects: patch(v.aspects) }));
    return head.head;
  };
  const huge = 'x'.repeat(MB4);
  const oversized = (n: number, len: number) =>
    entries(
      n,
      (i) => `${i}`.padEnd(len, 'k'),
      () => 'v'.repeat(10_000),
    );

  it('definitions and a hierarchy node stored before the bounds are held to them in the model: the anonymous structure answer stays small', async () => {
    await eventually(async () => expect((await structure()).status).to.equal(200)); // the model has loaded once
    const dim = await sports.create(envelope({ svcDimensionDefinition: { id: id('odim'), name: 'Old dimension', enumerable: true } }, id('odim')));
    const tax = await sports.create(envelope({ svcTaxonomyDefinition: { id: id('otax'), name: 'Old', dimensions: [id('odim')] } }, id('otax')));
    const ent = await sports.create(envelope({ svcEntityDefinition: { id: id('oent'), name: 'Old entity', parent: id('odim') } }, id('oent')));
    const node = await editor.create({
      system: { contentType: 'page' },
      aspects: { svcContentHierarchy: { name: 'Old node' } },
      operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
    });
    for (const r of [dim, tax, ent, node]) expect(r.status, r.text).to.equal(201);
    // Within the model's margin of changes (3 s): the next loads read them again.
    await storeBefore(dim.json.system.id, (a) => ({
      ...a,
      svcDimensionDefinition: { ...a.svcDimensionDefinition, name: huge, localizations: oversized(500, 10) },
    }));
    await storeBefore(tax.json.system.id, (a) => ({
      ...a,
      svcTaxonomyDefinition: {
        ...a.svcTaxonomyDefinition,
        name: huge,
        dimensions: [id('odim'), ...Array.from({ length: 2000 }, (_, i) => `${i}`.padEnd(2000, 'd'))],
      },
    }));
    await storeBefore(ent.json.system.id, (a) => ({
      ...a,
      svcEntityDefinition: {
        ...a.svcEntityDefinition,
        name: huge,
        localizations: oversized(300, 10),
        attributes: { ...oversized(300, 10), ['k'.repeat(MB4)]: 'v' },
      },
    }));
    await storeBefore(node.json.system.id, (a) => ({ ...a, svcContentHierarchy: { name: huge, attributes: oversized(300, 2000) } }));

    const t = await eventually(async () => {
      const t = await structure(`/${id('otax')}`);
      expect(t.status, t.text.slice(0, 300)).to.equal(200);
      expect(t.json.name.slice(0, 10), 'the stored version is loaded').to.equal('xxxxxxxxxx');
      expect(t.json.dimensions[0]?.entities[0]?.name.slice(0, 10)).to.equal('xxxxxxxxxx');
      return t;
    }, 15_000);
    const bytes = Buffer.byteLength(t.text);
    console.log(`      anonymous structure of the taxonomy stored before the bounds: ${bytes} bytes (4 MB names; 27.8 MB on the code before the bounds)`);
    expect(bytes, 'the whole answer').to.be.below(1_000_000);
    expect(t.json.name).to.have.length(TEXT);
    expect(t.json.dimensions.map((d: { id: string }) => d.id)).to.deep.equal([id('odim')]);
    const d = t.json.dimensions[0];
    expect(d.name).to.have.length(TEXT);
    expect(Object.keys(d.localizations)).to.have.length(MANY);
    for (const v of Object.values(d.localizations) as string[]) expect(v).to.have.length(TEXT);
    const e = d.entities[0];
    expect(e.name).to.have.length(TEXT);
    expect(Object.keys(e.localizations)).to.have.length(MANY);
    expect(Object.keys(e.attributes)).to.have.length(MANY);
    for (const [k, v] of Object.entries(e.attributes) as [string, string][]) {
      expect(k.length).to.be.at.most(TEXT);
      expect(v).to.have.length(TEXT);
    }
    const all = await structure();
    expect(all.status).to.equal(200);
    expect(Buffer.byteLength(all.text), 'every taxonomy').to.be.below(2_000_000);

    const h = await eventually(async () => {
      const h = await structure(`/${encodeURIComponent(node.json.system.id)}`);
      expect(h.status, h.text.slice(0, 300)).to.equal(200);
      expect(h.json.name.slice(0, 10)).to.equal('xxxxxxxxxx');
      return h;
    }, 15_000);
    expect(h.json.name).to.have.length(TEXT);
    // 300 stored attributes with 2,000-character names: none kept but the content type
    expect(h.json.attributes).to.deep.equal({ contentType: 'page' });
  });

  it('the model of a definition stored before the bounds keeps them (definitionOf, hierarchyNodeOf, buildTaxonomyModel)', () => {
    const aspects: Aspects = {
      svcEntityDefinition: {
        _type: 'svcEntityDefinition',
        id: 'e',
        name: huge,
        parent: 'p'.repeat(TEXT + 1),
        localizations: oversized(300, 10),
        attributes: { ...oversized(300, 10), ['k'.repeat(TEXT + 1)]: 'v' },
      },
    };
    const def = definitionOf(aspects, ['_taxonomy/e']);
    expect(def?.kind).to.equal('entity');
    if (def?.kind !== 'entity') return;
    expect(def.name).to.have.length(TEXT);
    expect(def.parent, 'a parent longer than any id names none').to.equal(null);
    expect(Object.keys(def.localizations)).to.have.length(MANY);
    expect(Object.keys(def.attributes)).to.have.length(MANY);
    for (const [k, v] of Object.entries({ ...def.localizations, ...def.attributes })) expect(k.length + v.length).to.be.at.most(2 * TEXT);
    const head = { cid: 'c', head: 'v' } as Snapshot;
    const node = hierarchyNodeOf(
      'c',
      head,
      'page',
      { _type: 'svcContentHierarchy', name: huge, localizations: oversized(300, 10) },
      'contentHierarchy.contents',
    );
    expect(node.name).to.have.length(TEXT);
    expect(Object.keys(node.localizations)).to.have.length(MANY);
    const tax = definitionOf(
      { svcTaxonomyDefinition: { _type: 'svcTaxonomyDefinition', id: 't', name: huge, dimensions: Array.from({ length: 5000 }, (_, i) => `d${i}`) } },
      ['_taxonomy/t'],
    );
    expect(tax?.kind === 'taxonomy' && tax.dimensions).to.have.length(MANY);
    const model = buildTaxonomyModel([tax!, def]);
    expect(JSON.stringify(structureOf(model, null, 100, () => true)).length).to.be.below(100_000);
  });

  it('a restore of a version stored before the bounds, or a promote of such a draft, is refused with 400 and stores nothing', async () => {
    const r = await sports.create(envelope({ svcEntityDefinition: { id: id('rst'), name: 'v1' } }, id('rst')));
    expect(r.status, r.text).to.equal(201);
    const cid: string = r.json.system.id;
    const v1: string = r.json.system.version;
    await storeBefore(cid, (a) => ({ ...a, svcEntityDefinition: { ...a.svcEntityDefinition, name: huge } }));
    const u = await sports.update(cid, { aspects: { svcEntityDefinition: { id: id('rst'), name: 'v2' } } }, r.headers.get('etag')!);
    expect(u.status, u.text).to.equal(200);
    const etag = u.headers.get('etag')!;

    // a draft of the content, stored before the bounds with an over-long name
    const d = await sports.updateDraft(`${T}ws3`, cid, { aspects: { svcEntityDefinition: { id: id('rst'), name: 'draft' } }, origin: etag });
    expect(d.status, d.text).to.equal(200);
    const key = cid.replace(/^contentid\//, '');
    const dkey = keys.drafts(partitionOf(key, p.settings.PARTITIONS), key);
    const draft = unpack<Draft>((await p.redis.hgetBuffer(dkey, `${T}ws3`))!);
    const localizations = oversized(101, 2);
    await p.redis.hset(
      dkey,
      `${T}ws3`,
      pack({ ...draft, aspects: { ...draft.aspects, svcEntityDefinition: { ...draft.aspects.svcEntityDefinition, localizations } } }),
    );

    const before = await stored();
    refused(await sports.restore(cid, v1, etag), 'svcEntityDefinition.name', TEXT, MB4, 'restore');
    refused(await sports.promote(`${T}ws3`, cid), 'svcEntityDefinition.localizations', MANY, 101, 'promote');
    expect(await stored()).to.deep.equal(before);
    const now = await sports.readContent(cid);
    expect(now.json.aspects?.svcEntityDefinition.name).to.equal('v2');
    expect(now.headers.get('etag')).to.equal(etag);
  });
});
