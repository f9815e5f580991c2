import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { type RedisServerHandle, startRedisServer } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { newWriters, runWriters } from '../support/writers.js';
import { exactlyOnce, type FeedEvent, resumingSubscribers } from './feed-clients.js';

/**
 * CONTRACT §13 "Guarantee" across a Redis crash: Redis killed (kill -9) under write load and
 * restarted from its append-only file (appendfsync always). Subscribers resuming from their last
 * cursor get every committed revision once, in order per content: no gap, no duplicate.
 */
describe('change feed across a Redis restart from its AOF (CONTRACT §13)', function () {
  this.timeout(90_000);
  let dir: string;
  let redis: RedisServerHandle;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'test-feed-aof-'));
    redis = await startRedisServer({ dir, appendonly: true, appendfsync: 'always' });
    p = await startTestPlatform({ REDIS_URL: redis.url, ACTOR_REPLY_TIMEOUT_MS: '3000' });
  });
  after(async () => {
    await p?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every revision once, in order per content, through the restart', async () => {
    const editor = await new Client(p.base).login('editor');
    const token = editor.token!;
    const since: string = (await editor.req('GET', '/changes?since=now')).json.last;
    const writers = await newWriters(editor, 8);
    const statuses: Record<string, number> = {};
    const load = runWriters(writers, () => [{ base: p.base, token }], statuses);
    const subs = resumingSubscribers(() => [p.base], token, since);
    await until(async () => load.count() > 150, 30_000, 'load to start');
    redis.kill9();
    await redis.exited;
    await new Promise((r) => setTimeout(r, 1000));
    redis = await startRedisServer({ port: redis.port, dir, appendonly: true, appendfsync: 'always' });
    const before = load.count();
    await until(async () => load.count() > before + 150, 60_000, 'writes to go on after the restart');
    await load.stop();
    const heads = new Map<string, number>();
    for (const w of writers) {
      const r = await editor.read(`/content/alias/${w.id}`);
      heads.set(w.id, Number(/\/(\d+)"$/.exec(r.headers.get('etag')!)![1]));
    }
    const total = [...heads.values()].reduce((a, b) => a + b, 0);
    const count = (got: FeedEvent[]) => got.filter((e) => heads.has(e.id)).length;
    await until(async () => count(subs.ws) >= total && count(subs.poll) >= total, 30_000, 'the subscribers to catch up');
    await subs.stop();
    expect(subs.errors).to.deep.equal([]);
    exactlyOnce('websocket', subs.ws, heads, (a, e, what) => expect(a, what).to.deep.equal(e));
    exactlyOnce('long poll', subs.poll, heads, (a, e, what) => expect(a, what).to.deep.equal(e));
  });
});
