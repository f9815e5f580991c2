import { Gauge } from 'prom-client';
import uWS from 'uWebSockets.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import { AppError } from '../errors.js';
import { sleep } from '../wait.js';
import type { Metrics } from '../adapters/metrics.js';
import type { SolrEngine } from '../adapters/search-engine.js';
import { SEARCH_MAX_BODY_BYTES, SEARCH_PREFIX, SearchService } from './search-service.js';
import { HeadCache } from './head-cache.js';
import { type Describable, type MountedRouter, openApiDocument } from './openapi.js';
import { type BodyAccounting, Exchange, segmentsOf } from './http.js';
import { BodiesHeld, searchBodyKey } from './bodies-held.js';
import { callerKey } from './keyed-counts.js';
import { CONTENT_PREFIX, ContentService, LOGIN_MAX_BODY_BYTES } from './content-service.js';
import type { ContentServiceDeps } from './content-deps.js';
import type { FileStore } from '../adapters/file-store.js';
import { DELIVERY_PREFIX, FILE_PREFIX, FileDeliveryService, FileService } from './file-service.js';
import { TAXONOMY_PREFIX, TaxonomyService } from './taxonomy-service.js';
import { learnIndexSchema } from '../adapters/index-schema.js';
import { ChangesService } from './changes-service.js';
import { BULK_ROUTE } from './bulk-service.js';
import { CONSOLE_PREFIX, ConsoleAssets } from './console-assets.js';

/** Service prefixes of CONTRACT §2, and the `Svc-Response-Origin` each one answers with. */
const ORIGINS: Record<string, string | undefined> = {
  [CONTENT_PREFIX]: 'content-service',
  [FILE_PREFIX]: 'file-service',
  [DELIVERY_PREFIX]: undefined,
  [SEARCH_PREFIX]: undefined,
  [TAXONOMY_PREFIX]: undefined,
};

/** The `Svc-Response-Origin` header of each prefix that has one, made once (every answer carries it). */
const ORIGIN_HEADERS = new Map(
  Object.entries(ORIGINS).flatMap(([prefix, origin]) => (origin ? [[prefix, ['Svc-Response-Origin', origin] as [string, string]]] : [])),
);

/** The gateway's own routes (answered in `Gateway.handle`), for the OpenAPI document. */
const GATEWAY_ROUTES: Describable = {
  describe: () => [
    { pattern: 'health', methods: ['GET'] },
    { pattern: 'metrics', methods: ['GET'] },
    { pattern: 'openapi.json', methods: ['GET'] },
    // the console's address without its slash: 308 to /console/ (ConsoleAssets)
    { pattern: 'console', methods: ['GET'] },
  ],
};

/**
 * Closes the connection of a request whose body uWS may frame otherwise than a proxy in front of
 * it: one with more than one Content-Length header (true when it did). uWebSockets.js 20.30 takes
 * the first, so `Content-Length: 3` and `Content-Length: 30` followed by `abcGET /smuggled …` had
 * it answer a second request that a proxy taking the other length forwarded as the first one's
 * body (request smuggling). Closed without an answer: uWS parses the bytes that came with the
 * request before an ended answer closes the connection (`end(body, true)` was followed by the
 * smuggled request's answer). It costs every request one header read; the headers are walked only
 * when a Content-Length is there at all, never for a plain GET. Every uWS route of the gateway
 * calls it first (the catch-all here, the change feed's in ChangesService.mount).
 */
export function refusedFraming(res: uWS.HttpResponse, req: uWS.HttpRequest): boolean {
  if (req.getHeader('content-length') === '') return false;
  let lengths = 0;
  // uWS gives header names in lower case.
  req.forEach((name) => {
    if (name === 'content-length') lengths++;
  });
  if (lengths < 2) return false;
  res.close();
  return true;
}

/**
 * Every route the gateway answers, by service prefix: what the OpenAPI document is made of
 * (src/gateway/openapi.test.ts checks that each is documented). A new router goes here.
 */
