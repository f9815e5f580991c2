import { expect } from 'chai';
import type { Aspects, Json, Snapshot, VersionRecord } from './model.js';
import { indexingCategorization, indexingStandard, type ComposeContext } from './variants.js';

/**
 * The composers of svcIndexing hold a content stored before the bounds of search documents to
 * them (SECURITY.md "Index documents"): at most 50 views, 64 date ranges of the content's own,
 * 1,000 categorization entities and 200,000 characters of tag paths, the first ones, and say
 * what they left out; a content within them is composed exactly as before.
 */
const snapshot = (views: Record<string, string>, windows: Record<string, { onTime?: string; offTime?: string }> = {}): Snapshot => ({
  cid: 'K',
  rev: 3,
  type: 'article',
  head: 'V1',
  created: 0,
  modified: 0,
  committer: 'u',
  deleted: false,
  views,
  symbolic: {},
  meta: { svcTimeState: { _type: 'svcTimeState', views: windows } },
  aliases: [],
});
const context = (s: Snapshot, aspects: Aspects, extra: Partial<ComposeContext> = {}): ComposeContext => ({
  snapshot: s,
  version: { key: 'V1', type: 'article', aspects, created: 0, creator: 'u', rev: 1 } satisfies VersionRecord,
  hasTaxonomyContent: async () => true,
  ...extra,
});
type Doc = Record<string, Json>;
async function compose(s: Snapshot, aspects: Aspects, extra: Partial<ComposeContext> = {}): Promise<Doc> {
  const ctx = context(s, aspects, extra);
  const standard = await indexingStandard(aspects, ctx);
  const out = await indexingCategorization(standard!, ctx);
  return out!.svcSolrDocument as Doc;
}
const fieldsLike = (doc: Doc, re: RegExp) => Object.keys(doc).filter((k) => re.test(k));
const valuesOf = (doc: Doc, re: RegExp) => fieldsLike(doc, re).flatMap((k) => (Array.isArray(doc[k]) ? (doc[k] as Json[]) : [doc[k]]));

