import { expect } from 'chai';
import { pack } from '../adapters/codec.js';
import type { Snapshot, VersionRecord } from '../content/model.js';
import { type ExportFilter, ExportRenderer, exportLine } from './export-render.js';

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

const security = { roles: { reader: { '*': ['Read'] } } };
/** A reader everywhere, with no types or views asked for: every content not deleted. */
const all: ExportFilter = { security, user: { userId: 'u', contexts: { __global__: ['reader'] } }, types: null, views: null };
const flat = (pairs: (readonly [Buffer | null, Buffer | null])[]) => pairs.flat();

describe('export rendering on a worker thread (CONTRACT §16)', () => {
  it('renders each content as exportLine does, in order, one line each', async () => {
    const r = new ExportRenderer();
    try {
      const contents = Array.from({ length: 300 }, (_, i) => [snapshot(`K${i}`), version()] as const);
      const { lines: out, wanting } = await r.render(flat(contents.map(([s, v]) => [pack(s), pack(v)])), all);
      expect(wanting).to.deep.equal([]);
      expect(out.toString()).to.equal(contents.map(([s, v]) => `${exportLine(s, v)}\n`).join(''));
      const line = JSON.parse(exportLine(snapshot('K'), version()));
      expect(line.views).to.deep.equal(['mirror', 'svcLatest']);
      expect(line.aliases).to.deep.equal(['contentid/K', 'web/é-😀']);
      expect(line.content.aspects.byline._type).to.equal('byline');
      expect((await r.render([], all)).lines.length).to.equal(0);
    } finally {
      await r.close();
    }
  });

  it('keeps what the caller may read, of the types and on the views asked for; a kept content read without its version is wanted', async () => {
    const r = new ExportRenderer();
    const owned = (cid: string, owners: string[], over: Partial<Snapshot> = {}): Snapshot => ({
      ...snapshot(cid),
      meta: { svcSecurityContext: { _type: 'svcSecurityContext', owners } },
      ...over,
    });
    try {
      const contents = [
        owned('S1', ['sports']),
        owned('C1', ['culture']),
        owned('S2', ['sports'], { type: 'image' }),
        owned('S3', ['sports'], { deleted: true }),
        owned('S4', ['sports'], { views: { svcLatest: 'V2' }, symbolic: {} }),
      ];
      const stored = flat(contents.map((c) => [pack(c), pack(version())] as const));
      const sports: ExportFilter = { ...all, user: { userId: 'sportseditor', contexts: { sports: ['reader'] } } };
      const cids = (b: Buffer) =>
        b
          .toString()
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).id);
      expect(cids((await r.render(stored, sports)).lines)).to.deep.equal(['contentid/S1', 'contentid/S2', 'contentid/S4']);
      expect(cids((await r.render(stored, all)).lines)).to.deep.equal(['contentid/S1', 'contentid/C1', 'contentid/S2', 'contentid/S4']);
      expect(cids((await r.render(stored, { ...sports, types: ['article'] })).lines)).to.deep.equal(['contentid/S1', 'contentid/S4']);
      expect(cids((await r.render(stored, { ...sports, views: ['mirror', 'svcPublic'] })).lines)).to.deep.equal(['contentid/S1', 'contentid/S2']);
      // Without its version (a head written before its version key was kept, an archived
      // version), a kept content is wanted, with its snapshot as stored; one not kept is not.
      const noVersions = flat(contents.map((c) => [pack(c), null] as const));
      const { lines, wanting } = await r.render([...noVersions, null, pack(version())], sports);
      expect(lines.length).to.equal(0);
      expect(wanting.map((w) => [w.cid, w.head])).to.deep.equal([
        ['S1', 'V2'],
        ['S2', 'V2'],
        ['S4', 'V2'],
      ]);
      expect(Buffer.from(wanting[0].snapshot).equals(pack(contents[0]))).to.equal(true);
      // A version that is not the head's (a field h a commit of an earlier build left behind) is
      // wanted too, never rendered with the head's version id.
      const older = { ...version(), key: 'V1' } as VersionRecord;
      const stale = await r.render([pack(contents[0]), pack(older), pack(contents[3]), pack(older)], sports);
      expect([stale.lines.length, stale.wanting.map((w) => w.head)]).to.deep.equal([0, ['V2']]);
    } finally {
      await r.close();
    }
  });

  it('a batch it cannot decode fails (the export is cut), and the renderer goes on', async () => {
    const r = new ExportRenderer();
    try {
      const bad = Buffer.from([0xc1]); // never used in msgpack
      let failed: unknown;
      await r.render([bad, bad], all).catch((e: unknown) => {
        failed = e;
      });
      expect(String(failed)).to.match(/export rendering failed/);
      const { lines: out } = await r.render([pack(snapshot('K')), pack(version())], all);
      expect(out.toString()).to.equal(`${exportLine(snapshot('K'), version())}\n`);
    } finally {
      await r.close();
    }
  });

  it('a worker that stops fails the batches it held; the next batch starts another', async () => {
    const r = new ExportRenderer();
    try {
      const many = Array.from({ length: 2000 }, (_, i) => [pack(snapshot(`K${i}`)), pack(version())]).flat();
      const held = r.render(many, all);
      await r.close();
      let failed: unknown;
      await held.catch((e: unknown) => {
        failed = e;
      });
      expect(String(failed)).to.match(/stopped/);
      expect((await r.render(many.slice(0, 2), all)).lines.toString()).to.equal(`${exportLine(snapshot('K0'), version())}\n`);
    } finally {
      await r.close();
    }
  });
});
