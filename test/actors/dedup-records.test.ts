import { expect } from 'chai';
import { Redis } from 'ioredis';
import { loadSettings, type Settings } from '../../config/settings.js';
import { pack, unpack } from '../../src/adapters/codec.js';
import { ContentStore } from '../../src/adapters/content-store.js';
import { createLogger } from '../../src/adapters/log.js';
import { newCommandId, newContentKey, partitionOf } from '../../src/adapters/ids.js';
import { connectRedis, type RedisClient } from '../../src/adapters/redis.js';
import { ContentActor, type ContentCommand, type WriteResult } from '../../src/actors/content/content-actor.js';
import type { DraftResult } from '../../src/actors/content/workspace.js';
import { ActorHost, sendReply, type Reply } from '../../src/actors/runtime.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { loadSecurityConfig } from '../../src/security/security-config.js';
import { Client, article, startIsolatedPlatform, startTestPlatform } from '../support/platform.js';
import { repliesOn } from '../support/replies.js';

/**
 * What the commit of a stream command keeps for a replay of it (`done:{p}:<command>`, kept
 * DEDUP_TTL_SECONDS, 24 h): the outcome and where the answer is read back from, not the answer.
 * Each whole reply held the new version (or the whole draft), so small writes of a large content
 * made Redis keep the content's size per write for a day, outside the bound of SECURITY.md. A
 * replay (a copy of the command in the stream, a web process whose actor died between commit
 * and reply) still answers what the first answer was: the revision the command made, read back.
 */

const editor = { userId: 'editor', contexts: { __global__: ['editor'] } };
const FOUR_MIB = 'x'.repeat(4 * 1024 * 1024);

/** The `done:*` keys of a Redis: how many, the bytes they hold, the longest TTL left. */
async function doneKeys(redis: Redis): Promise<{ n: number; bytes: number; ttl: number }> {
  let n = 0;
  let bytes = 0;
  let ttl = 0;
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', 'done:*', 'COUNT', 1000);
    for (const k of found) {
      n++;
      bytes += await redis.strlen(k);
      ttl = Math.max(ttl, await redis.ttl(k));
    }
    cursor = next;
  } while (cursor !== '0');
  return { n, bytes, ttl };
}

