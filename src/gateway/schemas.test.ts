import { expect } from 'chai';
import { isSafeName, nameSchema } from './schemas.js';

describe('names in paths (isSafeName, nameSchema)', () => {
  it('the fast check accepts exactly what the schema accepts', () => {
    const schema = nameSchema('name');
    const samples = [
      'a',
      'article',
      'contentid',
      'a.b',
      'a..b',
      '.',
      '..',
      '',
      'x'.repeat(256),
      'x'.repeat(257),
      'a/b',
      'a b',
      '{p}',
      'é',
      'a\u0000',
      '~@_-.',
      '.hidden',
    ];
    for (const s of samples) expect(isSafeName(s), JSON.stringify(s)).to.equal(schema.safeParse(s).success);
  });
});
