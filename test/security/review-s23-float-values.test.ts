import { expect } from 'chai';
import { checkSearchDocument, indexSchemaOf } from '../../src/content/search-document.js';

/**
 * The twenty-third session's review: a string value of a float or double field of the collection's
 * schema (Solr's Schema API; the bundled schema has none, another collection's may) was checked at
 * write time, in the gateway, by `^[+-]?(\d+\.?\d*|\.\d+)…$`, whose `\d+` and `\d*` split a run of
 * digits in as many ways as it has digits: a value of 20,000 digits and an `x` took 1.0 s of the
 * event loop, 50,000 digits 9.2 s, 100,000 digits 37.6 s, for a write of 100 KB that is then
 * refused (400); a write may hold many such values. Now `\d+(\.\d*)?`, the same numbers.
 */
describe('security: float values of a search document are checked in linear time (review s23)', () => {
  const schema = indexSchemaOf({
    fields: [],
    dynamicFields: [{ name: '*_f', type: 'pfloat' }],
    fieldTypes: [{ name: 'pfloat', class: 'solr.FloatPointField' }],
  });
  const check = (v: string) => checkSearchDocument({ _type: 'svcSolrDocument', n_f: v }, schema);

  it('a value of 20,000 digits and an x is refused in milliseconds', () => {
    const t0 = performance.now();
    const problem = check(`${'1'.repeat(20_000)}x`);
    expect(performance.now() - t0, 'ms').to.be.below(100);
    expect(problem?.field).to.equal('n_f');
  });

  it('takes and refuses the same numbers as before', () => {
    for (const ok of ['1', '1.', '1.5', '.5', '-1e5', '+2.5E-3', '007']) expect(check(ok), ok).to.equal(null);
    for (const bad of ['1.2.3', 'e5', '.', '', '1e', '--1', '1 ', 'NaN']) expect(check(bad), bad).to.not.equal(null);
  });
});
