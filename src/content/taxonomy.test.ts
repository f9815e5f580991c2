import { expect } from 'chai';
import { AppError } from '../errors.js';
import type { Snapshot } from './model.js';
import {
  addIndexedCompletions,
  buildTaxonomyModel,
  CONTENT_HIERARCHY,
  CONTENT_HIERARCHY_DIMENSION,
  completionLevels,
  completionOf,
  definedCompletions,
  definitionOf,
  type EntityDef,
  hierarchyNodeOf,
  MAX_COMPLETIONS,
  MAX_TAXONOMY_DEPTH,
  matchesLevels,
  type Sees,
  structureOf,
  type TaxonomyNode,
  taxonomyDepthOf,
} from './taxonomy.js';

const entity = (id: string, name: string, parent: string | null, over: Partial<EntityDef> = {}): EntityDef => ({
  kind: 'entity',
  id,
  name,
  localizations: {},
  parent,
  attributes: {},
  ...over,
});

const DEFS: TaxonomyNode[] = [
  { kind: 'taxonomy', id: 'news', name: 'News', dimensions: ['dimension.Tag', 'dimension.Missing'] },
  { kind: 'dimension', id: 'dimension.Tag', name: 'Tag', enumerable: false, localizations: { sv: 'Etikett' } },
  entity('tag.sport', 'Sport', 'dimension.Tag'),
  entity('tag.football', 'Football', 'tag.sport'),
  entity('tag.tennis', 'Tennis', 'tag.sport'),
  entity('tag.arts', 'Arts', 'dimension.Tag'),
  // a parent cycle: never shown
  entity('tag.a', 'A', 'tag.b'),
  entity('tag.b', 'B', 'tag.a'),
];

const all: Sees = () => true;

