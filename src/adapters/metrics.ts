import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { keys, ACTOR_GROUP, type RedisClient } from './redis.js';

interface PartitionRow {
  p: string;
  depth: number;
  pending: number;
  dead: number;
  lag: number;
}

/**
 * Prometheus metrics of one process, served at GET /metrics. Request metrics are recorded on
 * the hot path (a counter and a histogram observation); queue depths are read from Redis only
 * when scraped, once per scrape for all the per-partition gauges.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: 'http_requests_total', help: 'HTTP requests by route, method and status', labelNames: ['route', 'method', 'status'] as const, registers: [this.registry] });
  readonly latency = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by route',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private scrape?: { at: number; rows: Promise<PartitionRow[]> };
  /** Label children by route/method/status: looking labels up is most of an observation's cost. */
  private readonly children = new Map<string, { count: { inc(): void }; time: { observe(v: number): void } }>();

  /** Counts one answered request and its latency (seconds). */
  observe(route: string, method: string, status: number, seconds: number): void {
    const key = `${route} ${method} ${status}`;
    let c = this.children.get(key);
    if (!c) {
      c = { count: this.requests.labels(route, method, String(status)), time: this.latency.labels(route) };
      this.children.set(key, c);
    }
    c.count.inc();
    c.time.observe(seconds);
  }

  constructor(
    private readonly redis: RedisClient,
    private readonly partitions: number,
    inFlight: () => number,
  ) {
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: 'gateway_actor_requests_in_flight',
      help: 'Commands waiting for an actor reply in this gateway',
      registers: [this.registry],
      collect() {
        this.set(inFlight());
      },
    });
    const perPartition = (name: string, help: string, pick: (r: PartitionRow) => number) => {
      const rows = () => this.partitionRows();
      new Gauge({
        name,
        help,
        labelNames: ['partition'] as const,
        registers: [this.registry],
        async collect() {
          for (const r of await rows()) this.set({ partition: r.p }, pick(r));
        },
      });
    };
    perPartition('actor_queue_depth', 'Entries in each partition mailbox', (r) => r.depth);
    perPartition('actor_queue_lag', 'Commands of each partition mailbox no actor has read yet', (r) => r.lag);
    perPartition('actor_pending_commands', 'Commands read by an actor but not yet committed, per partition', (r) => r.pending);
    perPartition('actor_dead_letters', 'Commands in each partition dead-letter stream', (r) => r.dead);
  }

  /** Every partition's queue figures, read once (pipelined) and shared by one scrape's gauges. */
  private partitionRows(): Promise<PartitionRow[]> {
    const now = Date.now();
    if (this.scrape && now - this.scrape.at < 1000) return this.scrape.rows;
    const rows = Promise.all(
      Array.from({ length: this.partitions }, async (_, p): Promise<PartitionRow> => {
        const [depth, pend, dead, groups] = await Promise.all([
          this.redis.xlen(keys.commands(p)),
          this.redis.xpending(keys.commands(p), ACTOR_GROUP).catch(() => [0]) as Promise<unknown[]>,
          this.redis.xlen(keys.deadLetter(p)),
          this.redis.xinfo('GROUPS', keys.commands(p)).catch(() => []) as Promise<unknown[][]>,
        ]);
        const group = groups.find((g) => g[1] === ACTOR_GROUP);
        const at = group ? group.indexOf('lag') : -1;
        return { p: String(p), depth, pending: Number(pend[0] ?? 0), dead, lag: at >= 0 ? Number(group![at + 1] ?? 0) : 0 };
      }),
    );
    this.scrape = { at: now, rows };
    return rows;
  }
}
