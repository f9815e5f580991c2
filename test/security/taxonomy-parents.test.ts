import { expect } from 'chai';
import { ContentStore } from '../../src/adapters/content-store.js';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { checkTaxonomyAspects } from '../../src/actors/content/taxonomy-references.js';
import { CONTENT_HIERARCHY_DIMENSION, MAX_TAXONOMY_DEPTH } from '../../src/content/taxonomy.js';
import { Client, startIsolatedPlatform, startTestPlatform } from '../support/platform.js';
import { redisSettled, sentByRedis } from '../support/redis-bytes.js';
import { eventually } from '../support/wait.js';

/**
 * The eighteenth session's security review, on the parents of taxonomy entities (an
 * `svcEntityDefinition.parent`, an `svcContentHierarchy.parent`) that name content the writer may
 * not read (the sportseditor: `editor` in `sports` only; culture content is not its to read).
 *
 * Finding 1: the cycle check of a write (`refuseParentCycle`, src/actors/content/taxonomy-references.ts)
 * walked the whole chain above the parent, through culture content, reading every ancestor's head and
 * whole head version: the sportseditor's create of 200 bytes answered 201 always, in 6-13 ms for a
 * parent naming nothing, 46 ms for a culture root of 8 MB, 193-441 ms for the leaf of a chain of 300
 * culture nodes. Now it stops at the first content the writer may not read, after MAX_TAXONOMY_DEPTH
 * ancestors, and where what it read would pass PARENT_CHECK_MAX_BYTES.
 *
 * Finding 3: the sportseditor changed culture's public structure without writing culture content:
 * an entity of its own named a culture dimension as its parent and was listed (and completed) among
 * its entities; a culture node whose parent alias named nothing hung under the sportseditor's node
 * once it took that alias. Now an entity hangs under its parent only when its contexts are the
 * parent's (`hangsUnder`, src/content/taxonomy.ts): the same writers write both.
 *
 * Finding F4 (the review of that fix): it asked only that the entity's contexts be among the parent's,
 * so an entity without owners (in `__global__` only) hung under any parent: a global node or entity
 * whose parent alias named nothing (its parent deleted, which frees the alias) hung under the
 * sportseditor's node or definition once the sportseditor took that alias, as did a culture node
 * under a node the sportseditor shared with culture; and a loop of the sportseditor's own nodes
 * above it hid it from every tree (`src/content/taxonomy.test.ts`).
 *
 * Then (c): a taxonomy lists its dimensions by id, and the structure showed whatever content held
 * the alias `_taxonomy/<id>`: the sportseditor defined a dimension culture's taxonomy listed and
 * nobody held (culture deleted it, which frees the alias, or never defined it), and its dimension
 * and entities showed inside culture's taxonomy to everyone; its own taxonomy showed culture's
 * dimensions. Now a taxonomy shows a dimension only when their contexts are the same
 * (`hangsUnder`), the built-in content hierarchy dimension aside.
 */
const owners = (o: string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: o } } });
const PUBLIC = { _type: 'svcAssignToViews', views: ['svcPublic'] };
const MB = 1024 * 1024;

