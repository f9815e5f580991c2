import { expect } from 'chai';
import { PAGE_EXAMINE_BYTES } from '../../src/gateway/change-source.js';
import { bulk } from '../bulk/ndjson.js';
import { redisSettled, sentByRedis } from '../support/redis-bytes.js';
import { Client, startIsolatedPlatform, startTestPlatform } from '../support/platform.js';

/**
 * The seventeenth session's review. PAGE_EXAMINE_BYTES was a guess, not a bound: a page's rounds
 * read as many entries as the weight of those seen so far allowed, so a content whose first few
 * revisions are light and whose later ones carry a large metadata aspect (copied into every
 * revision's snapshot) made one page read every heavy revision at once: 100 MiB sent by Redis for
 * a 180 KB answer. And streams (SSE, WebSocket, long poll) made their catch-up pages outside
 * CHANGES_PAGES_PER_USER and CHANGES_PAGES_AT_ONCE: 16 SSE streams of one user, 1.6 GB sent by
 * Redis and 3 GB of the gateway's heap. Now a page's snapshots are read within what is left of its
 * budget (hget-each-within-n.lua, src/gateway/change-source.test.ts), and a stream's page waits
 * for a slot (PageSlots).
 */
const METADATA = 128 * 1024;
const HEAVY = 250;

describe("security: a feed page's weight is bounded whatever the entries weigh, and streams share the page bounds (review 17)", function () {
  this.timeout(600_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let sports: Client;
  let since: string;
  const sent = (): Promise<number> => sentByRedis(p.redis);
  const settled = (): Promise<void> => redisSettled(p.redis);

  before(async () => {
    p = await startIsolatedPlatform({ PARTITIONS: '64' });
    sports = await new Client(p.base).login('sportseditor');
    since = (await sports.req('GET', '/changes?since=now')).json.last as string;
    const owners = { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } };
    const c = await sports.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: 'mine' } }, operations: [owners] });
    expect(c.status, c.text.slice(0, 200)).to.equal(201);
    const id: string = c.json.system.id;
    // Four light revisions a few milliseconds apart: what a round's size was guessed from.
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 3));
      expect((await sports.update(id, { aspects: { t: { _type: 't', n: i } } }, null)).status).to.equal(200);
    }
    // A metadata aspect of 128 KB: every later revision's snapshot carries a copy.
    const big = await sports.update(
      id,
      { aspects: {}, operations: [{ _type: 'svcContentMetadata', aspects: { pad: { _type: 'pad', s: 'x'.repeat(METADATA) } } }] },
      null,
    );
    expect(big.status, big.text.slice(0, 200)).to.equal(200);
    const lines = Array.from({ length: HEAVY }, (_, i) => `${JSON.stringify({ op: 'update', id, content: { aspects: { t: { _type: 't', n: 100 + i } } } })}\n`);
    const r = await bulk(p.base, sports.token!, lines);
    expect(r.answers.every((a) => a.status === 200)).to.equal(true);
  });
  after(async () => p?.stop());

  /** Another web process on the same Redis: nothing of the commits is in its memory. */
  async function webProcess() {
    const w = await startTestPlatform({ REDIS_URL: p.settings.REDIS_URL, PARTITIONS: '64' }, ['web']);
    const c = new Client(w.base);
    c.token = sports.token;
    return { w, c };
  }

  it('one page makes Redis send at most about PAGE_EXAMINE_BYTES (before: all 31 MiB of the heavy revisions), and the pages after it deliver the rest', async () => {
    await settled();
    const { w, c } = await webProcess();
    try {
      const before = await sent();
      const first = await c.req('GET', `/changes?since=${since}&limit=1000`);
      const bytes = (await sent()) - before;
      expect(first.status).to.equal(200);
      console.log(`      Redis sent ${(bytes / 2 ** 20).toFixed(1)} MiB for the first page (${first.json.changes.length} events)`);
      expect(bytes, 'Redis bytes sent for one page').to.be.below(PAGE_EXAMINE_BYTES / 2 + 2 * 2 ** 20);
      // Every event comes, once, over the pages that follow.
      const revisions: number[] = first.json.changes.map((e: { revision: number }) => e.revision);
      for (let last = first.json.last as string, n = 0; n < 50; n++) {
        const page = await c.req('GET', `/changes?since=${last}&limit=1000`);
        expect(page.status).to.equal(200);
        if (!page.json.changes.length) break;
        revisions.push(...page.json.changes.map((e: { revision: number }) => e.revision));
        last = page.json.last;
      }
      expect(revisions).to.deep.equal(Array.from({ length: HEAVY + 6 }, (_, i) => i + 1));
    } finally {
      await w.stop();
    }
  });

  it('16 SSE streams of one user catch up with at most CHANGES_PAGES_PER_USER (4) pages made at once (before: 16), and each gets every event', async () => {
    await settled();
    const { w, c } = await webProcess();
    try {
      const source = w.gateway!.changes.source;
      const page = source.page.bind(source);
      let now = 0;
      let most = 0;
      (source as unknown as { page: typeof page }).page = async (...args) => {
        now++;
        most = Math.max(most, now);
        try {
          return await page(...args);
        } finally {
          now--;
        }
      };
      const counts = await Promise.all(
        Array.from({ length: 16 }, async () => {
          const ac = new AbortController();
          const res = await fetch(`${c.base}/changes?since=${since}&feed=sse`, { headers: { 'X-Auth-Token': sports.token! }, signal: ac.signal });
          expect(res.status).to.equal(200);
          let n = 0;
          let text = '';
          const reader = res.body!.getReader();
          const dec = new TextDecoder();
          const deadline = setTimeout(() => ac.abort(), 120_000);
          try {
            while (n < HEAVY + 6) {
              const { value, done } = await reader.read();
              if (done) break;
              text += dec.decode(value, { stream: true });
              const frames = text.split('\n\n');
              text = frames.pop()!;
              n += frames.filter((f) => f.includes('event: ')).length;
            }
          } catch {
            // cut at the deadline: the count says how far it got
          } finally {
            clearTimeout(deadline);
            ac.abort();
          }
          return n;
        }),
      );
      expect(counts).to.deep.equal(Array.from({ length: 16 }, () => HEAVY + 6));
      expect(most, 'pages made at once for one user').to.be.within(1, 4);
    } finally {
      await w.stop();
    }
  });
});
