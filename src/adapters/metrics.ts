import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { keys, ACTOR_GROUP, INDEXER_GROUP, type RedisClient } from './redis.js';
import { archiveTotals } from './version-archive.js';

interface PartitionRow {
  p: string;
  depth: number;
  pending: number;
  dead: number;
  lag: number;
  /** Content events no indexer has read yet, and read but not yet indexed. */
  indexLag: number;
  indexPending: number;
  /** Content events the audit trail's copier has not yet read (src/actors/audit-trail.ts). */
  auditLag: number;
  /** Documents the search engine refused and the indexer set aside, ever (dead letters added). */
  indexRefused: number;
}

/** One route, method and status: its answers, their summed latency, and a count per latency bucket (not cumulative). */
interface RequestRow {
  route: string;
  method: string;
  status: string;
  count: number;
  sum: number;
  buckets: Float64Array;
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * `http_request_duration_seconds` by route, from the request rows (summed over methods and
 * statuses), in the shape prom-client's registry renders: cumulative buckets, `+Inf`, sum, count.
 */
function latencyHistogram(rows: Map<string, RequestRow>) {
  const name = 'http_request_duration_seconds';
  const help = 'HTTP request latency by route';
  return {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    reset(): void {
      rows.clear();
    },
    async get() {
      const byRoute = new Map<string, { count: number; sum: number; buckets: number[] }>();
      for (const r of rows.values()) {
        let t = byRoute.get(r.route);
        if (!t) {
          t = { count: 0, sum: 0, buckets: LATENCY_BUCKETS.map(() => 0) };
          byRoute.set(r.route, t);
        }
        t.count += r.count;
        t.sum += r.sum;
        for (let i = 0; i < LATENCY_BUCKETS.length; i++) t.buckets[i] += r.buckets[i];
      }
      const values: { metricName: string; labels: Record<string, string | number>; value: number }[] = [];
      for (const [route, t] of byRoute) {
        let acc = 0;
        LATENCY_BUCKETS.forEach((le, i) => {
          acc += t.buckets[i];
          values.push({ metricName: `${name}_bucket`, labels: { le, route }, value: acc });
        });
        values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', route }, value: t.count });
        values.push({ metricName: `${name}_sum`, labels: { route }, value: t.sum });
        values.push({ metricName: `${name}_count`, labels: { route }, value: t.count });
      }
      return { name, help, type: 'histogram', values, aggregator: 'sum' };
    },
  };
}

/**
 * Prometheus metrics of one process, served at GET /metrics. Request metrics are recorded on
 * the hot path (a counter and a histogram observation); queue depths are read from Redis only
 * when scraped, once per scrape for all the per-partition gauges.
 */
export class Metrics {
  readonly registry = new Registry();
  private scrape?: { at: number; rows: Promise<PartitionRow[]> };
  /**
   * Request counts and latencies by route, method and status, kept as plain numbers and handed
   * to prom-client only when scraped: prom-client's own observation (label validation and
   * hashing, a bucket lookup by string) was 6% of a versioned read's CPU.
   */
  private readonly answered = new Map<string, RequestRow>();

  /** Counts one answered request and its latency (seconds). */
  observe(route: string, method: string, status: number, seconds: number): void {
    const key = `${route} ${method} ${status}`;
    let row = this.answered.get(key);
    if (!row) {
      row = { route, method, status: String(status), count: 0, sum: 0, buckets: new Float64Array(LATENCY_BUCKETS.length) };
      this.answered.set(key, row);
    }
    row.count++;
    row.sum += seconds;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (seconds <= LATENCY_BUCKETS[i]) {
        row.buckets[i]++;
        break;
      }
    }
  }

