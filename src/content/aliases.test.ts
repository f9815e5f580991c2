import { expect } from 'chai';
import { aliasExists, aliasName, aliasTarget, aliasValue, freedAliases, isMainNamespace, parseAliasValue, setAliasOps, splitAlias } from './aliases.js';
import { mainAlias } from './model.js';

describe('aliases (spec: svcSetAlias, alias release, workspace alias reservations)', () => {
  it('a full name splits at its first slash: the namespace holds none, the alias may', () => {
    expect(splitAlias('news/a')).to.deep.equal(['news', 'a']);
    expect(splitAlias('news/2024/05/a')).to.deep.equal(['news', '2024/05/a']);
    expect(splitAlias(aliasName('sport', 'x/y'))).to.deep.equal(['sport', 'x/y']);
  });

  it('the main alias contentid/<key> names its key directly', () => {
    const [ns, alias] = splitAlias(mainAlias('01ABC'));
    expect(isMainNamespace(ns)).to.equal(true);
    expect(alias).to.equal('01ABC');
    expect(isMainNamespace('news')).to.equal(false);
  });

  it('a global key holds the content key in main, ~<workspace>|<key> for a workspace reservation', () => {
    expect(aliasValue('01ABC')).to.equal('01ABC');
    expect(aliasValue('01ABC', '')).to.equal('01ABC');
    expect(aliasValue('01ABC', 'ws1')).to.equal('~ws1|01ABC');
    expect(parseAliasValue('01ABC')).to.deep.equal({ cid: '01ABC' });
    expect(parseAliasValue('~ws1|01ABC')).to.deep.equal({ cid: '01ABC', workspace: 'ws1' });
    expect(parseAliasValue(aliasValue('01ABC', 'ws-2'))).to.deep.equal({ cid: '01ABC', workspace: 'ws-2' });
  });

  it('a reservation names its content on its own workspace only; an assigned alias everywhere', () => {
    expect(aliasTarget(null)).to.equal(null);
    expect(aliasTarget(null, 'ws1')).to.equal(null);
    expect(aliasTarget('01ABC')).to.equal('01ABC');
    expect(aliasTarget('01ABC', 'ws1')).to.equal('01ABC');
    expect(aliasTarget('~ws1|01ABC', 'ws1')).to.equal('01ABC');
    expect(aliasTarget('~ws1|01ABC', 'ws2')).to.equal(null);
    expect(aliasTarget('~ws1|01ABC')).to.equal(null);
  });

  it('a write claims the aliases of its svcSetAlias operations, in order, with their full names', () => {
    const ops = [
      { _type: 'svcAssignToViews', views: ['svcPublic'] },
      { _type: 'svcSetAlias', namespace: 'news', alias: 'a' },
      { _type: 'svcSetAlias', namespace: 'news', alias: 'b/c' },
    ];
    const claimed = setAliasOps(ops);
    expect(claimed.map((c) => c.name)).to.deep.equal(['news/a', 'news/b/c']);
    expect(claimed[0].op).to.equal(ops[1]);
  });

  it('a write frees the aliases held before and not after', () => {
    expect(freedAliases(['news/a', 'news/b'], [])).to.deep.equal(['news/a', 'news/b']);
    expect(freedAliases(['news/a', 'news/b'], ['news/b'])).to.deep.equal(['news/a']);
    expect(freedAliases(['news/a'], ['news/a', 'news/c'])).to.deep.equal([]);
  });

  it('an alias another content holds is the ALIAS_EXISTS subResult (40910) naming it', () => {
    const op = { _type: 'svcSetAlias' as const, namespace: 'news', alias: 'a' };
    expect(aliasExists(op, 'news/a')).to.deep.equal({
      operation: op,
      status: { message: 'ALIAS_EXISTS', statusCode: '40910', extraInfo: { aliases: ['news/a'] } },
    });
  });
});