export function mountedRouters(content: Describable, search: Describable): MountedRouter[] {
  return [
    ['', GATEWAY_ROUTES],
    [CONTENT_PREFIX, content],
    [CONTENT_PREFIX, ChangesService.routes],
    [SEARCH_PREFIX, search],
    [FILE_PREFIX, FileService.routes],
    [DELIVERY_PREFIX, FileDeliveryService.routes],
    [TAXONOMY_PREFIX, TaxonomyService.routes],
    [CONSOLE_PREFIX, ConsoleAssets.routes],
  ];
}

export interface GatewayDeps extends Omit<ContentServiceDeps, 'baseUrl' | 'heads'> {
  redis: RedisClient;
  metrics: Metrics;
  engine: SolrEngine | null;
  files: FileStore;
}

/**
 * The HTTP gateway on uWebSockets.js: routing per service prefix, the version and origin
 * headers, bounded in-flight requests, and the one place where errors become responses.
 */
export class Gateway {
  private listenSocket: uWS.us_listen_socket | null = null;
  private port = 0;
  private active = 0;
  /** GET /health requests among `active`: they are answered even while the gateway sheds load. */
  private healthInFlight = 0;
  /** The health check under way, shared by the health requests that come meanwhile. */
  private healthCheck?: Promise<{ status: number; body: Record<string, string> }>;
  private readonly content: ContentService;
  private readonly search: SearchService;
  private readonly fileService: FileService;
  private readonly delivery: FileDeliveryService;
  private readonly taxonomy: TaxonomyService;
  private readonly heads: HeadCache;
  /** The change feed (CONTRACT §13): its own uWS routes, so long-lived streams take no in-flight slot. */
  readonly changes: ChangesService;
  /** The web console's static files (CONTRACT §19). */
  private readonly console = new ConsoleAssets();
  private openapi?: string;
  /** The `Svc-Api-Version` header every answer carries. */
  private readonly versionHeader: [string, string];
  /** Learning the search collection's schema for the write-time check of svcSolrDocument. */
  private schemaLearning?: { stop(): void };
  /** What the collected bodies of the requests under way hold (bodies-held.ts). */
  private readonly bodies: BodyAccounting;

  constructor(private readonly d: GatewayDeps) {
    this.versionHeader = ['Svc-Api-Version', d.settings.API_VERSION];
    this.heads = new HeadCache(d.store, d.settings, d.log);
    this.content = new ContentService({ ...d, heads: this.heads, baseUrl: () => this.baseUrl() });
    this.search = new SearchService(d);
    const fileDeps = { ...d, baseUrl: () => this.baseUrl() };
    this.fileService = new FileService(fileDeps);
    this.delivery = new FileDeliveryService(fileDeps);
    // Completions that ask the index count among their caller's searches.
    this.taxonomy = new TaxonomyService({ ...d, searchSlots: this.search.slots });
    this.changes = new ChangesService(d);
    const held = new BodiesHeld(d.settings.BODIES_HELD_BYTES, d.settings.BODIES_HELD_PER_CALLER_BYTES, d.settings.MAX_IN_FLIGHT);
    this.bodies = {
      held,
      // A signed-in caller's search body is held with the anonymous ones (bodies-held.ts).
      callerOf: (x, user) => (user && isSearch(x.path) ? searchBodyKey(callerKey(user, x, d.settings)) : callerKey(user, x, d.settings)),
    };
    const name = 'gateway_request_bodies_held_bytes';
    d.metrics.registry.removeSingleMetric(name);
    new Gauge({
      name,
      help: 'What the collected request bodies under way in this gateway hold: their bytes, then their parsed weight (BODIES_HELD_BYTES)',
      registers: [d.metrics.registry],
      collect() {
        this.set(held.total);
      },
    });
  }

