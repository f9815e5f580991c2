import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Json } from './model.js';
import { dateRange } from './variants.js';
import {
  checkSearchDocument,
  contentFields,
  indexSchemaOf,
  isDateRange,
  isIndexerField,
  isIsoDateTime,
  parseSchemaXml,
  ruleOf,
  searchBlock,
} from './search-document.js';

/** The bundled schema of the `content` collection (tools/solr/configsets/content/conf/schema.xml). */
const schema = indexSchemaOf(
  parseSchemaXml(readFileSync(fileURLToPath(new URL('../../tools/solr/configsets/content/conf/schema.xml', import.meta.url)), 'utf8')),
);
const check = (doc: Record<string, Json>) => checkSearchDocument({ _type: 'svcSolrDocument', ...doc }, schema);

describe('search documents (spec Categorization and search index documents, CONTRACT §20 Search documents)', () => {
  describe('the bundled schema', () => {
    it('knows the spec fields, dynamic fields and their types', () => {
      expect(ruleOf(schema, 'id')).to.deep.equal({ type: 'string', kind: 'text', multiValued: false, tokenized: false, docValues: true });
      expect(ruleOf(schema, 'version')).to.deep.equal({ type: 'plong', kind: 'long', multiValued: false, tokenized: false, docValues: true });
      expect(ruleOf(schema, 'title_s')).to.deep.equal({ type: 'string', kind: 'text', multiValued: false, tokenized: false, docValues: true });
      expect(ruleOf(schema, 'tags_ss')).to.deep.equal({ type: 'string', kind: 'text', multiValued: true, tokenized: false, docValues: true });
      expect(ruleOf(schema, 'when_dt')?.kind).to.equal('date');
      expect(ruleOf(schema, 'window_drange')).to.deep.equal({ type: 'daterange', kind: 'daterange', multiValued: true, tokenized: false, docValues: false });
      expect(ruleOf(schema, 'n_l')?.kind).to.equal('long');
      expect(ruleOf(schema, 'n_i')?.kind).to.equal('int');
      expect(ruleOf(schema, 'on_b')).to.deep.equal({ type: 'boolean', kind: 'boolean', multiValued: false, tokenized: false, docValues: true });
      expect(ruleOf(schema, 'on_bs')?.multiValued).to.equal(true);
      expect(ruleOf(schema, 'words_lc')).to.deep.equal({ type: 'text_lc', kind: 'text', multiValued: true, tokenized: true, docValues: false });
      expect(ruleOf(schema, 'svc_text')).to.deep.equal({ type: 'text_general', kind: 'text', multiValued: false, tokenized: true, docValues: false });
      expect(ruleOf(schema, '_root_')?.docValues, '_root_ (docValues="false" on the field)').to.equal(false);
      expect(ruleOf(schema, 'headline')).to.equal(undefined);
      expect(ruleOf(schema, 'count_f')).to.equal(undefined);
    });

    it('reads the Schema API form like the XML form', () => {
      const fromApi = indexSchemaOf({
        fields: [{ name: 'id', type: 'string', multiValued: false }],
        dynamicFields: [
          { name: '*_s', type: 'string' },
          { name: '*_ss', type: 'string', multiValued: true },
          { name: 'attr_*', type: 'pint' },
        ],
        fieldTypes: [
          { name: 'string', class: 'solr.StrField' },
          { name: 'pint', class: 'org.apache.solr.schema.IntPointField' },
        ],
      });
      expect(ruleOf(fromApi, 'a_ss')?.multiValued).to.equal(true);
      expect(ruleOf(fromApi, 'a_s')?.multiValued).to.equal(false);
      expect(ruleOf(fromApi, 'attr_count')?.kind).to.equal('int');
    });
  });

  describe('the indexer fields', () => {
    it("are id, root, version, Solr's own fields and every svc_ field", () => {
      for (const f of ['id', 'root', 'version', '_version_', '_root_', '_nest_path_', '_nest_parent_', 'svc_views_ss', 'svc_type_s', 'svc_anything'])
        expect(isIndexerField(f), f).to.equal(true);
      for (const f of ['headline_s', 'svcx_s', 'ids', 'parts']) expect(isIndexerField(f), f).to.equal(false);
    });

    it('contentFields drops them and _type from the root document', () => {
      expect(contentFields({ _type: 'svcSolrDocument', id: 'x', root: 'y', svc_views_ss: ['svcPublic'], _root_: 'z', headline_s: 'h' })).to.deep.equal({
        headline_s: 'h',
      });
    });

    it('searchBlock sets id and root, derives every child id, and drops the indexer fields of children at any depth', () => {
      const block = searchBlock(
        {
          id: 'forged',
          root: 'forged',
          svc_views_ss: ['svcLatest'],
          parts: [
            {
              id: 'c:other:key',
              root: 'c:other:key',
              svc_views_ss: ['svcPublic'],
              svc_security_context_ss: [],
              _root_: 'c:other:key',
              part_s: 'one',
              sub: [{ id: 'deep', svc_type_s: 'x', q_s: 'q' }],
            },
            { part_s: 'two' },
          ],
          one: { id: 'c:other:key2', _nest_path_: '/x', v_s: 'v' },
          tags_ss: ['a', 'b'],
        },
        'c:me:k1',
      );
      expect(block).to.deep.equal({
        id: 'c:me:k1',
        root: 'c:me:k1',
        svc_views_ss: ['svcLatest'],
        parts: [
          { part_s: 'one', sub: [{ q_s: 'q', id: 'c:me:k1/parts/0/sub/0', root: 'c:me:k1' }], id: 'c:me:k1/parts/0', root: 'c:me:k1' },
          { part_s: 'two', id: 'c:me:k1/parts/1', root: 'c:me:k1' },
        ],
        one: { v_s: 'v', id: 'c:me:k1/one', root: 'c:me:k1' },
        tags_ss: ['a', 'b'],
      });
      expect(searchBlock(block, 'c:me:k1')).to.deep.equal(block);
    });

    it('searchBlock treats every object of a list as a child, also in a list mixed with values', () => {
      expect(searchBlock({ mixed: ['x', { id: 'c:other:k', svc_views_ss: ['svcPublic'] }] }, 'c:me:k')).to.deep.equal({
        mixed: ['x', { id: 'c:me:k/mixed/1', root: 'c:me:k' }],
        id: 'c:me:k',
        root: 'c:me:k',
      });
    });
  });

  describe('checkSearchDocument', () => {
    it('accepts the fields of the schema with values of their types, child documents and nulls', () => {
      expect(
        check({
          headline_s: 'h',
          n_s: 5,
          tags_ss: ['a', 1, true, null],
          count_i: 42,
          count2_i: '-7',
          big_l: 9007199254740991,
          big2_l: '9223372036854775807',
          on_b: false,
          on2_b: 'true',
          flags_bs: [true, 'false'],
          when_dt: '2024-02-29T10:00:00.123Z',
          window_drange: ['[2024 TO 2025-06]', '2024-05', '[* TO *]', '[0000 TO 9999]', '[2026-01-01T00:00:00.000Z TO 2027-01-01T00:00:00.000Z]'],
          words_lc: 'Sports/Football',
          nothing_s: null,
          parts: [{ part_s: 'one', sub: [{ q_s: 'deep' }] }, { part_s: 'two' }],
          single: { v_s: 'v' },
          _childDocuments_: [{ a_s: 'anonymous' }],
        }),
      ).to.equal(null);
    });

    it('refuses the indexer fields on the root document and in child documents at any depth', () => {
      for (const [doc, field] of [
        [{ id: 'c:x:y' }, 'id'],
        [{ root: 'r' }, 'root'],
        [{ version: 3 }, 'version'],
        [{ _version_: 1 }, '_version_'],
        [{ _root_: 'r' }, '_root_'],
        [{ _nest_path_: '/a' }, '_nest_path_'],
        [{ svc_views_ss: ['svcPublic'] }, 'svc_views_ss'],
        [{ svc_security_context_ss: [] }, 'svc_security_context_ss'],
        [{ svc_contentstate_hidden_b: false }, 'svc_contentstate_hidden_b'],
        [{ svc_timestate_svcPublic_drange: '[* TO *]' }, 'svc_timestate_svcPublic_drange'],
        [{ parts: [{ a_s: 'x' }, { id: 'c:other:k' }] }, 'parts.1.id'],
        [{ parts: [{ sub: { svc_type_s: 'article' } }] }, 'parts.0.sub.svc_type_s'],
        [{ _childDocuments_: [{ _root_: 'c:other:k' }] }, '_childDocuments_.0._root_'],
      ] as [Record<string, Json>, string][]) {
        const p = check(doc);
        expect(p?.field, JSON.stringify(doc)).to.equal(field);
        expect(p?.message).to.include('set by the indexer');
      }
    });

    it('refuses a name the schema does not know, at the root and in a child', () => {
      expect(check({ headline: 'x' })).to.deep.include({ field: 'headline' });
      expect(check({ headline: 'x' })?.message).to.include('no field or dynamic field');
      expect(check({ parts: [{ count_f: 1 }] })?.field).to.equal('parts.0.count_f');
      expect(check({ parts: [{ _type: 'x' }] })?.field).to.equal('parts.0._type');
    });

    it('refuses a value of the wrong type', () => {
      const cases: [Record<string, Json>, string][] = [
        [{ count_i: 'not-a-number' }, 'count_i'],
        [{ count_i: 'x' }, 'count_i'],
        [{ count_i: 4.5 }, 'count_i'],
        [{ count_i: 2147483648 }, 'count_i'],
        [{ count_i: true }, 'count_i'],
        [{ count_l: '9223372036854775808' }, 'count_l'],
        [{ count_l: 2 ** 63 }, 'count_l'],
        [{ title_s: { a: 1 } }, 'title_s'],
        [{ title_s: [{ a: 1 }] }, 'title_s'],
        [{ on_b: 'yes' }, 'on_b'],
        [{ on_b: 1 }, 'on_b'],
        [{ when_dt: '2024-05-01' }, 'when_dt'],
        [{ when_dt: '2024-05-01T10:00:00+01:00' }, 'when_dt'],
        [{ when_dt: '2023-02-29T10:00:00Z' }, 'when_dt'],
        [{ when_dt: 1714557600000 }, 'when_dt'],
        [{ window_drange: ['{2024 TO 2025}'] }, 'window_drange'],
        [{ window_drange: '2024-13' }, 'window_drange'],
        [{ tags_ss: ['a', ['b']] }, 'tags_ss'],
        [{ tags_ss: ['a', { b: 1 }] }, 'tags_ss'],
      ];
      for (const [doc, field] of cases) {
        const p = check(doc);
        expect(p?.field, JSON.stringify(doc)).to.equal(field);
        expect(p?.message, JSON.stringify(doc)).to.match(/takes|mixes/);
      }
      expect(check({ title_s: { a: 1 } })?.message).to.equal('title_s: takes strings (or numbers, booleans) (field type string), not an object');
      expect(check({ count_i: 'x' })?.message).to.equal('count_i: takes integers from -2147483648 to 2147483647 (field type pint), not the string "x"');
    });

    it('refuses a list for a single-valued field', () => {
      expect(check({ title_s: ['a', 'b'] })).to.deep.equal({
        field: 'title_s',
        message: 'title_s: takes one value (field type string is single-valued), not a list',
      });
      expect(check({ count_i: [1] })?.field).to.equal('count_i');
    });

    it('refuses labels of child documents that hold / or #, and _childDocuments_ that is not a list', () => {
      expect(check({ 'a/b': [{ x_s: 'x' }] })?.field).to.equal('a/b');
      expect(check({ 'a#b': { x_s: 'x' } })?.field).to.equal('a#b');
      expect(check({ _childDocuments_: { x_s: 'x' } })?.field).to.equal('_childDocuments_');
    });
  });

  describe('dates', () => {
    it('date-times: ISO 8601 in UTC with a real calendar day', () => {
      for (const ok of ['2024-02-29T00:00:00Z', '2000-02-29T23:59:59.999999999Z', '0000-01-01T00:00:00Z', '-0001-01-01T00:00:00Z', '12020-01-01T00:00:00Z'])
        expect(isIsoDateTime(ok), ok).to.equal(true);
      for (const bad of [
        '2023-02-29T00:00:00Z',
        '1900-02-29T00:00:00Z',
        '2024-01-01T24:00:00Z',
        '2024-01-01T10:60:00Z',
        '2024-01-01T10:00:60Z',
        '2024-01-01T10:00Z',
        '2024-01-01t10:00:00z',
        'NOW',
        '2024-01-01',
      ])
        expect(isIsoDateTime(bad), bad).to.equal(false);
    });

    it('date ranges: truncated dates, * and [a TO b]', () => {
      for (const ok of [
        '2024',
        '2024-05',
        '2024-05-01',
        '2024-05-01T10',
        '2024-05-01T10:30',
        '2024-05-01T10:30:00',
        '2024-05-01T10:30:00.5Z',
        '*',
        '[* TO *]',
        '[2024 TO *]',
        '[-0001 TO 9999]',
      ])
        expect(isDateRange(ok), ok).to.equal(true);
      for (const bad of [
        '{2024 TO 2025}',
        '[2024 TO 2025}',
        '2024-13',
        '2024-1',
        ' 2024',
        '2024Z',
        '2024-05-01T10Z',
        '[2024  TO 2025]',
        'nonsense',
        '2024-02-30',
      ])
        expect(isDateRange(bad), bad).to.equal(false);
    });
  });
});

