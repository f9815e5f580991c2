import { expect } from 'chai';
import type { Aspects, Snapshot } from './model.js';
import type { Principal, SecurityConfig } from './permissions.js';
import { mayRead, mayReadVersion, onViewFilter, publicUntil, publicVersionKeys, readFilter, visibilityFilter, type VisibilityRules } from './visibility.js';

const security: SecurityConfig = {
  roles: {
    editor: { '*': ['Create', 'Read', 'Update'] },
    reader: { '*': ['Read'] },
    writer: { article: ['Create'] },
    articleReader: { article: ['Read'], image: ['*'] },
  },
};
const rules: VisibilityRules = { security, publicViews: ['svcPublic', 'web'] };
const NOW = Date.parse('2026-06-01T12:00:00Z');
const hour = 3600_000;
const iso = (ms: number) => new Date(ms).toISOString();

const user = (contexts: Record<string, string[]>): Principal => ({ userId: 'u', contexts });
const reader = user({ __global__: ['reader'] });
const sports = user({ sports: ['editor'] });
const nobody = user({ __global__: ['writer'] });

function snapshot(
  over: { views?: Record<string, string>; symbolic?: Record<string, string>; meta?: Aspects; deleted?: boolean; type?: string } = {},
): Snapshot {
  return {
    cid: 'k',
    rev: 3,
    type: over.type ?? 'article',
    head: 'v2',
    created: 0,
    modified: 0,
    committer: 'editor',
    deleted: over.deleted ?? false,
    views: over.views ?? { svcLatest: 'v2' },
    symbolic: over.symbolic ?? {},
    meta: over.meta ?? {},
    aliases: [],
  };
}

