import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { partitionOf } from '../../src/adapters/ids.js';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const PARTITIONS = 4;
const ENV = { PARTITIONS: String(PARTITIONS), LEASE_MS: '1000' };

/** Log messages of each actor process, by pid. */
const logs = new Map<number, { msg: string; partition?: number; recovered?: number }[]>();

/** An actor process of the Procfile's `actors` role, against the test Redis. */
function actorProcess(): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'actors'], {
    env: { ...process.env, ...ENV, LOG_LEVEL: 'debug' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const mine: { msg: string }[] = [];
  logs.set(child.pid!, mine);
  let rest = '';
  child.stdout!.on('data', (b: Buffer) => {
    const text = rest + b.toString();
    const parts = text.split('\n');
    rest = parts.pop()!;
    for (const l of parts) {
      try {
        mine.push(JSON.parse(l));
      } catch {
        // not a log line
      }
    }
  });
  return child;
}


describe('actors: an owner killed mid-stream (ARCHITECTURE principle 3)', function () {
  this.timeout(90000);
  let p: P;
  let editor: Client;
  let redis: Redis;
  const children: ChildProcess[] = [];

  before(async () => {
    redis = new Redis(process.env.REDIS_URL!);
    p = await startTestPlatform({ ...ENV, ACTOR_REPLY_TIMEOUT_MS: '20000' }, ['web']);
    editor = await new Client(p.base).login('editor');
    children.push(actorProcess(), actorProcess());
    const pids = () => children.map((c) => String(c.pid));
    await until(async () => {
      const owners = await Promise.all(Array.from({ length: PARTITIONS }, (_, i) => redis.get(`lease:{${i}}`)));
      return owners.every((o) => o && pids().includes(o.split(':')[1]));
    }, 30000, 'both actor processes to own the partitions');
  });

  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await p?.stop();
    redis.disconnect();
  });

  it('every acknowledged write is in history exactly once, no revision skipped or doubled, the survivor takes over', async () => {
    // One content per partition, so that the killed process owned some of them.
    const contents: { id: string; key: string }[] = [];
    const seen = new Set<number>();
    while (seen.size < PARTITIONS) {
      const r = await editor.create(article('start'));
      expect(r.status).to.equal(201);
      const key = r.json.system.id.split('/')[1];
      const part = partitionOf(key, PARTITIONS);
      if (seen.has(part)) continue;
      seen.add(part);
      contents.push({ id: r.json.system.id, key });
    }

    const statuses: number[] = [];
    const acknowledged = new Map<string, string[]>();
    const UPDATES = 30;
    let killed: number | undefined;

    const writer = async ({ id, key }: { id: string; key: string }) => {
      const acks: string[] = [];
      acknowledged.set(key, acks);
      let etag: string | null = `W/"${key}/1"`;
      for (let i = 0; i < UPDATES; i++) {
        const r = await editor.req('PUT', `/content/alias/${id}`, { body: article(`u${i}`), headers: etag ? { 'If-Match': etag } : {} });
        statuses.push(r.status);
        if (r.status === 200) {
          acks.push(r.json.system.version);
          etag = r.headers.get('etag');
        } else {
          // 503 (no answer in time) or 409 (a replay of our own write landed): learn the current revision
          const head = await editor.req('GET', `/content/alias/${id}`);
          etag = `W/"${key}/${head.headers.get('location')!.split('/').pop()}"`;
        }
      }
    };

    const killer = async () => {
      await until(async () => [...acknowledged.values()].every((a) => a.length >= 8), 30000, 'writes to get going');
      let owner: string | null = null;
      await until(async () => (owner = await redis.get(`lease:{${partitionOf(contents[0].key, PARTITIONS)}}`)) !== null, 5000, 'an owner');
      killed = Number(owner!.split(':')[1]);
      const child = children.find((c) => c.pid === killed)!;
      expect(child, 'the owner is one of the actor processes').to.not.equal(undefined);
      child.kill('SIGKILL');
    };

    await Promise.all([...contents.map(writer), killer()]);

    if (process.env.TEST_VERBOSE) console.log('statuses', JSON.stringify(statuses.reduce<Record<number, number>>((m, s) => ({ ...m, [s]: (m[s] ?? 0) + 1 }), {})));
    expect(statuses.filter((s) => s >= 500 && s !== 503), 'no server errors but 503').to.deep.equal([]);
    expect(statuses.filter((s) => s === 200).length).to.be.greaterThan(PARTITIONS * UPDATES * 0.8);

    for (const { id, key } of contents) {
      const h = await editor.read(`/content/alias/${id}/history`);
      const versions: string[] = h.json.versions.map((v: { version: string }) => v.version);
      const revs: number[] = h.json.versions.map((v: { revision: { revisionNumber: number } }) => v.revision.revisionNumber);
      expect(new Set(versions).size, 'no version twice').to.equal(versions.length);
      expect(revs, 'revisions 1..n without gaps').to.deep.equal(Array.from({ length: revs.length }, (_, i) => i + 1));
      for (const v of acknowledged.get(key)!) expect(versions, `acknowledged ${v}`).to.include(v);
    }

    const survivor = children.find((c) => c.pid !== killed)!;
    await until(async () => {
      const owners = await Promise.all(Array.from({ length: PARTITIONS }, (_, i) => redis.get(`lease:{${i}}`)));
      return owners.every((o) => o !== null && Number(o.split(':')[1]) === survivor.pid);
    }, 10000, 'the survivor to own every partition');
    // It took the dead owner's partitions over, the one written to mid-stream among them.
    const taken = logs.get(survivor.pid!)!.filter((l) => l.msg === 'partition taken').map((l) => l.partition);
    expect(taken).to.include(partitionOf(contents[0].key, PARTITIONS));
  });
});