describe('taxonomy read model (spec "Taxonomy service", CONTRACT §10)', () => {
  it('definitionOf reads the definition aspects through their svcTaxonomy representation', () => {
    const held = ['_taxonomy/t', '_taxonomy/d', '_taxonomy/e'];
    expect(definitionOf({ svcTaxonomyDefinition: { id: 't', name: 'T', dimensions: ['d', 1] } }, held)).to.deep.equal({
      kind: 'taxonomy',
      id: 't',
      name: 'T',
      dimensions: ['d'],
      contexts: [],
    });
    expect(definitionOf({ svcDimensionDefinition: { id: 'd', name: 'D', enumerable: 'yes', localizations: { sv: 'X', n: 1 } } }, held)).to.deep.equal({
      kind: 'dimension',
      id: 'd',
      name: 'D',
      enumerable: false,
      localizations: { sv: 'X' },
      contexts: [],
    });
    expect(definitionOf({ svcEntityDefinition: { id: 'e', name: 'E', parent: 'd', attributes: { a: 'b' } } }, held)).to.deep.equal(
      entity('e', 'E', 'd', { attributes: { a: 'b' }, contexts: [] }),
    );
    // the contexts of the content holding it, which decide where it may hang (hangsUnder)
    expect(definitionOf({ svcEntityDefinition: { id: 'e', parent: 'd' } }, held, ['sports'])).to.have.deep.property('contexts', ['sports']);
    expect(definitionOf({ svcTaxonomyDefinition: { id: 't', dimensions: ['d'] } }, held, ['culture'])).to.have.deep.property('contexts', ['culture']);
    expect(definitionOf({ svcEntityDefinition: { id: 'e', parent: 7 } }, held), 'a parent that is no string').to.have.property('parent', null);
    expect(definitionOf({ body: { title: 'x' } }, held)).to.equal(null);
    // only in the content that holds its alias `_taxonomy/<id>`
    const d = { svcDimensionDefinition: { id: 'd', name: 'D' } };
    expect(definitionOf(d, [])).to.equal(null);
    expect(definitionOf(d, ['web/d', '_taxonomy/dd', '_taxonomy/x'])).to.equal(null);
    expect(definitionOf(d, ['_taxonomy/d'])).to.have.property('id', 'd');
  });

  it('hierarchyNodeOf: the main alias as id (and as name by default), the content type as an attribute, the head kept for visibility', () => {
    const head = { cid: 'k1', head: 'v1', meta: {} } as Snapshot;
    const node = hierarchyNodeOf('k1', head, 'article', { attributes: { x: 'y', contentType: 'forged' } }, CONTENT_HIERARCHY_DIMENSION);
    expect(node).to.deep.equal({
      kind: 'entity',
      id: 'contentid/k1',
      name: 'contentid/k1',
      localizations: {},
      parent: CONTENT_HIERARCHY_DIMENSION,
      attributes: { x: 'y', contentType: 'article' },
      head,
      contexts: [],
    });
    expect(hierarchyNodeOf('k1', head, 'article', { name: 'Home' }, 'contentid/k0').name).to.equal('Home');
    // its contexts are its content's owners, without __global__, each once
    const owned = { ...head, meta: { svcSecurityContext: { owners: ['sports', '__global__', 'culture', 'sports', 7] } } } as unknown as Snapshot;
    expect(hierarchyNodeOf('k1', owned, 'article', {}, CONTENT_HIERARCHY_DIMENSION).contexts).to.deep.equal(['sports', 'culture']);
  });

  it("buildTaxonomyModel: an entity hangs under its parent only when its contexts are the parent's (the same writers write both); otherwise it is on no tree, found by id", () => {
    const dim = (id: string, contexts?: string[]) => ({ kind: 'dimension' as const, id, name: id, enumerable: true, localizations: {}, contexts });
    const m = buildTaxonomyModel([
      dim('culture', ['culture']),
      dim('shared', ['sports', 'culture']),
      dim('global'),
      dim('global2', ['__global__']),
      entity('c.opera', 'Opera', 'culture', { contexts: ['culture'] }),
      // the finding: the sportseditor's entity under culture's dimension
      entity('s.intruder', 'Aaa intruder', 'culture', { contexts: ['sports'] }),
      entity('s.global', 'Sports under global', 'global', { contexts: ['sports'] }),
      // content without owners (__global__ only) hangs only under a parent without owners
      entity('g.any', 'Global under culture', 'culture', { contexts: [] }),
      entity('g.plain', 'Global under culture, no contexts', 'culture'),
      entity('g.global', 'Global under global', 'global', { contexts: [] }),
      entity('g.global2', 'Global under global, __global__ named', 'global2', { contexts: ['__global__'] }),
      // under shared content: only content shared alike (its writers write the parent and the parent's write it)
      entity('s.shared', 'Sports under shared', 'shared', { contexts: ['sports'] }),
      entity('c.shared', 'Culture under shared', 'shared', { contexts: ['culture'] }),
      entity('cs.shared', 'Shared under shared', 'shared', { contexts: ['culture', 'sports', 'culture'] }),
      entity('sc.culture', 'Shared under culture', 'culture', { contexts: ['sports', 'culture'] }),
      // a culture node under the sportseditor's node (which took the alias the culture node names)
      entity('s.claim', 'Sports claim', 's.intruder', { contexts: ['sports'] }),
      entity('c.adopted', 'Adopted', 's.claim', { contexts: ['culture'] }),
      // the built-in dimension holds every root of the content hierarchy
      entity('contentid/k1', 'Culture root', CONTENT_HIERARCHY_DIMENSION, { contexts: ['culture'] }),
    ]);
    const kids = (id: string) => m.children.get(id)?.map((e) => e.id) ?? [];
    expect(kids('culture')).to.deep.equal(['c.opera']);
    expect(kids('global')).to.deep.equal(['g.global']);
    expect(kids('global2')).to.deep.equal(['g.global2']);
    expect(kids('shared')).to.deep.equal(['cs.shared']);
    expect(kids('s.claim')).to.deep.equal([]);
    expect(kids(CONTENT_HIERARCHY_DIMENSION)).to.deep.equal(['contentid/k1']);
    // on no tree, found by id with the children that may hang under it
    const intruder = structureOf(m, 's.intruder', 1, all) as { entities: { id: string }[] };
    expect(intruder.entities.map((e) => e.id)).to.deep.equal(['s.claim']);
    expect(definedCompletions(m, 'culture', [['aaa']], all)).to.deep.equal([]);
    expect(definedCompletions(m, 'culture', [['global']], all)).to.deep.equal([]);
  });

  it("buildTaxonomyModel: an entity without owners whose parent names nothing is not taken by the sportseditor's definition or node that takes the parent's alias (finding F4)", () => {
    // the global dimension `politics` and node `contentid/home` were deleted (their aliases freed);
    // the sportseditor defines `politics` and makes a node with the alias the global node names
    const m = buildTaxonomyModel([
      entity('g.mayor', 'Mayor', 'politics'),
      entity('g.council', 'Council', 'politics', { contexts: [] }),
      entity('c.opera', 'Opera', 'politics', { contexts: ['culture'] }),
      { kind: 'dimension', id: 'politics', name: 'Politics', enumerable: true, localizations: {}, contexts: ['sports'] },
      entity('contentid/g1', 'Global desk', 'contentid/s1', { contexts: [] }),
      entity('contentid/s1', 'Sports page', CONTENT_HIERARCHY_DIMENSION, { contexts: ['sports'] }),
      // the same with a node the sportseditor shares with culture: a culture node is not taken either
      entity('contentid/c1', 'Culture desk', 'contentid/sc1', { contexts: ['culture'] }),
      entity('contentid/sc1', 'Shared page', CONTENT_HIERARCHY_DIMENSION, { contexts: ['sports', 'culture'] }),
    ]);
    expect(m.children.get('politics') ?? []).to.deep.equal([]);
    expect(m.children.get('contentid/s1') ?? []).to.deep.equal([]);
    expect(m.children.get('contentid/sc1') ?? []).to.deep.equal([]);
    expect(definedCompletions(m, 'politics', [['mayor']], all)).to.deep.equal([]);
    expect(definedCompletions(m, CONTENT_HIERARCHY_DIMENSION, [['global']], all)).to.deep.equal([]);
    // found by their ids, as entities whose parent names nothing
    expect((structureOf(m, 'g.mayor', 1, all) as { id: string }).id).to.equal('g.mayor');
    expect((structureOf(m, 'contentid/g1', 1, all) as { id: string }).id).to.equal('contentid/g1');
  });

  it('buildTaxonomyModel: a cycle closed through a parent an entity may not hang under hides nothing of the other contexts', () => {
    const dim = { kind: 'dimension' as const, id: 'culture', name: 'Culture', enumerable: true, localizations: {}, contexts: ['culture'] };
    // culture: C under the dimension, D under C, C... and the sportseditor's S, whose check of
    // S -> C stopped at C (it may not read it): C's parent is S, S's parent is C.
    const m = buildTaxonomyModel([
      dim,
      entity('c', 'C', 's', { contexts: ['culture'] }),
      entity('d', 'D', 'c', { contexts: ['culture'] }),
      entity('s', 'S', 'c', { contexts: ['sports'] }),
    ]);
    expect(m.children.get('c')?.map((e) => e.id)).to.deep.equal(['d']);
    expect(m.children.has('s'), 'c hangs under s nowhere').to.equal(false);
    // the same loop among contents of one context is never shown
    const loop = buildTaxonomyModel([dim, entity('a', 'A', 'b', { contexts: ['culture'] }), entity('b', 'B', 'a', { contexts: ['culture'] })]);
    expect(loop.children.has('a') || loop.children.has('b')).to.equal(false);
  });

  it('buildTaxonomyModel: a loop leaves out only the entities on it; one whose chain reaches the loop stays under its parent, cut off where the loop begins (finding F4)', () => {
    // the sportseditor's loop of 101 nodes (its write's parent check stops after MAX_TAXONOMY_DEPTH
    // ancestors), an entity of sports under one of them and its subtree, and one under that
    const ring = MAX_TAXONOMY_DEPTH + 1;
    const defs: TaxonomyNode[] = [{ kind: 'dimension', id: 'sports', name: 'Sports', enumerable: true, localizations: {}, contexts: ['sports'] }];
    for (let i = 0; i < ring; i++) defs.push(entity(`ring${i}`, `Ring ${i}`, `ring${(i + 1) % ring}`, { contexts: ['sports'] }));
    defs.push(
      entity('below', 'Below', 'ring7', { contexts: ['sports'] }),
      entity('leaf', 'Leaf', 'below', { contexts: ['sports'] }),
      entity('self', 'Self', 'self', { contexts: ['sports'] }),
      entity('under-self', 'Under self', 'self', { contexts: ['sports'] }),
      entity('team', 'Team', 'sports', { contexts: ['sports'] }),
    );
    const m = buildTaxonomyModel(defs);
    for (let i = 0; i < ring; i++) expect(m.children.get(`ring${(i + 1) % ring}`)?.map((e) => e.id) ?? [], `ring${i} on the loop`).not.to.include(`ring${i}`);
    expect(m.children.get('ring7')?.map((e) => e.id)).to.deep.equal(['below']);
    expect(m.children.get('below')?.map((e) => e.id)).to.deep.equal(['leaf']);
    expect(m.children.get('self')?.map((e) => e.id)).to.deep.equal(['under-self']);
    expect(m.children.get('sports')?.map((e) => e.id)).to.deep.equal(['team']);
    // found by its id with its subtree, as an entity whose parent is on no tree
    const below = structureOf(m, 'below', 2, all) as { entities: { id: string }[] };
    expect(below.entities.map((e) => e.id)).to.deep.equal(['leaf']);
    // a chain of 10,000 entities below a loop, and one of 10,000 not: each walked once
    const long: TaxonomyNode[] = [entity('x', 'X', 'y'), entity('y', 'Y', 'x')];
    for (let i = 0; i < 10_000; i++) long.push(entity(`l${i}`, `L${i}`, i === 0 ? 'x' : `l${i - 1}`), entity(`f${i}`, `F${i}`, i === 0 ? 'none' : `f${i - 1}`));
    const started = performance.now();
    const lm = buildTaxonomyModel(long);
    expect(performance.now() - started).to.be.below(3_000);
    expect(lm.children.get('x')?.map((e) => e.id)).to.deep.equal(['l0']);
    expect(lm.children.has('y')).to.equal(false);
    expect(lm.children.get('l9998')?.map((e) => e.id)).to.deep.equal(['l9999']);
  });

  it("buildTaxonomyModel: a taxonomy shows a dimension it lists only when its contexts are the dimension's (the same writers write both); the built-in dimension in any", () => {
    const dim = (id: string, contexts?: string[]): TaxonomyNode => ({ kind: 'dimension', id, name: id, enumerable: true, localizations: {}, contexts });
    const taxonomy = (id: string, dimensions: string[], contexts?: string[]): TaxonomyNode => ({ kind: 'taxonomy', id, name: id, dimensions, contexts });
    const listed = ['c.genres', 's.places', 'g.topics', 'g.topics2', 'cs.shared', CONTENT_HIERARCHY_DIMENSION, 'c.genres', 'missing'];
    const m = buildTaxonomyModel([
      dim('c.genres', ['culture']),
      // the finding: the sportseditor's dimension holding an alias culture's taxonomy lists (deleted, or never defined)
      dim('s.places', ['sports']),
      dim('g.topics'),
      dim('g.topics2', ['__global__']),
      dim('cs.shared', ['sports', 'culture']),
      entity('s.injected', 'Injected', 's.places', { contexts: ['sports'] }),
      taxonomy('culture', listed, ['culture']),
      taxonomy('sports', listed, ['sports']),
      taxonomy('global', listed),
      taxonomy('shared', listed, ['culture', 'sports', '__global__']),
    ]);
    type Tree = { id: string; dimensions: { id: string }[] };
    const ids = (t: Tree | undefined) => t?.dimensions.map((d) => d.id);
    const tree = (t: string) => structureOf(m, t, 1, all) as Tree;
    expect(ids(tree('culture'))).to.deep.equal(['c.genres', CONTENT_HIERARCHY_DIMENSION]);
    expect(ids(tree('sports'))).to.deep.equal(['s.places', CONTENT_HIERARCHY_DIMENSION]);
    expect(ids(tree('global'))).to.deep.equal(['g.topics', 'g.topics2', CONTENT_HIERARCHY_DIMENSION]);
    expect(ids(tree('shared'))).to.deep.equal(['cs.shared', CONTENT_HIERARCHY_DIMENSION]);
    // the listing of every taxonomy says the same
    const list = structureOf(m, null, 1, all) as Tree[];
    for (const t of ['culture', 'sports', 'global', 'shared']) expect(ids(list.find((x) => x.id === t)), t).to.deep.equal(ids(tree(t)));
    expect(ids(list.find((t) => t.id === CONTENT_HIERARCHY))).to.deep.equal([CONTENT_HIERARCHY_DIMENSION]);
    // a dimension in no taxonomy it is listed by is found by its id with its entities
    expect((structureOf(m, 's.places', 1, all) as { entities: { id: string }[] }).entities.map((e) => e.id)).to.deep.equal(['s.injected']);
  });

  it('buildTaxonomyModel: built-ins always present and winning, children sorted by name then id, parent cycles left out', () => {
    const m = buildTaxonomyModel([...DEFS, { kind: 'taxonomy', id: CONTENT_HIERARCHY, name: 'forged', dimensions: [] }]);
    expect(m.taxonomies.map((t) => t.id)).to.deep.equal([CONTENT_HIERARCHY, 'news']);
    expect((m.byId.get(CONTENT_HIERARCHY) as { name: string }).name).to.equal('Content hierarchy');
    expect(m.byId.get(CONTENT_HIERARCHY_DIMENSION)?.kind).to.equal('dimension');
    expect(m.children.get('dimension.Tag')?.map((e) => e.id)).to.deep.equal(['tag.arts', 'tag.sport']);
    expect(m.children.get('tag.sport')?.map((e) => e.id)).to.deep.equal(['tag.football', 'tag.tennis']);
    expect(m.children.has('tag.a') || m.children.has('tag.b'), 'entities on a cycle').to.equal(false);
    const twins = buildTaxonomyModel([entity('z', 'Same', 'd'), entity('y', 'Same', 'd')]);
    expect(twins.children.get('d')?.map((e) => e.id)).to.deep.equal(['y', 'z']);
  });

  it('taxonomyDepthOf: default and maximum 100, a non-negative integer or 400', () => {
    expect(taxonomyDepthOf(null)).to.equal(MAX_TAXONOMY_DEPTH);
    expect(taxonomyDepthOf('')).to.equal(MAX_TAXONOMY_DEPTH);
    expect(taxonomyDepthOf('0')).to.equal(0);
    expect(taxonomyDepthOf('7')).to.equal(7);
    expect(taxonomyDepthOf('999999999')).to.equal(MAX_TAXONOMY_DEPTH);
    for (const bad of ['-1', '1.5', 'x', '1e3', '1234567890']) {
      expect(() => taxonomyDepthOf(bad), bad)
        .to.throw(AppError)
        .with.property('http', 400);
    }
  });

  it('structureOf: the tree down to depth levels, childrenOmitted exactly where the depth left children out', () => {
    const m = buildTaxonomyModel(DEFS);
    const list = structureOf(m, null, 1, all) as { id: string; dimensions: { id: string; entities: unknown[]; childrenOmitted: boolean }[] }[];
    expect(list.map((t) => t.id)).to.deep.equal([CONTENT_HIERARCHY, 'news']);
    const news = list[1];
    expect(
      news.dimensions.map((d) => d.id),
      'a dimension that is not defined is left out',
    ).to.deep.equal(['dimension.Tag']);
    expect(news.dimensions[0].entities).to.deep.equal([]);
    expect(news.dimensions[0].childrenOmitted).to.equal(true);
    expect(structureOf(m, 'news', 0, all)).to.deep.equal({ id: 'news', name: 'News', dimensions: [] });
    expect(structureOf(m, 'tag.sport', 1, all)).to.deep.equal({
      id: 'tag.sport',
      name: 'Sport',
      localizations: {},
      attributes: {},
      childrenOmitted: false,
      entities: [
        { id: 'tag.football', name: 'Football', localizations: {}, attributes: {}, entities: [], childrenOmitted: false },
        { id: 'tag.tennis', name: 'Tennis', localizations: {}, attributes: {}, entities: [], childrenOmitted: false },
      ],
    });
    expect(structureOf(m, 'dimension.Tag', 100, all))
      .to.have.property('localizations')
      .that.deep.equals({ sv: 'Etikett' });
    expect(structureOf(m, 'tag.a', 100, all), 'an entity on a cycle is found by id, without children')
      .to.have.property('entities')
      .that.deep.equals([]);
    expect(structureOf(m, 'nothing', 100, all)).to.equal(null);
  });

  it('structureOf: a node the caller may not see answers as missing and hides its subtree', () => {
    const m = buildTaxonomyModel(DEFS);
    const noSport: Sees = (e) => e.id !== 'tag.sport';
    expect(structureOf(m, 'tag.sport', 100, noSport)).to.equal(null);
    const dim = structureOf(m, 'dimension.Tag', 100, noSport) as { entities: { id: string }[] };
    expect(dim.entities.map((e) => e.id)).to.deep.equal(['tag.arts']);
    const shallow = structureOf(m, 'dimension.Tag', 0, (e) => e.id === 'nothing') as { childrenOmitted: boolean };
    expect(shallow.childrenOmitted, 'children the caller cannot see are not omitted ones').to.equal(false);
    expect(structureOf(m, 'tag.football', 100, noSport), 'below a hidden node, a node is still found by its id').to.not.equal(null);
  });

  it('completion: levels of lowercased tokens; defined entities matched on their last levels, seen with every ancestor', () => {
    expect(completionLevels(' Foo  bar/ /Baz ')).to.deep.equal([['foo', 'bar'], ['baz']]);
    expect(completionLevels('/ /')).to.deep.equal([]);
    expect(matchesLevels(['Sport', 'Football'], [['s'], ['f']])).to.equal(true);
    expect(matchesLevels(['Sport', 'Football'], [['f']])).to.equal(true);
    expect(matchesLevels(['Sport'], [['s'], ['f']])).to.equal(false);
    const m = buildTaxonomyModel(DEFS);
    expect(definedCompletions(m, 'dimension.Tag', [['s']], all).map((c) => c.path)).to.deep.equal([['Sport']]);
    expect(definedCompletions(m, 'dimension.Tag', [['t']], all).map((c) => c.path.join('/'))).to.deep.equal(['Sport/Tennis']);
    expect(
      definedCompletions(m, 'dimension.Tag', [['t']], (e) => e.id !== 'tag.sport'),
      'an entity below one the caller may not see',
    ).to.deep.equal([]);
  });

  it('completion: index paths add what no definition has, once, up to the limit; the result has the Dimension shape', () => {
    const m = buildTaxonomyModel(DEFS);
    const levels = [['s']];
    const matches = definedCompletions(m, 'dimension.Tag', levels, all);
    addIndexedCompletions(m, 'dimension.Tag', levels, matches, ['Sport', 'Sailing', 'Arts/Sculpture', 'Tennis'], all);
    expect(matches.map((c) => c.path.join('/'))).to.deep.equal(['Sport', 'Sailing', 'Arts/Sculpture']);
    const dim = m.byId.get('dimension.Tag');
    if (dim?.kind !== 'dimension') throw new Error('no dimension');
    expect(completionOf(m, dim, matches, all)).to.deep.equal({
      id: 'dimension.Tag',
      name: 'Tag',
      localizations: { sv: 'Etikett' },
      enumerable: false,
      childrenOmitted: false,
      entities: [
        { id: 'tag.sport', name: 'Sport', entities: [], attributes: {}, childrenOmitted: true },
        { id: 'Sailing', name: 'Sailing', entities: [], attributes: {}, childrenOmitted: false },
        { id: 'Arts/Sculpture', name: 'Sculpture', entities: [], attributes: {}, childrenOmitted: false },
      ],
    });
    expect(completionOf(m, dim, matches.slice(0, 1), (e) => e.id === 'tag.sport').entities[0].childrenOmitted, 'only children the caller sees count').to.equal(
      false,
    );
    // An entity the caller does not see is as if it did not exist: the same indexed path is
    // completed as for a model without it (left out, it told that the entity exists).
    const noSport = (e: TaxonomyNode) => e.id !== 'tag.sport';
    const without = buildTaxonomyModel(DEFS.filter((d) => !['tag.sport', 'tag.tennis', 'tag.football'].includes(d.id)));
    for (const [model, sees] of [
      [m, noSport],
      [without, all],
    ] as const) {
      const hidden = definedCompletions(model, 'dimension.Tag', levels, sees);
      addIndexedCompletions(model, 'dimension.Tag', levels, hidden, ['Sport', 'Sailing'], sees);
      expect(
        completionOf(model, dim, hidden, sees).entities.map((e) => e.id),
        'the same with and without the hidden entity',
      ).to.deep.equal(['Sport', 'Sailing']);
    }
    const many = Array.from({ length: MAX_COMPLETIONS + 5 }, (_, i) => `S${i}`);
    const capped = definedCompletions(m, 'dimension.Tag', levels, all);
    addIndexedCompletions(m, 'dimension.Tag', levels, capped, many, all);
    expect(capped).to.have.length(MAX_COMPLETIONS);
  });
});