describe('svcIndexing composers: content stored before the bounds of search documents', () => {
  it('a version on 10,000 views is indexed on 50 of them, the indexed views first (svcPublic, whose name sorts late, is kept), each with its window', async () => {
    const views: Record<string, string> = { svcLatest: 'V1', svcPublic: 'V1' };
    const windows: Record<string, { onTime: string; offTime: string }> = {};
    for (let i = 0; i < 9998; i++) {
      views[`a${i}`] = 'V1';
      windows[`a${i}`] = { onTime: '2026-01-01T00:00:00.001Z', offTime: '2026-06-01T00:00:00.998Z' };
    }
    const notes: string[] = [];
    const doc = await compose(
      snapshot(views, windows),
      { body: { _type: 'body', title: 't' } },
      { preferredViews: ['svcLatest', 'svcPublic'], trimmed: (n) => notes.push(n) },
    );
    const indexed = doc.svc_views_ss as string[];
    expect(indexed).to.have.length(50);
    expect(indexed).to.include.members(['svcLatest', 'svcPublic']);
    expect(indexed).to.deep.equal([...indexed].sort());
    expect(fieldsLike(doc, /^svc_timestate_.+_drange$/)).to.have.length(50);
    expect(doc.svc_timestate__drange).to.have.length(50);
    expect(doc.svc_timestate_svcPublic_drange).to.equal('[0000 TO 9999]');
    expect(doc.svc_index_trimmed_ss).to.deep.equal(['views']);
    expect(notes).to.have.length(1);
    expect(notes[0]).to.contain('50 of').and.contain('10000');
  });

  it("4,000 date ranges of the content's own are indexed as the first 64 in document order (child documents in place)", async () => {
    const r = (i: number) => `[2026-01-01T00:00:00.${String(i % 1000).padStart(3, '0')}Z TO 2027-01-01T00:00:00.998Z]`;
    const own = {
      _type: 'svcSolrDocument',
      headline_s: 'h',
      a_drange: Array.from({ length: 40 }, (_, i) => r(i)),
      // a child's forged system field (stored before the write-time check) takes no place: it is never indexed
      parts: [
        { part_s: 'p', svc_timestate_x_drange: Array.from({ length: 100 }, (_, i) => r(i)), b_drange: Array.from({ length: 3960 }, (_, i) => r(i + 40)) },
      ],
      one: { c_drange: r(4000) },
    };
    const notes: string[] = [];
    const doc = await compose(snapshot({ svcLatest: 'V1' }), { svcSolrDocument: own }, { trimmed: (n) => notes.push(n) });
    expect(doc.a_drange).to.have.length(40);
    const parts = doc.parts as Doc[];
    expect(parts[0].b_drange).to.deep.equal(own.parts[0].b_drange.slice(0, 24));
    expect(parts[0].part_s).to.equal('p');
    expect(parts[0]).to.not.have.property('svc_timestate_x_drange');
    expect(doc.one).to.not.have.property('c_drange');
    expect(doc.headline_s).to.equal('h');
    expect(doc.svc_index_trimmed_ss).to.deep.equal(['date-ranges']);
    expect(notes.join()).to.contain('3937');
  });

  it("the hunt's 194 KB categorization (each of 12,000 entities under a chain of long names) is indexed within 1,000 entities and 200,000 characters of paths, quickly", async () => {
    // Under a chain of 28 entities with 1,000-character names, each leaf's path repeats them all:
    // about 340 MB of paths, which the old composer built (and the indexer then failed on).
    let list: Json[] = Array.from({ length: 12_000 }, (_, i) => ({ name: `l${i}` }));
    for (let d = 28; d > 0; d--) list = [{ id: `e${d}`, name: `${d}`.padEnd(1000, 'n'), entities: list }];
    const cat = { _type: 'svcCategorization', dimensions: [{ id: 'tags', entities: list }] };
    expect(JSON.stringify(cat).length).to.be.within(190_000, 240_000);
    const notes: string[] = [];
    const t0 = Date.now();
    const doc = await compose(snapshot({ svcLatest: 'V1' }), { svcCategorization: cat }, { trimmed: (n) => notes.push(n) });
    expect(Date.now() - t0).to.be.below(2000);
    const names = doc.svc_tag_tags_ss as string[];
    const ids = (doc.svc_tag_id_tags_ss as string[] | undefined) ?? [];
    expect(names.length).to.be.at.most(1000);
    expect([...names, ...ids].reduce((n, p) => n + p.length, 0)).to.be.at.most(200_000);
    expect(doc.svc_tag_autocomplete_tags_lc).to.deep.equal(names);
    // the first ones in walk order: the chain from the top
    expect(names[0]).to.equal(`${1}`.padEnd(1000, 'n'));
    expect(doc.svc_index_trimmed_ss).to.deep.equal(['tags']);
    expect(notes.join()).to.contain('12028 entities');
  });

  it('a content within the bounds is composed as before: every view, range and path, no note', async () => {
    const views: Record<string, string> = { svcLatest: 'V1' };
    for (let i = 0; i < 49; i++) views[`v${i}`] = 'V1';
    const ents = Array.from({ length: 20 }, (_, i) => ({
      id: `s${i}`,
      name: `Section ${i}`,
      entities: Array.from({ length: 40 }, (_, j) => ({ id: `t${i}-${j}`, name: `Topic ${j}` })),
    }));
    const notes: string[] = [];
    const doc = await compose(
      snapshot(views),
      {
        svcSolrDocument: { _type: 'svcSolrDocument', w_drange: Array.from({ length: 64 }, () => '[2026 TO 2027]') },
        svcCategorization: { _type: 'svcCategorization', dimensions: [{ id: 'tags', entities: ents }] },
      },
      { trimmed: (n) => notes.push(n) },
    );
    expect(doc.svc_views_ss).to.have.length(50);
    expect(valuesOf(doc, /^w_drange$/)).to.have.length(64);
    expect(doc.svc_tag_tags_ss).to.have.length(820);
    expect(doc.svc_tag_id_tags_ss).to.have.length(820);
    expect(doc).to.not.have.property('svc_index_trimmed_ss');
    expect(notes).to.deep.equal([]);
  });
});
