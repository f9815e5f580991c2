import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { freePort, type RedisServerHandle, startRedisServer } from '../../src/dev/redis-server.js';
import { Fleet } from '../../src/fleet.js';
import { Client } from '../support/platform.js';
import { until } from '../support/wait.js';
import { newWriters, runWriters } from '../support/writers.js';
import { exactlyOnce, type FeedEvent, resumingSubscribers } from './feed-clients.js';

/**
 * CONTRACT §13 "Guarantee" across kills: the platform's roles as separate processes (2 web,
 * 2 actors); while writers commit, a gateway is killed (kill -9) and replaced and an actor process
 * is killed. Subscribers (WebSocket and long poll) that resume from their last cursor through
 * whichever gateway lives get every committed revision exactly once, in order per content.
 */
describe('change feed across process kills (CONTRACT §13)', function () {
  // Deadlines, not durations: a fleet of tsx processes starting on a loaded 2-core machine (the
  // suite beside a benchmark) has taken more than a minute to answer /health.
  this.timeout(300_000);
  let redis: RedisServerHandle;
  let fleet: Fleet;
  let dir: string;

  before(async () => {
    redis = await startRedisServer({});
    dir = mkdtempSync(join(tmpdir(), 'test-feed-faults-'));
    fleet = new Fleet({
      env: {
        REDIS_URL: redis.url,
        FILES_DIR: dir,
        PARTITIONS: '8',
        LEASE_MS: '2000',
        LOG_LEVEL: 'warn',
        NODE_ENV: 'test',
        SOLR_URL: '',
        NODE_OPTIONS: '--import tsx',
      },
      basePort: 0,
      entry: 'src/main.ts',
      output: (name, line) => process.env.TEST_LOG && console.log(name, line),
    });
    for (let i = 0; i < 2; i++) fleet.add('web', { PORT: String(await freePort()) });
    fleet.add('actors');
    fleet.add('actors');
    await fleet.ready(120_000);
  });
  after(async () => {
    await fleet?.stopAll();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const webs = () => fleet.processes.filter((p) => p.role === 'web' && p.child.exitCode === null && p.child.signalCode === null);

  it('a gateway killed and replaced, an actor process killed: every revision once, in order per content', async () => {
    const editor = await new Client(`${webs()[0].url}/content-service`).login('editor');
    const token = editor.token!;
    const since: string = (await editor.req('GET', '/changes?since=now')).json.last;
    const writers = await newWriters(editor, 8);
    const statuses: Record<string, number> = {};
    const load = runWriters(writers, () => webs().map((w) => ({ base: `${w.url}/content-service`, token })), statuses);
    const ids = new Set(writers.map((w) => w.id));
    const subs = resumingSubscribers(() => webs().map((w) => `${w.url}/content-service`), token, since);

    await until(async () => load.count() > 60, 30_000, 'load to start');
    const [web1] = webs();
    await fleet.kill(web1);
    fleet.add('web', { PORT: String(await freePort()) });
    await fleet.ready(120_000);
    const before = load.count();
    await until(async () => load.count() > before + 60, 30_000, 'writes after the gateway kill');
    const actor = fleet.processes.find((p) => p.role === 'actors')!;
    await fleet.kill(actor);
    const before2 = load.count();
    await until(async () => load.count() > before2 + 60, 60_000, 'writes after the actor kill');
    await load.stop();

    // What was committed: each writer content's head revision.
    const c = new Client(`${webs()[0].url}/content-service`, token);
    const heads = new Map<string, number>();
    for (const w of writers) {
      const r = await c.read(`/content/alias/${w.id}`);
      heads.set(w.id, Number(/\/(\d+)"$/.exec(r.headers.get('etag')!)![1]));
    }
    const total = [...heads.values()].reduce((a, b) => a + b, 0);
    const count = (got: FeedEvent[]) => got.filter((e) => ids.has(e.id)).length;
    await until(async () => count(subs.ws) >= total && count(subs.poll) >= total, 30_000, 'the subscribers to catch up');
    await subs.stop();
    expect(subs.errors).to.deep.equal([]);
    exactlyOnce('websocket', subs.ws, heads, (a, e, what) => expect(a, what).to.deep.equal(e));
    exactlyOnce('long poll', subs.poll, heads, (a, e, what) => expect(a, what).to.deep.equal(e));
  });
});
