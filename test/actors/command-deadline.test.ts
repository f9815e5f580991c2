import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { loadSettings } from '../../config/settings.js';
import { pack, unpack } from '../../src/adapters/codec.js';
import { ContentStore } from '../../src/adapters/content-store.js';
import { newCommandId, newContentKey, partitionOf } from '../../src/adapters/ids.js';
import { createLogger } from '../../src/adapters/log.js';
import { connectRedis } from '../../src/adapters/redis.js';
import { ContentActor, type ContentCommand } from '../../src/actors/content/content-actor.js';
import type { LifecycleHook } from '../../src/actors/content/lifecycle-hooks.js';
import { ActorHost } from '../../src/actors/runtime.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { loadSecurityConfig } from '../../src/security/security-config.js';
import type { Answer } from '../../src/client/index.js';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { valueWithin } from '../support/wait.js';
import { repliesOn } from '../support/replies.js';

/**
 * A command's deadline (security hunt F2): the gateway sets it when it sends a command (sent +
 * ACTOR_REPLY_TIMEOUT_MS) and answers 503 only after it (plus ACTOR_DEADLINE_GRACE_MS); an
 * actor refuses a command past it before doing anything with it, and a main write once more
 * just before its commit. So a 503 means "not applied": a queued write does not commit later
 * with the principal (and file approvals) it was sent with, after its token was revoked, its
 * password changed or its roles removed, and a client that retries after the 503 applies its
 * write once. Crash recovery within the deadline is test/actors/crash-recovery.test.ts.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PARTITIONS = 4;
const TIMEOUT_MS = 1000;
const GRACE_MS = 300;
const PASSWORD = 'deadline-password-1';

const until = valueWithin;

const sportsOwned = (title: string) => ({
  ...article(title),
  operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
});

/** The title of every revision of a content, revision 1 first. */
async function titles(c: Client, id: string): Promise<string[]> {
  const head = await c.readContent(id);
  expect(head.status, head.text).to.equal(200);
  const rev = Number(/\/(\d+)"$/.exec(head.headers.get('etag')!)![1]);
  const out: string[] = [];
  for (let i = 1; i <= rev; i++) {
    const v = await c.req('GET', `/content/alias/${id}/${i}`);
    expect(v.status, v.text).to.equal(200);
    out.push(v.json.aspects.body.title);
  }
  return out;
}

function expect503(r: Answer, what: string): void {
  expect(r.status, `${what}: ${r.text}`).to.equal(503);
  expect(r.json.statusCode, what).to.equal('50300');
  expect(r.headers.get('retry-after'), what).to.equal('1');
}

/** Stream commands not yet run (nor acknowledged): the partitions' entries past the group's last read, and pending ones. */
async function queuedCommands(redis: Redis, partitions = PARTITIONS): Promise<ContentCommand[]> {
  const out: ContentCommand[] = [];
  for (let p = 0; p < partitions; p++) {
    const groups = (await redis.xinfo('GROUPS', `cmd:{${p}}`).catch(() => [])) as unknown[][];
    const group = groups.find((g) => g[1] === 'actors');
    const last = group ? String(group[group.indexOf('last-delivered-id') + 1]) : '0-0';
    const rows = (await redis.xrangeBuffer(`cmd:{${p}}`, `(${last}`, '+')) as [Buffer, Buffer[]][];
    for (const [, f] of rows) out.push(unpack<ContentCommand>(f[1]));
  }
  return out;
}

describe('command deadline: a write answered 503 is never applied later (fleet: web and actors as separate processes; security hunt F2)', function () {
  this.timeout(120_000);
  let server: RedisServerHandle;
  let redis: Redis;
  let web: P;
  let filesDir: string;
  const children: ChildProcess[] = [];
  const killAll = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };

  /** `node --import tsx src/main.ts actors` on the private Redis: the Procfile's actors role. */
  function actorProcess(): ChildProcess {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'actors'], {
      env: {
        ...process.env,
        REDIS_URL: server.url,
        PARTITIONS: String(PARTITIONS),
        LEASE_MS: '1000',
        FILES_DIR: filesDir,
        ACTOR_REPLY_TIMEOUT_MS: String(TIMEOUT_MS),
        ACTOR_DEADLINE_GRACE_MS: String(GRACE_MS),
        LOG_LEVEL: process.env.TEST_LOG ?? 'error',
      },
      stdio: ['ignore', process.env.TEST_LOG ? 'inherit' : 'ignore', 'inherit'],
    });
    children.push(child);
    return child;
  }
  const ownsAll = (child: ChildProcess) =>
    until(
      async () => {
        const owners = await Promise.all(Array.from({ length: PARTITIONS }, (_, i) => redis.get(`lease:{${i}}`)));
        return owners.every((o) => o !== null && Number(o.split(':')[1]) === child.pid);
      },
      30_000,
      `actor process ${child.pid} to own every partition`,
    );
  const stopped = (child: ChildProcess) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });

  before(async function () {
    this.timeout(60_000);
    process.once('exit', killAll);
    filesDir = mkdtempSync(join(tmpdir(), 'test-deadline-'));
    server = await startRedisServer({ appendonly: false });
    redis = new Redis(server.url);
    web = await startTestPlatform(
      {
        REDIS_URL: server.url,
        PARTITIONS: String(PARTITIONS),
        LEASE_MS: '1000',
        ACTOR_REPLY_TIMEOUT_MS: String(TIMEOUT_MS),
        ACTOR_DEADLINE_GRACE_MS: String(GRACE_MS),
      } as Record<string, string>,
      ['web'],
    );
  });
  after(async function () {
    this.timeout(30_000);
    await Promise.all(children.map(stopped));
    process.removeListener('exit', killAll);
    await web?.stop();
    redis?.disconnect();
    await server?.stop();
    if (filesDir) rmSync(filesDir, { recursive: true, force: true });
  });

  it('three sports editors answered 503 (actors down), then a token revoked, a password changed, roles removed: a new actors process commits none; a client retry applies once', async () => {
    const first = actorProcess();
    await ownsAll(first);
    const editor = await new Client(web.base).login('editor');
    const run = Date.now().toString(36);
    const names = ['revoked', 'repassworded', 'unroled', 'retrying'].map((n) => `${n}-${run}`);
    for (const n of names) await web.tokens!.createAccount(n, PASSWORD, { sports: ['editor'] });
    const users = await Promise.all(names.map((n) => new Client(web.base).login(n, PASSWORD)));
    const ids: string[] = [];
    for (const [i, u] of users.entries()) {
      const c = await u.create(sportsOwned(`start ${i}`));
      expect(c.status, c.text).to.equal(201);
      ids.push(c.json.system.id);
    }

    // The actors platform stops: each editor's update waits in its mailbox and is answered 503.
    await stopped(first);
    const started = Date.now();
    const answers = await Promise.all(users.map((u, i) => u.update(ids[i], article(`queued ${i}`), null)));
    const waited = Date.now() - started;
    for (const [i, r] of answers.entries()) expect503(r, names[i]);
    const queued = await queuedCommands(redis);
    expect(
      queued
        .filter((c) => c.k === 'update')
        .map((c) => c.user.userId)
        .sort(),
      'the updates still wait in the mailboxes',
    ).to.deep.equal([...names].sort());

    // The accounts change after the 503: a token revoked, a password changed, the roles removed.
    expect((await users[0].revoke()).status).to.equal(204);
    await web.tokens!.setPassword(names[1], `${PASSWORD}-new`);
    await web.tokens!.createAccount(names[2], PASSWORD, {});
    expect((await users[2].permission(names[2])).status, 'the unroled token is still valid').to.equal(200);

    // A new actors process takes the partitions (and the waiting commands) over.
    const second = actorProcess();
    await ownsAll(second);
    // The fourth editor retries its write after the 503, as Retry-After says: applied once.
    const retry = await users[3].update(ids[3], article('queued 3'), null);
    expect(retry.status, retry.text).to.equal(200);
    // A write of the editor to each of the other contents comes after the waiting command of the
    // same content (one chain per content): once answered, that command was taken.
    for (const id of ids.slice(0, 3)) {
      const r = await editor.update(id, article('after'), null);
      expect(r.status, r.text).to.equal(200);
    }

    // The revisions of each content: no queued update applied, the retried one applied once.
    expect({
      revokedToken: await titles(editor, ids[0]),
      changedPassword: await titles(editor, ids[1]),
      removedRoles: await titles(editor, ids[2]),
      retriedAfter503: await titles(editor, ids[3]),
    }).to.deep.equal({
      revokedToken: ['start 0', 'after'],
      changedPassword: ['start 1', 'after'],
      removedRoles: ['start 2', 'after'],
      retriedAfter503: ['start 3', 'queued 3'],
    });

    // Every command was taken and acknowledged; none went to the dead letters.
    expect(await queuedCommands(redis)).to.deep.equal([]);
    for (let p = 0; p < PARTITIONS; p++) {
      expect(((await redis.xpending(`cmd:{${p}}`, 'actors')) as [number])[0], `pending in cmd:{${p}}`).to.equal(0);
      expect(await redis.xlen(`dead:{${p}}`), `dead letters of partition ${p}`).to.equal(0);
    }
    expect(waited, 'the 503s came after the deadline and its grace').to.be.at.least(TIMEOUT_MS + GRACE_MS - 50);
  });
});

