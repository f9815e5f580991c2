import http from 'node:http';
import { expect } from 'chai';
import { startRedisServer } from '../../src/dev/redis-server.js';
import type { AppError } from '../../src/errors.js';
import { CompareRenderer } from '../../src/gateway/compare-render.js';
import { type Client, Client as PlatformClient, startTestPlatform } from '../support/platform.js';

/** A GET through node:http, its body counted and dropped: the status and how long it took. */
function rawGet(url: string, token: string): Promise<{ status: number; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'X-Auth-Token': token } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0 }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/**
 * Review s23d: compares of large versions are made on the compare thread, at most
 * COMPARES_ON_THREAD (8) per process at once, 503 past it; nothing bounded them per caller. One
 * account with Read (the reader, or a sportseditor on its own content) that keeps eight compares
 * of a large content under way held every slot, and every other user's compare of large versions
 * answered 503 meanwhile. Measured on the old code with two 2.4 MB versions (180,000 values each):
 * the reader's 8 compares took 5.9 s together (a loaded 2-core machine), and the editor's compare
 * sent 50 ms after them answered 503 (in 231 ms); a reader that sends its next 8 as soon as one
 * answers keeps it so. Now: the reader's first 2 answer 200, the other 6 429, the editor's 200.
 * Now a caller holds at most COMPARES_ON_THREAD_PER_CALLER (2) slots, past them 429 with
 * Retry-After, and the others' compares find a slot.
 */
describe('security: compare slots per caller (review s23d)', function () {
  this.timeout(300_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let redis: Awaited<ReturnType<typeof startRedisServer>>;
  let editor: Client;
  let reader: Client;
  let url = '';
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
    redis = await startRedisServer({ appendonly: false });
    p = await startTestPlatform({ REDIS_URL: redis.url }, ['web', 'actors']);
    editor = await new PlatformClient(p.base).login('editor');
    reader = await new PlatformClient(p.base).login('reader');
    const r = await editor.create({ system: { contentType: 'article' }, aspects: big(60_000, 0) });
    expect(r.status, r.text.slice(0, 300)).to.equal(201);
    const id = r.json.system.id as string;
    const v1 = r.json.system.version as string;
    const u = await editor.update(id, { aspects: big(60_000, 3) }, r.headers.get('etag'));
    expect(u.status, u.text.slice(0, 300)).to.equal(200);
    const v2 = u.json.system!.version as string;
    url = `${p.base}/content/alias/${id}/compare?from=${encodeURIComponent(v1)}&to=${encodeURIComponent(v2)}`;
  });
  after(async () => {
    await p?.stop();
    await redis?.stop();
  });

  it("one caller's compares of large versions leave slots for the others", async () => {
    const t0 = performance.now();
    const readers = Array.from({ length: 8 }, () => rawGet(url, reader.token!));
    await new Promise((r) => setTimeout(r, 50));
    const other = await rawGet(url, editor.token!);
    const mine = await Promise.all(readers);
    const ms = Math.round(performance.now() - t0);
    const statuses = mine.map((m) => m.status);
    console.log(`      reader: ${statuses.join(' ')} in ${ms} ms; editor: ${other.status} in ${Math.round(other.ms)} ms`);
    expect(other.status, "another user's compare while the reader's are under way").to.equal(200);
    // The reader's own compares past its bound are told to come back (429), never 5xx.
    expect(statuses.filter((s) => s === 200).length).to.be.at.least(2);
    expect(statuses.every((s) => s === 200 || s === 429)).to.equal(true);
  });

  it('a caller past its share answers 429 with Retry-After, the process past its bound 503; slots given back once', () => {
    const renderer = new CompareRenderer(3, 2);
    const refusal = (f: () => unknown): AppError | null => {
      try {
        f();
        return null;
      } catch (e) {
        return e as AppError;
      }
    };
    const a1 = renderer.slot('user:a');
    const a2 = renderer.slot('user:a');
    expect(refusal(() => renderer.slot('user:a'))?.http).to.equal(429);
    expect(refusal(() => renderer.slot('user:a'))?.retryAfter).to.equal(1);
    const b1 = renderer.slot('user:b');
    expect(refusal(() => renderer.slot('user:c'))?.http).to.equal(503);
    a1();
    a1();
    const c1 = renderer.slot('user:c');
    expect(refusal(() => renderer.slot('user:b'))?.http).to.equal(503);
    for (const r of [a2, b1, c1]) r();
    renderer.slot('user:a');
    renderer.slot('user:a');
  });
});
