import { expect } from 'chai';
import { Redis } from 'ioredis';
import { loadSettings } from '../../config/settings.js';
import { pack, unpack } from '../../src/adapters/codec.js';
import { ContentStore } from '../../src/adapters/content-store.js';
import { createLogger } from '../../src/adapters/log.js';
import { newCommandId, newContentKey, partitionOf } from '../../src/adapters/ids.js';
import { connectRedis } from '../../src/adapters/redis.js';
import { ContentActor, type ContentCommand } from '../../src/actors/content/content-actor.js';
import { ActorHost, type Reply } from '../../src/actors/runtime.js';
import { loadSecurityConfig } from '../../src/security/security-config.js';
import { Client, article, startTestPlatform } from '../support/platform.js';

const P = 4;
const settings = () => loadSettings({ ...process.env, PARTITIONS: String(P), LEASE_MS: '1000', ACTOR_MAX_ATTEMPTS: '2' });
const editor = { userId: 'editor', contexts: { __global__: ['editor'] } };

async function waitFor<T>(f: () => Promise<T | null | undefined>, ms = 10000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('actor runtime (ARCHITECTURE principles 1-3, 6)', function () {
  this.timeout(30000);
  let redis: Redis;
  let host: ActorHost<ContentCommand> | undefined;
  const s = settings();
  const client = connectRedis(s);
  const store = new ContentStore(client, P, s.EVENTS_MAXLEN, s.DEDUP_TTL_SECONDS);

  before(async () => {
    redis = new Redis(process.env.REDIS_URL!);
    await redis.flushall(); // the private test server (global setup), never a shared one
  });
  afterEach(async () => {
    await host?.stop();
    host = undefined;
  });
  after(() => {
    redis.disconnect();
    client.disconnect();
  });

  const startHost = async () => {
    host = new ActorHost<ContentCommand>(client, s, new ContentActor(store, loadSecurityConfig()), createLogger('silent'));
    await host.start();
    return host;
  };

  /** Appends a raw command to its partition's mailbox, replying to `replyTo`. */
  const append = (cmd: ContentCommand | Buffer, cid: string) => redis.xadd(`cmd:{${partitionOf(cid, P)}}`, '*', 'm', Buffer.isBuffer(cmd) ? cmd : pack(cmd));

  const replies = async (stream: string, n: number): Promise<Reply[]> =>
    waitFor(async () => {
      const rows = (await redis.xrangeBuffer(stream, '-', '+')) as [Buffer, Buffer[]][];
      return rows.length >= n ? rows.map(([, f]) => unpack<Reply>(f[1])) : null;
    });

  it('a command appended twice (same id) commits once; both get the same reply', async () => {
    const cid = newContentKey();
    const cmd: ContentCommand = { k: 'create', id: newCommandId(), cid, replyTo: 'test:replies:1', user: editor, type: 'article', aspects: { body: { _type: 'body', title: 'x' } }, ops: [] };
    await append(cmd, cid);
    await append(cmd, cid);
    await startHost();
    const [a, b] = await replies('test:replies:1', 2);
    expect(a.ok).to.equal(true);
    expect(b).to.deep.equal(a);
    expect((await store.head(cid))!.rev).to.equal(1);
    expect(await store.versionIndex(cid)).to.have.length(1);
    // and once more after the batch: the recorded reply again, still one revision
    await append(cmd, cid);
    const [, , c] = await replies('test:replies:1', 3);
    expect(c).to.deep.equal(a);
    expect((await store.head(cid))!.rev).to.equal(1);
  });

  it('poison commands go to the dead-letter stream with their reason; the partition goes on', async () => {
    const cid = newContentKey();
    const p = partitionOf(cid, P);
    await startHost();
    // unreadable
    await append(Buffer.from([0xc1, 0xff, 0x00]), cid);
    // a command whose handling throws every time: an update of content whose head version is gone
    const create: ContentCommand = { k: 'create', id: newCommandId(), cid, replyTo: 'test:replies:2', user: editor, type: 'article', aspects: {}, ops: [] };
    await append(create, cid);
    await replies('test:replies:2', 1);
    await redis.del(`vr:{${p}}:${cid}`);
    const update: ContentCommand = { k: 'update', id: newCommandId(), cid, replyTo: 'test:replies:2', user: editor, ifMatch: null, unsafe: true, mode: 'update', aspects: {}, ops: [] };
    await append(update, cid);
    const [, failed] = await replies('test:replies:2', 2);
    expect(failed.ok).to.equal(false);
    if (!failed.ok) expect(failed.error.code).to.equal('INTERNAL');
    const dead = await waitFor(async () => {
      const rows = await redis.xrange(`dead:{${p}}`, '-', '+');
      return rows.length >= 2 ? rows : null;
    });
    const reasons = dead.map(([, f]) => f[f.indexOf('reason') + 1]);
    expect(reasons[0]).to.equal('unreadable command');
    expect(reasons[1]).to.match(/^failed 2 times/);
    // later commands of the partition still run
    const other: ContentCommand = { k: 'create', id: newCommandId(), cid: newContentKey(), replyTo: 'test:replies:3', user: editor, type: 'article', aspects: {}, ops: [] };
    // same partition as the poison ones
    let c2 = other.cid;
    while (partitionOf(c2, P) !== p) c2 = newContentKey();
    await append({ ...other, cid: c2 }, c2);
    const [ok] = await replies('test:replies:3', 1);
    expect(ok.ok).to.equal(true);
    expect(await redis.xpending(`cmd:{${p}}`, 'actors')).to.deep.include(0);
  });

  it('a commit by a process that no longer owns the lease is refused (fencing)', async () => {
    const cid = newContentKey();
    const p = partitionOf(cid, P);
    await redis.set(`lease:{${p}}`, 'someone-else', 'PX', 5000);
    const now = Date.now();
    const res = await store.commit({
      owner: 'me',
      expectedRev: 0,
      snapshot: { cid, rev: 1, type: 't', head: 'v', created: now, modified: now, committer: 'x', deleted: false, views: {}, symbolic: {}, meta: {}, aliases: [] },
      viewEvents: [],
      event: { kind: 'created', cid, rev: 1, type: 't', ts: now, userId: 'x' },
      reply: pack({}),
      commandId: newCommandId(),
    });
    expect(res).to.deep.equal({ ok: false, reason: 'lease-lost' });
    expect(await store.head(cid)).to.equal(null);
    await redis.del(`lease:{${p}}`);
  });

  it('a graceful stop hands every partition over; another host takes them all', async () => {
    const first = await startHost();
    expect(first.partitions()).to.have.length(P);
    await first.stop();
    host = undefined;
    for (let p = 0; p < P; p++) expect(await redis.get(`lease:{${p}}`)).to.equal(null);
    const second = await startHost();
    expect(second.partitions()).to.deep.equal([0, 1, 2, 3]);
  });

  it('two hosts share the partitions fairly', async () => {
    const a = await startHost();
    const b = new ActorHost<ContentCommand>(client, s, new ContentActor(store, loadSecurityConfig()), createLogger('silent'));
    await b.start();
    try {
      await waitFor(async () => (a.partitions().length === P / 2 && b.partitions().length === P / 2 ? true : null), 10000);
      expect([...a.partitions(), ...b.partitions()].sort()).to.deep.equal([0, 1, 2, 3]);
    } finally {
      await b.stop();
    }
  });
});

describe('gateway without actors (ARCHITECTURE principle 6)', function () {
  this.timeout(20000);
  it('a write answers 503 with Retry-After and statusCode 50300 when no actor answers in time', async () => {
    const p = await startTestPlatform({ ACTOR_REPLY_TIMEOUT_MS: '500', PARTITIONS: '3' }, ['web']);
    try {
      const c = await new Client(p.base).login('editor');
      const r = await c.create(article('nobody home'));
      expect(r.status).to.equal(503);
      expect(r.headers.get('retry-after')).to.equal('1');
      expect(r.json.statusCode).to.equal('50300');
    } finally {
      await p.stop();
    }
  });
});