  /** Searches this process asks of the engine now and that wait their turn (search-slots.ts; tests). */
  get searchesUnderWay(): { asking: number; waiting: number } {
    return this.search.slots.underWay;
  }

  /** The public address used in Location headers. */
  baseUrl(): string {
    return this.d.settings.PUBLIC_URL?.replace(/\/$/, '') ?? `http://${this.d.settings.HOST}:${this.port}`;
  }

  listen(): Promise<number> {
    this.heads.start();
    if (this.d.engine) this.schemaLearning = learnIndexSchema(this.d.engine, this.d.log);
    const app = uWS.App();
    this.changes.mount(app, refusedFraming);
    // The feed's cursor key is read (or written, by the first gateway ever) now, so that no
    // request writes it, not even a refused one; a failure is tried again by the first request.
    void this.changes.source.ready().catch(() => undefined);
    // Pipelined requests (RFC 9112 §9.3.2) are answered in order, or the connection is closed:
    // uWS keeps one response per connection and parses the requests of a read one after the
    // other. A request answered without I/O is answered before the next is parsed (uWS.js runs
    // this handler's microtasks on return). But uWS closes the connection when a request comes
    // while the one before it is unanswered (uWebSockets src/HttpContext.h, "Are we not ready
    // for another request yet? Terminate the connection"), before any handler sees it, and
    // answers of that read it still holds corked go with it. The gateway can neither hold that
    // request nor answer the pending one first: it never sees the request, and uWS writes only
    // through the one response. The client sees the connection closed, never one left hanging
    // nor an answer out of order or in part, and sends again what was not answered; a request
    // behind the unanswered one never ran. Pausing the socket while an answer is pending would
    // order only requests that come in a later read, for two syscalls on every request, and
    // would hide a client's going away while paused: not done. test/gateway/pipelining.test.ts,
    // RELIABILITY.md "Pipelined requests".
    app.any('/*', (res, req) => {
      if (refusedFraming(res, req)) return;
      // File uploads and bulk imports stream from the socket instead of being collected (no
      // MAX_BODY_BYTES for the whole body; a bulk line has that limit).
      const streamed = req.getMethod() === 'post' && streamsBody(req.getUrl());
      void this.dispatch(new Exchange(res, req, bodyLimitOf(req.getUrl(), this.d.settings.MAX_BODY_BYTES), streamed, this.bodies));
    });
    return new Promise((resolve, reject) => {
      app.listen(this.d.settings.HOST, this.d.settings.PORT, (sock) => {
        if (!sock) return reject(new Error(`Cannot listen on ${this.d.settings.HOST}:${this.d.settings.PORT} (address in use?)`));
        this.listenSocket = sock;
        this.port = uWS.us_socket_local_port(sock);
        this.d.log.info({ url: this.baseUrl() }, 'gateway listening');
        resolve(this.port);
      });
    });
  }

  /** Stops accepting connections; requests in flight finish. */
  async close(): Promise<void> {
    if (this.listenSocket) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    const deadline = Date.now() + 5000;
    while (this.active > 0 && Date.now() < deadline) await sleep(20);
    await this.heads.stop();
    await this.changes.close();
    this.delivery.renditions.close();
    this.schemaLearning?.stop();
  }

  /** Serves one request: its answer, or its error's; counted in flight until it ends. Never rejects. */
  private async dispatch(x: Exchange): Promise<void> {
    x.baseHeaders.push(this.versionHeader);
    this.active++;
    try {
      await this.handle(x);
    } catch (e) {
      try {
        x.discardBody();
        x.sendError(e, (err) => this.d.log.error({ err, method: x.method, path: x.path, requestId: x.requestId }, 'request failed'));
      } catch (failed) {
        // Answering failed itself (Exchange.send closed the connection): logged, never left as an
        // unhandled rejection, which would stop the process.
        this.d.log.error({ err: failed, method: x.method, path: x.path, requestId: x.requestId }, 'answer failed');
      }
    } finally {
      x.release();
      this.active--;
      this.d.metrics.observe(x.route, x.method, x.status || 499, (performance.now() - x.started) / 1000);
    }
  }