for (const dispatch of ['local', 'stream'] as const) {
  describe(`command deadline in one process (${dispatch} dispatch): a write queued behind a slow one (held in a lifecycle hook) while its user's roles were removed`, function () {
    this.timeout(60_000);
    let server: RedisServerHandle;
    let p: P;
    let entered: () => void = () => undefined;
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const inHook = new Promise<void>((r) => {
      entered = r;
    });
    const hook: LifecycleHook = {
      name: 'slow',
      async beforeUpdate(ctx) {
        if ((ctx.aspects.body as { title?: string } | null)?.title !== 'slow') return;
        entered();
        await held;
      },
    };

    before(async () => {
      server = await startRedisServer({ appendonly: false });
      p = await startTestPlatform(
        {
          REDIS_URL: server.url,
          PARTITIONS: String(PARTITIONS),
          ACTOR_REPLY_TIMEOUT_MS: String(TIMEOUT_MS),
          ACTOR_DEADLINE_GRACE_MS: String(GRACE_MS),
          LOCAL_DISPATCH: dispatch === 'local' ? 'true' : 'false',
        } as Record<string, string>,
        undefined,
        undefined,
        [hook],
      );
    });
    after(async () => {
      release();
      await p?.stop();
      await server?.stop();
    });

    const title =
      dispatch === 'local'
        ? 'is not applied (503); the slow one, started in time, commits and is answered 200; the content goes on'
        : 'is not applied (503), nor is the slow one, held past its deadline (503); the content goes on';
    it(title, async () => {
      const name = `sports-${dispatch}-${Date.now().toString(36)}`;
      await p.tokens!.createAccount(name, PASSWORD, { sports: ['editor'] });
      const user = await new Client(p.base).login(name, PASSWORD);
      const editor = await new Client(p.base).login('editor');
      const c = await user.create(sportsOwned('start'));
      expect(c.status, c.text).to.equal(201);
      const id: string = c.json.system.id;

      const slow = user.update(id, article('slow'), null);
      await inHook;
      const queued = user.update(id, article('queued'), null);
      await sleep(100);
      await p.tokens!.createAccount(name, PASSWORD, {}); // the roles removed
      await sleep(TIMEOUT_MS + GRACE_MS + 200);
      release();
      const [s, q] = await Promise.all([slow, queued]);
      expect503(q, 'the queued write');
      // The slow write was started (and its permission checked) before its deadline. Its gateway
      // stops waiting at the deadline only when it sent it through the streams: then it must not
      // commit after the 503. A gateway that handed it to its own process's actor waits for it.
      if (dispatch === 'stream') expect503(s, 'the slow write, held past its deadline');
      else expect(s.status, s.text).to.equal(200);
      // Once the editor's write is answered, every earlier command of the content was taken.
      const after = await editor.update(id, article('after'), null);
      expect(after.status, after.text).to.equal(200);
      expect(await titles(editor, id)).to.deep.equal(dispatch === 'stream' ? ['start', 'after'] : ['start', 'slow', 'after']);
    });
  });
}

