import { expect } from 'chai';
import { Redis } from 'ioredis';
import { loadSettings } from '../../config/settings.js';
import { CommitOutcome, ContentStore, type CommitInput, type CommitResult } from '../../src/adapters/content-store.js';
import { createLogger } from '../../src/adapters/log.js';
import { newCommandId, newContentKey } from '../../src/adapters/ids.js';
import { connectRedis } from '../../src/adapters/redis.js';
import { ContentActor, type ContentCommand, type WriteResult } from '../../src/actors/content/content-actor.js';
import { etagOf } from '../../src/content/model.js';
import { ActorHost, type Reply } from '../../src/actors/runtime.js';
import { loadSecurityConfig } from '../../src/security/security-config.js';

/**
 * A commit that Redis applied but whose answer was lost (the connection dropped as Redis
 * restarted: RELIABILITY.md, "Redis killed and restarted"). The actor retries the command; it
 * must answer the commit's reply, not run the command again (a create would answer 409, an
 * update 409, a delete 409): the head revision names the command that wrote it. Both for local
 * dispatch (no recorded reply) and for commands from the stream (recorded reply).
 */
describe('actors: a commit applied whose answer was lost is answered, not run again (RELIABILITY: Redis restart)', function () {
  this.timeout(30000);
  const P = 4;
  const s = loadSettings({ ...process.env, PARTITIONS: String(P), LEASE_MS: '1000', ACTOR_MAX_ATTEMPTS: '3' });
  const client = connectRedis(s);
  const editor = { userId: 'editor', contexts: { __global__: ['editor'] } };
  let redis: Redis;
  let host: ActorHost<ContentCommand> | undefined;

  /**
   * A store whose next `lose` commits are applied by Redis and then fail, as a lost answer does;
   * and whose next `resend` commits run twice, answering the second run, as ioredis does when it
   * sends a command again after reconnecting (autoResendUnfulfilledCommands).
   */
  class LosingStore extends ContentStore {
    lose = 0;
    resend = 0;
    /** Commits whose resent run finds the partition lease gone (it expired while Redis was down). */
    resendLeaseGone = 0;
    override async commit(c: CommitInput): Promise<CommitResult> {
      let res = await super.commit(c);
      if (this.resendLeaseGone > 0) {
        this.resendLeaseGone--;
        return { outcome: CommitOutcome.LeaseLost };
      }
      if (this.resend > 0) {
        this.resend--;
        res = await super.commit(c);
      }
      if (this.lose > 0) {
        this.lose--;
        throw new Error('Connection is closed.');
      }
      return res;
    }
  }
  const store = new LosingStore(client, P, s.EVENTS_MAXLEN, s.DEDUP_TTL_SECONDS);

  before(async () => {
    redis = new Redis(process.env.REDIS_URL!);
    if (!process.env.TEST_REDIS_URL) await redis.flushall();
    host = new ActorHost<ContentCommand>(client, s, new ContentActor(store, loadSecurityConfig()), createLogger(process.env.TEST_LOG ?? 'silent'));
    await host.start();
    const end = Date.now() + 10000;
    while (host.partitions().length < P && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  });
  after(async () => {
    await host?.stop();
    redis.disconnect();
    client.disconnect();
  });

  /** The value of a successful reply. */
  const val = (r: Reply): unknown => (r.ok ? r.value : undefined);
  const run = async (cmd: ContentCommand): Promise<Reply> => {
    const r = await host!.runLocal(cmd);
    expect(r, 'the partition is owned here').to.not.equal(null);
    return r!;
  };

  it('local create, update, view, delete: each answered as applied, one revision each', async () => {
    const cid = newContentKey();
    store.lose = 1;
    const created = await run({
      k: 'create',
      id: newCommandId(),
      cid,
      user: editor,
      type: 'article',
      aspects: { body: { _type: 'body', title: 'a' } },
      ops: [{ _type: 'svcSetAlias', namespace: 'lost', alias: cid }],
    });
    expect(created.ok, JSON.stringify(created)).to.equal(true);
    const w = val(created) as WriteResult;
    expect(w.snapshot.rev).to.equal(1);
    expect(w.version.aspects.body.title).to.equal('a');

    store.lose = 1;
    const updated = await run({
      k: 'update',
      id: newCommandId(),
      cid,
      user: editor,
      ifMatch: etagOf(cid, 1),
      unsafe: false,
      mode: 'update',
      aspects: { body: { _type: 'body', title: 'b' } },
      ops: [],
    });
    expect(updated.ok, JSON.stringify(updated)).to.equal(true);
    expect((val(updated) as WriteResult).snapshot.rev).to.equal(2);
    expect((val(updated) as WriteResult).version.aspects.body.title).to.equal('b');

    store.lose = 1;
    const view = await run({
      k: 'assignView',
      id: newCommandId(),
      cid,
      user: editor,
      view: 'svcPublic',
      ifMatch: etagOf(cid, 2),
      versionKey: (val(updated) as WriteResult).version.key,
    });
    expect(view).to.deep.include({ ok: true, value: { cid, rev: 3 } });

    store.lose = 1;
    const deleted = await run({ k: 'delete', id: newCommandId(), cid, user: editor, ifMatch: etagOf(cid, 3) });
    expect(deleted).to.deep.include({ ok: true, value: { cid, rev: 4 } });
    // what follows the delete's commit was finished: its alias is free again
    expect(await redis.exists(`alias:lost/${cid}`)).to.equal(0);
    expect((await store.head(cid))!.rev).to.equal(4);
    expect(await store.versionIndex(cid)).to.have.length(2);
  });

  /** A create then an update of a new content, `arm` setting up the store before each commit. */
  const createThenUpdate = async (arm: () => void): Promise<{ cid: string; created: Reply; updated: Reply }> => {
    const cid = newContentKey();
    arm();
    const created = await run({
      k: 'create',
      id: newCommandId(),
      cid,
      user: editor,
      type: 'article',
      aspects: { body: { _type: 'body', title: 'a' } },
      ops: [],
    });
    arm();
    const updated = await run({
      k: 'update',
      id: newCommandId(),
      cid,
      user: editor,
      ifMatch: etagOf(cid, 1),
      unsafe: false,
      mode: 'update',
      aspects: { body: { _type: 'body', title: 'b' } },
      ops: [],
    });
    return { cid, created, updated };
  };

  it('a commit sent twice (the first answer lost with the connection) answers as applied, not 409', async () => {
    const { cid, created, updated } = await createThenUpdate(() => (store.resend = 1));
    expect(created.ok, JSON.stringify(created)).to.equal(true);
    expect(updated.ok, JSON.stringify(updated)).to.equal(true);
    expect((val(updated) as WriteResult).snapshot.rev).to.equal(2);
    expect((await store.head(cid))!.rev).to.equal(2);
    expect(await store.versionIndex(cid)).to.have.length(2);
  });

  it('a commit sent twice whose second run finds the lease gone answers as applied, not lease lost (then 409 through the stream)', async () => {
    const { cid, created, updated } = await createThenUpdate(() => (store.resendLeaseGone = 1));
    expect(created.ok, JSON.stringify(created)).to.equal(true);
    expect(updated.ok, JSON.stringify(updated)).to.equal(true);
    expect((val(updated) as WriteResult).snapshot.rev).to.equal(2);
    expect((await store.head(cid))!.rev).to.equal(2);
    expect(host!.partitions(), 'no partition given up').to.have.length(P);
  });

  it('a command that did fail (its commit did not take place) still runs again', async () => {
    const cid = newContentKey();
    let failNext = true;
    const original = store.commit.bind(store);
    store.commit = async (c) => {
      if (failNext) {
        failNext = false;
        throw new Error('Connection is closed.');
      }
      return original(c);
    };
    try {
      const created = await run({
        k: 'create',
        id: newCommandId(),
        cid,
        user: editor,
        type: 'article',
        aspects: { body: { _type: 'body', title: 'x' } },
        ops: [],
      });
      expect(created.ok, JSON.stringify(created)).to.equal(true);
      expect((await store.head(cid))!.rev).to.equal(1);
    } finally {
      store.commit = original;
    }
  });
});
