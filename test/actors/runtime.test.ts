import { expect } from 'chai';
import { Redis } from 'ioredis';
import { loadSettings } from '../../config/settings.js';
import { pack, unpack } from '../../src/adapters/codec.js';
import { CommitOutcome, ContentStore } from '../../src/adapters/content-store.js';
import { createLogger } from '../../src/adapters/log.js';
import { newCommandId, newContentKey, partitionOf } from '../../src/adapters/ids.js';
import { connectRedis } from '../../src/adapters/redis.js';
import { ContentActor, type ContentCommand } from '../../src/actors/content/content-actor.js';
import { ActorHost, type CommandHandler, type Reply } from '../../src/actors/runtime.js';
import { loadSecurityConfig } from '../../src/security/security-config.js';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { repliesOn } from '../support/replies.js';

/** The actor runtime against the real Redis (ARCHITECTURE principles 1-3, 6). */

const P = 4;
const settings = () => loadSettings({ ...process.env, PARTITIONS: String(P), LEASE_MS: '1000', ACTOR_MAX_ATTEMPTS: '2' });
const editor = { userId: 'editor', contexts: { __global__: ['editor'] } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(f: () => Promise<T | null | undefined>, ms = 10000, what = 'a condition'): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** A new content key on partition `p`. */
function keyOn(p: number): string {
  for (;;) {
    const k = newContentKey();
    if (partitionOf(k, P) === p) return k;
  }
}

/** The private test Redis (global setup) may be flushed; a server named by TEST_REDIS_URL only cleaned where needed. */
async function cleanSlate(redis: Redis): Promise<void> {
  if (!process.env.TEST_REDIS_URL) await redis.flushall();
  else await redis.del('actors:members', ...Array.from({ length: P }, (_, i) => `lease:{${i}}`));
}

const pendingCount = async (redis: Redis, p: number) => ((await redis.xpending(`cmd:{${p}}`, 'actors')) as [number])[0];

describe('actor runtime (ARCHITECTURE principles 1-3)', function () {
  this.timeout(30000);
  let redis: Redis;
  let host: ActorHost<ContentCommand> | undefined;
  const s = settings();
  const client = connectRedis(s);
  const store = new ContentStore(client, P, s.EVENTS_MAXLEN, s.DEDUP_TTL_SECONDS);
  let replyStreams = 0;

  before(async () => {
    redis = new Redis(process.env.REDIS_URL!);
    await cleanSlate(redis);
  });
  afterEach(async () => {
    await host?.stop();
    host = undefined;
  });
  after(() => {
    redis.disconnect();
    client.disconnect();
  });

  const newHost = (handler: CommandHandler<ContentCommand> = new ContentActor(store, loadSecurityConfig())) =>
    new ActorHost<ContentCommand>(client, s, handler, createLogger(process.env.TEST_LOG ?? 'silent'));
  const startHost = async (handler?: CommandHandler<ContentCommand>) => {
    host = newHost(handler);
    await host.start();
    return host;
  };

  const replyStream = () => `test:replies:${++replyStreams}`;
  const create = (cid: string, replyTo: string, title = 'x'): ContentCommand => ({
    k: 'create',
    id: newCommandId(),
    cid,
    replyTo,
    user: editor,
    type: 'article',
    aspects: { body: { _type: 'body', title } },
    ops: [],
  });

  /** Appends a raw command (or any blob) to its partition's mailbox; resolves with the entry id. */
  const append = async (cmd: ContentCommand | Buffer, cid: string) =>
    (await redis.xadd(`cmd:{${partitionOf(cid, P)}}`, '*', 'm', Buffer.isBuffer(cmd) ? cmd : pack(cmd)))!;

  const replies = (stream: string, n: number): Promise<Reply[]> => repliesOn(redis, stream, n);

  describe('(a) idempotent replay', () => {
    it('a command appended twice (same command id) commits once; both get the same reply, and a third copy later too', async () => {
      const cid = newContentKey();
      const to = replyStream();
      const cmd = create(cid, to);
      await append(cmd, cid);
      await append(cmd, cid);
      await startHost();
      const [a, b] = await replies(to, 2);
      expect(a.ok, JSON.stringify(a)).to.equal(true);
      expect(b).to.deep.equal(a);
      expect((await store.head(cid))!.rev).to.equal(1);
      expect(await store.versionIndex(cid)).to.have.length(1);
      // once more in a later batch: the recorded reply (done key) again, still one revision
      await append(cmd, cid);
      const [, , c] = await replies(to, 3);
      expect(c).to.deep.equal(a);
      expect((await store.head(cid))!.rev).to.equal(1);
      expect(await store.versionIndex(cid)).to.have.length(1);
      expect(await redis.xlen(`events:{${partitionOf(cid, P)}}`)).to.be.greaterThan(0);
      expect(await pendingCount(redis, partitionOf(cid, P))).to.equal(0);
    });

    it('a command a stale owner read after the partition was taken is reclaimed once it waited a lease, and the trims behind later commands keep it meanwhile', async () => {
      const p = 2;
      const stream = `cmd:{${p}}`;
      await startHost();
      await waitFor(async () => ((await redis.get(`lease:{${p}}`)) ? true : null), 10000, 'the partition taken');
      // The owner's loop is past its first recovery once it answered a command.
      const first = create(keyOn(p), replyStream(), 'first');
      await append(first, first.cid);
      await replies(first.replyTo!, 1);
      const to = replyStream();
      const stranded = create(keyOn(p), to, 'stranded');
      // A previous owner's read that Redis served after this owner took the partition: in one
      // transaction, so the running owner's blocked read never sees the entry.
      const tx = (await redis
        .multi()
        .xadd(stream, '*', 'm', pack(stranded))
        .xreadgroup('GROUP', 'actors', 'ghost', 'COUNT', 1, 'STREAMS', stream, '>')
        .exec())!;
      const strandedId = tx[0][1] as string;
      // Later commands of the partition: the owner runs them and trims behind them (at most once
      // a second: the pause makes the last one's trim reach past the stranded command).
      const toLater = replyStream();
      for (let i = 0; i < 3; i++) {
        if (i === 2) await sleep(1100);
        const later = create(keyOn(p), toLater, `later ${i}`);
        await append(later, later.cid);
        await replies(toLater, i + 1);
      }
      expect((await redis.xrange(stream, strandedId, strandedId)).length, 'the stranded command is still in the stream').to.equal(1);
      const [r] = await replies(to, 1);
      expect(r.id).to.equal(stranded.id);
      expect(r.ok, JSON.stringify(r)).to.equal(true);
      expect((await store.head(stranded.cid))!.rev).to.equal(1);
      await waitFor(async () => ((await pendingCount(redis, p)) === 0 ? true : null), 10000, 'nothing pending');
    });

    it('the pending commands of a dead owner are reclaimed (XAUTOCLAIM) and run once; a copy of one it had committed answers the recorded reply', async () => {
      const p = 1;
      const stream = `cmd:{${p}}`;
      await redis.xgroup('CREATE', stream, 'actors', '0', 'MKSTREAM').catch((e: Error) => {
        if (!String(e).includes('BUSYGROUP')) throw e;
      });
      const to = replyStream();
      const a = create(keyOn(p), to, 'a');
      const b = create(keyOn(p), to, 'b');
      const ea = await append(a, a.cid);
      const eb1 = await append(b, b.cid);
      const eb2 = await append(b, b.cid); // a gateway retry of b
      // A previous owner read all three (pending under its name) ...
      const read = (await redis.xreadgroup('GROUP', 'actors', 'ghost', 'COUNT', 10, 'STREAMS', stream, '>')) as [string, [string, string[]][]][];
      expect(read[0][1].map((e) => e[0])).to.deep.equal([ea, eb1, eb2]);
      // ... committed b (its commit acknowledges the first entry), and died.
      await redis.set(`lease:{${p}}`, 'ghost', 'PX', 10000);
      const out = await new ContentActor(store, loadSecurityConfig())
        .handle(b, { partition: p, owner: 'ghost', entryId: eb1 })
        .finally(() => redis.del(`lease:{${p}}`));
      if (out === 'lease-lost') throw new Error('ghost commit refused');
      expect(out.committed).to.equal(true);
      const pending = (await redis.xpending(stream, 'actors', '-', '+', 10)) as [string, string, number, number][];
      expect(pending.map((r) => [r[0], r[1]])).to.deep.equal([
        [ea, 'ghost'],
        [eb2, 'ghost'],
      ]);

      await startHost();
      const got = await replies(to, 2);
      const ra = got.find((r) => r.id === a.id)!;
      const rb = got.find((r) => r.id === b.id)!;
      expect(ra.ok, JSON.stringify(ra)).to.equal(true);
      expect(rb, 'the recorded reply of the committed command').to.deep.equal(unpack(pack(out.reply)));
      for (const cid of [a.cid, b.cid]) {
        expect((await store.head(cid))!.rev).to.equal(1);
        expect(await store.versionIndex(cid)).to.have.length(1);
      }
      expect(await pendingCount(redis, p)).to.equal(0);
      // A later command of the same partition is answered after every earlier one (one loop per
      // partition, replies sent in order on one connection): once it is, no other reply can come.
      const later = keyOn(p);
      const toLater = replyStream();
      await append(create(later, toLater), later);
      await replies(toLater, 1);
      expect(await redis.xlen(to), 'one reply per entry, no more').to.equal(2);
    });
  });

  describe('(b) poison commands', () => {
    it('go to the dead-letter stream with their reason after ACTOR_MAX_ATTEMPTS; the partition goes on', async () => {
      const p = 2;
      const cid = keyOn(p);
      await startHost();
      const deadBefore = await redis.xlen(`dead:{${p}}`);
      // unreadable
      const blob = Buffer.from([0xc1, 0xff, 0x00]);
      const e1 = await append(blob, cid);
      // a command whose handling throws every time: an update of content whose head version is gone
      const to = replyStream();
      await append(create(cid, to), cid);
      await replies(to, 1);
      await redis.del(`vr:{${p}}:${cid}`);
      const update: ContentCommand = {
        k: 'update',
        id: newCommandId(),
        cid,
        replyTo: to,
        user: editor,
        ifMatch: null,
        unsafe: true,
        mode: 'update',
        aspects: {},
        ops: [],
      };
      const e2 = await append(update, cid);
      const [, failed] = await replies(to, 2);
      expect(failed.ok).to.equal(false);
      if (!failed.ok) {
        expect(failed.error.code).to.equal('INTERNAL');
        expect(failed.error.message).to.not.match(/head version|missing|\.ts/);
      }
      const dead = await waitFor(async () => {
        const rows = (await redis.xrangeBuffer(`dead:{${p}}`, '-', '+')) as [Buffer, Buffer[]][];
        return rows.length >= deadBefore + 2 ? rows.slice(deadBefore) : null;
      });
      const field = (f: Buffer[], name: string) => f[f.findIndex((x, i) => i % 2 === 0 && x.toString() === name) + 1];
      expect(dead.map(([, f]) => field(f, 'reason').toString())).to.deep.equal(['unreadable command', 'failed 2 times']);
      expect(dead.map(([, f]) => field(f, 'entry').toString())).to.deep.equal([e1, e2]);
      expect(field(dead[0][1], 'm').equals(blob), 'the unreadable blob kept as it was').to.equal(true);
      expect(unpack<ContentCommand>(field(dead[1][1], 'm'))).to.deep.include({ id: update.id, cid, k: 'update' });
      // nothing committed by the failing update
      expect((await store.head(cid))!.rev).to.equal(1);
      // later commands of the same partition still run, and nothing stays pending
      const later = keyOn(p);
      const to2 = replyStream();
      await append(create(later, to2), later);
      const [ok] = await replies(to2, 1);
      expect(ok.ok).to.equal(true);
      expect(await pendingCount(redis, p)).to.equal(0);
    });
  });

  describe('(d) lease fencing', () => {
    it('a commit by a process that does not own the lease is refused with lease-lost', async () => {
      const cid = keyOn(3);
      const now = Date.now();
      const commit = (owner: string) =>
        store.commit({
          owner,
          expectedRev: 0,
          snapshot: {
            cid,
            rev: 1,
            type: 't',
            head: 'v',
            created: now,
            modified: now,
            committer: 'x',
            deleted: false,
            views: {},
            symbolic: {},
            meta: {},
            aliases: [],
          },
          viewEvents: [],
          event: { kind: 'created', cid, rev: 1, type: 't', ts: now, userId: 'x' },
          reply: pack({}),
          commandId: newCommandId(),
        });
      try {
        // nobody owns the partition
        await redis.del('lease:{3}');
        expect(await commit('me')).to.deep.equal({ outcome: CommitOutcome.LeaseLost });
        // another process owns it
        await redis.set('lease:{3}', 'someone-else', 'PX', 5000);
        expect(await commit('me')).to.deep.equal({ outcome: CommitOutcome.LeaseLost });
        expect(await store.head(cid)).to.equal(null);
        expect(await store.versionIndex(cid)).to.deep.equal([]);
        // the owner itself may
        expect(await commit('someone-else')).to.deep.equal({ outcome: CommitOutcome.Committed });
      } finally {
        await redis.del('lease:{3}');
      }
    });

    it('a host whose lease another process took commits nothing there and gives the partition up; owning it again, it runs the command once', async () => {
      const p = 0;
      const cid = keyOn(p);
      // The intruder takes the lease while the host handles the command: after the host read
      // it as the owner, before its commit. The handler's answer is the event to wait for.
      const actor = new ContentActor(store, loadSecurityConfig());
      let refused: Promise<unknown> | undefined;
      const h = await startHost({
        handle: (cmd, ctx) => {
          if (cmd.cid !== cid || refused) return actor.handle(cmd, ctx);
          const out = redis.set(`lease:{${p}}`, 'intruder:1:beef', 'PX', 60000).then(() => actor.handle(cmd, ctx));
          refused = out;
          return out;
        },
        resumeApplied: (cmd) => actor.resumeApplied(cmd),
      });
      expect(h.partitions()).to.deep.equal([0, 1, 2, 3]);
      const to = replyStream();
      try {
        await append(create(cid, to), cid);
        await waitFor(async () => refused, 10000, 'the host to handle the command');
        expect(await refused, 'the commit without the lease').to.equal('lease-lost');
        await waitFor(async () => (h.partitions().includes(p) ? null : true), 10000, 'the host to give the partition up');
        expect(await store.head(cid), 'nothing committed without the lease').to.equal(null);
        expect(await redis.xlen(to)).to.equal(0);
        expect(await redis.get(`lease:{${p}}`)).to.equal('intruder:1:beef');
      } finally {
        // the intruder goes away: the host takes the partition back and runs the command
        await redis.del(`lease:{${p}}`);
      }
      const [r] = await replies(to, 1);
      expect(r.ok, JSON.stringify(r)).to.equal(true);
      expect(h.partitions()).to.include(p);
      expect(await redis.get(`lease:{${p}}`)).to.equal(h.owner);
      expect((await store.head(cid))!.rev).to.equal(1);
      expect(await store.versionIndex(cid)).to.have.length(1);
      expect(await pendingCount(redis, p)).to.equal(0);
    });
  });

  describe('(e) hand-over', () => {
    it('a graceful stop hands every partition over (leases deleted); another host takes them all', async () => {
      const first = await startHost();
      expect(first.partitions()).to.deep.equal([0, 1, 2, 3]);
      for (let p = 0; p < P; p++) expect(await redis.get(`lease:{${p}}`)).to.equal(first.owner);
      await first.stop();
      host = undefined;
      for (let p = 0; p < P; p++) expect(await redis.get(`lease:{${p}}`), `lease:{${p}} after the stop`).to.equal(null);
      expect(await redis.zscore('actors:members', first.owner), 'the stopped host left the members').to.equal(null);
      const second = await startHost();
      expect(second.partitions()).to.deep.equal([0, 1, 2, 3]);
      for (let p = 0; p < P; p++) expect(await redis.get(`lease:{${p}}`)).to.equal(second.owner);
      // and it works them: a command on every partition is answered
      const to = replyStream();
      for (let p = 0; p < P; p++) {
        const cid = keyOn(p);
        await append(create(cid, to), cid);
      }
      expect((await replies(to, P)).every((r) => r.ok)).to.equal(true);
    });

    it('two hosts share the partitions fairly; when one stops, the other takes its share', async () => {
      const a = await startHost();
      const b = newHost();
      await b.start();
      try {
        await waitFor(async () => (a.partitions().length === P / 2 && b.partitions().length === P / 2 ? true : null), 10000, 'a fair share');
        expect([...a.partitions(), ...b.partitions()].sort()).to.deep.equal([0, 1, 2, 3]);
      } finally {
        await b.stop();
      }
      await waitFor(async () => (a.partitions().length === P ? true : null), 10000, 'the remaining host to take every partition');
    });
  });

  describe('(f) one read of the commands for every partition (issue 23)', () => {
    const connectionNames = async () =>
      ((await redis.client('LIST')) as string)
        .split('\n')
        .map((l) => /name=(\S*)/.exec(l)?.[1] ?? '')
        .filter((n) => n.startsWith('actor-'));

    it('a host reads the command streams of all its partitions on one blocking connection, and answers a command on each', async () => {
      const before = (await connectionNames()).length;
      await startHost();
      const to = replyStream();
      for (let p = 0; p < P; p++) {
        const cid = keyOn(p);
        await append(create(cid, to), cid);
      }
      expect((await replies(to, P)).every((r) => r.ok)).to.equal(true);
      const names = await connectionNames();
      expect(
        names.filter((n) => n === 'actor-commands'),
        JSON.stringify(names),
      ).to.have.length(1);
      expect(
        names.filter((n) => /^actor-p\d+$/.test(n)),
        'no reader of its own per partition',
      ).to.deep.equal([]);
      expect(names.length - before, JSON.stringify(names)).to.equal(1);
    });

    it('a graceful stop does not spin: the loops stop before the read they share', async () => {
      const h = await startHost();
      const to = replyStream();
      const cid = keyOn(0);
      await append(create(cid, to), cid);
      await replies(to, 1);
      const cpu = process.cpuUsage();
      const t0 = Date.now();
      await h.stop();
      host = undefined;
      const used = process.cpuUsage(cpu);
      // A loop whose source closed while it still ran took its null at once, again and again,
      // until its next reclaim (LEASE_MS / 2): the event loop busy for as long.
      expect((used.user + used.system) / 1000, `CPU during a stop of ${Date.now() - t0} ms`).to.be.below(150);
    });

    it('partitions taken while the read blocks are read at once, not when the block times out', async () => {
      const a = await startHost();
      const b = newHost();
      await b.start();
      let aStopped = false;
      try {
        await waitFor(async () => (b.partitions().length === P / 2 ? true : null), 10000, 'a fair share');
        const ofA = a.partitions();
        // A command on one of b's partitions: b's read answers it and blocks anew now (for 2 s).
        const warm = replyStream();
        const cid0 = keyOn(b.partitions()[0]);
        await append(create(cid0, warm), cid0);
        await replies(warm, 1);
        await a.stop();
        aStopped = true;
        await waitFor(async () => (b.partitions().length === P ? true : null), 5000, 'b to take every partition');
        const to = replyStream();
        const sent = Date.now();
        for (const p of ofA) {
          const cid = keyOn(p);
          await append(create(cid, to), cid);
        }
        expect((await replies(to, ofA.length)).every((r) => r.ok)).to.equal(true);
        expect(Date.now() - sent, 'answered within the block of the read that was under way').to.be.below(700);
      } finally {
        if (!aStopped) await a.stop();
        host = b;
      }
    });
  });
});

describe('gateway and a command that keeps failing (ARCHITECTURE principle 3, spec Errors)', function () {
  this.timeout(30000);
  let redis: Redis;
  before(() => {
    redis = new Redis(process.env.REDIS_URL!);
  });
  after(() => redis.disconnect());

  for (const dispatch of ['stream', 'local'] as const) {
    it(`answers 500 with the spec error body and no stack trace; the partition goes on (${dispatch} dispatch)`, async () => {
      const p = await startTestPlatform(
        { PARTITIONS: String(P), LEASE_MS: '1000', ACTOR_MAX_ATTEMPTS: '2', LOCAL_DISPATCH: dispatch === 'local' ? 'true' : 'false' },
        ['web', 'actors'],
      );
      try {
        const c = await new Client(p.base).login('editor');
        const r0 = await c.create(article('soon poison'));
        expect(r0.status, r0.text).to.equal(201);
        const id: string = r0.json.system.id;
        const key = id.split('/')[1];
        const part = partitionOf(key, P);
        const deadBefore = await redis.xlen(`dead:{${part}}`);
        await redis.del(`vr:{${part}}:${key}`); // the head version record is gone: the actor throws

        const r = await c.req('PUT', `/content/alias/${id}`, { body: article('poison'), headers: { 'If-Match': r0.headers.get('etag')! } });
        expect(r.status, r.text).to.equal(500);
        expect(r.json).to.deep.equal({ message: 'The command could not be processed', statusCode: '50000', extraInfo: {} });
        expect(r.text).to.not.match(/stack|Error:|\bat \S+ \(|\.ts:\d+|head version|missing/);

        if (dispatch === 'stream') {
          const rows = await waitFor(async () => {
            const all = await redis.xrange(`dead:{${part}}`, '-', '+');
            return all.length > deadBefore ? all.slice(deadBefore) : null;
          });
          expect(rows).to.have.length(1);
          const f = rows[0][1];
          expect(f[f.indexOf('reason') + 1]).to.equal('failed 2 times');
          expect(await pendingCount(redis, part)).to.equal(0);
        } else {
          // a command handed over in process has no stream entry to set aside
          expect(await redis.xlen(`dead:{${part}}`)).to.equal(deadBefore);
        }
        expect((await c.req('GET', `/content/alias/${id}?atLeastRevision=1`)).headers.get('location')).to.match(/\/1$/);

        // the partition goes on: another content of the same partition is created and updated
        let other: { id: string; etag: string } | undefined;
        while (!other) {
          const x = await c.create(article('neighbour'));
          expect(x.status, x.text).to.equal(201);
          if (partitionOf(x.json.system.id.split('/')[1], P) === part) other = { id: x.json.system.id, etag: x.headers.get('etag')! };
        }
        const u = await c.req('PUT', `/content/alias/${other.id}`, { body: article('neighbour 2'), headers: { 'If-Match': other.etag } });
        expect(u.status, u.text).to.equal(200);
      } finally {
        await p.stop();
      }
    });
  }
});

describe('gateway without actors (ARCHITECTURE principle 6)', function () {
  this.timeout(20000);
  it('a create answers 503 with Retry-After and statusCode 50300 when no actor answers in time', async () => {
    const PARTS = 3;
    const p = await startTestPlatform({ ACTOR_REPLY_TIMEOUT_MS: '500', PARTITIONS: String(PARTS) }, ['web']);
    const redis = new Redis(process.env.REDIS_URL!);
    try {
      const c = await new Client(p.base).login('editor');
      const started = Date.now();
      const r = await c.create(article('nobody home'));
      expect(r.status, r.text).to.equal(503);
      expect(r.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
      expect(r.json.statusCode).to.equal('50300');
      expect(r.json.message).to.be.a('string');
      expect(Date.now() - started, 'answered after the reply timeout, not much later').to.be.within(400, 5000);
    } finally {
      await p.stop();
      // The command stays in its mailbox: take it out, so no later actor creates the content.
      for (let i = 0; i < PARTS; i++) {
        const rows = (await redis.xrangeBuffer(`cmd:{${i}}`, '-', '+')) as [Buffer, Buffer[]][];
        for (const [entry, f] of rows) {
          const cmd = unpack<ContentCommand>(f[1]);
          if (cmd.k === 'create' && (cmd.aspects.body as { title?: string } | undefined)?.title === 'nobody home') await redis.xdel(`cmd:{${i}}`, entry);
        }
      }
      redis.disconnect();
    }
  });
});