  private async handle(x: Exchange): Promise<void> {
    const segs = segmentsOf(x.path);
    // Readiness is answered even while the gateway sheds load: an orchestrator must not take an
    // overloaded gateway for a dead one (it costs one Redis PING).
    if (segs.length === 1 && segs[0] === 'health') {
      x.route = 'health';
      this.healthInFlight++;
      return this.health(x).finally(() => this.healthInFlight--);
    }
    // Health checks in flight take no slot of MAX_IN_FLIGHT.
    if (this.active - this.healthInFlight > this.d.settings.MAX_IN_FLIGHT) throw new AppError('UNAVAILABLE', 'Too many requests in flight', {}, 1);
    if (segs.length === 1 && segs[0] === 'openapi.json') {
      x.route = 'openapi';
      getOnly(x);
      this.openapi ??= JSON.stringify(openApiDocument(this.d.settings.API_VERSION, this.baseUrl(), mountedRouters(this.content.router, this.search.router)));
      x.send(200, [['Content-Type', 'application/json']], this.openapi);
      return;
    }
    if (segs.length === 1 && segs[0] === 'metrics') {
      x.route = 'metrics';
      getOnly(x);
      x.send(200, [['Content-Type', this.d.metrics.registry.contentType]], await this.d.metrics.registry.metrics());
      return;
    }
    const prefix = segs[0] ?? '';
    if (prefix === CONSOLE_PREFIX) {
      x.route = CONSOLE_PREFIX;
      this.console.handle(x, segs.slice(1).filter(Boolean), x.path.endsWith('/'));
      return;
    }
    // Own keys only: `/constructor` or `/__proto__` must not find Object.prototype's members.
    const known = Object.hasOwn(ORIGINS, prefix);
    const origin = known ? ORIGIN_HEADERS.get(prefix) : undefined;
    if (origin) x.baseHeaders.push(origin);
    if (prefix === CONTENT_PREFIX) {
      const { handler, params, pattern } = this.content.router.match(x.method, segs.slice(1));
      x.route = `${prefix}/${pattern}`;
      if (x.method === 'DELETE') await x.noBody();
      return handler(x, params);
    }
    if (prefix === SEARCH_PREFIX) {
      const { handler, params, pattern } = this.search.router.match(x.method, segs.slice(1));
      x.route = `${prefix}/${pattern}`;
      return handler(x, params);
    }
    if (prefix === FILE_PREFIX || prefix === DELIVERY_PREFIX) {
      return (prefix === FILE_PREFIX ? this.fileService : this.delivery).handle(x, segs.slice(1));
    }
    if (prefix === TAXONOMY_PREFIX) return this.taxonomy.handle(x, segs.slice(1));
    throw new AppError('NOT_FOUND', known ? `Service ${prefix} is not available yet` : 'No such resource');
  }

  /**
   * Readiness: 200 once Redis answers, 503 naming the failing part otherwise. `status` is
   * `degraded` (still 200) while the search engine's refused documents are set aside.
   */
  private async health(x: Exchange): Promise<void> {
    getOnly(x);
    // One check at a time: health requests take no slot of MAX_IN_FLIGHT, so a flood of them
    // must not become a flood of pings to Redis, the engine and the file store. Requests that
    // come while a check runs share its answer.
    this.healthCheck ??= this.checkHealth().finally(() => {
      this.healthCheck = undefined;
    });
    const { status, body } = await this.healthCheck;
    x.sendJson(status, body);
  }

