import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';

const run = promisify(execFile);

export interface TestRedisCluster {
  /** `host:port,...` for REDIS_CLUSTER_NODES. */
  nodes: string;
  servers: RedisServerHandle[];
  /** Moves `slots` hash slots from the first master to the second while the cluster serves (MOVED/ASK for clients). */
  reshard(slots: number): Promise<void>;
  /** The servers that are masters now (after a failover, a promoted replica is one). */
  masters(): Promise<RedisServerHandle[]>;
  /** True when every live server reports cluster_state:ok. */
  healthy(): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * A real Redis Cluster of `masters` masters, each with `replicas` replicas, from Debian's
 * redis-server, each on a free port with its own directory, created with `redis-cli --cluster
 * create` (STACK-NOTES: cluster_state:ok in about 2 s). `nodeTimeoutMs` is how long a master
 * may be unreachable before its replica takes over.
 */
export async function startRedisCluster(masters = 3, opts: { replicas?: number; nodeTimeoutMs?: number } = {}): Promise<TestRedisCluster> {
  const replicas = opts.replicas ?? 0;
  const dir = mkdtempSync(join(tmpdir(), 'test-redis-cluster-'));
  const servers: RedisServerHandle[] = [];
  for (let i = 0; i < masters * (1 + replicas); i++) {
    servers.push(
      await startRedisServer({
        dir: join(dir, `n${i}`),
        extraArgs: ['--cluster-enabled', 'yes', '--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 2000)],
      }),
    );
  }
  const addrs = servers.map((s) => `127.0.0.1:${s.port}`);
  await run('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-replicas', String(replicas), '--cluster-yes']);
  const gone = new Set<RedisServerHandle>();
  for (const s of servers) void s.exited.then(() => gone.add(s));
  const ask = async <T>(s: RedisServerHandle, f: (c: Redis) => Promise<T>): Promise<T> => {
    const c = new Redis(s.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    return f(c).finally(() => c.disconnect());
  };
  const ok = async () => {
    for (const s of servers) {
      if (gone.has(s)) continue;
      const info = await ask(s, (c) => c.cluster('INFO'));
      if (!String(info).includes('cluster_state:ok')) return false;
    }
    return true;
  };
  // A replica that has not finished its first sync would not take over (its data is too old).
  const synced = async () => {
    for (const s of servers) {
      const info = String(await ask(s, (c) => c.info('replication')));
      if (info.includes('role:slave') && !/master_link_status:up/.test(info)) return false;
    }
    return true;
  };
  const deadline = Date.now() + 20_000;
  while (!(await ok()) || !(await synced())) {
    if (Date.now() > deadline) throw new Error('the Redis Cluster did not reach cluster_state:ok');
    await new Promise((r) => setTimeout(r, 200));
  }
  const idOf = async (port: number) => {
    const c = new Redis(port, '127.0.0.1', { lazyConnect: true });
    return (await c.cluster('MYID').finally(() => c.disconnect())) as string;
  };
  return {
    nodes: addrs.join(','),
    servers,
    async reshard(slots: number) {
      const [from, to] = await Promise.all([idOf(servers[0].port), idOf(servers[1].port)]);
      await run('redis-cli', [
        '--cluster',
        'reshard',
        addrs[0],
        '--cluster-from',
        from,
        '--cluster-to',
        to,
        '--cluster-slots',
        String(slots),
        '--cluster-yes',
        '--cluster-pipeline',
        '100',
      ]);
    },
    async masters() {
      const live = servers.filter((s) => !gone.has(s));
      const roles = await Promise.all(live.map((s) => ask(s, (c) => c.call('ROLE') as Promise<unknown[]>)));
      return live.filter((_, i) => roles[i][0] === 'master');
    },
    healthy: ok,
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
