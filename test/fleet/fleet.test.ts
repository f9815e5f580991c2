import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { freePort, startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { Fleet, type FleetProcess } from '../../src/fleet.js';
import { buildDist } from '../support/build.js';
import { Client } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually, until } from '../support/wait.js';
import { newWriters, runWriters, verifyWriters } from '../support/writers.js';
import { report } from '../faults/report.js';

/**
 * The fleet (issue "scale-out", part 1): the Procfile's roles as separate processes (2 web,
 * 2 actors, 1 indexer, 1 reindexer, `src/fleet.ts`) on one Redis and one Solr. Writes go
 * through either gateway; partitions are shared by the actor processes; an actor process is
 * added, one stopped and one killed (kill -9) under load, a gateway killed, the indexer
 * killed and replaced: no acknowledged write is lost or applied twice, and every change ends
 * up searchable. Figures (what clients saw, take-over times) are printed for RELIABILITY.md.
 */

const PARTITIONS = 16;
const LEASE_MS = 2000;

describe('fleet: 2 web, 2 actors, indexer, reindexer as separate processes (issue scale-out)', function () {
  this.timeout(300_000);
  let redis: RedisServerHandle;
  let r: Redis;
  let fleet: Fleet;
  let dir: string;
  const statuses: Record<string, number> = {};

  before(async () => {
    buildDist();
    const [solr, server] = await Promise.all([ensureTestSolr(), startRedisServer({})]);
    redis = server;
    r = new Redis(redis.url);
    dir = mkdtempSync(join(tmpdir(), 'test-fleet-'));
    fleet = new Fleet({
      env: {
        REDIS_URL: redis.url,
        SOLR_URL: solr,
        FILES_DIR: dir,
        PARTITIONS: String(PARTITIONS),
        LEASE_MS: String(LEASE_MS),
        LOG_LEVEL: 'warn',
        NODE_ENV: 'test',
      },
      basePort: 0,
      entry: 'dist/src/main.js',
      output: (name, line) => process.env.TEST_LOG && console.log(name, line),
    });
    for (let i = 0; i < 2; i++) fleet.add('web', { PORT: String(await freePort()) });
    fleet.add('actors');
    fleet.add('actors');
    fleet.add('indexer');
    fleet.add('reindexer');
    await fleet.ready();
  });
  after(async () => {
    await fleet?.stopAll();
    r?.disconnect();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const webs = () => fleet.processes.filter((p) => p.role === 'web');
  const actors = () => fleet.processes.filter((p) => p.role === 'actors');
  /** pid → partitions it holds the lease of. */
  async function owners(): Promise<Map<number, number>> {
    const values = await Promise.all(Array.from({ length: PARTITIONS }, (_, i) => r.get(`lease:{${i}}`)));
    const m = new Map<number, number>();
    for (const v of values) {
      const pid = v === null ? 0 : Number(v.split(':')[1]);
      m.set(pid, (m.get(pid) ?? 0) + 1);
    }
    return m;
  }
  const clientOf = async (web: FleetProcess) => new Client(`${web.url}/content-service`).login('editor');

  const gateways = (tokens: Map<string, string>) => () =>
    webs()
      .filter((p) => p.child.exitCode === null && p.child.signalCode === null)
      .map((p) => ({ base: `${p.url}/content-service`, token: tokens.get(p.name)! }));

  it('writes through either gateway are read through the other; the actor processes share the partitions', async () => {
    const [a, b] = await Promise.all(webs().map(clientOf));
    for (let i = 0; i < 10; i++) {
      const [w, other] = i % 2 ? [a, b] : [b, a];
      const c = await w.create({ system: { contentType: 'article' }, aspects: { body: { title: `x${i}` } } });
      expect(c.status, c.text).to.equal(201);
      expect((await other.read(`/content/alias/${c.json.system.id}`)).json.aspects.body.title).to.equal(`x${i}`);
    }
    // a token issued by one gateway works at the other
    expect((await new Client(b.base, a.token).read('/security/permission/editor')).status).to.equal(200);
    // the second process to join takes its half from the first within a few heartbeats
    const pids = actors().map((p) => p.child.pid!);
    await until(
      async () => {
        const o = await owners();
        return pids.every((pid) => o.get(pid) === PARTITIONS / 2);
      },
      20_000,
      'each actor process to hold half of the partitions',
    );
  });

  it('an actor process added, one stopped and one killed (kill -9) under load: partitions move, no write lost or duplicated', async () => {
    const clients = await Promise.all(webs().map(clientOf));
    const tokens = new Map(webs().map((w, i) => [w.name, clients[i].token!]));
    const writers = await newWriters(clients[0], 12);
    const l = runWriters(writers, gateways(tokens), statuses);
    const log: string[] = [];
    await until(async () => l.count() > 100, 20_000, 'load to start');

    const added = fleet.add('actors');
    let t = Date.now();
    // shares are ceil(P / members): 6, 6 and the 4 left for the newcomer
    await until(
      async () => ((await owners()).get(added.child.pid!) ?? 0) >= PARTITIONS - 2 * Math.ceil(PARTITIONS / 3),
      30_000,
      'the new actor process to take its share',
    );
    log.push(`actor process added: holds its share after ${Date.now() - t} ms`);

    const [first, second] = actors();
    const firstPid = first.child.pid!;
    t = Date.now();
    await fleet.stop(first);
    await until(async () => !(await owners()).has(firstPid) && !(await owners()).has(0), 30_000, "the stopped process's partitions to be taken over");
    log.push(`actor process stopped (SIGTERM): its partitions taken over ${Date.now() - t} ms after the signal`);

    const secondPid = second.child.pid!;
    t = Date.now();
    await fleet.kill(second);
    await until(async () => !(await owners()).has(secondPid) && !(await owners()).has(0), 30_000, "the killed process's partitions to be taken over");
    log.push(`actor process killed (SIGKILL): its partitions taken over ${Date.now() - t} ms after the kill`);
    const before = l.count();
    await until(async () => l.count() > before + 100, 30_000, 'writes to go on');
    await l.stop();

    expect([...(await owners()).keys()]).to.deep.equal([added.child.pid!]);
    const revisions = await verifyWriters(writers, clients[0]);
    const acked = writers.reduce((s, w) => s + w.acked.length, 0);
    const unknown = writers.reduce((s, w) => s + w.unknown.length, 0);
    log.push(`writes: ${acked} acknowledged, ${unknown} without an answer, ${revisions} revisions; client statuses ${JSON.stringify(statuses)}`);
    report('fleet-actors', { command: 'npm test -- test/fleet/fleet.test.ts', events: log, statuses: { ...statuses } });
    expect(acked).to.be.above(200);
  });

  it('a gateway killed (kill -9) under load: the other serves on, nothing acknowledged is lost', async () => {
    const clients = await Promise.all(webs().map(clientOf));
    const tokens = new Map(webs().map((w, i) => [w.name, clients[i].token!]));
    const writers = await newWriters(clients[0], 8);
    for (const k of Object.keys(statuses)) delete statuses[k];
    const l = runWriters(writers, gateways(tokens), statuses);
    await until(async () => l.count() > 100, 20_000, 'load to start');
    await fleet.kill(webs()[1]);
    // from here on the writers are given the surviving gateway only: what they get acknowledged
    // (200 with the revision, not any answer: a 5xx or a 409 is no write) is served by it
    const killedAt = Date.now();
    const ackedSinceKill = () => writers.reduce((s, w) => s + w.acked.filter((a) => a.at > killedAt).length, 0);
    await until(async () => ackedSinceKill() >= 200, 30_000, 'writes acknowledged through the other gateway');
    await l.stop();
    const revisions = await verifyWriters(writers, clients[0]);
    report('fleet-gateway-killed', {
      command: 'npm test -- test/fleet/fleet.test.ts',
      fault: 'web process kill -9 under write load (8 writers alternating between the two gateways)',
      statuses: { ...statuses },
      acknowledgedAfterTheKill: ackedSinceKill(),
      revisionsVerified: revisions,
    });
    expect(ackedSinceKill(), 'writes acknowledged after the kill').to.be.at.least(200);
    expect(
      writers.filter((w) => !w.acked.some((a) => a.at > killedAt)).map((w) => w.id),
      'writers with no write acknowledged after the kill',
    ).to.deep.equal([]);
    fleet.add('web', { PORT: String(await freePort()) });
    await fleet.ready();
  });

  it('the indexer killed (kill -9) under load and replaced: every change ends up searchable', async () => {
    const c = await clientOf(webs()[0]);
    const indexer = fleet.processes.find((p) => p.role === 'indexer')!;
    const made: string[] = [];
    const type = `fleet${Date.now()}`;
    const writing = (async () => {
      for (let i = 0; i < 60; i++) {
        const res = await c.create({ system: { contentType: type }, aspects: { body: { title: `i${i}` } } });
        expect(res.status).to.equal(201);
        made.push(res.json.system.version);
        if (i === 20) await fleet.kill(indexer);
      }
    })();
    await writing;
    const t = Date.now();
    fleet.add('indexer');
    const search = `${webs()[0].url}/search-service/content/select`;
    await eventually(async () => {
      const res = await c.req('GET', `${search}?${new URLSearchParams({ q: `svc_type_s:${type}`, rows: '100', fl: 'id' })}`);
      expect(res.status, res.text).to.equal(200);
      expect((res.json.response.docs as { id: string }[]).map((d) => d.id).sort()).to.deep.equal([...made].sort());
    }, 30_000);
    report('fleet-indexer-killed', {
      command: 'npm test -- test/fleet/fleet.test.ts',
      fault: 'indexer kill -9 after 21 of 60 creates, a new indexer started after the 60th',
      msFromNewIndexerToAllSearchable: Date.now() - t,
    });
  });
});