describe('visibility: who may see a content version (CONTRACT §9, §20)', () => {
  it('without a token: a version on a public view now, not hidden, inside its time state', () => {
    expect(publicVersionKeys(snapshot(), rules.publicViews, NOW)).to.deep.equal([]);
    expect(publicVersionKeys(snapshot({ views: { svcLatest: 'v2', svcPublic: 'v1' } }), rules.publicViews, NOW)).to.deep.equal(['v1']);
    expect(publicVersionKeys(snapshot({ views: { svcPublic: 'v1', web: 'v2' } }), rules.publicViews, NOW)).to.deep.equal(['v1', 'v2']);
    expect(
      publicVersionKeys(snapshot({ views: { svcLatest: 'v2' }, symbolic: { web: 'svcLatest' } }), rules.publicViews, NOW),
      'a symbolic public view',
    ).to.deep.equal(['v2']);
    const pub = { svcLatest: 'v2', svcPublic: 'v1' };
    expect(publicVersionKeys(snapshot({ views: pub, meta: { svcContentState: { hidden: true } } }), rules.publicViews, NOW), 'hidden').to.deep.equal([]);
    expect(
      publicVersionKeys(snapshot({ views: pub, meta: { svcTimeState: { views: { svcPublic: { onTime: iso(NOW + hour) } } } } }), rules.publicViews, NOW),
      'before onTime',
    ).to.deep.equal([]);
    expect(
      publicVersionKeys(snapshot({ views: pub, meta: { svcTimeState: { views: { svcPublic: { offTime: iso(NOW) } } } } }), rules.publicViews, NOW),
      'at offTime',
    ).to.deep.equal([]);
    expect(
      publicVersionKeys(
        snapshot({ views: pub, meta: { svcTimeState: { views: { svcPublic: { onTime: iso(NOW), offTime: iso(NOW + 1) } } } } }),
        rules.publicViews,
        NOW,
      ),
      'at onTime',
    ).to.deep.equal(['v1']);
    expect(publicVersionKeys(snapshot({ views: pub, deleted: true }), rules.publicViews, NOW), 'deleted').to.deep.equal([]);

    expect(mayReadVersion(rules, null, snapshot({ views: pub }), 'v1', NOW)).to.equal(true);
    expect(mayReadVersion(rules, null, snapshot({ views: pub }), 'v2', NOW), 'the latest version is not the public one').to.equal(false);
    expect(
      mayReadVersion(rules, null, snapshot({ views: pub, meta: { svcSecurityContext: { owners: ['culture'] } } }), 'v1', NOW),
      'owners do not matter on a public view',
    ).to.equal(true);
  });

  it('with a token: Read on the content type in __global__ or in one of its contexts, any version, any view', () => {
    const culture = snapshot({ meta: { svcSecurityContext: { owners: ['culture'] } } });
    const ofSports = snapshot({ meta: { svcSecurityContext: { owners: ['sports', 'culture'] } } });
    expect(mayReadVersion(rules, reader, culture, 'v1', NOW)).to.equal(true);
    expect(mayReadVersion(rules, sports, culture, 'v2', NOW)).to.equal(false);
    expect(mayReadVersion(rules, sports, ofSports, 'v2', NOW)).to.equal(true);
    expect(mayReadVersion(rules, sports, snapshot(), 'v2', NOW), 'no owners: __global__ only').to.equal(false);
    expect(mayReadVersion(rules, nobody, snapshot({ views: { svcPublic: 'v2' } }), 'v2', NOW), 'a token without Read does not fall back to public').to.equal(
      false,
    );
    expect(mayReadVersion(rules, user({ __global__: ['articleReader'] }), snapshot({ type: 'image' }), 'v2', NOW), 'permission *').to.equal(true);
    expect(mayReadVersion(rules, user({ __global__: ['articleReader'] }), snapshot({ type: 'video' }), 'v2', NOW)).to.equal(false);
    expect(mayReadVersion(rules, reader, snapshot({ deleted: true }), 'v2', NOW), 'deleted').to.equal(false);
  });

  it('the filter form: public views inside their time state and not hidden; or what the principal may Read', () => {
    const t = iso(NOW);
    expect(visibilityFilter(rules, null, NOW)).to.equal(
      `{!lucene}((+svc_views_ss:svcPublic +svc_timestate_svcPublic_drange:"${t}") OR (+svc_views_ss:web +svc_timestate_web_drange:"${t}")) AND -svc_contentstate_hidden_b:true`,
    );
    expect(visibilityFilter(rules, reader, NOW)).to.equal('{!lucene}((*:*))');
    expect(visibilityFilter(rules, sports, NOW)).to.equal('{!lucene}((+svc_security_context_ss:"sports"))');
    expect(visibilityFilter(rules, nobody, NOW)).to.equal('{!lucene}(-*:*)');
    expect(readFilter(security, user({ __global__: ['articleReader'], 'a"b': ['reader'] }))).to.equal(
      '((+svc_type_s:("article" OR "image")) OR (+svc_security_context_ss:"a\\"b"))',
    );
    expect(readFilter(security, user({ __global__: ['constructor', '__proto__'] })), 'role names of Object.prototype grant nothing').to.equal('(-*:*)');
    expect(onViewFilter('my view~1', NOW)).to.equal(`{!lucene}(+svc_views_ss:my\\ view\\~1 +svc_timestate_my_view_1_drange:"${t}")`);
  });

  it('the filter form per context: a context restricts to its content and the types its roles may Read; roles without Read add nothing', () => {
    const t = iso(NOW);
    expect(readFilter(security, user({ sports: ['articleReader'] }))).to.equal('((+svc_security_context_ss:"sports" +svc_type_s:("article" OR "image")))');
    expect(readFilter(security, user({ sports: ['writer'], culture: ['reader'], __global__: ['unknown'] })), 'only culture grants Read').to.equal(
      '((+svc_security_context_ss:"culture"))',
    );
    expect(readFilter(security, user({ __global__: ['articleReader'], sports: ['editor'] }))).to.equal(
      '((+svc_type_s:("article" OR "image")) OR (+svc_security_context_ss:"sports"))',
    );
    expect(readFilter(security, user({})), 'no roles: nothing').to.equal('(-*:*)');
    expect(readFilter(security, user({ __global__: [] }))).to.equal('(-*:*)');
    expect(visibilityFilter({ security, publicViews: ['web'] }, null, NOW), 'one public view').to.equal(
      `{!lucene}((+svc_views_ss:web +svc_timestate_web_drange:"${t}")) AND -svc_contentstate_hidden_b:true`,
    );
    expect(visibilityFilter(rules, reader, NOW), 'with a token, hidden content and public views do not enter the filter').to.not.match(/hidden|svc_views_ss/);
  });

  it('mayRead, the token side of both forms, agrees with the filter on type and context', () => {
    const ofSports = snapshot({ meta: { svcSecurityContext: { owners: ['sports'] } } });
    expect(mayRead(security, user({ sports: ['articleReader'] }), ofSports)).to.equal(true);
    expect(mayRead(security, user({ sports: ['articleReader'] }), snapshot({ type: 'video', meta: ofSports.meta }))).to.equal(false);
    expect(mayRead(security, user({ culture: ['reader'] }), ofSports)).to.equal(false);
    expect(mayRead(security, user({ __global__: ['unknown'] }), snapshot())).to.equal(false);
    expect(mayRead(security, reader, snapshot({ meta: { svcSecurityContext: { owners: ['__global__'] } } }))).to.equal(true);
  });
});

describe('visibility: how long a public delivery may be kept (publicUntil)', () => {
  const windows = (w: Record<string, { offTime?: string }>) => ({ svcTimeState: { views: w } });
  it('until the latest offTime of the public views that hold the version; null when one has none', () => {
    const both = { svcPublic: 'v1', web: 'v1' };
    expect(publicUntil(snapshot({ views: both }), rules.publicViews, 'v1', NOW)).to.equal(null);
    expect(publicUntil(snapshot({ views: both, meta: windows({ svcPublic: { offTime: iso(NOW + hour) } }) }), rules.publicViews, 'v1', NOW)).to.equal(null);
    const offs = windows({ svcPublic: { offTime: iso(NOW + hour) }, web: { offTime: iso(NOW + 2 * hour) } });
    expect(publicUntil(snapshot({ views: both, meta: offs }), rules.publicViews, 'v1', NOW)).to.equal(NOW + 2 * hour);
    // a view that holds another version, or whose window has closed, does not count
    expect(publicUntil(snapshot({ views: { svcPublic: 'v1', web: 'v2' }, meta: offs }), rules.publicViews, 'v1', NOW)).to.equal(NOW + hour);
    expect(publicUntil(snapshot({ views: both, meta: offs }), rules.publicViews, 'v1', NOW + 1.5 * hour)).to.equal(NOW + 2 * hour);
  });
});
