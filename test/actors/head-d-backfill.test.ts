import { expect } from 'chai';
import type { Cluster } from 'ioredis';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadSettings } from '../../config/settings.js';
import { pack, unpack } from '../../src/adapters/codec.js';
import { CommitOutcome, ContentStore } from '../../src/adapters/content-store.js';
import { newCommandId, newContentKey, partitionOf } from '../../src/adapters/ids.js';
import { createLogger } from '../../src/adapters/log.js';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { backfillHeadD, headDMarker, type HeadDBackfillCounts } from '../../src/actors/head-d-backfill.js';
import type { ContentEvent, Snapshot } from '../../src/content/model.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { startPlatform } from '../../src/main.js';
import { startRedisCluster } from '../support/redis-cluster.js';
import { sentByRedis } from '../support/redis-bytes.js';
import { valueWithin } from '../support/wait.js';

/**
 * SECURITY.md, H4 ("Known and not yet bounded" until this job): heads committed before the commit
 * kept `d` (or by an older build since, whose `d` names an earlier revision) were answered whole
 * by live-heads-n.lua. src/actors/head-d-backfill.ts writes their `d` from their own snapshot once
 * per partition (head-d-backfill-n.lua), at the start of an actor process.
 *
 * Heads are committed by the commit script, then made what an older build left: their `d`
 * removed (HDEL), or set to an earlier revision. Each test has a Redis of its own (the job scans
 * every head of it).
 */
