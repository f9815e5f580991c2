/**
 * Taxonomy completion latency (issue 7: p99 under 20 ms on 10,000 entities). Starts its own Redis
 * and the platform (one process, no Solr: an enumerable dimension is completed from its
 * definitions), defines one dimension with N entities (N/100 parents of 100 children each), then
 * sends completion requests one after another and prints p50/p99/p999.
 *   node --import tsx bench/taxonomy-completion.ts [N, default 10000] [requests, default 3000]
 * With BENCH_URL set (a running gateway; `npm run bench` sets it), it defines the dimension there
 * instead of starting its own platform.
 */
import { loadSettings } from '../config/settings.js';
import { createLogger } from '../src/adapters/log.js';
import { startRedisServer } from '../src/dev/redis-server.js';
import { startPlatform } from '../src/main.js';

const N = Number(process.argv[2] ?? 10000);
const REQUESTS = Number(process.argv[3] ?? 3000);
const EXTERNAL = process.env.BENCH_URL;
const redis = EXTERNAL ? null : await startRedisServer({});
const settings = redis ? loadSettings({ ...process.env, PORT: '0', REDIS_URL: redis.url, SOLR_URL: 'http://127.0.0.1:1/solr', LOG_LEVEL: 'warn' }) : null;
const p = settings ? await startPlatform({ settings, log: createLogger('warn') }) : { url: EXTERNAL!.replace(/\/+$/, ''), stop: async () => undefined };
const base = `${p.url}/content-service`;
const token = (
  (await (
    await fetch(`${base}/security/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: 'editor', password: 'editor' }),
    })
  ).json()) as { token: string }
).token;
const headers = { 'Content-Type': 'application/json', 'X-Auth-Token': token };
const WORDS = [
  'alpha',
  'beta',
  'gamma',
  'delta',
  'epsilon',
  'zeta',
  'eta',
  'theta',
  'iota',
  'kappa',
  'lambda',
  'mu',
  'nu',
  'xi',
  'omicron',
  'pi',
  'rho',
  'sigma',
  'tau',
  'upsilon',
];
const nameOf = (i: number) => `${WORDS[i % 20]} ${WORDS[Math.floor(i / 20) % 20]} ${i}`;

async function define(kind: 'Dimension' | 'Entity', aspect: Record<string, unknown>): Promise<void> {
  const r = await fetch(`${base}/content`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      system: { contentType: `svc${kind}DefinitionContent` },
      aspects: { [`svc${kind}Definition`]: aspect },
      operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: aspect.id }],
    }),
  });
  if (r.status !== 201) throw new Error(`define ${aspect.id}: ${r.status} ${await r.text()}`);
}

try {
  const t0 = Date.now();
  await define('Dimension', { id: 'bench', name: 'Bench', enumerable: true, localizations: {} });
  const parents = Math.max(1, Math.floor(N / 100));
  let made = 0;
  const ids = Array.from({ length: N }, (_, i) => i);
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (ids.length) {
        const i = ids.shift()!;
        await define('Entity', { id: `e${i}`, name: nameOf(i), localizations: {}, parent: i < parents ? 'bench' : `e${i % parents}` });
        made++;
      }
    }),
  );
  console.log(`defined ${made} entities in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const inputs = ['al', 'alpha be', 'gam/del', 'sigma', 'ze et', 'k', 'pi rho', 'alpha/beta', 'omicron pi 1', 'tau up'];
  const complete = async (s: string) => {
    const r = await fetch(`${p.url}/taxonomy-service/complete/bench/${encodeURIComponent(s)}`);
    if (r.status !== 200) throw new Error(`complete ${s}: ${r.status}`);
    return ((await r.json()) as { entities: unknown[] }).entities.length;
  };
  await complete('al'); // the first read loads the definitions
  const times: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now();
    await complete(inputs[i % inputs.length]);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const q = (x: number) => times[Math.min(times.length - 1, Math.floor(x * times.length))].toFixed(2);
  console.log(`completion on ${N} entities, ${REQUESTS} requests one at a time: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, p999 ${q(0.999)} ms (budget p99 < 20 ms)`);
  console.log(`RESULT ${JSON.stringify({ workload: 'taxonomy completion', entities: N, requests: REQUESTS, p50: +q(0.5), p99: +q(0.99), p999: +q(0.999) })}`);
} finally {
  await p.stop();
  await redis?.stop();
}
process.exit(0);