describe('command deadline: the actor runtime and the gateway (security hunt F2)', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  let redis: Redis;
  let host: ActorHost<ContentCommand> | undefined;
  const P = 2;
  /** Long, so that "within the grace" holds on a loaded machine. */
  const HOST_GRACE_MS = 60_000;
  const editor = { userId: 'editor', contexts: { __global__: ['editor'] } };
  let store: ContentStore;
  let client: ReturnType<typeof connectRedis>;
  let streams = 0;

  before(async () => {
    server = await startRedisServer({ appendonly: false });
    redis = new Redis(server.url);
    const s = loadSettings({ ...process.env, REDIS_URL: server.url, PARTITIONS: String(P), LEASE_MS: '1000', ACTOR_DEADLINE_GRACE_MS: String(HOST_GRACE_MS) });
    client = connectRedis(s);
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

  const create = (deadline: number | undefined, title = 'x'): ContentCommand => ({
    k: 'create',
    id: newCommandId(),
    cid: newContentKey(),
    replyTo: `test:replies:${++streams}`,
    user: editor,
    type: 'article',
    aspects: { body: { _type: 'body', title } },
    ops: [{ _type: 'svcSetAlias', namespace: 'deadline', alias: `a${streams}` }],
    ...(deadline === undefined ? {} : { deadline }),
  });
  const aliasOf = (cmd: ContentCommand) => (cmd as { ops: { alias: string }[] }).ops[0].alias;
  const append = async (cmd: ContentCommand) => redis.xadd(`cmd:{${partitionOf(cmd.cid, P)}}`, '*', 'm', pack(cmd));
  const replies = (stream: string, n: number) => repliesOn(redis, stream, n);
  /** Once a later command of the same partition is answered, every earlier one was taken. */
  const drained = async (cmd: ContentCommand) => {
    for (;;) {
      const later = create(undefined, 'later');
      if (partitionOf(later.cid, P) !== partitionOf(cmd.cid, P)) continue;
      await append(later);
      await replies(later.replyTo!, 1);
      return;
    }
  };

  it('a stream command past its deadline is refused with the 503 within the grace, unanswered later, commits nothing; without a deadline or before it, it runs', async () => {
    const now = Date.now();
    const withinGrace = create(now - 10, 'within grace');
    const pastGrace = create(now - HOST_GRACE_MS - 5000, 'past grace');
    const inTime = create(now + 10_000, 'in time');
    const none = create(undefined, 'no deadline');
    // A workspace draft command too: the check is the runtime's, before any kind runs.
    const draft: ContentCommand = {
      k: 'wsCreate',
      id: newCommandId(),
      cid: newContentKey(),
      replyTo: `test:replies:${++streams}`,
      user: editor,
      workspace: 'deadline',
      type: 'article',
      aspects: { body: { _type: 'body', title: 'draft' } },
      ops: [],
      deadline: now - 10,
    };
    for (const c of [withinGrace, pastGrace, inTime, none, draft]) await append(c);
    const [refused] = await replies(withinGrace.replyTo!, 1);
    expect(refused.ok).to.equal(false);
    if (!refused.ok) expect(refused.error).to.include({ code: 'UNAVAILABLE', message: 'No actor answered in time', retryAfter: 1 });
    const [draftRefused] = await replies(draft.replyTo!, 1);
    expect(draftRefused.ok ? null : draftRefused.error.code).to.equal('UNAVAILABLE');
    expect(await store.draft(draft.cid, 'deadline'), 'no draft stored').to.equal(null);
    expect((await replies(inTime.replyTo!, 1))[0].ok).to.equal(true);
    expect((await replies(none.replyTo!, 1))[0].ok).to.equal(true);
    await drained(pastGrace);
    expect(await redis.xlen(pastGrace.replyTo!), 'no reply past the grace: the gateway answered 503 already').to.equal(0);
    for (const c of [withinGrace, pastGrace]) {
      expect(await store.head(c.cid), 'nothing committed').to.equal(null);
      expect(await store.resolveAlias('deadline', aliasOf(c)), 'no alias taken').to.equal(null);
    }
    for (let p = 0; p < P; p++) {
      expect(((await redis.xpending(`cmd:{${p}}`, 'actors')) as [number])[0]).to.equal(0);
      expect(await redis.xlen(`dead:{${p}}`)).to.equal(0);
    }
  });

  it('a copy of a committed command arriving past its deadline still answers the committed result', async () => {
    const cmd = create(Date.now() + 10_000, 'committed');
    await append(cmd);
    const [ok] = await replies(cmd.replyTo!, 1);
    expect(ok.ok).to.equal(true);
    await append({ ...cmd, deadline: Date.now() - 10 }); // a copy, its deadline past
    const [, again] = await replies(cmd.replyTo!, 2);
    expect(again).to.deep.equal(ok);
    expect((await store.head(cmd.cid))!.rev).to.equal(1);
  });

  it('a main write from the streams whose lifecycle hook outlasts its deadline commits nothing and frees the alias it reserved', async () => {
    const slow: LifecycleHook = {
      name: 'slow',
      beforeCreate: async () => {
        await sleep(300);
      },
    };
    const actor = new ContentActor(store, loadSecurityConfig(), [slow]);
    const cmd = create(Date.now() + 100, 'slow hook');
    const p = partitionOf(cmd.cid, P);
    const out = await actor.handle(cmd, { partition: p, owner: host!.owner, entryId: '0-1' });
    if (out === 'lease-lost') throw new Error('lease lost');
    expect(out.committed).to.equal(false);
    expect(out.reply.ok).to.equal(false);
    if (!out.reply.ok) expect(out.reply.error.code).to.equal('UNAVAILABLE');
    expect(await store.head(cmd.cid)).to.equal(null);
    expect(await store.resolveAlias('deadline', aliasOf(cmd)), 'the alias it reserved is free again').to.equal(null);
  });

  it('the gateway stamps the deadline when it sends and answers 503 only after it and its grace', async () => {
    const web = await startTestPlatform(
      { REDIS_URL: server.url, PARTITIONS: String(P), ACTOR_REPLY_TIMEOUT_MS: '400', ACTOR_DEADLINE_GRACE_MS: '600' } as Record<string, string>,
      ['web'],
    );
    await host!.stop(); // no actor answers
    host = undefined;
    try {
      const c = await new Client(web.base).login('editor');
      const sent = Date.now();
      const r = await c.create(article('nobody home'));
      const answered = Date.now();
      expect503(r, 'create without actors');
      const waiting = (await queuedCommands(redis, P)).filter((x) => x.k === 'create');
      expect(waiting).to.have.length(1);
      const deadline = waiting[0].deadline!;
      expect(deadline).to.be.a('number');
      expect(deadline, 'stamped when sent: sent + ACTOR_REPLY_TIMEOUT_MS').to.be.at.least(sent + 400);
      expect(answered, 'the 503 after the deadline and its grace').to.be.at.least(deadline + 600);
      expect(answered - sent).to.be.below(10_000);
    } finally {
      await web.stop();
    }
  });
});