describe('time-state windows in the index (dateRange)', () => {
  const at = (s: string) => Date.parse(s);
  it('writes open ends as the years 0000 and 9999', () => {
    expect(dateRange()).to.equal('[0000 TO 9999]');
    expect(dateRange(at('2026-01-01T00:00:00Z'))).to.equal('[2026-01-01T00:00:00.000Z TO 9999]');
  });
  it('never writes what the engine refuses: an end before its start, or a year outside 0000-9999', () => {
    // A refused document left the content's earlier document (views, owners, hidden) in the index.
    const never = '[0000-01-01T00:00:00.000Z TO 0000-01-01T00:00:00.000Z]';
    expect(dateRange(at('2030-01-01T00:00:00Z'), at('2020-01-01T00:00:00Z'))).to.equal(never);
    expect(dateRange(at('2030-01-01T00:00:00Z'), at('2030-01-01T00:00:00Z'))).to.equal(never);
    expect(dateRange(at('+010000-01-01T00:00:00Z'))).to.equal('[9999-12-31T23:59:59.999Z TO 9999]');
    expect(dateRange(undefined, at('-000100-01-01T00:00:00Z'))).to.equal('[0000 TO 0000-01-01T00:00:00.000Z]');
  });
});

describe('the bound of date ranges in a content own svcSolrDocument (MAX_DATE_RANGES, 64)', () => {
  // Millisecond ends: the engine indexes each as up to 999 prefix-tree cells.
  const ranges = (n: number) => Array.from({ length: n }, (_, i) => `[2026-01-01T00:00:${String(i % 60).padStart(2, '0')}.001Z TO 2026-06-01T00:00:00.998Z]`);

  it('accepts 64 date-range values over the document and its child documents', () => {
    expect(check({ a_drange: ranges(40), parts: [{ b_drange: ranges(20) }, { c_drange: ranges(3) }], one: { d_drange: ranges(1)[0] } })).to.equal(null);
  });

  it('refuses the 65th, naming the field where the bound was passed, the bound and the count', () => {
    const p = check({ a_drange: ranges(40), parts: [{ b_drange: ranges(20) }, { c_drange: ranges(5) }] });
    expect(p).to.deep.include({ field: 'parts.1.c_drange', limit: 64, found: 65 });
    expect(p!.message).to.contain('65 date-range values').and.contain('at most 64');
    // a single value counts as one; nulls are not values
    expect(check({ a_drange: [...ranges(64), null], b_drange: null })).to.equal(null);
    expect(check({ a_drange: ranges(64), one: { b_drange: ranges(1)[0] } })).to.deep.include({ field: 'one.b_drange', found: 65 });
  });

  it("refuses the hunt's document: 4,000 values in one field (the engine ran out of memory on it)", () => {
    expect(check({ x_drange: ranges(4000) })).to.deep.include({ field: 'x_drange', limit: 64, found: 4000 });
  });
});
