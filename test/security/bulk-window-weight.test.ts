import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { keys } from '../../src/adapters/redis.js';
import { bulk } from '../bulk/ndjson.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { setTimeout as sleep } from 'node:timers/promises';

setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
/** Memory still in use after a full collection: the JS heap and the buffers outside it. */
function retainedBytes(): number {
  collect();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/**
 * What a bulk import holds while the actors are slow to answer (the twenty-first session's
 * review): its window of lines in flight (BULK_IN_FLIGHT, WINDOW_BYTES 32 MiB) counted each line
 * by its bytes, but a JSON text of empty objects (`{},`, three bytes) holds about 21 times its
 * length parsed: one sportseditor's import of 200 lines of 99,000 empty objects (297 KB each)
 * took the gateway's heap up by 757 MiB, and imports per user were not bounded. Now a line
 * weighs what it holds parsed, and a user runs at most IMPORT_MAX_PER_USER imports at once.
 *
 * The platform here is a web process alone, its commands going through the streams to no actor:
 * every line stays in flight until its deadline.
 */
describe('a bulk import holds a bounded window of parsed lines', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let own: RedisServerHandle;
  let sports: Client;

  before(async () => {
    own = await startRedisServer({ appendonly: false });
    // A web process alone: its commands wait in the streams, no actor takes them.
    p = await startTestPlatform({ REDIS_URL: own.url, LOCAL_DISPATCH: 'false', ACTOR_REPLY_TIMEOUT_MS: '30000', IMPORT_MAX_PER_USER: '2' }, ['web']);
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => {
    await p?.stop();
    await own?.stop();
  });

  const heavyLine = (i: number) =>
    `${JSON.stringify({ op: 'create', content: { system: { contentType: 'article' }, aspects: { body: { n: i, a: Array.from({ length: 99_000 }, () => ({})) } } } })}\n`;

  it('200 lines of 99,000 empty objects, no actor answering: the gateway holds under 128 MiB more', async () => {
    const before = retainedBytes();
    const line = heavyLine(0);
    let sent = 0;
    const body = new Readable({
      read() {
        if (sent >= 200) return void this.push(null);
        sent++;
        this.push(line);
      },
    });
    const statuses: number[] = [];
    const run = bulk(p.base, sports.token!, body, { onAnswer: (a) => void statuses.push(a.status) });
    // The window fills and the upload stops being read; give it time to take all it will.
    await sleep(6000);
    const grown = retainedBytes() - before;
    let taken = 0;
    for (let i = 0; i < p.settings.PARTITIONS; i++) taken += await p.redis.xlen(keys.commands(i));
    console.log(
      `      ${sent} lines sent (${((sent * line.length) / 2 ** 20).toFixed(0)} MiB), ${taken} taken, this process holds ${(grown / 2 ** 20).toFixed(0)} MiB more`,
    );
    expect(grown, 'bytes the window of parsed lines holds').to.be.below(128 * 2 ** 20);
    // Each line holds about 11 MB while in flight (13 MB weighed): the window of 32 MiB takes three.
    expect(taken, 'lines in flight').to.be.at.most(4);
    body.destroy();
    await Promise.race([run, sleep(1000)]);
  });

  it('a user runs at most IMPORT_MAX_PER_USER imports at once: 429 with Retry-After past it', async () => {
    const open = [0, 1].map(() => {
      const body = new Readable({ read() {} });
      body.push('not a line\n'); // answered 400 by the gateway: no actor here
      return { body, run: bulk(p.base, sports.token!, body) };
    });
    await sleep(500);
    const third = await sports.req('POST', '/bulk', {
      body: 'not a line\n',
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(third.status, third.text).to.equal(429);
    expect(third.headers.get('retry-after')).to.not.equal(null);
    for (const o of open) o.body.push(null);
    await Promise.all(open.map((o) => o.run));
    const fourth = await sports.req('POST', '/bulk', { body: '', headers: { 'Content-Type': 'application/x-ndjson' } });
    expect(fourth.status, fourth.text).to.equal(200);
  });
});
