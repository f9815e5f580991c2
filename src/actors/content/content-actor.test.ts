import { expect } from 'chai';
import type { Snapshot } from '../../content/model.js';
import { AppError } from '../../errors.js';
import type { Operation } from './commands.js';
import { applyOperations } from './content-actor.js';

const snapshot = (): Snapshot =>
  ({
    cid: 'K',
    rev: 2,
    head: 'V1',
    type: 'article',
    created: 0,
    modified: 0,
    committer: 'u',
    deleted: false,
    views: {},
    symbolic: {},
    meta: {},
    aliases: [],
  }) as unknown as Snapshot;

describe('applyOperations', () => {
  it('refuses (400) a reserved view, namespace or metadata aspect name in operations it replays (a draft saved before the gateway refused them), changing nothing', () => {
    const reserved: Operation[][] = [];
    for (const name of ['_type', '__proto__']) {
      reserved.push(
        [{ _type: 'svcAssignToViews', views: ['svcPublic', name] }],
        [{ _type: 'svcAssignToSymbolicViews', views: [name], targetView: '@svcPublic' }],
        [{ _type: 'svcSetAlias', namespace: name, alias: 'a' }],
        [{ _type: 'svcContentMetadata', aspects: JSON.parse(`{"${name}": {"x": 1}}`) }],
      );
    }
    for (const ops of reserved) {
      const s = snapshot();
      const before = JSON.stringify(s);
      let err: unknown;
      try {
        applyOperations(s, 'V2', ops, 'u', 1);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(ops)).to.be.instanceOf(AppError);
      expect((err as AppError).code, JSON.stringify(ops)).to.equal('BAD_REQUEST');
      expect(JSON.stringify(s), JSON.stringify(ops)).to.equal(before);
    }
    const s = snapshot();
    const events = applyOperations(
      s,
      'V2',
      [
        { _type: 'svcAssignToViews', views: ['constructor'] },
        { _type: 'svcContentMetadata', aspects: { note: { x: 1 } } },
      ],
      'u',
      1,
    );
    expect(Object.keys(s.views).sort()).to.deep.equal(['constructor', 'svcLatest']);
    expect(events.map((e) => e.view)).to.deep.equal(['svcLatest', 'constructor']);
  });
});

describe('applyOperations: the views a content may be on (MAX_VIEWS, 50)', () => {
  const names = (n: number, prefix = 'v') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  const refusal = (f: () => unknown): AppError => {
    try {
      f();
    } catch (e) {
      return e as AppError;
    }
    throw new Error('not refused');
  };

  it('refuses (400, naming the bound and the count) a write that puts the content on a 51st view, by either operation', () => {
    // 49 views and svcLatest: 50 views
    expect(() => applyOperations(snapshot(), 'V2', [{ _type: 'svcAssignToViews', views: names(49) }], 'u', 1)).to.not.throw();
    for (const ops of [
      [{ _type: 'svcAssignToViews', views: names(50) }],
      [
        { _type: 'svcAssignToViews', views: names(30) },
        { _type: 'svcAssignToSymbolicViews', views: names(20, 's'), targetView: '@v0' },
      ],
      // the hunt's create: 100 operations of 100 names
      Array.from({ length: 100 }, (_, i) => ({ _type: 'svcAssignToViews', views: names(100, `o${i}-`) })),
    ] as Operation[][]) {
      const e = refusal(() => applyOperations(snapshot(), 'V2', ops, 'u', 1));
      expect(e).to.be.instanceOf(AppError);
      expect(e.code).to.equal('BAD_REQUEST');
      expect(e.extraInfo.limit).to.equal(50);
      expect(e.message).to.contain('at most 50');
    }
  });

  it('content on more views before the bound can still be written, and taken off views, but not put on more', () => {
    const many = () => {
      const s = snapshot();
      for (const v of names(70)) s.views[v] = 'V1';
      s.views.svcLatest = 'V1';
      return s;
    };
    expect(() => applyOperations(many(), 'V2', [{ _type: 'svcContentMetadata', aspects: { note: { x: 1 } } }], 'u', 1)).to.not.throw();
    expect(() => applyOperations(many(), 'V2', [{ _type: 'svcAssignToViews', views: ['v3'] }], 'u', 1)).to.not.throw();
    const e = refusal(() => applyOperations(many(), 'V2', [{ _type: 'svcAssignToViews', views: ['another'] }], 'u', 1));
    expect(e.extraInfo).to.deep.include({ limit: 50, found: 72 });
  });
});
