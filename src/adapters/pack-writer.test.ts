import { createHash } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { pack } from './codec.js';
import { ContentStore, type CommitInput } from './content-store.js';
import { PackWriter } from './pack-writer.js';
import { ACTOR_GROUP, connectRedis, draftSummaryField, packScriptArgs } from './redis.js';

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

  /** Whether the writer packs `v` as the blob packScriptArgs writes of `pack(v)`. */
  const asPack = (v: unknown, writer = w): boolean =>
    writer
      .begin()
      .packed('v', v)
      .end()
      .equals(packScriptArgs({ v: pack(v) }));

  it('writes strings whose UTF-8 length passes a header bound (31, 255, 65,535 bytes) their length does not, as pack does', () => {
    // msgpackr guesses the header from the string's length and moves the bytes when its UTF-8
    // takes a longer one; under 64 characters it encodes by its own loop, from 64 by utf8Write
    // (a lone surrogate: three bytes of its own code there, U+FFFD here).
    const units = ['x', '\u007f', '\u0080', 'é', '\u07ff', '\u0800', '€', '\uffff', '\ud83d\ude00', '\ud800', '\udc00', '\u0000'];
    const lengths = [
      0, 1, 10, 11, 15, 16, 20, 21, 30, 31, 32, 33, 42, 43, 63, 64, 65, 85, 86, 127, 128, 255, 256, 257, 21845, 21846, 32767, 32768, 65535, 65536, 65537,
    ];
    for (const u of units)
      for (const n of lengths)
        for (const s of [u.repeat(n), `a${u.repeat(n)}`, `${u.repeat(n)}a`]) {
          const what = `${JSON.stringify(u)} x ${n} (${s.length} units, ${Buffer.byteLength(s)} bytes)`;
          expect(asPack(s), what).to.equal(true);
          expect(asPack({ [s]: [s] }), `as a key, ${what}`).to.equal(true);
        }
  });

  it('writes numbers at the bound of every integer form, and containers of 15 to 65,537 entries, as pack does', () => {
    const bounds = [0, -0, 0x1f, 0x20, 0x3f, 0x40, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53, 2 ** 53 + 2];
    const numbers = [
      ...bounds,
      ...bounds.map((n) => -n),
      -0x21,
      -0x81,
      -0x8001,
      -(2 ** 31) - 1,
      0.5,
      0.1,
      1e-300,
      5e-324,
      Number.MAX_VALUE,
      3.4028234663852886e38,
    ];
    for (const n of [...numbers, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(asPack(n), String(n)).to.equal(true);
      expect(asPack([n, { n }]), `[${n}, {n: ${n}}]`).to.equal(true);
    }
    for (const n of [15, 16, 17, 255, 256, 65535, 65536, 65537]) {
      expect(asPack(new Array(n).fill(1)), `an array of ${n}`).to.equal(true);
      expect(asPack(new Array(n)), `a sparse array of ${n}`).to.equal(true);
      expect(asPack(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]))), `an object of ${n} keys`).to.equal(true);
    }
  });

  it('writes values that end at, or one byte past, the capacity of its buffer as pack does', () => {
    // A new writer's buffer holds 64 KiB: a string of 0 to 9 characters, then floats (9 bytes
    // each) or two-byte characters, end a value at every byte around that capacity.
    for (let pad = 0; pad < 10; pad++) {
      const floats = ['p'.repeat(pad), ...new Array(7300).fill(1.5)];
      const chars = ['p'.repeat(pad), ...new Array(21_900).fill('é')];
      for (const v of [floats, chars]) {
        const fresh = new PackWriter();
        expect(
          fresh
            .begin()
            .packed('v', v)
            .end()
            .equals(packScriptArgs({ v: pack(v) })),
          `after ${pad} characters`,
        ).to.equal(true);
      }
    }
    const fresh = new PackWriter();
    for (let n = 65536 - 48; n < 65536 + 16; n++) expect(asPack({ a: 'y'.repeat(n) }, fresh), `${n} characters`).to.equal(true);
  });

  it('answers a buffer of its own: a later commit, or one that threw half-way, changes no answer before it', () => {
    const first = w
      .begin()
      .str('owner', 'a')
      .packed('snapshot', { s: 'x'.repeat(100), n: [1, 2, 3] })
      .end();
    const kept = Buffer.from(first);
    // Unknown to msgpackr: the writer hands the value to pack, which throws; the writer is left half-way.
    expect(() =>
      w
        .begin()
        .str('owner', 'b')
        .packed('snapshot', { s: 'y'.repeat(200), deep: [{ x: Symbol('no') }] }),
    ).to.throw(/Unknown type/);
    const after = w.begin().str('owner', 'c').packed('snapshot', { z: 1 }).end();
    expect(after.equals(packScriptArgs({ owner: 'c', snapshot: pack({ z: 1 }) }))).to.equal(true);
    expect(first.equals(kept), 'the first answer, after two more commits').to.equal(true);
    expect(first.buffer === after.buffer && first.byteOffset === after.byteOffset).to.equal(false);
  });

  it('lets go of a buffer grown for a large commit at its end (a 10 MiB body would hold 32 MiB for the life of the process)', () => {
    const big = { s: 'z'.repeat(4 * 1024 * 1024) };
    const out = w.begin().packed('version', big).end();
    expect(out.equals(packScriptArgs({ version: pack(big) }))).to.equal(true);
    // biome-ignore lint/complexity/useLiteralKeys: buf is private; brackets reach it
    expect(w['buf'].length, 'the buffer kept after a commit of 4 MiB').to.be.at.most(1024 * 1024);
    expect(asPack({ after: 'the large commit' })).to.equal(true);
  });

  it('is read by the commit script as written: cmsgpack decodes the map, its numbers and strings, and gives the blobs back byte for byte', async () => {
    const redis = connectRedis({ REDIS_URL: process.env.REDIS_URL as string, REDIS_CLUSTER_NODES: '' });
    try {
      const blob = { t: 'é'.repeat(40), n: [-1, 2 ** 53, -(2 ** 31) - 1, 0.1, 300], u: undefined, long: '€'.repeat(30_000), list: new Array(20).fill(null) };
      const names = Array.from({ length: 12 }, (_, i) => `extra${i}`);
      w.begin()
        .str('s', 'é'.repeat(20))
        .num('n', 1_700_000_000_123)
        .bool('b', true)
        .packed('blob', blob)
        .packedList('list', [1, 'x'.repeat(300)]);
      w.str('str16', 'x'.repeat(300)).str('str32', 'x'.repeat(70_000));
      for (const n of names) w.str(n, n);
      const arg = w.end();
      expect(arg[0], 'a map16 header (more than 15 names)').to.equal(0xde);
      // Blobs are compared by their SHA-1 (redis.sha1hex) and length: the reply's strings are decoded as UTF-8.
      const script = `local a = cmsgpack.unpack(ARGV[1])
        local n = 0
        for _ in pairs(a) do n = n + 1 end
        local s = {}
        for i, b in ipairs({a.s, a.blob, a.list[1], a.list[2], a.str16, a.str32, a.extra11}) do s[i] = #b .. ':' .. redis.sha1hex(b) end
        return {n, tostring(a.n), tostring(a.b), #a.list, s[1], s[2], s[3], s[4], s[5], s[6], s[7]}`;
      const got = (await redis.eval(script, 0, arg)) as unknown[];
      const digest = (b: Buffer | string) => `${Buffer.byteLength(b)}:${createHash('sha1').update(b).digest('hex')}`;
      expect(got.slice(0, 4)).to.deep.equal([19, '1700000000123', 'true', 2]);
      expect(got.slice(4)).to.deep.equal(
        ['é'.repeat(20), pack(blob), pack(1), pack('x'.repeat(300)), 'x'.repeat(300), 'x'.repeat(70_000), 'extra11'].map(digest),
      );
    } finally {
      redis.disconnect();
    }
  });
});