describe('head d backfill: d written for the heads an older build committed, once per partition (H4)', function () {
  this.timeout(120_000);
  const P = 4;
  const ALL = Array.from({ length: P }, (_, p) => p);
  const owner = `head-d-test:${process.pid}`;
  let server: RedisServerHandle;
  let redis: RedisClient;
  let store: ContentStore;

  const headOf = (cid: string, parts = P) => `ct:{${partitionOf(cid, parts)}}:${cid}`;
  const snapshotOf = (cid: string, rev: number, deleted: boolean, pad: number): Snapshot => ({
    cid,
    rev,
    type: 'headDTest',
    head: 'v1',
    created: 1,
    modified: rev,
    committer: 'editor',
    deleted,
    views: { svcLatest: 'v1' },
    symbolic: {},
    meta: pad ? { pad: { _type: 'pad', x: 'x'.repeat(pad) } } : {},
    aliases: [],
  });
  /** Commits revision `rev` of `cid` (made on rev - 1) with the commit script. */
  const commitRev = async (s: ContentStore, cid: string, rev: number, deleted: boolean, pad = 0) => {
    const event: ContentEvent = { kind: deleted ? 'deleted' : 'updated', cid, rev, type: 'headDTest', version: 'v1', ts: rev, userId: 'editor' };
    const res = await s.commit({ owner, expectedRev: rev - 1, snapshot: snapshotOf(cid, rev, deleted, pad), viewEvents: [], event, commandId: newCommandId() });
    expect(res).to.deep.equal({ outcome: CommitOutcome.Committed });
  };
  /** n contents at revision 1, every `deletedEvery`th deleted (revision 2). */
  const makeHeads = async (s: ContentStore, n: number, deletedEvery: number, pad = 0): Promise<{ cids: string[]; deleted: Set<string> }> => {
    const cids = Array.from({ length: n }, () => newContentKey());
    const deleted = new Set(cids.filter((_, i) => i % deletedEvery === deletedEvery - 1));
    await Promise.all(cids.map((cid) => commitRev(s, cid, 1, false, pad)));
    await Promise.all([...deleted].map((cid) => commitRev(s, cid, 2, true, pad)));
    return { cids, deleted };
  };
  /** What an older build left: no `d`. */
  const withoutD = async (r: RedisClient, heads: string[]) => {
    for (const h of heads) expect(await r.hdel(h, 'd')).to.equal(1);
  };
  /** Every head's `d` is the one the commit script writes for its revision and snapshot. */
  const expectRightD = async (r: RedisClient, heads: string[]) => {
    for (const h of heads) {
      const [rev, s, d] = await r.hmgetBuffer(h, 'rev', 's', 'd');
      expect(d?.toString(), h).to.equal(`${rev}:${unpack<Snapshot>(s!).deleted === true ? 1 : 0}`);
    }
  };
  /** live-heads-n.lua's answers for these heads (one call per partition) and the bytes Redis sent for them. */
  const lookup = async (r: RedisClient, heads: string[]) => {
    const byPartition = new Map<string, string[]>();
    for (const h of heads) {
      const tag = /^ct:(\{\d+\})/.exec(h)![1];
      byPartition.set(tag, [...(byPartition.get(tag) ?? []), h]);
    }
    const before = await sentByRedis(r);
    const answers = new Map<string, number | Buffer>();
    for (const hs of byPartition.values()) {
      const found = await r.liveHeadsBuffer(hs.length, ...hs);
      for (const [i, h] of hs.entries()) answers.set(h, found[i]);
    }
    const bytes = (await sentByRedis(r)) - before;
    return { answers: heads.map((h) => answers.get(h)!), bytes };
  };

  const setLeases = async () => {
    for (const p of ALL) await redis.set(`lease:{${p}}`, owner, 'PX', 600_000);
  };

  before(async () => {
    server = await startRedisServer({ appendonly: false });
    redis = connectRedis({ REDIS_URL: server.url });
    store = new ContentStore(redis, P, 10_000, 60);
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  beforeEach(async () => {
    await redis.flushall();
    await setLeases();
  });

  it('heads without d, or with the d of an earlier revision, get the d of their own snapshot (deleted: <rev>:1); the lookup then answers 1/0 and reads no snapshot', async () => {
    const PAD = 8 * 1024;
    const { cids, deleted } = await makeHeads(store, 120, 5, PAD);
    const heads = cids.map((c) => headOf(c));
    // The first 10 keep their d (committed by this build); 5 deleted ones were deleted by an older
    // build (d still names revision 1); the rest have none.
    const staleDeleted = cids.filter((c) => deleted.has(c)).slice(-5);
    for (const c of staleDeleted) await redis.hset(headOf(c), 'd', '1:0');
    await withoutD(
      redis,
      heads.filter((_, i) => i >= 10 && !staleDeleted.includes(cids[i])),
    );
    const live = cids.map((c) => !deleted.has(c));
    expect(await store.liveContents(cids), 'the snapshots decoded answer the same').to.deep.equal(live);

    const old = await lookup(redis, heads);
    expect(old.answers.filter((a) => Buffer.isBuffer(a)).length, 'snapshots answered before the job').to.equal(110);
    expect(old.bytes).to.be.above(110 * PAD);

    const counts = await backfillHeadD(redis, ALL, { batch: 16, budgetBytes: 40 * 1024 });

    const now = await lookup(redis, heads);
    console.log(`      the lookup of 120 heads of ${PAD / 1024} KB: Redis sent ${old.bytes} bytes before the job, ${now.bytes} after`);
    expect(now.answers, 'no snapshot answered after the job').to.deep.equal(live.map((l) => (l ? 1 : 0)));
    expect(now.bytes).to.be.below(4 * 1024);
    await expectRightD(redis, heads);
    for (const c of staleDeleted) expect(await redis.hget(headOf(c), 'd')).to.equal('2:1');

    const deletedWithoutRightD = cids.filter((c, i) => i >= 10 && deleted.has(c)).length;
    expect(counts).to.deep.include({ partitions: ALL, marked: 0, heads: 120, right: 10, undecodable: 0, gone: 0, stopped: false });
    expect(counts.written).to.deep.equal({ live: 110 - deletedWithoutRightD, deleted: deletedWithoutRightD });
    // Batches of 16 per partition, each cut after 40 KB of snapshots (4 of 8 KB): more calls than batches.
    expect(counts.calls).to.be.above(110 / 5);
    for (const p of ALL) expect(await redis.exists(headDMarker(p)), `marker of partition ${p}`).to.equal(1);
    expect(await store.liveContents(cids)).to.deep.equal(live);
  });

  it('a head committed while the job runs keeps the d of its commit; an older build committing meanwhile never gets a d that is wrong for its revision', async () => {
    const { cids, deleted } = await makeHeads(store, 600, 7);
    const heads = cids.map((c) => headOf(c));
    await withoutD(redis, heads);
    const revs = new Map<string, number>(cids.map((c) => [c, deleted.has(c) ? 2 : 1]));
    let done = false;
    // Small calls, so that commits land between them.
    const job = backfillHeadD(redis, ALL, { batch: 4 }).then((c) => {
      done = true;
      return c;
    });
    let duringJob = 0;
    const byOlderBuild = new Set<string>();
    const order = [...cids].sort(() => Math.random() - 0.5);
    for (let i = 0; i < order.length && !done; i += 6) {
      await Promise.all(
        order.slice(i, i + 6).map(async (cid, k) => {
          const rev = revs.get(cid)! + 1;
          revs.set(cid, rev);
          if (k === 5) {
            // An older build's commit: rev and s, no d.
            await redis.hset(headOf(cid), 'rev', rev, 's', pack(snapshotOf(cid, rev, rev % 2 === 0, 0)));
            byOlderBuild.add(cid);
          } else await commitRev(store, cid, rev, rev % 2 === 0);
        }),
      );
      if (!done) duringJob++;
    }
    const counts = await job;
    console.log(`      ${duringJob} rounds of 6 commits while the job ran (${counts.calls} calls), ${byOlderBuild.size} by an older build`);
    expect(duringJob, 'commits made while the job ran').to.be.above(2);
    expect(counts.heads).to.equal(600);
    for (const cid of cids) {
      const h = headOf(cid);
      const [rev, s, d] = await redis.hmgetBuffer(h, 'rev', 's', 'd');
      const right = `${rev}:${unpack<Snapshot>(s!).deleted === true ? 1 : 0}`;
      // The d of this build's commit stays (the job never writes over it, not even with the d of
      // the revision it read before); after an older build's, a d naming the head's revision is
      // the right one, and one naming another is not believed.
      if (!byOlderBuild.has(cid) || d?.toString().startsWith(`${rev}:`)) expect(d?.toString(), h).to.equal(right);
    }
    // What the older build left is taken by the next run (the markers removed: a later start).
    for (const p of ALL) await redis.del(headDMarker(p));
    await backfillHeadD(redis, ALL);
    await expectRightD(redis, heads);
    const now = await lookup(redis, heads);
    expect(now.answers.every((a) => a === 0 || a === 1)).to.equal(true);
  });

  it('running twice, or in two processes at once, is harmless: each head written once, a partition marked is not gone through again', async () => {
    const { cids, deleted } = await makeHeads(store, 300, 3);
    const heads = cids.map((c) => headOf(c));
    await withoutD(redis, heads);
    const other = connectRedis({ REDIS_URL: server.url });
    let a: HeadDBackfillCounts;
    let b: HeadDBackfillCounts;
    try {
      [a, b] = await Promise.all([backfillHeadD(redis, ALL, { batch: 8 }), backfillHeadD(other, [3, 1, 2], { batch: 8 })]);
    } finally {
      other.disconnect();
    }
    await expectRightD(redis, heads);
    const onB = cids.filter((c) => partitionOf(c, P) !== 0);
    expect(a.written.live + b.written.live, 'each live head written once').to.equal(cids.length - deleted.size);
    expect(a.written.deleted + b.written.deleted, 'each deleted head written once').to.equal(deleted.size);
    expect(b.heads).to.equal(onB.length);
    expect(a.right + b.right).to.equal(onB.length);

    const again = await backfillHeadD(redis, ALL);
    expect(again).to.deep.include({ partitions: [], marked: P, heads: 0, calls: 0 });
    for (const p of ALL) await redis.del(headDMarker(p));
    const third = await backfillHeadD(redis, ALL);
    expect(third).to.deep.include({ partitions: ALL, heads: 300, right: 300, written: { live: 0, deleted: 0 } });
    await expectRightD(redis, heads);
  });

  it('a snapshot Redis cannot decode, or none, is left as it was (still answered whole); keys that are no head are passed over', async () => {
    const { cids } = await makeHeads(store, 3, 10);
    const [good, garbled, bare] = cids.map((c) => headOf(c));
    await withoutD(redis, [good, garbled, bare]);
    await redis.hset(garbled, 's', Buffer.from([0xc1, 0x00]));
    await redis.hdel(bare, 's');
    const p = partitionOf(cids[0], P);
    await redis.set(`ct:{${p}}:notahash`, 'x');
    await redis.hset(`ct:{${p}}:norev`, 'x', '1');
    const counts = await backfillHeadD(redis, ALL);
    expect(counts).to.deep.include({ heads: 5, undecodable: 2, gone: 2, written: { live: 1, deleted: 0 } });
    expect(await redis.hget(good, 'd')).to.equal('1:0');
    expect(await redis.hexists(garbled, 'd')).to.equal(0);
    expect(await redis.hexists(bare, 'd')).to.equal(0);
    expect(Buffer.isBuffer((await lookup(redis, [garbled])).answers[0])).to.equal(true);
    expect(await redis.hgetall(`ct:{${p}}:norev`)).to.deep.equal({ x: '1' });
  });

  it('an actor process goes through the partitions it holds as it starts, in the background, then those it takes over later (a rolling upgrade), and logs one line of counts; its next start finds them marked', async () => {
    const { cids, deleted } = await makeHeads(store, 200, 4);
    const heads = cids.map((c) => headOf(c));
    await withoutD(redis, heads);
    // Partitions 2 and 3 are held by a process of an older build (no backfill) as this one starts.
    await redis.del(...ALL.map((p) => `lease:{${p}}`));
    for (const p of [2, 3]) await redis.set(`lease:{${p}}`, 'older-build', 'PX', 600_000);
    const onOlder = heads.filter((h) => /^ct:\{[23]\}/.test(h));
    const filesDir = mkdtempSync(join(tmpdir(), 'test-files-'));
    const settings = loadSettings({
      ...process.env,
      REDIS_URL: server.url,
      PARTITIONS: String(P),
      LEASE_MS: '1000',
      FILES_DIR: filesDir,
      ARCHIVE_INTERVAL_SECONDS: '604800',
    });
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    const backfillLines = () => lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('head d backfill'));
    try {
      for (const start of [1, 2]) {
        lines.length = 0;
        const platform = await startPlatform({ settings, roles: ['actors'], log: createLogger('info', sink) });
        try {
          if (start === 1) {
            expect(platform.actors!.partitions()).to.deep.equal([0, 1]);
            await valueWithin(async () => (await redis.exists(headDMarker(0), headDMarker(1))) === 2, 10_000, 'partitions 0 and 1 marked');
            await expectRightD(
              redis,
              heads.filter((h) => !onOlder.includes(h)),
            );
            expect(await redis.hexists(onOlder[0], 'd'), 'a partition it does not hold').to.equal(0);
            expect(backfillLines(), 'no line while partitions are left').to.deep.equal([]);
            // The older build's process stops: this one takes its partitions over, and goes through them.
            await redis.del('lease:{2}', 'lease:{3}');
          } else expect(platform.actors!.partitions()).to.deep.equal(ALL);
          const line = await valueWithin(async () => backfillLines()[0], 20_000, 'the backfill line');
          if (start === 1) {
            expect(line).to.deep.include({
              msg: 'head d backfill done: every partition marked',
              partitions: ALL,
              marked: 0,
              heads: 200,
              right: 0,
              role: 'actors',
            });
            expect(line.written).to.deep.equal({ live: 200 - deleted.size, deleted: deleted.size });
            expect(line.passes).to.be.above(1);
            await expectRightD(redis, heads);
          } else
            expect(line).to.deep.include({ msg: 'head d backfill done: every partition marked', partitions: [], marked: P, heads: 0, calls: 0, passes: 1 });
        } finally {
          await platform.stop();
        }
        expect(backfillLines(), 'one line per process').to.have.length(1);
      }
    } finally {
      rmSync(filesDir, { recursive: true, force: true });
    }
  });

  it('on Redis Cluster: every master is scanned, each call stays in its partition slot', async function () {
    this.timeout(120_000);
    const cluster = await startRedisCluster(3);
    const PC = 12;
    const c = connectRedis({ REDIS_CLUSTER_NODES: cluster.nodes });
    try {
      for (let p = 0; p < PC; p++) await c.set(`lease:{${p}}`, owner, 'PX', 600_000);
      const s = new ContentStore(c, PC, 10_000, 60);
      const { cids, deleted } = await makeHeads(s, 240, 4);
      const heads = cids.map((cid) => headOf(cid, PC));
      await withoutD(c, heads);
      const slots = new Set<string>();
      for (const n of (c as unknown as Cluster).nodes('master')) {
        if ((await n.dbsize()) > 0) slots.add(String(n.options.port));
      }
      expect(slots.size, 'masters holding heads').to.be.above(1);
      const counts = await backfillHeadD(
        c,
        Array.from({ length: PC }, (_, p) => p),
        { batch: 32 },
      );
      expect(counts).to.deep.include({ heads: 240, right: 0, undecodable: 0, stopped: false });
      expect(counts.written).to.deep.equal({ live: 240 - deleted.size, deleted: deleted.size });
      await expectRightD(c, heads);
      expect(await s.liveContents(cids)).to.deep.equal(cids.map((cid) => !deleted.has(cid)));
    } finally {
      c.disconnect();
      await cluster.stop();
    }
  });
});
