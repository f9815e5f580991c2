import { expect } from 'chai';
import type { Draft, Snapshot } from '../content/model.js';
import type { Principal, SecurityConfig } from '../content/permissions.js';
import { AppError } from '../errors.js';
import { Reads } from './reads.js';

const security: SecurityConfig = {
  roles: {
    reader: { '*': ['Read'] },
    writer: { article: ['Create'] },
    articleReader: { article: ['Read'] },
  },
};
const NOW = Date.parse('2026-06-01T12:00:00Z');
const reads = new Reads({ security, settings: { PUBLIC_VIEWS: 'svcPublic,web' }, clock: () => NOW });

const user = (userId: string, contexts: Record<string, string[]>): Principal => ({ userId, contexts });
const reader = user('reader', { __global__: ['reader'] });
const sportsReader = user('sports', { sports: ['articleReader'] });
const writer = user('writer', { __global__: ['writer'] });

/** A content at revision 3 whose current version is v2, on svcLatest only unless `over` says otherwise. */
function snapshot(over: Partial<Snapshot> = {}): Snapshot {
  const base = { cid: 'k', rev: 3, type: 'article', head: 'v2', created: 0, modified: 0, committer: 'editor', deleted: false };
  return { ...base, views: { svcLatest: 'v2' }, symbolic: {}, meta: {}, aliases: [], ...over };
}

const draft = (type: string): Draft => ({
  workspace: 'ws',
  cid: 'k',
  type,
  aspects: {},
  ops: [],
  reserved: [],
  fromCreate: true,
  mode: 'update',
  created: 0,
  modified: 0,
  creator: 'editor',
});

/** The error `f` throws, as [HTTP status, message]; null when it throws none. */
function refusal(f: () => unknown): [number, string] | null {
  try {
    f();
    return null;
  } catch (e) {
    if (!(e instanceof AppError)) throw e;
    return [e.http, e.message];
  }
}

const ofSports = snapshot({ meta: { svcSecurityContext: { owners: ['sports'] } } });
const published = snapshot({ views: { svcLatest: 'v2', svcPublic: 'v1' } });

describe('gateway reads: every read decision in one place (CONTRACT §9, §12, §20)', () => {
  it('content reads: Read on the type in __global__ or a context of the owners; 403 names Read and the user, never the type', () => {
    expect(reads.mayRead(reader, snapshot())).to.equal(true);
    expect(reads.mayRead(sportsReader, ofSports)).to.equal(true);
    expect(reads.mayRead(sportsReader, snapshot()), 'no owners: __global__ only').to.equal(false);
    expect(reads.mayRead(sportsReader, snapshot({ type: 'image', meta: ofSports.meta })), 'the role grants article only').to.equal(false);
    expect(refusal(() => reads.checkRead(reader, ofSports))).to.equal(null);
    expect(
      refusal(() => reads.checkRead(writer, published)),
      'a public view does not open a content read',
    ).to.deep.equal([403, 'Read denied for writer']);
  });

  it('drafts: Read on the original while it exists in main, else Read on the type in any context held', () => {
    expect(reads.mayReadDraft(sportsReader, draft('article'), null), 'a draft of new content').to.equal(true);
    expect(reads.mayReadDraft(sportsReader, draft('image'), null)).to.equal(false);
    expect(reads.mayReadDraft(sportsReader, draft('article'), snapshot()), 'the original decides: not owned by sports').to.equal(false);
    expect(reads.mayReadDraft(sportsReader, draft('article'), ofSports)).to.equal(true);
    expect(refusal(() => reads.checkDraftRead(writer, draft('article'), null))).to.deep.equal([403, 'Read denied for writer']);
  });

  it('file delivery by version: a version on a public view to anyone; any other needs Read (no token 401, no Read 403)', () => {
    expect(refusal(() => reads.checkVersionDelivery(null, published, 'v1'))).to.equal(null);
    expect(refusal(() => reads.checkVersionDelivery(writer, published, 'v1'))).to.equal(null);
    expect(refusal(() => reads.checkVersionDelivery(null, published, 'v2'))?.[0]).to.equal(401);
    expect(refusal(() => reads.checkVersionDelivery(writer, published, 'v2'))).to.deep.equal([403, 'Read denied for writer']);
    expect(
      refusal(() => reads.checkVersionDelivery(reader, published, 'v0')),
      'Read opens every version',
    ).to.equal(null);
    const hidden = snapshot({ views: published.views, meta: { svcContentState: { hidden: true } } });
    expect(refusal(() => reads.checkVersionDelivery(null, hidden, 'v1'))?.[0], 'hidden content is on no public view').to.equal(401);
  });

  it('file delivery by alias: the latest version for who may read, else the public one, else 401 or 403', () => {
    expect(reads.deliveredVersion(reader, published)).to.equal('v2');
    expect(reads.deliveredVersion(null, published)).to.equal('v1');
    expect(reads.deliveredVersion(writer, published), 'a token without Read gets what anyone gets').to.equal('v1');
    expect(refusal(() => reads.deliveredVersion(null, snapshot()))?.[0]).to.equal(401);
    expect(refusal(() => reads.deliveredVersion(writer, snapshot()))).to.deep.equal([403, 'Read denied for writer']);
  });

  it('search and inlined results: the filter form and the snapshot form of the same rule', () => {
    const t = new Date(NOW).toISOString();
    expect(reads.searchFilters(reader, null, NOW)).to.deep.equal(['{!lucene}((*:*))']);
    expect(reads.searchFilters(null, 'web', NOW)).to.deep.equal([
      `{!lucene}((+svc_views_ss:svcPublic +svc_timestate_svcPublic_drange:"${t}") OR (+svc_views_ss:web +svc_timestate_web_drange:"${t}")) AND -svc_contentstate_hidden_b:true`,
      `{!lucene}(+svc_views_ss:web +svc_timestate_web_drange:"${t}")`,
    ]);
    expect(reads.mayReadVersion(null, published, 'v1', NOW)).to.equal(true);
    expect(reads.mayReadVersion(null, published, 'v2', NOW)).to.equal(false);
    expect(reads.mayReadVersion(writer, published, 'v1', NOW), 'search with a token: Read only').to.equal(false);
    expect(reads.mayReadVersion(sportsReader, ofSports, 'v2', NOW)).to.equal(true);
  });
});
