import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServerHandle } from '../../src/adapters/redis-server.js';

const run = promisify(execFile);

export interface TestRedisCluster {
  /** `host:port,...` for REDIS_CLUSTER_NODES. */
  nodes: string;
  servers: RedisServerHandle[];
  /** Moves `slots` hash slots from the first master to the second while the cluster serves (MOVED/ASK for clients). */
  reshard(slots: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A real Redis Cluster of `masters` masters (no replicas) from Debian's redis-server, each on a
 * free port with its own directory, created with `redis-cli --cluster create` (STACK-NOTES:
 * cluster_state:ok in about 2 s).
 */
export async function startRedisCluster(masters = 3): Promise<TestRedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'test-redis-cluster-'));
  const servers: RedisServerHandle[] = [];
  for (let i = 0; i < masters; i++) {
    servers.push(await startRedisServer({ dir: join(dir, `n${i}`), extraArgs: ['--cluster-enabled', 'yes', '--cluster-node-timeout', '2000'] }));
  }
  const addrs = servers.map((s) => `127.0.0.1:${s.port}`);
  await run('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-replicas', '0', '--cluster-yes']);
  const ok = async () => {
    for (const s of servers) {
      const c = new Redis(s.port, '127.0.0.1', { lazyConnect: true });
      const info = await c.cluster('INFO').finally(() => c.disconnect());
      if (!String(info).includes('cluster_state:ok')) return false;
    }
    return true;
  };
  const deadline = Date.now() + 20_000;
  while (!(await ok())) {
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
      await run('redis-cli', ['--cluster', 'reshard', addrs[0], '--cluster-from', from, '--cluster-to', to, '--cluster-slots', String(slots), '--cluster-yes', '--cluster-pipeline', '100']);
    },
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