  constructor(
    private readonly redis: RedisClient,
    private readonly partitions: number,
    inFlight: () => number,
  ) {
    collectDefaultMetrics({ register: this.registry });
    // /metrics answers without a token: no server version in it (SECURITY.md threat model).
    this.registry.removeSingleMetric('nodejs_version_info');
    const answered = this.answered;
    new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by route, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const r of answered.values()) this.inc({ route: r.route, method: r.method, status: r.status }, r.count);
      },
    });
    this.registry.registerMetric(latencyHistogram(answered) as unknown as Metric);
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
    perPartition('indexer_lag', 'Content events of each partition no indexer has read yet', (r) => r.indexLag);
    perPartition('indexer_pending', 'Content events of each partition read by an indexer and not yet indexed', (r) => r.indexPending);
    perPartition('audit_lag', 'Content events of each partition not yet read into the audit trail', (r) => r.auditLag);
    const redisOf = () => this.redis;
    const rowsOf = () => this.partitionRows();
    // Counted in Redis by whichever indexer or re-indexer process set the document aside (those
    // serve no /metrics): the dead letters ever added to each partition's stream.
    new Counter({
      name: 'indexer_refused_documents_total',
      help: 'Documents the search engine refused and the indexer set aside (indexer-dead:{partition})',
      labelNames: ['partition'] as const,
      registers: [this.registry],
      async collect() {
        const rows = await rowsOf();
        this.reset();
        for (const r of rows) this.inc({ partition: r.p }, r.indexRefused);
      },
    });
    new Gauge({
      name: 'indexer_refused_contents',
      help: 'Contents whose documents the search engine refused, until they are indexed again (/health says search is degraded)',
      registers: [this.registry],
      async collect() {
        this.set(await redisOf().hlen(keys.indexerRefused));
      },
    });
    // Webhook deliveries (CONTRACT §14), counted in Redis by whichever webhooks process attempted them.
    new Counter({
      name: 'webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: delivered (2xx), retried (to be attempted again), failed (past WEBHOOK_MAX_AGE_HOURS)',
      labelNames: ['outcome'] as const,
      registers: [this.registry],
      async collect() {
        const counts = await redisOf().hgetall(keys.webhookOutcomes);
        this.reset();
        for (const outcome of ['delivered', 'retried', 'failed']) this.inc({ outcome }, Number(counts[outcome] ?? 0));
      },
    });
    const partitionCount = this.partitions;
    new Gauge({
      name: 'webhook_oldest_pending_seconds',
      help: 'Age of the oldest webhook delivery not yet delivered or failed (0 when none)',
      registers: [this.registry],
      async collect() {
        const r = redisOf();
        const oldest = await Promise.all(Array.from({ length: partitionCount }, (_, p) => r.zrange(keys.webhookPending(p), '0', '0', 'WITHSCORES')));
        const min = Math.min(...oldest.map((o) => (o.length ? Number(o[1]) : Number.POSITIVE_INFINITY)));
        this.set(Number.isFinite(min) ? Math.max(0, (Date.now() - min) / 1000) : 0);
      },
    });
    // The version archive (issue 25), counted in Redis by the archiver's moves (src/actors/scripts/archive-move-8.lua).
    const partitionsOf = this.partitions;
    // Read once per scrape for the four figures.
    let totals: { at: number; t: ReturnType<typeof archiveTotals> } | undefined;
    const totalsOnce = () => {
      if (!totals || Date.now() - totals.at > 500) totals = { at: Date.now(), t: archiveTotals(redisOf(), partitionsOf) };
      return totals.t;
    };
    const archived = (name: string, help: string, pick: (t: Awaited<ReturnType<typeof archiveTotals>>) => number, kind: 'counter' | 'gauge') => {
      const collect = async function (this: Gauge | Counter) {
        const n = pick(await totalsOnce());
        if (this instanceof Gauge) this.set(n);
        else {
          this.reset();
          this.inc(n);
        }
      };
      if (kind === 'gauge') new Gauge({ name, help, registers: [this.registry], collect });
      else new Counter({ name, help, registers: [this.registry], collect });
    };
    archived('archive_versions_total', 'Versions moved from Redis into the version archive', (t) => t.versions, 'counter');
    archived('archive_revisions_total', 'Revision snapshots moved from Redis into the version archive', (t) => t.revisions, 'counter');
    archived('archive_bytes_total', 'Compressed bytes written to the version archive (segments that Redis now points to)', (t) => t.bytes, 'counter');
    archived(
      'archive_backlog_versions',
      'Versions the archiver found to move in its current or last pass and has not moved yet',
      (t) => Math.max(0, t.backlog),
      'gauge',
    );
    new Gauge({
      name: 'reindex_session_progress_ratio',
      help: 'Share of the content of each recent re-indexing session that is indexed (1 when complete)',
      labelNames: ['session'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        const r = redisOf();
        for (const id of await r.zrange(keys.reindexSessions, '0', '-1')) {
          const [total, done] = await r.hmget(keys.reindexSession(id), 'total', 'done');
          if (total === null) continue;
          this.set({ session: id }, Number(total) === 0 ? 1 : Math.min(1, Number(done) / Number(total)));
        }
      },
    });
  }

  /** Every partition's queue figures, read once (pipelined) and shared by one scrape's gauges. */
  private partitionRows(): Promise<PartitionRow[]> {
    const now = Date.now();
    if (this.scrape && now - this.scrape.at < 1000) return this.scrape.rows;
    const rows = Promise.all(
      Array.from({ length: this.partitions }, async (_, p): Promise<PartitionRow> => {
        const [depth, pend, dead, groups, eventGroups, refusedStream] = await Promise.all([
          this.redis.xlen(keys.commands(p)),
          this.redis.xpending(keys.commands(p), ACTOR_GROUP).catch(() => [0]) as Promise<unknown[]>,
          this.redis.xlen(keys.deadLetter(p)),
          this.redis.xinfo('GROUPS', keys.commands(p)).catch(() => []) as Promise<unknown[][]>,
          this.redis.xinfo('GROUPS', keys.events(p)).catch(() => []) as Promise<unknown[][]>,
          // no such key: nothing was ever refused in this partition
          this.redis.xinfo('STREAM', keys.indexerDeadLetter(p)).catch(() => undefined) as Promise<unknown[] | undefined>,
        ]);
        const field = (group: unknown[] | undefined, name: string) => {
          const at = group ? group.indexOf(name) : -1;
          return at >= 0 ? Number(group![at + 1] ?? 0) : 0;
        };
        const actors = groups.find((g) => g[1] === ACTOR_GROUP);
        const indexer = eventGroups.find((g) => g[1] === INDEXER_GROUP);
        // `entries-added` counts trimmed entries too (Redis 7); before Redis 7 only `length` is known.
        const indexRefused = refusedStream?.includes('entries-added') ? field(refusedStream, 'entries-added') : field(refusedStream, 'length');
        return {
          p: String(p),
          depth,
          pending: Number(pend[0] ?? 0),
          dead,
          lag: field(actors, 'lag'),
          indexLag: field(indexer, 'lag'),
          indexPending: field(indexer, 'pending'),
          auditLag: field(
            eventGroups.find((g) => g[1] === 'audit'),
            'lag',
          ),
          indexRefused,
        };
      }),
    );
    this.scrape = { at: now, rows };
    return rows;
  }
}