describe('dedup records: what a committed write keeps for a replay (SECURITY.md, Redis per content)', function () {
  this.timeout(180_000);

  describe('their bytes, through the command streams (LOCAL_DISPATCH=false, the layout of the Procfile)', () => {
    type P = Awaited<ReturnType<typeof startIsolatedPlatform>>;
    let p: P;
    let redis: Redis;
    let client: Client;
    let id: string;

    before(async () => {
      p = await startIsolatedPlatform({ LOCAL_DISPATCH: 'false' });
      redis = new Redis(p.settings.REDIS_URL!);
      client = await new Client(p.base).login('editor');
      const c = await client.create(article('big', { text: FOUR_MIB }));
      expect(c.status, c.text.slice(0, 300)).to.equal(201);
      id = c.json.system.id;
    });
    after(async () => {
      redis?.disconnect();
      await p?.stop();
    });

    it('20 updates of a few bytes on a 4 MiB content add under 100 KB of done:* keys (each held the whole version before: 84 MB in all)', async () => {
      const before = await doneKeys(redis);
      for (let i = 0; i < 20; i++) {
        const r = await client.update(id, { aspects: { tiny: { _type: 'tiny', n: i } } }, null);
        expect(r.status, r.text.slice(0, 300)).to.equal(200);
        expect(r.json.aspects!.tiny.n).to.equal(i);
        expect(r.json.aspects!.body.text).to.have.length(FOUR_MIB.length);
      }
      const after = await doneKeys(redis);
      expect(after.n - before.n, 'one record per write').to.equal(20);
      expect(after.bytes - before.bytes, 'bytes of the records of 20 writes').to.be.below(100_000);
      expect(after.ttl, 'still kept for replays').to.be.within(1, p.settings.DEDUP_TTL_SECONDS);
    });

    it('20 draft writes of a few bytes over a 4 MiB content add under 100 KB of done:* keys (each held the whole draft before: 84 MB in all)', async () => {
      const before = await doneKeys(redis);
      for (let i = 0; i < 20; i++) {
        const r = await client.req('PUT', `/content/workspace/desk/alias/${id}`, { body: { aspects: { tiny: { _type: 'tiny', n: i } } } });
        expect(r.status, r.text.slice(0, 300)).to.equal(200);
        expect(r.json.aspects!.tiny.n).to.equal(i);
        expect(r.json.aspects!.body.text).to.have.length(FOUR_MIB.length);
      }
      const after = await doneKeys(redis);
      expect(after.n - before.n, 'one record per write').to.equal(20);
      expect(after.bytes - before.bytes, 'bytes of the records of 20 draft writes').to.be.below(100_000);
    });
  });

  describe('replays by the actors: a copy of a command in the stream answers what the command answered', () => {
    const P = 4;
    let server: RedisServerHandle;
    let s: Settings;
    let client: RedisClient;
    let redis: Redis;
    let store: ContentStore;
    let host: ActorHost<ContentCommand>;
    let streams = 0;

    before(async () => {
      server = await startRedisServer({ appendonly: false });
      s = loadSettings({ ...process.env, REDIS_URL: server.url, PARTITIONS: String(P), LEASE_MS: '1000' });
      client = connectRedis(s);
      redis = new Redis(server.url);
      store = new ContentStore(client, P, s.EVENTS_MAXLEN, s.DEDUP_TTL_SECONDS);
      host = new ActorHost<ContentCommand>(client, s, new ContentActor(store, loadSecurityConfig()), createLogger(process.env.TEST_LOG ?? 'silent'));
      await host.start();
    });
    after(async () => {
      await host?.stop();
      client?.disconnect();
      redis?.disconnect();
      await server?.stop();
    });

    const append = (cmd: ContentCommand) => redis.xadd(`cmd:{${partitionOf(cmd.cid, P)}}`, '*', 'm', pack(cmd));
    const recordOf = (cmd: ContentCommand) => redis.getBuffer(`done:{${partitionOf(cmd.cid, P)}}:${cmd.id}`);
    const replyStream = () => `test:dedup-replies:${++streams}`;
    const update = (cid: string, replyTo: string, n: number): ContentCommand => ({
      k: 'update',
      id: newCommandId(),
      cid,
      replyTo,
      user: editor,
      ifMatch: null,
      unsafe: true,
      mode: 'update',
      aspects: { tiny: { _type: 'tiny', n } },
      ops: [],
    });
    /** A content of 200 KB, created through the stream. */
    const created = async (to: string): Promise<string> => {
      const cid = newContentKey();
      await append({
        k: 'create',
        id: newCommandId(),
        cid,
        replyTo: to,
        user: editor,
        type: 'article',
        aspects: { body: { _type: 'body', title: 'replayed', text: 'y'.repeat(200_000) } },
        ops: [],
      });
      const [r] = await repliesOn(redis, to, 1);
      expect(r.ok, JSON.stringify(r).slice(0, 300)).to.equal(true);
      return cid;
    };

    it('a copy of an update, after a later update: the revision and version the update made, read back; its record holds no version', async () => {
      const to = replyStream();
      const cid = await created(to);
      const a = update(cid, to, 1);
      await append(a);
      await append(update(cid, to, 2));
      const [, first, second] = await repliesOn(redis, to, 3);
      expect(first.ok && second.ok, JSON.stringify([first, second]).slice(0, 300)).to.equal(true);
      const record = (await recordOf(a))!;
      expect(record.length, 'the record of a write of a 200 KB content').to.be.below(1000);

      await append(a);
      const [, , , copy] = await repliesOn(redis, to, 4);
      expect(copy, 'the copy answers the first answer').to.deep.equal(first);
      const value = (copy as Reply & { ok: true }).value as WriteResult;
      expect(value.snapshot.rev).to.equal(2);
      expect(value.version.aspects.tiny).to.deep.equal({ _type: 'tiny', n: 1 });
      expect((await store.head(cid))!.rev, 'the copy ran nothing').to.equal(3);
      expect(await store.versionIndex(cid)).to.have.length(3);
    });

    it('a copy of a draft write: the draft it wrote; after a later write of the same draft, the draft as it is now (a workspace keeps one per content)', async () => {
      const to = replyStream();
      const cid = await created(to);
      const draftWrite = (n: number): ContentCommand => ({
        k: 'wsUpdate',
        id: newCommandId(),
        cid,
        replyTo: to,
        user: editor,
        workspace: 'desk',
        aspects: { tiny: { _type: 'tiny', n } },
        ops: [],
        mode: 'update',
      });
      const w = draftWrite(1);
      await append(w);
      const [, first] = await repliesOn(redis, to, 2);
      expect(first.ok, JSON.stringify(first).slice(0, 300)).to.equal(true);
      expect((await recordOf(w))!.length, 'the record of a draft write of a 200 KB content').to.be.below(1000);

      await append(w);
      const [, , copy] = await repliesOn(redis, to, 3);
      expect(copy).to.deep.equal(first);

      await append(draftWrite(2));
      await append(w);
      const [, , , later, again] = await repliesOn(redis, to, 5);
      expect(later.ok).to.equal(true);
      expect(again, 'the draft the workspace holds now').to.deep.equal({ ...later, id: w.id });
      expect(((again as Reply & { ok: true }).value as DraftResult).draft.aspects.tiny).to.deep.equal({ _type: 'tiny', n: 2 });
    });

    it('a record an earlier build wrote (the whole reply) is answered as it was recorded, and nothing runs', async () => {
      const to = replyStream();
      const cid = newContentKey();
      const cmd = update(cid, to, 1);
      const whole: Reply = { id: cmd.id, ok: true, value: { recorded: 'whole', by: 'an earlier build' } };
      await redis.set(`done:{${partitionOf(cid, P)}}:${cmd.id}`, pack(whole), 'EX', 600);
      await append(cmd);
      const [r] = await repliesOn(redis, to, 1);
      expect(r).to.deep.equal(whole);
      expect(await store.head(cid)).to.equal(null);
    });
  });

  describe('replays by a web process: its actor died between the commit and the reply (Mailbox.sweepLostReplies)', () => {
    let server: RedisServerHandle;
    let p: Awaited<ReturnType<typeof startTestPlatform>>;
    let client: Client;
    let redis: Redis;
    let conn: RedisClient;
    let store: ContentStore;
    let actor: ContentActor;
    let partitions: number;

    before(async () => {
      server = await startRedisServer({ appendonly: false });
      // A web process alone: no actor answers but the one these tests play.
      p = await startTestPlatform({ REDIS_URL: server.url, LOCAL_DISPATCH: 'false' }, ['web']);
      partitions = p.settings.PARTITIONS;
      redis = new Redis(server.url);
      conn = connectRedis(p.settings);
      store = new ContentStore(conn, partitions, p.settings.EVENTS_MAXLEN, p.settings.DEDUP_TTL_SECONDS);
      actor = new ContentActor(store, loadSecurityConfig());
      for (let i = 0; i < partitions; i++) await redis.xgroup('CREATE', `cmd:{${i}}`, 'actors', '0', 'MKSTREAM');
      client = await new Client(p.base).login('editor');
    });
    after(async () => {
      await p?.stop();
      redis?.disconnect();
      conn?.disconnect();
      await server?.stop();
    });

    /** The next command any web process sent, taken from its partition's stream as an actor takes it. */
    const nextCommand = async (): Promise<{ cmd: ContentCommand; partition: number; entryId: string }> => {
      const streams = Array.from({ length: partitions }, (_, i) => `cmd:{${i}}`);
      for (;;) {
        const res = (await redis.xreadgroupBuffer('GROUP', 'actors', 'ghost', 'COUNT', 1, 'BLOCK', 1000, 'STREAMS', ...streams, ...streams.map(() => '>'))) as
          | [Buffer, [Buffer, Buffer[]][]][]
          | null;
        if (!res) continue;
        const [stream, [[entryId, fields]]] = res[0];
        return { cmd: unpack<ContentCommand>(fields[1]), partition: streams.indexOf(stream.toString()), entryId: entryId.toString() };
      }
    };
    /** Commits the next command as its actor would, recording its reply, and dies before replying. */
    const commitAndDie = async (): Promise<ContentCommand> => {
      const { cmd, partition, entryId } = await nextCommand();
      await redis.set(`lease:{${partition}}`, 'ghost', 'PX', 30_000);
      const out = await actor.handle(cmd, { partition, owner: 'ghost', entryId });
      if (out === 'lease-lost' || !out.committed) throw new Error(`not committed: ${JSON.stringify(out).slice(0, 300)}`);
      return cmd;
    };

    it('a create, then an update followed by another before the web process looks: each answered as it was written (201, 200 with its revision)', async () => {
      const creating = client.create(article('swept', { text: 'z'.repeat(100_000) }));
      await commitAndDie();
      const c = await creating;
      expect(c.status, c.text.slice(0, 300)).to.equal(201);
      expect(c.json.aspects.body.title).to.equal('swept');
      const id = c.json.system.id;
      const key = id.split('/')[1];

      const updating = client.update(id, { aspects: { tiny: { _type: 'tiny', n: 1 } } }, c.headers.get('etag'));
      const a = await commitAndDie();
      // Another write of the same content commits before the web process looks the first one up.
      const b = { ...a, id: newCommandId(), aspects: { tiny: { _type: 'tiny', n: 2 } }, ifMatch: null, unsafe: true } as ContentCommand;
      const out = await actor.handle(b, { partition: partitionOf(key, partitions), owner: 'ghost', entryId: '' });
      expect(out !== 'lease-lost' && out.committed).to.equal(true);
      const u = await updating;
      expect(u.status, u.text.slice(0, 300)).to.equal(200);
      expect(u.headers.get('etag')).to.equal(`W/"${key}/2"`);
      expect(u.json.aspects!.tiny.n).to.equal(1);
      expect(u.json.aspects!.body.text).to.have.length(100_000);
      expect((await store.head(key))!.rev).to.equal(3);
    });

    it('a draft write: answered with its draft', async () => {
      const c = client.create(article('drafted'));
      await commitAndDie();
      const id = (await c).json.system.id;
      const writing = client.req('PUT', `/content/workspace/desk/alias/${id}`, { body: { aspects: { tiny: { _type: 'tiny', n: 7 } } } });
      await commitAndDie();
      const w = await writing;
      expect(w.status, w.text.slice(0, 300)).to.equal(200);
      expect(w.json.aspects.tiny.n).to.equal(7);
      expect(w.json.aspects.body.title).to.equal('drafted');
    });

    it('a record an actor of an earlier release sends on as the reply of a copy is read back too', async () => {
      const c = client.create(article('sent on'));
      await commitAndDie();
      const id = (await c).json.system.id;
      const updating = client.update(id, { aspects: { tiny: { _type: 'tiny', n: 3 } } }, null);
      const cmd = await commitAndDie();
      // Sent at once, before the web process would look the record up itself.
      const record = (await redis.getBuffer(`done:{${partitionOf(cmd.cid, partitions)}}:${cmd.id}`))!;
      sendReply(conn, cmd.replyTo, cmd.id, record);
      const u = await updating;
      expect(u.status, u.text.slice(0, 300)).to.equal(200);
      expect(u.json.aspects!.tiny.n).to.equal(3);
      expect(u.json.aspects!.body.title).to.equal('sent on');
    });

    it('a record an earlier build wrote (the whole reply) is answered as it was recorded', async () => {
      const c = client.create(article('before the upgrade'));
      await commitAndDie();
      const created = await c;
      const id = created.json.system.id;
      const key = id.split('/')[1];
      const updating = client.update(id, { aspects: { tiny: { _type: 'tiny', n: 1 } } }, null);
      // An actor of the earlier build: it recorded the whole reply (here one that says so).
      const { cmd, partition, entryId } = await nextCommand();
      const head = (await store.head(key))!;
      const version = (await store.version(key, head.head))!;
      const value: WriteResult = { snapshot: head, version: { ...version, aspects: { body: { _type: 'body', title: 'recorded whole' } } }, subResults: [] };
      await redis.set(`done:{${partition}}:${cmd.id}`, pack({ id: cmd.id, ok: true, value } satisfies Reply), 'EX', 600);
      await redis.xack(`cmd:{${partition}}`, 'actors', entryId);
      const u = await updating;
      expect(u.status, u.text.slice(0, 300)).to.equal(200);
      expect(u.json.aspects!.body.title).to.equal('recorded whole');
    });
  });
});
