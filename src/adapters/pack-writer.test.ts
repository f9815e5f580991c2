import { expect } from 'chai';
import fc from 'fast-check';
import { pack } from './codec.js';
import { ContentStore, type CommitInput } from './content-store.js';
import { PackWriter } from './pack-writer.js';
import { ACTOR_GROUP, draftSummaryField, packScriptArgs } from './redis.js';

/** Strings of every kind msgpackr tells apart: short and long (64 characters and more), non-ASCII, surrogate pairs and lone surrogates. */
const text = fc.oneof(
  fc.string({ maxLength: 70 }),
  fc.string({ unit: 'binary', maxLength: 70 }),
  fc.string({ unit: fc.constantFrom('a', 'é', '€', '\ud83d\ude00', '\ud800', '\udc00', '\u0000'), maxLength: 90 }),
  fc.constantFrom('x'.repeat(63), 'x'.repeat(64), 'é'.repeat(40), '€'.repeat(100), 'x'.repeat(255), 'x'.repeat(256), 'é'.repeat(33000), 'x'.repeat(70000)),
);
const number = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(
    0,
    -0,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xffff,
    0x10000,
    2 ** 32 - 1,
    2 ** 32,
    -0x20,
    -0x21,
    -0x80,
    -0x81,
    -0x8000,
    -0x8001,
    -(2 ** 31),
    -(2 ** 31) - 1,
  ),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 2 ** 53, 1.5, Date.now()),
);
/** JSON values and the few others a commit may hold (undefined, holes), with keys msgpackr's plain objects take. */
const value = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    text,
    number,
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.array(tie('v'), { maxLength: 20 }),
    fc.dictionary(fc.oneof(text, fc.constantFrom('_type', '1', '__proto__', 'constructor')), tie('v'), { maxKeys: 20 }),
  ),
})).v;
/** What only `pack` writes: the writer hands these to it whole. */
const other = fc.constantFrom<unknown>(
  new Date(0),
  new Map([['a', 1]]),
  new Set([1]),
  Buffer.from('abc'),
  new Uint8Array([1, 2]),
  10n,
  Object.create(null),
  Object.assign(Object.create(null), { a: 1 }),
  { constructor: 'own key' },
  new (class Thing {
    a = 1;
  })(),
  [1, [2, new Date(5)]],
  { a: { b: new Map() } },
);
// biome-ignore lint/suspicious/noSparseArray: a hole, which msgpackr packs as undefined
const holes = [1, , 3];

