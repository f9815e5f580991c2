import type { Answer } from '../../src/client/index.js';
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { partitionOf } from '../../src/adapters/ids.js';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { valueWithin } from '../support/wait.js';

/**
 * The crash test (ARCHITECTURE principles 1 and 3, 6): a web-only gateway in this
 * process, two actor processes of the Procfile's `actors` role as child processes, sequential
 * writes per content, and the owner of one content's partition killed with SIGKILL while
 * commands are in its hands.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const PARTITIONS = 4;
const ENV = { PARTITIONS: String(PARTITIONS), LEASE_MS: '1000' };
/** Contents per partition, so that the killed process holds several writers' commands. */
const PER_PARTITION = 2;
/** Writes per content at least; writers go on until the survivor has taken over. */
const MIN_WRITES = 12;
/** Writes per content after the take-over, at least. */
const WRITES_AFTER = 3;

interface Actor {
  child: ChildProcess;
  output: string[];
}

const _sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const until = valueWithin;

const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;

function exited(c: ChildProcess, ms: number): Promise<boolean> {
  if (!alive(c)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    c.once('exit', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

/** `node --import tsx src/main.ts actors` against the test Redis; its output kept for a failure report. */
function actorProcess(): Actor {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'actors'], {
    env: { ...process.env, ...ENV, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const keep = (b: Buffer) => {
    output.push(b.toString());
    if (output.length > 200) output.shift();
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { child, output };
}

/** Lease owner value `<hostname>:<pid>:<hex>` → pid. */
const pidOf = (owner: string | null) => (owner === null ? null : Number(owner.split(':')[1]));

interface Attempt {
  key: string;
  partition: number;
  marker: string;
  unsafe: boolean;
  start: number;
  end: number;
  status: number;
  statusCode?: string;
  retryAfter?: string | null;
  version?: string;
  rev?: number;
}

describe('actors: the owner of a partition killed (kill -9) mid-stream (ARCHITECTURE principles 1, 3, 6)', function () {
  this.timeout(120_000); // a deadline for a stuck run; every wait below polls for its condition
  let p: P;
  let editor: Client;
  let redis: Redis;
  const actors: Actor[] = [];
  let frozen: ChildProcess | undefined;
  let killedOwner: string | undefined;
  const killAll = () => {
    for (const a of actors) if (alive(a.child)) a.child.kill('SIGKILL');
  };

  const leases = () => Promise.all(Array.from({ length: PARTITIONS }, (_, i) => redis.get(`lease:{${i}}`)));

  before(async function () {
    this.timeout(30000);
    process.once('exit', killAll);
    redis = new Redis(process.env.REDIS_URL!);
    p = await startTestPlatform({ ...ENV, ACTOR_REPLY_TIMEOUT_MS: '15000' }, ['web']);
    editor = await new Client(p.base).login('editor');
    actors.push(actorProcess(), actorProcess());
    // both processes up and sharing the partitions fairly (2 each)
    await until(
      async () => {
        const pids = (await leases()).map(pidOf);
        return actors.every((a) => pids.filter((x) => x === a.child.pid).length === PARTITIONS / 2);
      },
      25000,
      'both actor processes to own half of the partitions',
    );
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') {
      for (const a of actors) console.error(`--- actor process ${a.child.pid} output ---\n${a.output.join('')}`);
    }
  });

  after(async function () {
    this.timeout(20000);
    // The survivor stops gracefully (hands its partitions over, leaves the members); anything
    // else still there (a frozen or a stuck process) is killed.
    for (const a of actors) if (alive(a.child)) a.child.kill(a.child === frozen ? 'SIGKILL' : 'SIGTERM');
    for (const a of actors) if (!(await exited(a.child, 8000))) a.child.kill('SIGKILL');
    for (const a of actors) await exited(a.child, 2000);
    process.removeListener('exit', killAll);
    await p?.stop();
    if (redis) {
      // The killed process never left the members; later test files must not count it.
      if (killedOwner) await redis.zrem('actors:members', killedOwner);
      redis.disconnect();
    }
  });

  it('every acknowledged write is in history exactly once, revisions 1..n, the survivor takes over, outage writes answer 200 or 503', async () => {
    // PER_PARTITION contents on every partition, so that the process killed owned some of them.
    const contents: { id: string; key: string; partition: number }[] = [];
    const count = new Map<number, number>();
    while (contents.length < PARTITIONS * PER_PARTITION) {
      const r = await editor.create(article('start'));
      expect(r.status, r.text).to.equal(201);
      const id: string = r.json.system.id;
      const key = id.split('/')[1];
      const part = partitionOf(key, PARTITIONS);
      if ((count.get(part) ?? 0) >= PER_PARTITION) continue;
      count.set(part, (count.get(part) ?? 0) + 1);
      contents.push({ id, key, partition: part });
    }
    const target = contents[0];
    // dead letters from earlier test files of the same run are not this test's
    const deadBefore = await Promise.all(Array.from({ length: PARTITIONS }, (_, i) => redis.xlen(`dead:{${i}}`)));

    const attempts: Attempt[] = [];
    const acked = new Map<string, number>(); // writes acknowledged per content
    let takenOverAt: number | undefined;
    const stop = { writers: false };

    const writer = async ({ id, key, partition }: (typeof contents)[number]) => {
      let etag: string | null = `W/"${key}/1"`;
      let after = 0;
      acked.set(key, 0);
      for (let i = 0; ; i++) {
        const marker = `${key}#${i}`;
        const unsafe: boolean = etag === null;
        const start = Date.now();
        // After a failure the current ETag is not known: the next write goes unsafe.
        const r: Answer = await editor.req('PUT', `/content/alias/${id}${unsafe ? '?unsafeUpdate=true' : ''}`, {
          body: article(marker),
          headers: unsafe ? {} : { 'If-Match': etag! },
        });
        const a: Attempt = {
          key,
          partition,
          marker,
          unsafe,
          start,
          end: Date.now(),
          status: r.status,
          statusCode: r.json?.statusCode,
          retryAfter: r.headers.get('retry-after'),
        };
        attempts.push(a);
        if (r.status === 200) {
          etag = r.headers.get('etag');
          a.version = r.json.system.version;
          a.rev = Number(/\/(\d+)"$/.exec(etag!)![1]);
          acked.set(key, acked.get(key)! + 1);
        } else {
          etag = null;
        }
        if (takenOverAt !== undefined && start > takenOverAt) after++;
        // go on until the take-over is past and the last write of this content was answered
        if ((i + 1 >= MIN_WRITES && after >= WRITES_AFTER && r.status === 200) || stop.writers) return;
      }
    };

    let killedParts: number[] = [];
    let frozenAt = 0;
    let killedAt = 0;
    let pendingAtKill = 0;
    let survivor: ChildProcess | undefined;

    const killer = async () => {
      // writes under way on every content first
      await until(async () => [...acked.values()].length === contents.length && [...acked.values()].every((n) => n >= 3), 15000, 'writes to get going');
      const before = await leases();
      killedOwner = before[target.partition]!;
      const victim = actors.find((a) => a.child.pid === pidOf(killedOwner!))!;
      expect(victim, `the owner ${killedOwner} is one of the actor processes`).to.not.equal(undefined);
      survivor = actors.find((a) => a !== victim)!.child;
      killedParts = before.flatMap((o, i) => (o === killedOwner ? [i] : []));
      expect(killedParts).to.have.length(PARTITIONS / 2);

      // Freeze it first, so that the crash lands with commands in its hands: Redis hands new
      // commands to its blocked XREADGROUP (pending under its consumer name), which it never
      // processes. Then kill -9. A freeze between two reads gets no command handed to it: then
      // thaw it and freeze it again, until commands are pending under its name.
      frozen = victim.child;
      const pendingOfVictim = async () => {
        let n = 0;
        for (const part of killedParts) {
          const rows = (await redis.xpending(`cmd:{${part}}`, 'actors', '-', '+', 1000, killedOwner!)) as unknown[];
          n += rows.length;
        }
        return n;
      };
      pendingAtKill = await until(
        async () => {
          victim.child.kill('SIGSTOP');
          frozenAt = Date.now();
          const n = await until(async () => (await pendingOfVictim()) || null, 3000, 'commands pending under the frozen owner').catch(() => 0);
          if (!n) victim.child.kill('SIGCONT');
          return n || null;
        },
        30_000,
        'commands pending under the frozen owner',
      );
      victim.child.kill('SIGKILL');
      killedAt = Date.now();
      await exited(victim.child, 5000);

      // The survivor takes every partition of the dead one over: the leases name it now.
      await until(
        async () => {
          const now = await leases();
          return now.every((o) => pidOf(o) === survivor!.pid) || null;
        },
        15000,
        'the survivor to own every partition',
      );
      takenOverAt = Date.now();
    };

    const killing = killer().catch((e) => {
      stop.writers = true;
      throw e;
    });
    await Promise.all([...contents.map(writer), killing]);

    const outage = takenOverAt! - frozenAt;
    const tally: Record<number, number> = {};
    for (const a of attempts) tally[a.status] = (tally[a.status] ?? 0) + 1;
    if (process.env.TEST_VERBOSE) console.log({ statuses: tally, pendingAtKill, outageMs: outage, killedParts, writes: attempts.length });

    // 1. Never a server error other than 503; a 503 carries Retry-After and 50300.
    expect(
      attempts.filter((a) => a.status !== 200 && a.status !== 503),
      'only 200 or 503 answers',
    ).to.deep.equal([]);
    for (const a of attempts.filter((x) => x.status === 503)) {
      expect(a.statusCode).to.equal('50300');
      expect(a.retryAfter).to.match(/^\d+$/);
    }

    // 2. Writes were sent to the dead owner's partitions during the outage, and answered 200 or 503.
    const duringOutage = attempts.filter((a) => killedParts.includes(a.partition) && a.start < takenOverAt! && a.end > frozenAt);
    expect(duringOutage.length, 'writes to the killed partitions during the outage').to.be.greaterThan(0);
    for (const a of duringOutage) expect([200, 503]).to.include(a.status);
    // and the crash did land with commands in the dead owner's hands (recovered by XAUTOCLAIM)
    expect(pendingAtKill, 'commands pending under the killed owner when it died').to.be.greaterThan(0);

    // 3. The survivor took the dead one's partitions over.
    const after = await leases();
    for (const part of killedParts) expect(pidOf(after[part]), `lease of partition ${part}`).to.equal(survivor!.pid);

    // 4. Every mailbox is drained: nothing pending, nothing dead-lettered.
    for (let i = 0; i < PARTITIONS; i++) {
      const summary = (await redis.xpending(`cmd:{${i}}`, 'actors')) as [number, ...unknown[]];
      expect(summary[0], `pending in cmd:{${i}}`).to.equal(0);
      expect(await redis.xlen(`dead:{${i}}`), `dead letters of partition ${i}`).to.equal(deadBefore[i]);
    }

    // 5. History: every acknowledged write exactly once, at its revision, revisions 1..n, in order.
    for (const { id, key } of contents) {
      const mine = attempts.filter((a) => a.key === key);
      const last = mine[mine.length - 1];
      expect(last.status, 'the last write of each content was acknowledged').to.equal(200);
      const h = await editor.read(`/content/alias/${id}/history?atLeastRevision=${last.rev}`);
      expect(h.status, h.text).to.equal(200);
      const versions: string[] = h.json.versions.map((v: { version: string }) => v.version);
      const revs: number[] = h.json.versions.map((v: { revision: { revisionNumber: number } }) => v.revision.revisionNumber);
      expect(new Set(versions).size, 'no version twice in history').to.equal(versions.length);
      expect(
        [...revs].sort((a, b) => a - b),
        'revisions 1..n without gaps or duplicates',
      ).to.deep.equal(Array.from({ length: revs.length }, (_, i) => i + 1));
      expect(revs.length, 'the last acknowledged write is the head').to.equal(last.rev);
      const versionAt = new Map(h.json.versions.map((v: { version: string; revision: { revisionNumber: number } }) => [v.revision.revisionNumber, v.version]));

      // What each revision holds: the marker of the write that made it.
      const markers: string[] = [];
      for (let rev = 2; rev <= revs.length; rev++) {
        const r = await editor.req('GET', `/content/alias/${id}/${rev}`);
        expect(r.status, r.text).to.equal(200);
        expect(r.json.system.version).to.equal(versionAt.get(rev));
        markers.push(r.json.aspects.body.title);
      }
      expect(new Set(markers).size, 'no write applied twice').to.equal(markers.length);
      for (const m of markers)
        expect(
          mine.map((a) => a.marker),
          `revision marker ${m} was sent`,
        ).to.include(m);
      // sequential writes land in the order they were sent
      const order = markers.map((m) => Number(m.split('#')[1]));
      expect(order, 'writes in sending order').to.deep.equal([...order].sort((a, b) => a - b));
      for (const a of mine.filter((x) => x.status === 200)) {
        expect(versions, `acknowledged ${a.version}`).to.include(a.version);
        expect(versionAt.get(a.rev!), `acknowledged ${a.marker} at revision ${a.rev}`).to.equal(a.version);
        expect(markers[a.rev! - 2], `revision ${a.rev} holds ${a.marker}`).to.equal(a.marker);
      }
    }
    expect(killedAt).to.be.greaterThan(0);
  });
});
