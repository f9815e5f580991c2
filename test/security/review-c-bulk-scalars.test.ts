import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { countsIn } from '../../src/gateway/body-limits.js';
import { keys } from '../../src/adapters/redis.js';
import { bulk } from '../bulk/ndjson.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';

setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
function retainedBytes(): number {
  collect();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/**
 * Review C of 294c26b: a bulk line weighed its bytes, 64 an object or array and 32 a key
 * (`weightOf`), but not its scalars (now `parsedWeight`, from the walk of the parsed line). Numbers in an array that also holds an object are boxed when
 * parsed (a HeapNumber and a slot: about 24 bytes for `0.5,`, four bytes of text), so such a line
 * holds about six times its weight parsed, and the window of WINDOW_BYTES (32 MiB) holds some
 * 190 MiB of parsed lines (and their packed commands) per import, four imports a user. The
 * harness is that of bulk-window-weight.test.ts: a web process whose commands no actor answers.
 */
describe('review C: a bulk line of boxed numbers weighs what it holds parsed', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let own: RedisServerHandle;
  let sports: Client;

  before(async () => {
    own = await startRedisServer({ appendonly: false });
    // A web process alone: its commands wait in the streams, no actor takes them.
    p = await startTestPlatform({ REDIS_URL: own.url, LOCAL_DISPATCH: 'false', ACTOR_REPLY_TIMEOUT_MS: '30000' }, ['web']);
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => {
    await p?.stop();
    await own?.stop();
  });

  const N = 500_000;
  const line = `{"op":"create","content":{"system":{"contentType":"article"},"aspects":{"body":{"_type":"body","a":[{},${Array(N).fill('0.5').join(',')}]}}}}\n`;

  it('200 lines of [{}, 0.5 × 500,000] (2 MB each), no actor answering: the window takes two of them at most', async () => {
    const counted = countsIn(Buffer.from(line));
    // What the weighting of 294c26b counted (on the bytes, without scalars).
    const weight = line.length + 64 * counted.containers + 32 * counted.keys;
    const before = retainedBytes();
    let sent = 0;
    const body = new Readable({
      read() {
        if (sent >= 200) return void this.push(null);
        sent++;
        this.push(line);
      },
    });
    const run = bulk(p.base, sports.token!, body);
    await sleep(6000);
    // The client runs in this process too (the lines it sent may sit in its own buffers): what
    // the gateway took is counted by the commands it sent to the actors' streams.
    const grown = retainedBytes() - before;
    let taken = 0;
    for (let i = 0; i < p.settings.PARTITIONS; i++) taken += await p.redis.xlen(keys.commands(i));
    console.log(
      `      a line weighed ${(weight / 2 ** 20).toFixed(2)} MiB before; ${sent} lines sent, ${taken} taken, this process holds ${(grown / 2 ** 20).toFixed(0)} MiB more`,
    );
    body.destroy();
    await Promise.race([run, sleep(1000)]);
    // Each such line holds about 44 MB while in flight: the window of 32 MiB takes two at most.
    expect(taken, 'lines in flight').to.be.at.most(2);
  });
});