  private async checkHealth(): Promise<{ status: number; body: Record<string, string> }> {
    const parts: Record<string, string> = {};
    const redisUp = await within(
      this.d.redis.ping().then(
        () => true,
        (e: unknown) => {
          // The driver's message names the server's host and port: logged, never answered (CONTRACT §20).
          this.d.log.warn({ err: e }, 'health: Redis does not answer');
          return false;
        },
      ),
      HEALTH_PART_MS,
      false,
    );
    parts.redis = redisUp ? 'ok' : 'failing: Redis does not answer';
    parts.search = await this.searchHealth();
    parts.files = (await within(this.d.files.ping(), HEALTH_PART_MS, false)) ? 'ok' : `failing: the ${this.d.files.kind} file store does not answer`;
    parts.actorsInFlight = String(this.d.mailbox.inFlight);
    const ok = parts.redis === 'ok' && !parts.search.startsWith('failing') && !parts.files.startsWith('failing');
    return { status: ok ? 200 : 503, body: { status: !ok ? 'unavailable' : parts.search.startsWith('degraded') ? 'degraded' : 'ok', ...parts } };
  }

  /**
   * The search part of /health: failing while the engine does not answer; degraded while
   * contents whose documents it refused are set aside (src/actors/index-writer.ts), until each
   * is indexed again.
   */
  private async searchHealth(): Promise<string> {
    if (!this.d.engine) return 'not configured';
    if (!(await within(this.d.engine.ping(), HEALTH_PART_MS, false))) return 'failing: the search engine does not answer';
    // Redis failing is the redis part's.
    const refused = await within(
      this.d.redis.hlen(keys.indexerRefused).catch(() => 0),
      HEALTH_PART_MS,
      0,
    );
    return refused ? `degraded: ${refused} content${refused === 1 ? '' : 's'} refused by the search engine (dead letters in indexer-dead:{p})` : 'ok';
  }
}

/**
 * How long each part of a health check may take: a backend that accepts a connection and never
 * answers (a hung JVM) is failing, and a check shared by every health request must end.
 */
const HEALTH_PART_MS = 1000;

/** `p`, or `fallback` once `ms` passed without an answer. */
function within<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  return Promise.race([p.catch(() => fallback), late]).finally(() => clearTimeout(timer));
}

/** 405 (with Allow: GET) for any method but GET and HEAD. */
function getOnly(x: Exchange): void {
  if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', 'Use GET', { allow: ['GET'] });
}

/** Whether `url` is the search service's, decided on the decoded path as routing decides (a path that does not decode is not). */
function isSearch(url: string): boolean {
  try {
    return segmentsOf(url)[0] === SEARCH_PREFIX;
  } catch {
    return false;
  }
}

/**
 * The most a collected body may have on a route (413 past it): a search's form body at most
 * SEARCH_MAX_BODY_BYTES (what the engine takes), a login's LOGIN_MAX_BODY_BYTES, any other
 * MAX_BODY_BYTES (`max`).
 */
export function bodyLimitOf(url: string, max: number): number {
  let segs: string[];
  try {
    segs = segmentsOf(url);
  } catch {
    return max;
  }
  if (isSearch(url)) return Math.min(max, SEARCH_MAX_BODY_BYTES);
  if (segs.length === 3 && segs[0] === CONTENT_PREFIX && segs[1] === 'security' && segs[2] === 'token') return Math.min(max, LOGIN_MAX_BODY_BYTES);
  return max;
}

/**
 * Whether a POST to `url` streams its body (file uploads, bulk imports), decided on the decoded
 * path as routing decides (`/content-service/%62ulk` is the bulk route too: decided on the raw
 * URL, such a request found a collected body where the import wanted a stream, and hung). A path
 * that does not decode streams nothing: it answers 400 before any body is read.
 */
export function streamsBody(url: string): boolean {
  let segs: string[];
  try {
    segs = segmentsOf(url);
  } catch {
    return false;
  }
  return (segs[0] === FILE_PREFIX && segs.length > 1) || (segs[0] === CONTENT_PREFIX && segs[1] === BULK_ROUTE);
}
