import { expect } from 'chai';
import { Redis } from 'ioredis';
import { loadSettings } from '../../config/settings.js';
import { pack, unpack } from '../../src/adapters/codec.js';
import { CommitOutcome, ContentStore } from '../../src/adapters/content-store.js';
import { newCommandId, newContentKey, newVersionKey, partitionOf } from '../../src/adapters/ids.js';
import { connectRedis, packScriptArgs } from '../../src/adapters/redis.js';
import type { ContentEvent, Draft, Snapshot, VersionRecord, ViewEvent } from '../../src/content/model.js';

/**
 * The commit scripts (src/actors/scripts/commit-content-n.lua, commit-draft-4.lua) read their
 * arguments from one packed map. What they store must stay what the earlier positional form
 * stored, byte for byte, in the same keys: data written before is read by the same code.
 */
describe('commit scripts: packed arguments, the same key layout and blobs (ARCHITECTURE principle 2)', function () {
  this.timeout(20000);
  // Many partitions, and keys on partitions the other actor tests (4 partitions) never own.
  const P = 272; // the most PARTITIONS allows (config/settings.ts)
  const s = loadSettings({ ...process.env, PARTITIONS: String(P) });
  const client = connectRedis(s);
  const store = new ContentStore(client, P, s.EVENTS_MAXLEN, s.DEDUP_TTL_SECONDS);
  const owner = `commit-script-test:${process.pid}`;
  let redis: Redis;

  const keyOnHighPartition = (): [string, number] => {
    for (;;) {
      const k = newContentKey();
      const p = partitionOf(k, P);
      if (p >= 100) return [k, p];
    }
  };
  const snapshotOf = (cid: string, rev: number, head: string, now: number): Snapshot => ({
    cid,
    rev,
    type: 'scriptTest',
    head,
    created: now,
    modified: now + rev,
    committer: 'editor',
    deleted: false,
    views: { svcLatest: head },
    symbolic: {},
    meta: {},
    aliases: ['news/a'],
    cmd: newCommandId(),
  });

  before(() => {
    redis = new Redis(process.env.REDIS_URL!);
  });
  after(() => {
    redis.disconnect();
    client.disconnect();
  });

  it('a commit writes each blob it is given unchanged, in the keys of adapters/redis.ts', async () => {
    const [cid, p] = keyOnHighPartition();
    await redis.set(`lease:{${p}}`, owner, 'PX', 10000);
    const now = Date.now();
    const vk = newVersionKey();
    const snapshot = snapshotOf(cid, 1, vk, now);
    const version: VersionRecord = {
      key: vk,
      type: 'scriptTest',
      aspects: { body: { _type: 'body', title: 'é漢字' } },
      created: now,
      creator: 'editor',
      rev: 1,
    };
    const views: ViewEvent[] = [
      { view: 'svcLatest', userId: 'editor', version: `c:${cid}:${vk}`, rev: 1, ts: now },
      { view: 'svcPublic', userId: 'editor', version: '@svcLatest', rev: 1, ts: now },
    ];
    const event: ContentEvent = { kind: 'created', cid, rev: 1, type: 'scriptTest', version: vk, ts: now, userId: 'editor' };
    const reply = pack({ id: 'x', ok: true, value: { big: 'z'.repeat(70000) } });
    const commandId = newCommandId();
    const res = await store.commit({ owner, expectedRev: 0, snapshot, version, viewEvents: views, event, reply, commandId, entryId: '1-1' });
    expect(res).to.deep.equal({ outcome: CommitOutcome.Committed });

    expect(await redis.hget(`ct:{${p}}:${cid}`, 'rev')).to.equal('1');
    expect((await redis.hgetBuffer(`ct:{${p}}:${cid}`, 's'))!.equals(pack(snapshot))).to.equal(true);
    expect(await redis.hget(`ct:{${p}}:${cid}`, 'd'), 'revision 1, not deleted').to.equal('1:0');
    expect((await redis.hgetBuffer(`rv:{${p}}:${cid}`, '1'))!.equals(pack(snapshot))).to.equal(true);
    expect((await redis.hgetBuffer(`vr:{${p}}:${cid}`, vk))!.equals(pack(version))).to.equal(true);
    const index = await redis.lrangeBuffer(`vi:{${p}}:${cid}`, 0, -1);
    expect(index.map((b) => b.toString('hex'))).to.deep.equal([pack({ key: vk, rev: 1, created: now, creator: 'editor' }).toString('hex')]);
    const history = await redis.lrangeBuffer(`vh:{${p}}:${cid}`, 0, -1);
    expect(history.map((b) => b.toString('hex'))).to.deep.equal(views.map((v) => pack(v).toString('hex')));
    const [[, fields]] = (await redis.xrevrangeBuffer(`events:{${p}}`, '+', '-', 'COUNT', 1)) as [Buffer, Buffer[]][];
    expect(fields[0].toString()).to.equal('e');
    expect(fields[1].equals(pack(event))).to.equal(true);
    expect((await redis.getBuffer(`done:{${p}}:${commandId}`))!.equals(reply)).to.equal(true);
    expect(await redis.ttl(`done:{${p}}:${commandId}`)).to.be.within(1, s.DEDUP_TTL_SECONDS);
    expect(await redis.zscore(`cat:{${p}}`, cid)).to.equal(String(snapshot.modified));
    expect(await redis.sismember(`cat:{${p}}:t:scriptTest`, cid)).to.equal(1);

    // A local commit (no reply, no entry) of a change without a version records no reply.
    const next = snapshotOf(cid, 2, vk, now);
    const localId = newCommandId();
    const local = await store.commit({
      owner,
      expectedRev: 1,
      snapshot: next,
      viewEvents: [],
      event: { ...event, kind: 'views', rev: 2 },
      commandId: localId,
      entryId: '',
    });
    expect(local).to.deep.equal({ outcome: CommitOutcome.Committed });
    expect(await redis.exists(`done:{${p}}:${localId}`)).to.equal(0);
    expect(await redis.llen(`vi:{${p}}:${cid}`)).to.equal(1);
    expect(await redis.hget(`ct:{${p}}:${cid}`, 'rev')).to.equal('2');

    // A stale expected revision writes nothing and names the head's revision.
    const stale = await store.commit({ owner, expectedRev: 1, snapshot: snapshotOf(cid, 2, vk, now), viewEvents: [], event, commandId: newCommandId() });
    expect(stale).to.deep.equal({ outcome: CommitOutcome.RevisionMoved, rev: 2 });
    // Another owner writes nothing.
    const fenced = await store.commit({
      owner: 'someone-else',
      expectedRev: 2,
      snapshot: snapshotOf(cid, 3, vk, now),
      viewEvents: [],
      event,
      commandId: newCommandId(),
    });
    expect(fenced).to.deep.equal({ outcome: CommitOutcome.LeaseLost });
    expect(await redis.hget(`ct:{${p}}:${cid}`, 'rev')).to.equal('2');
  });

  it('the commits of a partition made in one turn go to Redis in a few script calls, each checked and written on its own', async () => {
    const [first, p] = keyOnHighPartition();
    const onP = [first];
    while (onP.length < 43) {
      const k = newContentKey();
      if (partitionOf(k, P) === p) onP.push(k);
    }
    await redis.set(`lease:{${p}}`, owner, 'PX', 10000);
    const now = Date.now();
    const commitOf = (cid: string, expectedRev: number, by = owner) => {
      const vk = newVersionKey();
      const version: VersionRecord = { key: vk, type: 'scriptTest', aspects: { body: { _type: 'body', title: cid } }, created: now, creator: 'editor', rev: 1 };
      const event: ContentEvent = { kind: 'created', cid, rev: 1, type: 'scriptTest', version: vk, ts: now, userId: 'editor' };
      return store.commit({ owner: by, expectedRev, snapshot: snapshotOf(cid, 1, vk, now), version, viewEvents: [], event, commandId: newCommandId() });
    };
    const calls = async () => {
      const stats = await redis.info('commandstats');
      return [...stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    };
    const before = await calls();
    // 41 creates, one of a content expected at revision 3 (it is new), one by another owner.
    const results = await Promise.all([...onP.slice(0, 41).map((cid) => commitOf(cid, 0)), commitOf(onP[41], 3), commitOf(onP[42], 0, 'someone-else')]);
    // One call for these 43 (other tests of this process may add a few); one a commit made 43.
    expect((await calls()) - before).to.be.below(5);
    expect(results.slice(0, 41)).to.deep.equal(onP.slice(0, 41).map(() => ({ outcome: CommitOutcome.Committed })));
    expect(results[41]).to.deep.equal({ outcome: CommitOutcome.RevisionMoved, rev: 0 });
    expect(results[42]).to.deep.equal({ outcome: CommitOutcome.LeaseLost });
    for (const cid of onP.slice(0, 41)) expect(await redis.hget(`ct:{${p}}:${cid}`, 'rev')).to.equal('1');
    for (const cid of onP.slice(41)) expect(await redis.exists(`ct:{${p}}:${cid}`)).to.equal(0);
    // Each event once, in the order of the commits.
    const events = (await redis.xrevrangeBuffer(`events:{${p}}`, '+', '-', 'COUNT', 41)) as [Buffer, Buffer[]][];
    expect(events.reverse().map(([, f]) => unpack<ContentEvent>(f[1]).cid)).to.deep.equal(onP.slice(0, 41));
  });

  it('a commit keeps d beside the head (<rev>:1: that revision is deleted); a d of another revision is not believed; liveContents reads it, and decodes the snapshot of a head an older build wrote without it (H4)', async () => {
    const [cid, p] = keyOnHighPartition();
    await redis.set(`lease:{${p}}`, owner, 'PX', 10000);
    const now = Date.now();
    const vk = newVersionKey();
    const version: VersionRecord = { key: vk, type: 'scriptTest', aspects: { body: { _type: 'body', title: 'd' } }, created: now, creator: 'editor', rev: 1 };
    const event: ContentEvent = { kind: 'created', cid, rev: 1, type: 'scriptTest', version: vk, ts: now, userId: 'editor' };
    const head = `ct:{${p}}:${cid}`;
    expect(
      await store.commit({ owner, expectedRev: 0, snapshot: snapshotOf(cid, 1, vk, now), version, viewEvents: [], event, commandId: newCommandId() }),
    ).to.deep.equal({
      outcome: CommitOutcome.Committed,
    });
    expect(await redis.hget(head, 'd')).to.equal('1:0');
    expect(await store.liveContents([cid])).to.deep.equal([true]);
    // An older build, run beside this one, deletes it: rev and s change, d still names revision 1,
    // so it is not believed: the snapshot is read.
    const next = newContentKey();
    const q = partitionOf(next, P);
    await redis.set(`lease:{${q}}`, owner, 'PX', 10000);
    await store.commit({ owner, expectedRev: 0, snapshot: snapshotOf(next, 1, vk, now), version, viewEvents: [], event, commandId: newCommandId() });
    await redis.hset(`ct:{${q}}:${next}`, 'rev', 2, 's', pack({ ...snapshotOf(next, 2, vk, now), deleted: true }));
    expect(await redis.hget(`ct:{${q}}:${next}`, 'd')).to.equal('1:0');
    expect(await store.liveContents([next])).to.deep.equal([false]);
    const gone = { ...snapshotOf(cid, 2, vk, now), deleted: true };
    expect(
      await store.commit({ owner, expectedRev: 1, snapshot: gone, viewEvents: [], event: { ...event, kind: 'deleted', rev: 2 }, commandId: newCommandId() }),
    ).to.deep.equal({
      outcome: CommitOutcome.Committed,
    });
    expect(await redis.hget(head, 'd')).to.equal('2:1');
    expect(await redis.hkeys(head)).to.have.members(['rev', 's', 'h', 'd']);
    expect(await store.liveContents([cid])).to.deep.equal([false]);

    // Heads as an older build wrote them (rev, s, h; no d), live and deleted, on this partition and others, beside new ones and none.
    const oldLive = newContentKey();
    const oldDeleted = newContentKey();
    const never = newContentKey();
    for (const [k, deleted] of [
      [oldLive, false],
      [oldDeleted, true],
    ] as const) {
      const q = partitionOf(k, P);
      await redis.hset(`ct:{${q}}:${k}`, 'rev', 1, 's', pack({ ...snapshotOf(k, 1, vk, now), deleted }), 'h', vk);
    }
    const live = await store.liveContents([oldLive, cid, never, oldDeleted, oldLive, cid]);
    expect(live).to.deep.equal([true, false, false, false, true, false]);
    expect(await store.liveContents([])).to.deep.equal([]);
    // The same answers as reading the heads.
    const asked = [oldLive, cid, never, oldDeleted];
    expect(await store.liveContents(asked)).to.deep.equal((await store.heads(asked)).map((h) => !!h && !h.deleted));
    await redis.del(`ct:{${partitionOf(oldLive, P)}}:${oldLive}`, `ct:{${partitionOf(oldDeleted, P)}}:${oldDeleted}`);
  });

  it('a draft commit writes and removes the draft blob, records its reply, is fenced by the lease; a promote removes the draft; the summary a workspace listing reads is kept beside it and removed with it', async () => {
    const [cid, p] = keyOnHighPartition();
    await redis.set(`lease:{${p}}`, owner, 'PX', 10000);
    const now = Date.now();
    const draft: Draft = {
      workspace: 'ws1',
      cid,
      type: 'scriptTest',
      aspects: {},
      ops: [],
      reserved: [],
      fromCreate: true,
      mode: 'update',
      created: now,
      modified: now,
      creator: 'editor',
    };
    const commandId = newCommandId();
    const reply = pack({ id: commandId, ok: true, value: { removed: false } });
    expect(await store.commitDraft({ owner, cid, workspace: 'ws1', draft, reply, commandId })).to.equal(CommitOutcome.Committed);
    expect((await redis.hgetBuffer(`dr:{${p}}:${cid}`, 'ws1'))!.equals(pack(draft))).to.equal(true);
    // beside it, what a workspace listing and a promote read instead of the draft (its origin: none, from a create)
    expect(unpack((await redis.hgetBuffer(`dr:{${p}}:${cid}`, 'ws1:summary')) as Buffer)).to.deep.equal({
      type: 'scriptTest',
      size: pack(draft).length,
      fromCreate: true,
      views: false,
    });
    expect(await store.draftOrigin(cid, 'ws1')).to.deep.equal({ fromCreate: true, origin: null, views: false });
    expect(await store.draftOrigin(cid, 'ws2')).to.equal(null);
    expect((await redis.getBuffer(`done:{${p}}:${commandId}`))!.equals(reply)).to.equal(true);
    expect(await store.commitDraft({ owner: 'someone-else', cid, workspace: 'ws1', draft: null, commandId: newCommandId() })).to.equal(CommitOutcome.LeaseLost);
    expect(await redis.hexists(`dr:{${p}}:${cid}`, 'ws1')).to.equal(1);

    const vk = newVersionKey();
    const promoted = await store.commit({
      owner,
      expectedRev: 0,
      snapshot: snapshotOf(cid, 1, vk, now),
      version: { key: vk, type: 'scriptTest', aspects: {}, created: now, creator: 'editor', rev: 1 },
      viewEvents: [],
      event: { kind: 'created', cid, rev: 1, type: 'scriptTest', version: vk, ts: now, userId: 'editor' },
      commandId: newCommandId(),
      promotedFrom: 'ws1',
    });
    expect(promoted).to.deep.equal({ outcome: CommitOutcome.Committed });
    expect(await redis.hkeys(`dr:{${p}}:${cid}`), 'the draft and its summary').to.deep.equal([]);

    expect(await store.commitDraft({ owner, cid, workspace: 'ws2', draft: { ...draft, workspace: 'ws2' }, commandId: newCommandId() })).to.equal(
      CommitOutcome.Committed,
    );
    expect(await redis.hkeys(`dr:{${p}}:${cid}`)).to.have.members(['ws2', 'ws2:summary']);
    expect(await store.commitDraft({ owner, cid, workspace: 'ws2', draft: null, commandId: newCommandId() })).to.equal(CommitOutcome.Committed);
    expect(await redis.hkeys(`dr:{${p}}:${cid}`), 'the draft and its summary').to.deep.equal([]);
  });

  it('packScriptArgs: Lua reads every length form, numbers, booleans, lists, and nil for what is left out', async () => {
    const sizes = [0, 31, 32, 255, 256, 65535, 65536];
    const args: Record<string, Buffer | Buffer[] | number | boolean | string | undefined> = {
      gone: undefined,
      yes: true,
      no: false,
      n: 1763922000123,
      text: 'é漢字',
    };
    for (const n of sizes) args[`s${n}`] = Buffer.alloc(n, 0xff);
    args.list15 = Array.from({ length: 15 }, (_, i) => Buffer.of(i));
    args.list16 = Array.from({ length: 16 }, (_, i) => Buffer.of(i, 0x80));
    const lua = `
      local a = cmsgpack.unpack(ARGV[1])
      local out = {}
      for _, n in ipairs({${sizes.join(',')}}) do table.insert(out, string.len(a['s' .. n])) end
      table.insert(out, #a.list15)
      table.insert(out, #a.list16)
      table.insert(out, string.byte(a.list16[16], 1) * 256 + string.byte(a.list16[16], 2))
      table.insert(out, tostring(a.yes) .. tostring(a.no) .. tostring(a.gone))
      table.insert(out, a.text)
      redis.call('SET', KEYS[1], a.n)
      return out`;
    const key = `script-args-test:${process.pid}`;
    const res = (await redis.eval(lua, 1, key, packScriptArgs(args))) as (number | string)[];
    expect(res.slice(0, sizes.length)).to.deep.equal(sizes);
    expect(res.slice(sizes.length, sizes.length + 2)).to.deep.equal([15, 16]);
    expect(res[sizes.length + 2]).to.equal(15 * 256 + 0x80);
    expect(res.slice(sizes.length + 3)).to.deep.equal(['truefalsenil', 'é漢字']);
    expect(await redis.get(key)).to.equal('1763922000123');
    await redis.del(key);
  });
});
