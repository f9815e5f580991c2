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
