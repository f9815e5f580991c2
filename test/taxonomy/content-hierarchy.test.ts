import { expect } from 'chai';
import { loadVariantsConfig } from '../../config/variants.js';
import { ContentStore } from '../../src/adapters/content-store.js';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { Variants } from '../../src/content/variants.js';
import type { Exchange } from '../../src/gateway/http.js';
import { TaxonomyService } from '../../src/gateway/taxonomy-service.js';
import { composeVariant } from '../../src/gateway/variant-reads.js';
import { loadSecurityConfig } from '../../src/security/security-config.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * The special `contentHierarchy` taxonomy (spec "Taxonomy resources": it "models hierarchies
 * among contents"): contents holding the `svcContentHierarchy` aspect are the entities of its
 * one dimension `contentHierarchy.contents`, each under the content its `parent` names (by
 * content id or any alias), roots under the dimension. Entity ids are content ids.
 */
describe('contentHierarchy taxonomy (spec Taxonomy resources)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  const T = `h${Date.now().toString(36)}`;
  const ids: Record<string, string> = {};
  const etags: Record<string, string> = {};

  async function node(key: string, type: string, hierarchy: Record<string, unknown>, alias?: string) {
    const r = await editor.create({
      system: { contentType: type },
      aspects: { body: { title: key }, svcContentHierarchy: hierarchy },
      operations: alias ? [{ _type: 'svcSetAlias', namespace: T, alias }] : [],
    });
    expect(r.status, r.text).to.equal(201);
    ids[key] = r.json.system.id;
    etags[key] = r.headers.get('etag')!;
  }
  const entityIds = (list: { id: string }[]) => list.map((e) => e.id);

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    await node('home', 'page', { name: `${T} Home`, localizations: { de: 'Startseite' } });
    await node('sport', 'page', { name: 'Sport', parent: ids.home }, 'sport');
    await node('culture', 'page', { name: 'Culture', parent: ids.home });
    // the parent given by another alias than the content id
    await node('match', 'article', { name: 'Match Report', parent: `${T}/sport`, attributes: { byline: 'AP' } });
  });
  after(async () => p?.stop());

  it('GET structure/contentHierarchy: the taxonomy, its dimension and the contents as entities under their parents', async () => {
    const r = await eventually(async () => {
      const r = await editor.taxonomyStructure('contentHierarchy');
      expect(r.status, r.text).to.equal(200);
      expect(entityIds(r.json.dimensions[0].entities)).to.include(ids.home);
      return r;
    });
    expect(r.json).to.deep.include({ id: 'contentHierarchy', name: 'Content hierarchy' });
    const dim = r.json.dimensions[0];
    expect(dim).to.deep.include({ id: 'contentHierarchy.contents', enumerable: true, childrenOmitted: false });
    const home = dim.entities.find((e: { id: string }) => e.id === ids.home);
    expect(home).to.deep.equal({
      id: ids.home,
      name: `${T} Home`,
      localizations: { de: 'Startseite' },
      attributes: { contentType: 'page' },
      childrenOmitted: false,
      entities: [
        { id: ids.culture, name: 'Culture', localizations: {}, attributes: { contentType: 'page' }, entities: [], childrenOmitted: false },
        {
          id: ids.sport,
          name: 'Sport',
          localizations: {},
          attributes: { contentType: 'page' },
          childrenOmitted: false,
          entities: [
            {
              id: ids.match,
              name: 'Match Report',
              localizations: {},
              attributes: { byline: 'AP', contentType: 'article' },
              entities: [],
              childrenOmitted: false,
            },
          ],
        },
      ],
    });
    // listed among all taxonomies too
    const all = await editor.taxonomyStructure();
    expect(all.json.map((t: { id: string }) => t.id)).to.include('contentHierarchy');
  });

  it('GET structure/<content id> (it holds a slash) with depth, childrenOmitted where cut', async () => {
    const r = await editor.taxonomyStructure(ids.home, 1);
    expect(r.status, r.text).to.equal(200);
    expect(entityIds(r.json.entities)).to.deep.equal([ids.culture, ids.sport]);
    expect(r.json.entities[1]).to.deep.include({ entities: [], childrenOmitted: true });
    // the same id unencoded, as two path segments
    const raw = await editor.req('GET', `${p.url}/taxonomy-service/structure/${ids.home}?depth=0`);
    expect(raw.status).to.equal(200);
    expect(raw.json).to.deep.include({ id: ids.home, entities: [], childrenOmitted: true });
  });

  it('nodes are seen by who may see their content (CONTRACT §20): anonymous callers the public ones, a caller with a token those it may Read', async () => {
    const sports = await new Client(p.base).login('sportseditor');
    const anon = new Client(p.base);
    const make = async (who: Client, name: string, parent: string | undefined, owners: string[], views: string[]) => {
      const r = await who.create({
        system: { contentType: 'page' },
        aspects: { svcContentHierarchy: { name, ...(parent ? { parent } : {}) } },
        operations: [
          { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners } } },
          ...(views.length ? [{ _type: 'svcAssignToViews', views }] : []),
        ],
      });
      expect(r.status, r.text).to.equal(201);
      return r.json.system.id as string;
    };
    const root = await make(editor, `${T} Root`, undefined, ['culture'], ['svcPublic']);
    const secret = await make(editor, `${T} Secret`, root, ['culture'], []);
    const below = await make(editor, `${T} Below`, secret, ['culture'], ['svcPublic']);
    const sportsOwn = await make(sports, `${T} Desk`, root, ['sports'], []);
    const kids = async (c: Client, id: string) => {
      const r = await c.req('GET', `${p.url}/taxonomy-service/structure/${id}?depth=1`);
      expect(r.status, r.text).to.equal(200);
      return entityIds(r.json.entities);
    };
    // the sportseditor's node names the culture root as its parent, but hangs under it for nobody:
    // its writers may not write the root (SECURITY.md, hangsUnder); it is found by its id
    await eventually(async () => expect((await editor.req('GET', `${p.url}/taxonomy-service/structure/${sportsOwn}`)).status).to.equal(200));
    expect(await kids(editor, root)).to.deep.equal([secret]);
    expect(await kids(anon, root), 'anonymous').to.deep.equal([]);
    // with a token the rule is Read (as in search): the culture root is not the sportseditor's,
    // its own node below it is found by id
    expect((await sports.req('GET', `${p.url}/taxonomy-service/structure/${root}`)).status).to.equal(404);
    expect((await sports.req('GET', `${p.url}/taxonomy-service/structure/${sportsOwn}`)).status).to.equal(200);
    // a node the caller may not see answers 404, as a node that does not exist
    expect((await anon.req('GET', `${p.url}/taxonomy-service/structure/${secret}`)).status).to.equal(404);
    expect((await sports.req('GET', `${p.url}/taxonomy-service/structure/${secret}`)).status).to.equal(404);
    // below it, a public node is found by its id (as if its parent did not exist) but never
    // completed through its parent's name
    expect((await anon.req('GET', `${p.url}/taxonomy-service/structure/${below}`)).status).to.equal(200);
    const complete = (c: Client, input: string) => c.req('GET', `${p.url}/taxonomy-service/complete/contentHierarchy.contents/${encodeURIComponent(input)}`);
    expect(entityIds((await complete(editor, `${T} Sec/${T} Bel`)).json.entities)).to.deep.equal([below]);
    expect(entityIds((await complete(anon, `${T} Sec/${T} Bel`)).json.entities)).to.deep.equal([]);
    expect(entityIds((await complete(anon, `${T} Bel`)).json.entities)).to.deep.equal([]);
    expect(entityIds((await complete(anon, `${T} Ro`)).json.entities)).to.deep.equal([root]);
    expect((await complete(anon, `${T} Ro`)).json.entities[0].childrenOmitted, 'anonymous sees no child of root').to.equal(false);
    expect((await complete(editor, `${T} Ro`)).json.entities[0].childrenOmitted).to.equal(true);
    // a bad token is refused, not read as anonymous
    expect((await anon.req('GET', `${p.url}/taxonomy-service/structure/${root}`, { token: 'not-a-token' })).status).to.equal(401);
  });

  it('a parent that makes a cycle among contents is refused with 400 and changes nothing', async () => {
    const r = await editor.update(ids.home, { aspects: { svcContentHierarchy: { name: 'Home', parent: ids.match } } }, etags.home, 'updateMode=merge');
    expect(r.status, r.text).to.equal(400);
    expect(r.json.extraInfo).to.deep.equal({ field: 'svcContentHierarchy.parent', cycle: [ids.home, ids.match, `${T}/sport`, ids.home] });
    expect((await editor.readContent(ids.home)).headers.get('etag')).to.equal(etags.home);
    const self = await editor.update(ids.sport, { aspects: { svcContentHierarchy: { name: 'Sport', parent: `${T}/sport` } } }, etags.sport, 'updateMode=merge');
    expect(self.status, self.text).to.equal(400);
  });

  it('a cycle through content the writer may not read is not refused: the check stops at that content, and the loop hides nothing of it', async () => {
    // S in sports; C (culture) under an unreadable middle M (culture) under S. The sportseditor
    // sets S under C. Refusing it would tell that C's chain leads back to S (before, 400 "makes a
    // cycle through content you may not read"), so its check stops at C as at a root; readers
    // never show a loop, and S hangs under C for nobody (its contexts are not C's).
    const owners = (o: string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: o } } });
    const make = async (title: string, ctx: string[], parent?: string) => {
      const r = await editor.create({
        system: { contentType: 'page' },
        aspects: { body: { title }, svcContentHierarchy: parent ? { name: title, parent } : { name: title } },
        operations: [owners(ctx)],
      });
      expect(r.status, r.text).to.equal(201);
      return { id: r.json.system.id as string, etag: r.headers.get('etag')! };
    };
    const s = await make(`${T} S`, ['sports']);
    const m = await make(`${T} M`, ['culture'], s.id);
    const c = await make(`${T} C`, ['culture'], m.id);
    const d = await make(`${T} D`, ['culture'], c.id);
    // One who may read them all is refused, and sees the chain.
    const all = await editor.update(s.id, { aspects: { svcContentHierarchy: { name: 'S', parent: c.id } } }, s.etag, 'updateMode=merge');
    expect(all.status, all.text).to.equal(400);
    expect(all.json.extraInfo).to.deep.equal({ field: 'svcContentHierarchy.parent', cycle: [s.id, c.id, m.id, s.id] });
    const sports = await new Client(p.base).login('sportseditor');
    const r = await sports.update(s.id, { aspects: { svcContentHierarchy: { name: 'S', parent: c.id } } }, s.etag, 'updateMode=merge');
    expect(r.status, r.text).to.equal(200);
    expect(r.text).not.to.include(m.id);
    await eventually(async () => {
      const below = await editor.taxonomyStructure(c.id, 1);
      expect(entityIds(below.json.entities)).to.deep.equal([d.id]);
    });
    expect(entityIds((await editor.taxonomyStructure(m.id, 1)).json.entities)).to.deep.equal([c.id]);
  });

  it('completion on contentHierarchy.contents matches name paths of contents', async () => {
    const r = await editor.taxonomyComplete('contentHierarchy.contents', `${T} H/Sp/Ma`);
    expect(r.status, r.text).to.equal(200);
    expect(r.json.entities).to.deep.equal([
      { id: ids.match, name: 'Match Report', entities: [], attributes: { byline: 'AP', contentType: 'article' }, childrenOmitted: false },
    ]);
    const sp = (await editor.taxonomyComplete('contentHierarchy.contents', 'Sp')).json.entities;
    expect(entityIds(sp), JSON.stringify(sp)).to.deep.equal([ids.sport]);
  });

  it('a moved content moves with its children; a deleted one leaves the hierarchy', async () => {
    const moved = await editor.update(ids.sport, { aspects: { svcContentHierarchy: { name: 'Sport', parent: ids.culture } } }, etags.sport, 'updateMode=merge');
    expect(moved.status, moved.text).to.equal(200);
    await eventually(async () => {
      const c = await editor.taxonomyStructure(ids.culture, 2);
      expect(entityIds(c.json.entities)).to.deep.equal([ids.sport]);
      expect(entityIds(c.json.entities[0].entities)).to.deep.equal([ids.match]);
    });
    const del = await editor.remove(ids.match, (await editor.readContent(ids.match)).headers.get('etag')!);
    expect(del.status, del.text).to.equal(204);
    await eventually(async () => expect((await editor.taxonomyStructure(ids.match)).status).to.equal(404));
    expect((await editor.taxonomyStructure(ids.sport)).json).to.deep.include({ entities: [], childrenOmitted: false });
  });

  describe('lookups are made together, not one call to Redis each', () => {
    /** A store on a connection of its own, and the commands sent on it (every call to Redis, one each). */
    let redis: RedisClient;
    let store: ContentStore;
    const sent: string[] = [];
    before(async () => {
      redis = connectRedis(p.settings, { name: 'counted' });
      const send = redis.sendCommand.bind(redis) as (...args: unknown[]) => unknown;
      (redis as { sendCommand: unknown }).sendCommand = (...args: unknown[]) => {
        sent.push((args[0] as { name: string }).name);
        return send(...args);
      };
      await redis.ping();
      store = new ContentStore(redis, p.settings.PARTITIONS, p.settings.EVENTS_MAXLEN, p.settings.DEDUP_TTL_SECONDS);
    });
    after(() => redis?.disconnect());
    const counted = async <T>(run: () => Promise<T>): Promise<{ value: T; calls: number }> => {
      sent.length = 0;
      const value = await run();
      return { value, calls: sent.length };
    };
    const created = async (body: Record<string, unknown>, operations: unknown[] = []) => {
      const r = await editor.create({ system: { contentType: 'page' }, aspects: { body: { title: 'x' }, ...body }, operations });
      expect(r.status, r.text).to.equal(201);
      return r.json.system.id as string;
    };
    const deletedId = async () => {
      const id = await created({});
      expect((await editor.remove(id, (await editor.readContent(id)).headers.get('etag')!)).status).to.equal(204);
      return id;
    };

    it('a load of the taxonomy reads its contents a partition at a time and resolves their parents together: before, three calls per content hierarchy node', async () => {
      const top = await created({ svcContentHierarchy: { name: `${T} Top` } }, [{ _type: 'svcSetAlias', namespace: T, alias: 'top' }]);
      const gone = await deletedId();
      const kids: string[] = [];
      for (let i = 0; i < 120; i++) kids.push(await created({ svcContentHierarchy: { name: `${T} Kid ${i}`, parent: i % 2 ? top : `${T}/top` } }));
      // parents that name no content: deleted, an alias nobody holds, no reference at all
      const orphans = [
        await created({ svcContentHierarchy: { name: `${T} Orphan 1`, parent: gone } }),
        await created({ svcContentHierarchy: { name: `${T} Orphan 2`, parent: `${T}/nobody` } }),
        await created({ svcContentHierarchy: { name: `${T} Orphan 3`, parent: 'nonsense' } }),
      ];
      const gateway = await eventually(async () => {
        const r = await editor.taxonomyStructure(top, 1);
        expect(entityIds(r.json.entities)).to.have.members(kids);
        return r.json;
      });
      const svc = new TaxonomyService({ store, settings: p.settings, engine: null, tokens: p.tokens!, security: loadSecurityConfig(), clock: Date.now });
      const answers: unknown[] = [];
      const x = () =>
        ({
          method: 'GET',
          query: new URLSearchParams('depth=1'),
          header: (name: string) => (name === 'x-auth-token' ? editor.token : undefined),
          sendJson: (status: number, body: unknown) => answers.push([status, body]),
        }) as unknown as Exchange;
      const { calls } = await counted(() => svc.handle(x(), ['structure', ...top.split('/')]));
      expect(answers).to.deep.equal([[200, gateway]]);
      for (const orphan of orphans) expect((await editor.taxonomyStructure(orphan)).status, 'an orphan is on no tree but found by id').to.equal(200);
      // every content of the taxonomy catalog (the whole run's), read LOAD_BATCH (500) at a time:
      // per partition its catalog, then per batch one read of heads and versions, one of the
      // parents' heads per partition, and one MGET of the parents' aliases
      const partitions = p.settings.PARTITIONS;
      let members = 0;
      for (let q = 0; q < partitions; q++) members += await p.redis.scard(`cat:{${q}}:tx`);
      expect(members).to.be.above(kids.length);
      expect(calls, `${members} contents`).to.be.at.most(partitions + Math.ceil(members / 500) * (2 * partitions + 1));
    });

    it('a read in the variant svcIndexing looks up the ids of its categorization together: before, one call each (400 ids, 400 calls)', async () => {
      const gone = await deletedId();
      const hierarchy = [
        { id: ids.home, name: 'home' },
        { id: `${T}/sport`, name: 'sport by alias', entities: [{ id: ids.culture, name: 'culture below' }] },
        { id: gone, name: 'deleted' },
        { id: `${T}/nobody`, name: 'an alias nobody holds' },
        { id: 'nonsense', name: 'no reference' },
        ...Array.from({ length: 295 }, (_, i) => ({ id: `contentid/${T}nothing${i}`, name: `nothing ${i}` })),
      ];
      const topics = Array.from({ length: 100 }, (_, i) => ({ id: `${T}-topic-${i}`, name: `topic ${i}` }));
      const id = await created({
        svcCategorization: {
          dimensions: [
            { id: 'contentHierarchy.contents', entities: hierarchy },
            { id: 'topics', entities: topics },
          ],
        },
      });
      const read = await editor.read(`/content/alias/${id}?variant=svcIndexing`);
      expect(read.status, read.text).to.equal(200);
      const doc = read.json.aspects.svcSolrDocument;
      expect(doc.svc_tag_id_contentHierarchy_contents_ss).to.deep.equal([ids.home, `${T}/sport`, `${T}/sport/${ids.culture}`]);
      expect(doc.svc_tag_id_topics_ss).to.equal(undefined);
      // the gateway's composition on a counted store: the same document, in a few calls
      const key = id.split('/')[1];
      const head = (await store.head(key))!;
      const version = (await store.version(key, head.head))!;
      const variants = new Variants(loadVariantsConfig());
      const { value, calls } = await counted(() => composeVariant({ variants, store }, 'svcIndexing', head, version));
      expect(value?.svcSolrDocument).to.deep.equal(doc);
      // the heads of the content ids (one call per partition) and the aliases (one MGET each for
      // the hierarchy's and the topics' `_taxonomy/<id>`)
      expect(calls).to.be.at.most(p.settings.PARTITIONS + 2);
    });
  });
});