describe('PackWriter (src/adapters/pack-writer.ts)', () => {
  const w = new PackWriter();

  it('packs every value byte for byte as pack does, as the blob packScriptArgs writes', () => {
    fc.assert(
      fc.property(fc.oneof(value, other), (v) => {
        const mine = w.begin().packed('v', v).end();
        expect(mine.equals(packScriptArgs({ v: v === undefined ? undefined : pack(v) }))).to.equal(true);
      }),
      { numRuns: 5000 },
    );
    for (const v of [holes, new Array(40), { a: undefined }, 'x'.repeat(2 ** 17)])
      expect(
        w
          .begin()
          .packed('v', v)
          .end()
          .equals(packScriptArgs({ v: pack(v) })),
      ).to.equal(true);
  });

  it('writes the other arguments and lists as packScriptArgs, from a fixmap to a map16', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('s', 'n', 'b', 'blob', 'list'), fc.oneof(value, other)), { maxLength: 20 }), text, number, (args, s, n) => {
        w.begin();
        const expected: Parameters<typeof packScriptArgs>[0] = {};
        args.forEach(([kind, v], i) => {
          const name = `${kind}${i}`;
          if (kind === 's') {
            w.str(name, s);
            expected[name] = s;
          } else if (kind === 'n') {
            w.num(name, n);
            expected[name] = n;
          } else if (kind === 'b') {
            w.bool(name, i % 2 === 0);
            expected[name] = i % 2 === 0;
          } else if (kind === 'blob') {
            w.blob(name, pack(v));
            expected[name] = pack(v);
          } else {
            w.packedList(name, [v, i, s]);
            expected[name] = [pack(v), pack(i), pack(s)];
          }
        });
        expect(w.end().equals(packScriptArgs(expected))).to.equal(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('makes the commit argument of commit-content-n.lua as before (ContentStore.commitArgs against packScriptArgs of pack)', () => {
    const store = new ContentStore({} as never, 64, 100_000, 86_400);
    // The argument as it was made until the twentieth session.
    const before = (c: CommitInput) => {
      const v = c.version;
      return packScriptArgs({
        owner: c.owner,
        expectedRev: c.expectedRev,
        rev: c.snapshot.rev,
        snapshot: pack(c.snapshot),
        head: c.snapshot.head,
        deleted: c.snapshot.deleted === true,
        versionKey: v?.key,
        version: v && pack(v),
        versionIndexEntry:
          v &&
          pack({ key: v.key, rev: v.rev, created: v.created, creator: v.creator, ...(v.restoredFrom === undefined ? {} : { restoredFrom: v.restoredFrom }) }),
        event: pack(c.event),
        eventsMaxLen: 100_000,
        reply: c.reply?.length ? c.reply : undefined,
        dedupTtl: 86_400,
        ts: c.snapshot.modified,
        group: ACTOR_GROUP,
        entryId: c.entryId || undefined,
        promotedFrom: c.promotedFrom || undefined,
        promotedSummary: c.promotedFrom ? draftSummaryField(c.promotedFrom) : undefined,
        viewEvents: c.viewEvents.map((e) => pack(e)),
      });
    };
    const aspects = fc.dictionary(text, fc.dictionary(text, value, { maxKeys: 5 }), { maxKeys: 4 });
    const input = fc.record({
      owner: text,
      expectedRev: fc.nat(),
      rev: fc.integer({ min: 1, max: 2 ** 40 }),
      cid: text,
      head: text,
      deleted: fc.option(fc.boolean(), { nil: undefined }),
      meta: aspects,
      version: fc.option(fc.record({ aspects, restoredFrom: fc.option(text, { nil: undefined }) }), { nil: undefined }),
      via: fc.option(fc.constantFrom('bulk', 'promote'), { nil: undefined }),
      views: fc.array(text, { maxLength: 4 }),
      reply: fc.option(fc.uint8Array({ maxLength: 40 }), { nil: undefined }),
      entryId: fc.option(fc.constantFrom('', '1-0', '1700000000000-3'), { nil: undefined }),
      promotedFrom: fc.option(fc.constantFrom('', 'ws1', 'é'), { nil: undefined }),
    });
    fc.assert(
      fc.property(input, (i) => {
        const now = 1_700_000_000_000 + i.expectedRev;
        const c: CommitInput = {
          owner: i.owner,
          expectedRev: i.expectedRev,
          snapshot: {
            cid: i.cid,
            rev: i.rev,
            type: 'article',
            head: i.head,
            created: now,
            modified: now,
            committer: 'editor',
            ...(i.deleted === undefined ? {} : { deleted: i.deleted }),
            views: Object.fromEntries(i.views.map((v) => [v, i.head])),
            symbolic: {},
            meta: i.meta,
            aliases: i.views,
            cmd: 'c1',
          },
          version: i.version && {
            key: i.head,
            type: 'article',
            aspects: i.version.aspects,
            created: now,
            creator: 'editor',
            rev: i.rev,
            ...(i.version.restoredFrom === undefined ? {} : { restoredFrom: i.version.restoredFrom }),
          },
          viewEvents: i.views.map((view) => ({ view, userId: 'editor', version: `${i.cid}:${i.head}`, rev: i.rev, ts: now })),
          event: {
            kind: 'created',
            cid: i.cid,
            rev: i.rev,
            type: 'article',
            version: i.version ? i.head : undefined,
            ts: now,
            userId: 'editor',
            requestId: 'r',
            ...(i.via ? { via: i.via } : {}),
          },
          reply: i.reply && Buffer.from(i.reply),
          commandId: 'c1',
          entryId: i.entryId,
          promotedFrom: i.promotedFrom,
        } as CommitInput;
        // biome-ignore lint/complexity/useLiteralKeys: commitArgs is private; brackets reach it
        expect(store['commitArgs'](c).equals(before(c))).to.equal(true);
      }),
      { numRuns: 2000 },
    );
  });
});
