import { expect } from 'chai';
import { pack } from '../adapters/codec.js';
import type { Snapshot, VersionRecord } from '../content/model.js';
import { ExportRenderer, exportLine } from './export-render.js';

const snapshot = (cid: string): Snapshot =>
  ({
    cid,
    rev: 2,
    head: 'V2',
    type: 'article',
    created: Date.UTC(2026, 10, 26, 12),
    modified: Date.UTC(2026, 10, 26, 13),
    committer: 'editor',
    deleted: false,
    views: { svcLatest: 'V2', svcPublic: 'V1' },
    symbolic: { mirror: 'svcLatest' },
    aliases: ['web/é-😀'],
    meta: { svcCategorization: { _type: 'svcCategorization', categories: ['x'] } },
  }) as unknown as Snapshot;
const version = (type = 'article'): VersionRecord =>
  ({
    key: 'V2',
    type,
    created: Date.UTC(2026, 10, 26, 13),
    aspects: { body: { _type: 'body', title: 'Ünïcödé €😀' }, byline: { author: 'A' } },
  }) as unknown as VersionRecord;

describe('export rendering on a worker thread (CONTRACT §16)', () => {
  it('renders each content as exportLine does, in order, one line each', async () => {
    const r = new ExportRenderer();
    try {
      const contents = Array.from({ length: 300 }, (_, i) => [snapshot(`K${i}`), version()] as const);
      const out = await r.render(contents.map(([s, v]) => [pack(s), pack(v)]));
      expect(out.toString()).to.equal(contents.map(([s, v]) => `${exportLine(s, v)}\n`).join(''));
      const line = JSON.parse(exportLine(snapshot('K'), version()));
      expect(line.views).to.deep.equal(['mirror', 'svcLatest']);
      expect(line.aliases).to.deep.equal(['contentid/K', 'web/é-😀']);
      expect(line.content.aspects.byline._type).to.equal('byline');
      expect((await r.render([])).length).to.equal(0);
    } finally {
      await r.close();
    }
  });

  it('a batch it cannot decode fails (the export is cut), and the renderer goes on', async () => {
    const r = new ExportRenderer();
    try {
      const bad = Buffer.from([0xc1]); // never used in msgpack
      let failed: unknown;
      await r.render([[bad, bad]]).catch((e: unknown) => {
        failed = e;
      });
      expect(String(failed)).to.match(/export rendering failed/);
      const out = await r.render([[pack(snapshot('K')), pack(version())]]);
      expect(out.toString()).to.equal(`${exportLine(snapshot('K'), version())}\n`);
    } finally {
      await r.close();
    }
  });

  it('a worker that stops fails the batches it held; the next batch starts another', async () => {
    const r = new ExportRenderer();
    try {
      const many = Array.from({ length: 2000 }, (_, i) => [pack(snapshot(`K${i}`)), pack(version())] as [Buffer, Buffer]);
      const held = r.render(many);
      await r.close();
      let failed: unknown;
      await held.catch((e: unknown) => {
        failed = e;
      });
      expect(String(failed)).to.match(/stopped/);
      expect((await r.render(many.slice(0, 1))).toString()).to.equal(`${exportLine(snapshot('K0'), version())}\n`);
    } finally {
      await r.close();
    }
  });
});