describe('security: a write checks its parent chain with the same work whatever content it may not read holds (review 18, finding 1)', function () {
  this.timeout(600_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let editor: Client;
  let sports: Client;
  const T = `tp${Date.now().toString(36)}`;

  /** A content hierarchy node of `as` with `filler` bytes of body, an alias `T/<alias>` and these owners: its id. */
  async function node(as: Client, alias: string, parent: string | undefined, ctx: string[], filler = 0): Promise<string> {
    const r = await as.create({
      system: { contentType: 'page' },
      aspects: { body: { title: alias, text: 'x'.repeat(filler) }, svcContentHierarchy: { name: alias, ...(parent ? { parent } : {}) } },
      operations: [owners(ctx), { _type: 'svcSetAlias', namespace: T, alias }],
    });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    return r.json.system.id as string;
  }

  before(async () => {
    p = await startIsolatedPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    // culture: a chain of 300 small nodes (T/deep0 <- ... <- T/deep299), and a leaf under two nodes of 8 MB
    let parent: string | undefined;
    for (let i = 0; i < 300; i++) parent = await node(editor, `deep${i}`, parent, ['culture']);
    parent = undefined;
    for (let i = 0; i < 2; i++) parent = await node(editor, `big${i}`, parent, ['culture'], 8 * MB);
    await node(editor, 'bigleaf', parent, ['culture']);
  });
  after(async () => p?.stop());

  /** What Redis sends while the sportseditor creates a node of its own under `parent` (the least of three), and the create's time. */
  async function createUnder(parent: string): Promise<{ bytes: number; ms: number[] }> {
    let bytes = Number.POSITIVE_INFINITY;
    const ms: number[] = [];
    for (let i = 0; i < 3; i++) {
      await redisSettled(p.redis);
      const before = await sentByRedis(p.redis);
      const t0 = performance.now();
      const r = await sports.create({
        system: { contentType: 'page' },
        aspects: { body: { title: 'mine' }, svcContentHierarchy: { name: 'mine', parent } },
        operations: [owners(['sports'])],
      });
      ms.push(performance.now() - t0);
      expect(r.status, r.text).to.equal(201);
      bytes = Math.min(bytes, (await sentByRedis(p.redis)) - before);
    }
    return { bytes, ms };
  }

  it("the sportseditor's create under culture nodes: 201, and Redis sends what it sends for a parent naming nothing (before: the whole chain, 16 MB for the leaf under the 8 MB nodes)", async () => {
    const nothing = await createUnder(`${T}/nothing-here`);
    const cases: Record<string, string> = {
      'culture root': `${T}/deep0`,
      'culture leaf of a chain of 300': `${T}/deep299`,
      'culture root of 8 MB': `${T}/big0`,
      'culture leaf under two nodes of 8 MB': `${T}/bigleaf`,
    };
    const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
    console.log(`      a parent naming nothing: Redis sent ${nothing.bytes} B, ${median(nothing.ms).toFixed(1)} ms`);
    for (const [label, ref] of Object.entries(cases)) {
      const got = await createUnder(ref);
      console.log(`      ${label}: Redis sent ${got.bytes} B, ${median(got.ms).toFixed(1)} ms`);
      // The head of the first culture content is read (to learn that the writer may not read it): a few hundred bytes.
      expect(got.bytes, label).to.be.below(nothing.bytes + 4 * 1024);
    }
  });

  it("the sportseditor's entity definition under a culture definition held by content of 8 MB: Redis sends what it sends for a parent naming nothing (before: the whole version)", async () => {
    const big = await editor.create({
      system: { contentType: 'svcDimensionDefinitionContent' },
      aspects: { body: { title: 'big', text: 'x'.repeat(8 * MB) }, svcDimensionDefinition: { id: `${T}-bigdim`, name: 'Big', enumerable: true } },
      operations: [owners(['culture']), { _type: 'svcSetAlias', namespace: '_taxonomy', alias: `${T}-bigdim` }],
    });
    expect(big.status, big.text.slice(0, 300)).to.equal(201);
    let n = 0;
    const entityUnder = async (parent: string): Promise<number> => {
      let bytes = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 3; i++) {
        const eid = `${T}-e${n++}`;
        await redisSettled(p.redis);
        const before = await sentByRedis(p.redis);
        const r = await sports.create({
          system: { contentType: 'svcEntityDefinitionContent' },
          aspects: { svcEntityDefinition: { id: eid, name: eid, parent } },
          operations: [owners(['sports']), { _type: 'svcSetAlias', namespace: '_taxonomy', alias: eid }],
        });
        expect(r.status, r.text).to.equal(201);
        bytes = Math.min(bytes, (await sentByRedis(p.redis)) - before);
      }
      return bytes;
    };
    const nothing = await entityUnder(`${T}-no-such-dimension`);
    const culture = await entityUnder(`${T}-bigdim`);
    console.log(`      a parent naming nothing: Redis sent ${nothing} B; the culture definition of 8 MB: ${culture} B`);
    expect(culture).to.be.below(nothing + 4 * 1024);
  });

  it('what the check reads of a chain the writer may read is at most PARENT_CHECK_MAX_BYTES (before: every version whole, 9.4 MB here)', async () => {
    // the sportseditor's own chain of three nodes of 3 MB: the check reads one of them
    let parent: string | undefined;
    for (let i = 0; i < 3; i++) parent = await node(sports, `own${i}`, parent, ['sports'], 3 * MB);
    const own = await createUnder(`${T}/own2`);
    console.log(`      under the sportseditor's own chain of three nodes of 3 MB: Redis sent ${own.bytes} B`);
    expect(own.bytes, 'bytes Redis sent for one create under the chain').to.be.below(4.5 * MB);
  });

  it('the check reads at most MAX_TAXONOMY_DEPTH ancestors (before: up to 10,000; here all 300)', async () => {
    // the editor (who may read every node) under the chain of 300: MAX_TAXONOMY_DEPTH ancestors, each
    // a head and a version read (and an alias looked up where one names it), counted on a store of
    // its own connection
    const redis: RedisClient = connectRedis(p.settings, { name: 'counted' });
    const sent: string[] = [];
    const send = redis.sendCommand.bind(redis) as (...args: unknown[]) => unknown;
    (redis as { sendCommand: unknown }).sendCommand = (...args: unknown[]) => {
      sent.push((args[0] as { name: string }).name);
      return send(...args);
    };
    try {
      await redis.ping();
      const store = new ContentStore(redis, p.settings.PARTITIONS, p.settings.EVENTS_MAXLEN, p.settings.DEDUP_TTL_SECONDS);
      // scripts loaded first, so that no NOSCRIPT retry is counted
      await store.headWithin('none', 0);
      await store.versionWithin('none', 'none', 0);
      sent.length = 0;
      await checkTaxonomyAspects(store, 'newcontentkey', { svcContentHierarchy: { name: 'x', parent: `${T}/deep299` } }, () => true);
      expect(sent.length, sent.join(' ')).to.be.at.most(3 * MAX_TAXONOMY_DEPTH);
      expect(sent.length, 'every ancestor up to the bound read').to.be.at.least(MAX_TAXONOMY_DEPTH);
    } finally {
      redis.disconnect();
    }
  });
});

