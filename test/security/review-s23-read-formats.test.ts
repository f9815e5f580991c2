import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { expect } from 'chai';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { serialize } from '../../src/gateway/envelope.js';
import { type Client, Client as PlatformClient, startTestPlatform } from '../support/platform.js';

/** A GET through node:http, its body counted and dropped: no answer check, no parse in this process. */
function rawGet(url: string, token: string): Promise<{ status: number; bytes: number; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'X-Auth-Token': token } }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, ms: performance.now() - t0 }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** `n` zeros under `depth` nested maps `{a: {a: … [0, 0, …]}}`: within MAX_BODY_DEPTH (64) with the envelope around it. */
const deep = (depth: number, n: number): unknown => {
  let v: unknown = new Array(n).fill(0);
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
};

/**
 * The twenty-third session's review: what the read formats of CONTRACT §12 (`format=json+allTypes`,
 * `format=json+pretty`, or the same by `Accept`) cost for a content whose values sit deep, which
 * any writer may store (nesting up to MAX_BODY_DEPTH, 64; scalars bounded by MAX_BODY_BYTES only).
 * Measured on the old code with a sportseditor's article of 2.5 million numbers under 58 nested
 * maps (5 MB stored), read by the reader:
 *
 * - `json`: 5.0 MB in 184 ms (a stall of 171 ms, decoding the version);
 * - `json+allTypes`: 5.0 MB in 5.2 s, all of it on the event loop (every other request waited):
 *   each map's `_type` marker walked its whole subtree again, so each number was walked once per
 *   map above it. The same numbers under one map: 16 ms. Not kept by the read cache (an answer past
 *   READ_CACHE_BYTES / 16 is not), so every read paid again. Fixed: `withAllTypes` makes each
 *   marker from the names the walk below it made (src/gateway/envelope.ts).
 * - `json+pretty`: 317.5 MB (63 times the `json` answer: each number on a line indented 2 spaces
 *   a level) in 6.1 s, the gateway's RSS from 610 MB to 1.3 GB for one request; 4.4 million
 *   numbers (8.8 MB stored) answered 500 (`RangeError: Invalid string length`, past V8's longest
 *   string) after 7.7 s. Not fixed (the second describe, skipped).
 */
describe('security: read formats of deeply nested content (review s23)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let redis: Awaited<ReturnType<typeof startRedisServer>>;
  let sports: Client;
  let reader: Client;

  before(async () => {
    // Web and actors only: an indexer in this process would compose the search document of the
    // large version while the reads are measured.
    redis = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: redis.url }, ['web', 'actors']);
    sports = await new PlatformClient(p.base).login('sportseditor');
    reader = await new PlatformClient(p.base).login('reader');
  });
  after(async () => {
    await p?.stop();
    await redis?.stop();
  });

  /** The sportseditor's article of `n` numbers under `depth` maps; its versioned address. */
  const created = async (depth: number, n: number): Promise<string> => {
    const r = await sports.create({
      system: { contentType: 'article' },
      aspects: { body: { _type: 'body', title: 'deep', c: deep(depth, n) } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
    });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    return r.headers.get('location') as string;
  };

  it('json+allTypes walks each value once: a reader of 1,000,000 numbers under 58 maps does not hold the event loop', async () => {
    const at = await created(58, 1_000_000);
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const a = await rawGet(`${at}?format=${encodeURIComponent('json+allTypes')}`, reader.token as string);
    lag.disable();
    expect(a.status).to.equal(200);
    // Old code: 2.0-2.2 s (5.2 s at 2.5 million numbers); now the decode of the version and one walk,
    // 80-300 ms here (as `json`, 170-230 ms for 2.5 million numbers, beside other work).
    expect(lag.max / 1e6, 'the longest stall of the event loop, ms').to.be.below(1000);
  });

  it('json+allTypes answers as before: the markers of nested maps and lists', () => {
    const v = { a: { b: [1, 2], c: { _type: 'own', x: 'y' }, d: { e: [{ f: 1.5 }, { f: 2 }] }, g: { _type: 5, h: null } } };
    expect(JSON.parse(serialize(v, 'json+allTypes'))).to.deep.equal({
      a: {
        b: [1, 2],
        c: { _type: 'own', x: 'y' },
        d: {
          e: [
            { f: 1.5, _type: 'MAP::double' },
            { f: 2, _type: 'MAP::long' },
          ],
          _type: 'MAP::LIST::any',
        },
        g: { _type: 5, h: null },
        _type: 'MAP::any',
      },
      _type: 'MAP::MAP::any',
    });
  });
});

/**
 * A pretty answer indents each value 2 spaces a level, so it weighed up to about 64 times the
 * stored content (MAX_BODY_DEPTH), and past V8's longest string (about 512 Mi characters, a
 * content of 8.4 MB of nested numbers) it answered 500, for a read, to anyone who may read the
 * content. Now a value whose indentation would add more than PRETTY_MAX_ADDED_CHARS (16 Mi) is
 * answered plain (`serialize` in envelope.ts).
 */
describe('security: json+pretty of deeply nested content is bounded (review s23)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let redis: Awaited<ReturnType<typeof startRedisServer>>;
  let sports: Client;
  let reader: Client;

  before(async () => {
    redis = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: redis.url }, ['web', 'actors']);
    sports = await new PlatformClient(p.base).login('sportseditor');
    reader = await new PlatformClient(p.base).login('reader');
  });
  after(async () => {
    await p?.stop();
    await redis?.stop();
  });

  it('a pretty read of 4,400,000 numbers under 58 maps (8.8 MB) never answers 5xx, nor 16 times the plain answer', async () => {
    const r = await sports.create({
      system: { contentType: 'article' },
      aspects: { body: { _type: 'body', title: 'deep', c: deep(58, 4_400_000) } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
    });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    const at = r.headers.get('location') as string;
    const plain = await rawGet(at, reader.token as string);
    expect(plain.status).to.equal(200);
    const pretty = await rawGet(`${at}?format=${encodeURIComponent('json+pretty')}`, reader.token as string);
    // Old code: 500 after 7.7 s (2.5 million numbers: 200 with 317.5 MB, RSS +700 MB).
    expect(pretty.status, 'a read never answers 5xx for what a writer stored').to.be.below(500);
    if (pretty.status === 200) expect(pretty.bytes).to.be.below(16 * plain.bytes);
  });
});
