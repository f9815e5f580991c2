import { expect } from 'chai';
import { AppError } from '../errors.js';
import { type Handler, Router } from './router.js';

/** A handler that is told apart by its name. */
const named = (name: string): Handler => Object.assign(async () => undefined, { label: name });
const labelOf = (h: Handler) => (h as Handler & { label: string }).label;

function refusal(f: () => unknown): AppError {
  try {
    f();
  } catch (e) {
    expect(e).to.be.instanceOf(AppError);
    return e as AppError;
  }
  throw new Error('expected a refusal');
}

describe('gateway router: paths and methods to handlers (CONTRACT §2)', () => {
  const r = new Router()
    .on('GET', 'content/alias/:ns/:alias', named('read'))
    .on('PUT', 'content/alias/:ns/:alias', named('update'))
    .on('GET', 'content/alias/:ns/:alias/metadata', named('metadata'))
    .on('GET', 'content/alias/:ns/:alias/#rev', named('versioned'))
    .on('POST', 'content', named('create'))
    .on('DELETE', '/content/', named('delete all'));

  it('matches literal segments, takes `:name` from any one segment, `#name` from a revision only', () => {
    const m = r.match('GET', ['content', 'alias', 'news', 'hello']);
    expect(labelOf(m.handler)).to.equal('read');
    expect(m.params).to.deep.equal({ ns: 'news', alias: 'hello' });
    expect(m.pattern).to.equal('content/alias/:ns/:alias');
    const v = r.match('GET', ['content', 'alias', 'news', 'hello', '12']);
    expect(labelOf(v.handler)).to.equal('versioned');
    expect(v.params).to.deep.equal({ ns: 'news', alias: 'hello', rev: '12' });
    expect(labelOf(r.match('GET', ['content', 'alias', 'news', 'hello', 'metadata']).handler)).to.equal('metadata');
  });

  it('a revision is 1 to 15 digits without a leading zero', () => {
    expect(r.match('GET', ['content', 'alias', 'n', 'a', '999999999999999']).params.rev).to.equal('999999999999999');
    for (const bad of ['0', '01', '1000000000000000', '-1', '1.0', '1e3', ' 1', 'x']) {
      expect(refusal(() => r.match('GET', ['content', 'alias', 'n', 'a', bad])).http, bad).to.equal(404);
    }
  });

  it('a segment is matched as decoded, whole: a parameter holds anything of one segment and nothing more', () => {
    expect(r.match('GET', ['content', 'alias', 'a/b', '..']).params).to.deep.equal({ ns: 'a/b', alias: '..' });
    expect(refusal(() => r.match('GET', ['content', 'alias', 'news'])).http, 'too few segments').to.equal(404);
    expect(refusal(() => r.match('GET', ['content', 'alias', 'n', 'a', '1', 'metadata', 'x'])).http, 'too many').to.equal(404);
    expect(refusal(() => r.match('GET', ['Content', 'alias', 'n', 'a'])).http, 'literals are case-sensitive').to.equal(404);
    expect(refusal(() => r.match('GET', [])).http).to.equal(404);
  });

  it('a path known with other methods answers 405 with those methods in allow; an unknown path 404', () => {
    const e = refusal(() => r.match('DELETE', ['content', 'alias', 'n', 'a']));
    expect(e.http).to.equal(405);
    expect(e.extraInfo.allow).to.deep.equal(['GET', 'PUT']);
    const c = refusal(() => r.match('GET', ['content']));
    expect(c.http).to.equal(405);
    expect(c.extraInfo.allow, 'patterns are compared without empty segments: /content/ is content').to.deep.equal(['POST', 'DELETE']);
    const n = refusal(() => r.match('GET', ['nothing']));
    expect(n.http).to.equal(404);
    expect(n.code).to.equal('NOT_FOUND');
  });

  it('HEAD is answered by GET where no HEAD handler exists; GET is never answered by HEAD', () => {
    expect(labelOf(r.match('HEAD', ['content', 'alias', 'n', 'a']).handler)).to.equal('read');
    const own = new Router().on('HEAD', 'x', named('head'));
    expect(labelOf(own.match('HEAD', ['x']).handler)).to.equal('head');
    expect(refusal(() => own.match('GET', ['x'])).extraInfo.allow).to.deep.equal(['HEAD']);
  });

  it('the first route that matches wins; a method registered again on the same pattern replaces the handler', () => {
    const first = new Router().on('GET', 'a/:x', named('param')).on('GET', 'a/b', named('literal')).on('GET', 'a/:y', named('again'));
    expect(labelOf(first.match('GET', ['a', 'b']).handler)).to.equal('param');
    expect(first.match('GET', ['a', 'c']).params, 'the pattern a/:x keeps its first parameter name').to.deep.equal({ x: 'c' });
    expect(first.describe()).to.deep.equal([
      { pattern: 'a/:x', methods: ['GET'] },
      { pattern: 'a/b', methods: ['GET'] },
      { pattern: 'a/:y', methods: ['GET'] },
    ]);
    const replaced = new Router().on('GET', 'a', named('one')).on('GET', 'a', named('two'));
    expect(labelOf(replaced.match('GET', ['a']).handler)).to.equal('two');
    expect(replaced.describe()).to.deep.equal([{ pattern: 'a', methods: ['GET'] }]);
  });

  it('describe lists every pattern with its methods (the OpenAPI document)', () => {
    expect(r.describe()).to.deep.equal([
      { pattern: 'content/alias/:ns/:alias', methods: ['GET', 'PUT'] },
      { pattern: 'content/alias/:ns/:alias/metadata', methods: ['GET'] },
      { pattern: 'content/alias/:ns/:alias/#rev', methods: ['GET'] },
      { pattern: 'content', methods: ['POST', 'DELETE'] },
    ]);
  });
});