describe('security: an entity hangs under its parent, and a dimension in a taxonomy, only when their contexts are the same (review 18, finding 3 and F4; then a taxonomy’s dimensions)', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;
  let anon: Client;
  const T = `tq${Date.now().toString(36)}`;
  const id = (s: string) => `${T}-${s}`;
  const ids: Record<string, string> = {};
  const structure = (path: string, as?: Client) => (as ?? anon).req('GET', `${p.url}/taxonomy-service/structure/${path}`, as ? {} : { token: null });
  const kids = async (path: string, as?: Client) => {
    const r = await structure(path, as);
    expect(r.status, `${path}: ${r.text}`).to.equal(200);
    return (r.json.entities as { id: string }[]).map((e) => e.id);
  };

  async function made(as: Client, key: string, envelope: Record<string, unknown>) {
    const r = await as.create(envelope);
    expect(r.status, `${key}: ${r.text}`).to.equal(201);
    ids[key] = r.json.system.id as string;
    return r;
  }
  const definition = (type: string, aspect: string, value: Record<string, unknown>, ctx: string[]) => ({
    system: { contentType: type },
    aspects: { [aspect]: { localizations: {}, ...value } },
    operations: [owners(ctx), { _type: 'svcSetAlias', namespace: '_taxonomy', alias: value.id }],
  });
  const hierarchyNode = (name: string, parent: string | undefined, ctx: string[], alias?: string) => ({
    system: { contentType: 'page' },
    aspects: { body: { title: name }, svcContentHierarchy: { name, ...(parent ? { parent } : {}) } },
    operations: [owners(ctx), PUBLIC, ...(alias ? [{ _type: 'svcSetAlias', namespace: T, alias }] : [])],
  });

  // Every write before the first read of the taxonomy: its first load reads them all.
  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    anon = new Client(p.base);
    // (a) culture's dimension and entity; the sportseditor's entity naming the dimension, and one naming nothing
    await made(
      editor,
      'arts',
      definition('svcDimensionDefinitionContent', 'svcDimensionDefinition', { id: id('arts'), name: 'Arts', enumerable: true }, ['culture']),
    );
    await made(
      editor,
      'opera',
      definition('svcEntityDefinitionContent', 'svcEntityDefinition', { id: id('opera'), name: 'Opera', parent: id('arts') }, ['culture']),
    );
    const intruder = await sports.create(
      definition('svcEntityDefinitionContent', 'svcEntityDefinition', { id: id('intruder'), name: 'Aaa Sports Betting Ads', parent: id('arts') }, ['sports']),
    );
    const nowhere = await sports.create(
      definition('svcEntityDefinitionContent', 'svcEntityDefinition', { id: id('nowhere'), name: 'Aaa Nowhere', parent: id('no-such-dimension') }, ['sports']),
    );
    // the same answer as for a parent that names nothing
    expect([intruder.status, nowhere.status], intruder.text).to.deep.equal([201, 201]);
    // (a) in the content hierarchy: culture's public root and child, the sportseditor's public node under the root
    await made(editor, 'root', hierarchyNode(`${T} Culture root`, undefined, ['culture']));
    await made(editor, 'child', hierarchyNode(`${T} Culture child`, ids.root, ['culture']));
    await made(sports, 'desk', hierarchyNode(`${T} Desk of the sports editors`, ids.root, ['sports']));
    // (b) a culture node whose parent alias names nothing, then the sportseditor's node taking that alias
    await made(editor, 'orphan', hierarchyNode(`${T} Culture desk`, `${T}/culture-root`, ['culture']));
    await made(sports, 'claim', hierarchyNode(`${T} Claimed root`, undefined, ['sports'], 'culture-root'));
    // (b) for definitions: a culture entity naming a dimension that does not exist, which the sportseditor then defines
    await made(
      editor,
      'waiting',
      definition('svcEntityDefinitionContent', 'svcEntityDefinition', { id: id('waiting'), name: 'Waiting', parent: id('claimed') }, ['culture']),
    );
    await made(
      sports,
      'claimed',
      definition('svcDimensionDefinitionContent', 'svcDimensionDefinition', { id: id('claimed'), name: 'Claimed', enumerable: true }, ['sports']),
    );
    // a node the sportseditor shares with culture is written by sports editors too: it holds only nodes shared alike
    await made(editor, 'orphan2', hierarchyNode(`${T} Culture desk 2`, `${T}/shared-root`, ['culture']));
    await made(editor, 'sharedkid', hierarchyNode(`${T} Shared desk`, `${T}/shared-root`, ['culture', 'sports']));
    await made(sports, 'shared', hierarchyNode(`${T} Shared root`, undefined, ['sports', 'culture'], 'shared-root'));
    // (F4) a node without owners whose parent alias names nothing, then the sportseditor's node taking that alias
    await made(editor, 'gorphan', hierarchyNode(`${T} Global desk`, `${T}/global-root`, []));
    await made(sports, 'gclaim', hierarchyNode(`${T} Claimed global root`, undefined, ['sports'], 'global-root'));
    // ... and under a node without owners, it hangs
    await made(editor, 'groot', hierarchyNode(`${T} Global root`, undefined, []));
    await made(editor, 'gchild', hierarchyNode(`${T} Global child`, ids.groot, []));
    // (F4) for definitions: an entity without owners naming a dimension that does not exist, which the sportseditor then defines
    await made(
      editor,
      'gwaiting',
      definition('svcEntityDefinitionContent', 'svcEntityDefinition', { id: id('gwaiting'), name: 'Global waiting', parent: id('gclaimed') }, []),
    );
    await made(
      sports,
      'gclaimed',
      definition('svcDimensionDefinitionContent', 'svcDimensionDefinition', { id: id('gclaimed'), name: 'Claimed by sports', enumerable: true }, ['sports']),
    );
    // (c) culture's taxonomy lists genres (defined), places (defined, then deleted: its alias is
    // free again), later (never defined) and the built-in dimension; the sportseditor takes the
    // aliases of places and later with dimensions and entities of its own
    await made(
      editor,
      'ctax',
      definition(
        'svcTaxonomyDefinitionContent',
        'svcTaxonomyDefinition',
        { id: id('ctax'), name: 'Culture', dimensions: [id('genres'), id('places'), id('later'), CONTENT_HIERARCHY_DIMENSION] },
        ['culture'],
      ),
    );
    await made(
      editor,
      'genres',
      definition('svcDimensionDefinitionContent', 'svcDimensionDefinition', { id: id('genres'), name: 'Genres', enumerable: true }, ['culture']),
    );
    await made(
      editor,
      'drama',
      definition('svcEntityDefinitionContent', 'svcEntityDefinition', { id: id('drama'), name: 'Drama', parent: id('genres') }, ['culture']),
    );
    const places = await made(
      editor,
      'places',
      definition('svcDimensionDefinitionContent', 'svcDimensionDefinition', { id: id('places'), name: 'Places', enumerable: true }, ['culture']),
    );
    const deleted = await editor.remove(ids.places, places.headers.get('etag')!);
    expect(deleted.status, deleted.text).to.equal(204);
    for (const dim of ['places', 'later']) {
      await made(
        sports,
        `s-${dim}`,
        definition('svcDimensionDefinitionContent', 'svcDimensionDefinition', { id: id(dim), name: `SPORTS ${dim}`, enumerable: true }, ['sports']),
      );
      await made(
        sports,
        `s-${dim}-e`,
        definition('svcEntityDefinitionContent', 'svcEntityDefinition', { id: id(`${dim}-e`), name: 'Injected by sportseditor', parent: id(dim) }, ['sports']),
      );
    }
    // (c, the converse) the sportseditor's taxonomy lists culture's genres beside a dimension of its own
    const sportsTaxonomy = { id: id('stax'), name: 'Sports', dimensions: [id('genres'), id('sdim')] };
    await made(sports, 'stax', definition('svcTaxonomyDefinitionContent', 'svcTaxonomyDefinition', sportsTaxonomy, ['sports']));
    await made(
      sports,
      'sdim',
      definition('svcDimensionDefinitionContent', 'svcDimensionDefinition', { id: id('sdim'), name: 'Sports dimension', enumerable: true }, ['sports']),
    );
  });
  after(async () => p?.stop());

  it("(a) the sportseditor's entity naming a culture dimension is on no tree: neither listed nor completed among its entities (before: both, to everyone)", async () => {
    // found by its id: the model holds it
    await eventually(async () => expect((await structure(id('intruder'))).status).to.equal(200), 10_000);
    expect(await kids(id('arts'))).to.deep.equal([id('opera')]);
    expect(await kids(id('arts'), editor)).to.deep.equal([id('opera')]);
    const completed = await anon.req('GET', `${p.url}/taxonomy-service/complete/${id('arts')}/Aaa`, { token: null });
    expect(completed.status, completed.text).to.equal(200);
    expect(completed.json.entities).to.deep.equal([]);
  });

  it("(a) in the content hierarchy: the sportseditor's node naming a culture node is not among its children (before: listed to everyone)", async () => {
    await eventually(async () => expect((await structure(ids.desk)).status).to.equal(200), 10_000);
    expect(await kids(ids.root)).to.deep.equal([ids.child]);
    expect(await kids(ids.root, editor)).to.deep.equal([ids.child]);
  });

  it('(b) a culture node whose parent alias names nothing does not hang under the node that takes the alias (before: it showed as its child)', async () => {
    await eventually(async () => expect((await structure(ids.claim)).status).to.equal(200), 10_000);
    expect(await kids(ids.claim)).to.deep.equal([]);
    expect(await kids(ids.claim, editor)).to.deep.equal([]);
    expect((await structure(ids.orphan)).status, 'the culture node, found by its id').to.equal(200);
    // the same for definitions
    expect(await kids(id('claimed'))).to.deep.equal([]);
    expect((await structure(id('waiting'))).status).to.equal(200);
    // where the node that takes the alias is shared with culture, culture's node does not hang there
    // either (before F4: it did): only the node shared alike
    expect(await kids(ids.shared, editor)).to.deep.equal([ids.sharedkid]);
    expect((await structure(ids.orphan2, editor)).status).to.equal(200);
  });

  it("(F4) a node or entity without owners whose parent alias names nothing does not hang under the sportseditor's node or definition that takes the alias (before: it did)", async () => {
    await eventually(async () => expect((await structure(id('gclaimed'))).status).to.equal(200), 10_000);
    expect(await kids(ids.gclaim)).to.deep.equal([]);
    expect(await kids(ids.gclaim, editor)).to.deep.equal([]);
    expect(await kids(ids.gclaim, sports)).to.deep.equal([]);
    expect((await structure(ids.gorphan)).status, 'the global node, found by its id').to.equal(200);
    expect(await kids(id('gclaimed'))).to.deep.equal([]);
    const completed = await anon.req('GET', `${p.url}/taxonomy-service/complete/${id('gclaimed')}/Global`, { token: null });
    expect(completed.status, completed.text).to.equal(200);
    expect(completed.json.entities).to.deep.equal([]);
    expect((await structure(id('gwaiting'))).status).to.equal(200);
    // a node without owners still hangs under one without owners
    expect(await kids(ids.groot)).to.deep.equal([ids.gchild]);
  });

  it("(c) a taxonomy shows a dimension it lists only when its contexts are the dimension's: the sportseditor's dimension holding the alias of one culture deleted, or never defined, is not in culture's taxonomy, nor culture's in the sportseditor's (before: both shown, with their entities, to everyone)", async () => {
    type Tree = { id: string; dimensions: { id: string; entities: { name: string }[] }[] };
    const dimensionsOf = (t: Tree | undefined) => t?.dimensions.map((d) => d.id);
    const ctax = async (as?: Client) => {
      const r = await structure(`${id('ctax')}?depth=2`, as);
      expect(r.status, r.text).to.equal(200);
      return r.json as Tree;
    };
    // the sportseditor's dimensions are in the model, found by their ids with their entities
    await eventually(async () => expect(await kids(id('later'))).to.deep.equal([id('later-e')]), 10_000);
    expect(await kids(id('places'))).to.deep.equal([id('places-e')]);
    for (const as of [undefined, editor, sports]) {
      const t = await ctax(as);
      expect(dimensionsOf(t), 'culture taxonomy').to.deep.equal([id('genres'), CONTENT_HIERARCHY_DIMENSION]);
      expect(JSON.stringify(t)).not.to.include('Injected by sportseditor');
      expect(t.dimensions[0].entities.map((e) => e.name)).to.deep.equal(['Drama']);
      const s = await structure(`${id('stax')}?depth=1`, as);
      expect(dimensionsOf(s.json), 'the sportseditor taxonomy').to.deep.equal([id('sdim')]);
    }
    // the listing of all taxonomies says the same
    const all = await anon.req('GET', `${p.url}/taxonomy-service/structure?depth=1`, { token: null });
    expect(all.status, all.text).to.equal(200);
    const listed = all.json as Tree[];
    expect(dimensionsOf(listed.find((t) => t.id === id('ctax')))).to.deep.equal([id('genres'), CONTENT_HIERARCHY_DIMENSION]);
    expect(dimensionsOf(listed.find((t) => t.id === id('stax')))).to.deep.equal([id('sdim')]);
  });

  it('a cycle through content the writer may not read is not refused: the answer is the one for a chain that does not come back, and culture nodes stay where they were (before: 400)', async () => {
    // culture: M under the sportseditor's S, C under M, D under C; another culture node N on no loop
    await made(sports, 's', hierarchyNode(`${T} S`, undefined, ['sports']));
    await made(editor, 'm', hierarchyNode(`${T} M`, ids.s, ['culture']));
    await made(editor, 'c', hierarchyNode(`${T} C`, ids.m, ['culture']));
    await made(editor, 'd', hierarchyNode(`${T} D`, ids.c, ['culture']));
    await made(editor, 'n', hierarchyNode(`${T} N`, undefined, ['culture']));
    const moveS = async (parent: string) => {
      const etag = (await sports.readContent(ids.s)).headers.get('etag')!;
      return sports.update(ids.s, { aspects: { svcContentHierarchy: { name: `${T} S`, parent } } }, etag, 'updateMode=merge');
    };
    const answer = (r: { status: number; json?: unknown }) => [r.status, Object.keys((r.json as { aspects?: object })?.aspects ?? {})];
    const noLoop = await moveS(ids.n);
    const loop = await moveS(ids.c);
    expect(answer(loop), JSON.stringify(loop.json)).to.deep.equal(answer(noLoop));
    expect(loop.status).to.equal(200);
    expect(loop.text).not.to.include(ids.m);
    // the loop S -> C -> M -> S passes through parents an entity may not hang under: nothing of culture is hidden
    await eventually(async () => expect(await kids(ids.c, editor)).to.deep.equal([ids.d]), 10_000);
    expect(await kids(ids.m, editor)).to.deep.equal([ids.c]);
    expect(await kids(ids.c, editor)).to.deep.equal([ids.d]);
  });
});
