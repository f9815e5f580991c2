import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'chai';
import { pack } from '../../src/adapters/codec.js';
import { COMPARE_ON_LOOP_BYTES, COMPARE_ON_LOOP_VALUES, CompareRenderer, storedShape, storedValues } from '../../src/gateway/compare-render.js';
import { AppError } from '../../src/errors.js';
import type { VersionRecord } from '../../src/content/model.js';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { type Client, Client as PlatformClient, readerAccounts, startTestPlatform } from '../support/platform.js';

/**
 * Review 18: a compare read and diffed its two versions on the event loop, however large. Five
 * readers' compares of a 2.4 MB version (180,000 keys) with itself held the gateway's event loop
 * 3.5 s, every other request waiting, for answers of 140 bytes. Now the same version on both
 * sides answers an empty patch without a diff, and versions over COMPARE_ON_LOOP_BYTES are
 * compared on a thread of their own, at most a few waiting per process (503 past them).
 */
describe('security: the cost of a compare of large versions (review 18)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let redis: Awaited<ReturnType<typeof startRedisServer>>;
  let editor: Client;
  let reader: Client;
  let id = '';
  let v1 = '';
  let v2 = '';
  const big = (n: number, changed: number) => {
    const aspects: Record<string, Record<string, string>> = {};
    for (let a = 0; a < 3; a++) {
      const one: Record<string, string> = { _type: `big${a}` };
      for (let i = 0; i < n; i++) one[`k${i}`] = i < changed ? `w${i}` : `v${i}`;
      aspects[`big${a}`] = one;
    }
    return aspects;
  };

  before(async () => {
    // Web and actors only: an indexer of the same process composing the search documents of these
    // 2.4 MB versions would hold the event loop while the compares are measured.
    redis = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: redis.url }, ['web', 'actors']);
    editor = await new PlatformClient(p.base).login('editor');
    reader = await new PlatformClient(p.base).login('reader');
    const r = await editor.create({ system: { contentType: 'article' }, aspects: big(60_000, 0) });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    id = r.json.system.id;
    v1 = r.json.system.version;
    const u = await editor.update(id, { aspects: big(60_000, 3) }, r.headers.get('etag'));
    expect(u.status, u.text.slice(0, 300)).to.equal(200);
    v2 = u.json.system!.version as string;
    await moreReaders();
  });
  after(async () => {
    await p?.stop();
    await redis?.stop();
  });

  const compare = (from: string, to: string, who: Client = reader) =>
    who.req('GET', `/content/alias/${id}/compare?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
  /** Four reader accounts: one caller makes at most COMPARES_ON_THREAD_PER_CALLER (2) compares of large versions at once (review s23d). */
  const readers: Client[] = [];
  const moreReaders = async () => {
    readers.push(reader, ...(await readerAccounts(p, 3)));
  };

  it('a version compared with itself answers an empty patch', async () => {
    const r = await compare(v1, v1);
    expect(r.status, r.text.slice(0, 300)).to.equal(200);
    expect(r.json).to.deep.equal({ from: v1, to: v1, patch: [] });
  });

  it('eight compares (COMPARES_ON_THREAD) of large versions at once leave the event loop free, and answer the patch', async () => {
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? compare(v1, v1, readers[i % 4]) : compare(v1, v2, readers[i % 4]))));
    lag.disable();
    for (const r of rs) expect(r.status, r.text.slice(0, 300)).to.equal(200);
    const byPath = (ops: { path: string }[]) => [...ops].sort((a, b) => a.path.localeCompare(b.path));
    expect(byPath(rs[0].json.patch)).to.deep.equal(
      byPath([0, 1, 2].flatMap((a) => [0, 1, 2].map((i) => ({ op: 'replace', path: `/big${a}/k${i}`, value: `w${i}` })))),
    );
    // Diffing 2.4 MB versions on the loop held it 0.3-0.5 s a compare, decoding alone 100 ms: eight
    // held it 2.5 s or more. Made on the thread, a stall is whatever else the process does (26 ms
    // alone; up to 430 ms in the whole suite on a loaded machine).
    expect(lag.max / 1e6, 'the longest stall of the event loop, ms').to.be.below(1000);
  });

  it('past the compares a process makes on its thread at once: 503 with Retry-After, before anything is read', async () => {
    const renderer = new CompareRenderer(1);
    const aspects = big(20_000, 0);
    const stored = pack({ key: 'a', type: 't', aspects, created: 0, creator: 'x', rev: 1 } satisfies VersionRecord);
    expect(stored.length).to.be.above(COMPARE_ON_LOOP_BYTES);
    expect(CompareRenderer.onThread({ key: 'a', stored }, { key: 'b', stored }, 2 * stored.length)).to.equal(true);
    const release = renderer.slot();
    let refused: AppError | null = null;
    try {
      renderer.slot();
    } catch (e) {
      refused = e as AppError;
    }
    expect(refused?.http).to.equal(503);
    expect(refused?.retryAfter).to.equal(1);
    const answer = JSON.parse(await renderer.answer('k', { key: 'a', stored }, { key: 'b', stored }, 2 * stored.length));
    expect(answer).to.deep.equal({ from: 'c:k:a', to: 'c:k:b', patch: [] });
    release();
    release(); // given back once
    const again = renderer.slot();
    expect(() => renderer.slot()).to.throw(AppError);
    again();
  });
});

/**
 * Review of the twenty-first session (F1): the rule above measured a compare by its versions'
 * stored bytes, but what a compare costs follows how many values they hold. An empty object or
 * array is one byte of MessagePack: a version of 99,000 of them is 99 KB stored, under
 * COMPARE_ON_LOOP_BYTES with its pair, and was decoded and diffed on the event loop (eight such
 * compares at once held it 0.8 s; with a patch of every value, 150-250 ms each and 5 MB answered),
 * and kept decoded in the compare cache, whose bound counted stored bytes: 64 bytes of heap for
 * each byte counted (its 8 MiB could hold about 530 MB).
 */
describe('security: compares of versions of many small values (review 21, F1)', function () {
  this.timeout(300_000);
  setFlagsFromString('--expose-gc');
  const collect = runInNewContext('gc') as () => void;
  const retained = (): number => {
    collect();
    return process.memoryUsage().heapUsed;
  };
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let redis: Awaited<ReturnType<typeof startRedisServer>>;
  let reader: Client;
  let id = '';
  const versions: string[] = [];
  const VERSIONS = 32;
  const VALUES = 99_000;
  // Every version differs from the next in one value: the patch is one operation (a large answer
  // would measure this process's client parsing it, not the gateway).
  const many = (n: number) => ({ body: { _type: 'body', n, a: Array.from({ length: VALUES }, () => ({})) } });

  before(async () => {
    redis = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: redis.url }, ['web', 'actors']);
    // A sportseditor writes its own content; any reader of it compares.
    const writer = await new PlatformClient(p.base).login('sportseditor');
    reader = await new PlatformClient(p.base).login('reader');
    const sports = [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }];
    const r = await writer.create({ system: { contentType: 'article' }, aspects: many(1), operations: sports });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    id = r.json.system.id;
    versions.push(r.json.system.version);
    let etag = r.headers.get('etag');
    for (let n = 2; n <= VERSIONS; n++) {
      const u = await writer.update(id, { aspects: many(n) }, etag);
      expect(u.status, u.text.slice(0, 300)).to.equal(200);
      etag = u.headers.get('etag');
      versions.push(u.json.system!.version as string);
    }
    const stored = pack({ key: 'a', type: 'article', aspects: many(1), created: 0, creator: 'x', rev: 1 } satisfies VersionRecord);
    expect(2 * stored.length, 'two such versions are under COMPARE_ON_LOOP_BYTES').to.be.below(COMPARE_ON_LOOP_BYTES);
    await moreReaders();
  });
  after(async () => {
    await p?.stop();
    await redis?.stop();
  });

  const compare = (from: string, to: string, who: Client = reader) =>
    who.req('GET', `/content/alias/${id}/compare?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
  /** Four reader accounts: one caller makes at most COMPARES_ON_THREAD_PER_CALLER (2) compares of large versions at once (review s23d). */
  const readers: Client[] = [];
  const moreReaders = async () => {
    readers.push(reader, ...(await readerAccounts(p, 3)));
  };

  it('storedShape counts the values and the lengths of all their paths (a bound of what a patch spells), exactly, on 300 random values', () => {
    const ref = (v: unknown, path: number): { values: number; pathChars: number } => {
      let values = 1;
      let pathChars = path;
      const add = (x: unknown, step: number) => {
        const r = ref(x, path + 1 + step);
        values += r.values;
        pathChars += r.pathChars;
      };
      if (Array.isArray(v)) for (let i = 0; i < v.length; i++) add(v[i], String(i).length);
      else if (v && typeof v === 'object')
        for (const [k, x] of Object.entries(v)) {
          values++; // the key
          add(x, Buffer.byteLength(k));
        }
      return { values, pathChars };
    };
    const rnd = (d: number): unknown => {
      const r = Math.random();
      if (d > 4 || r < 0.3) return [1, 'ab', null, true, 3.5, 'é'.repeat(Math.floor(Math.random() * 40)), -70000, 2 ** 40][Math.floor(Math.random() * 8)];
      if (r < 0.65) return Array.from({ length: Math.floor(Math.random() * 20) }, () => rnd(d + 1));
      const o: Record<string, unknown> = {};
      for (let i = 0; i < Math.floor(Math.random() * 20); i++) o[`k${'x'.repeat(Math.floor(Math.random() * 300))}é${i}`] = rnd(d + 1);
      return o;
    };
    for (let i = 0; i < 300; i++) {
      const v = rnd(0);
      expect(storedShape(pack(v), 1e9), JSON.stringify(v).slice(0, 80)).to.deep.equal(ref(v, 0));
    }
    const deep = pack({ ['k'.repeat(800)]: { ['k'.repeat(800)]: Array.from({ length: 100 }, (_, i) => i) } });
    expect(storedShape(deep, 1e9, 1000).pathChars, 'stops one past the path limit').to.equal(1001);
  });

  it('storedValues counts every value of a stored version (containers, keys, strings, numbers) on its bytes', () => {
    const walk = (v: unknown): number =>
      Array.isArray(v)
        ? 1 + v.reduce((n: number, x) => n + walk(x), 0)
        : v !== null && typeof v === 'object'
          ? 1 + Object.values(v).reduce((n: number, x) => n + 1 + walk(x), 0)
          : 1;
    const samples: unknown[] = [
      null,
      true,
      0,
      -1,
      -33,
      127,
      128,
      -129,
      65_536,
      -70_000,
      2 ** 40,
      -(2 ** 40),
      0.5,
      1e300,
      '',
      'x'.repeat(31),
      'x'.repeat(32),
      'é'.repeat(200),
      'y'.repeat(70_000),
      Array.from({ length: 20 }, (_, i) => i),
      Array.from({ length: 70_000 }, () => ({})),
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, [i, { a: null }]])),
      Object.fromEntries(Array.from({ length: 70_000 }, (_, i) => [`k${i}`, i % 2 === 0])),
      { deep: [[[[{ a: [{}, [], '', 0.25, -5] }]]]] },
    ];
    for (const v of samples) {
      const stored = pack({ key: 'a', type: 't', aspects: { x: { _type: 'x', v } }, created: 1, creator: 'c', rev: 1 });
      // The record's own 6 keys and values, the aspects map, its key and aspect, and the aspect's two keys.
      const expected = 1 + 12 + 1 + 1 + 1 + 2 + walk(v);
      expect(storedValues(stored, 10_000_000), JSON.stringify(v).slice(0, 60)).to.equal(expected);
      expect(storedValues(stored, 5)).to.equal(6);
    }
    expect(storedValues(Buffer.from([0xc1]), 100), 'not MessagePack').to.equal(101);
    expect(storedValues(Buffer.from([0xda, 0x00, 0x10, 0x41]), 100), 'cut short').to.equal(101);
    expect(COMPARE_ON_LOOP_VALUES).to.be.above(2 * 3_500);
  });

  it('eight compares (COMPARES_ON_THREAD) of such versions at once leave the event loop free, and answer the patch', async () => {
    await compare(versions[0], versions[1]); // the thread's first job (its start, its JIT) is not the figure
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => compare(versions[i + 2], versions[i + 3], readers[i % 4])));
    lag.disable();
    rs.forEach((r, i) => {
      expect(r.status, r.text.slice(0, 300)).to.equal(200);
      expect(r.json.patch).to.deep.equal([{ op: 'replace', path: '/body/n', value: i + 4 }]);
    });
    // On the old code each was decoded and diffed on the loop (198,000 values): eight held it 0.8 s; now 18 ms.
    expect(lag.max / 1e6, 'the longest stall of the event loop, ms').to.be.below(150);
  });

  it('what the compares keep decoded is bounded by what it holds, not by its stored bytes', async () => {
    const before = retained();
    for (let i = 0; i + 1 < VERSIONS; i++) {
      const r = await compare(versions[i], versions[i + 1]);
      expect(r.status, r.text.slice(0, 300)).to.equal(200);
    }
    const grown = retained() - before;
    // On the old code the 23 versions not yet compared (2.2 MB stored, under the cache's 8 MiB of
    // stored bytes) stayed decoded: 127 MiB retained; now none is kept (each goes to the thread).
    expect(grown / 2 ** 20, 'heap retained after the compares, MiB').to.be.below(48);
  });
});
