import type uWS from 'uWebSockets.js';
import type { Settings } from '../../config/settings.js';
import type { ContentStore } from '../adapters/content-store.js';
import type { Logger } from '../adapters/log.js';
import type { Metrics } from '../adapters/metrics.js';
import type { RedisClient } from '../adapters/redis.js';
import { type ChangeFilter, parseFilter, type StreamPosition } from '../content/change-events.js';
import type { Principal, SecurityConfig } from '../content/permissions.js';
import { AppError } from '../errors.js';
import { clientAddressOf, limitedAddress, trustedProxies } from '../security/client-address.js';
import type { TokenService } from '../security/token-service.js';
import { ChangeFanout, type FeedSink, FeedSubscriber } from './change-fanout.js';
import { ChangeSource, type Delivered, PagesAhead } from './change-source.js';
import { Exchange } from './http.js';
import { KeyedCounts } from './keyed-counts.js';
import { Reads } from './reads.js';

export interface ChangesServiceDeps {
  settings: Settings;
  redis: RedisClient;
  store: ContentStore;
  tokens: TokenService;
  security: SecurityConfig;
  /** The clock of time state (injected by tests). */
  clock: () => number;
  metrics: Metrics;
  log: Logger;
}

/** The feed's address under the content service (CONTRACT §13). */
export const CHANGES_PATH = '/content-service/changes';
export const CHANGES_WS_PATH = '/content-service/changes/ws';

const PARAMS = new Set(['since', 'limit', 'types', 'views', 'kinds', 'feed', 'timeout']);
/** Bounds and defaults of `limit` (events per page) and `timeout` (long poll, ms): also the OpenAPI document's. */
export const FEED_LIMIT = { min: 1, max: 1000, default: 100 } as const;
export const FEED_TIMEOUT = { min: 0, max: 60000, default: 30000 } as const;
/**
 * An SSE stream idle this long gets a comment line, checked every SSE_CHECK_MS: a comment at
 * least every 15 s (CONTRACT §13) keeps it open through proxies.
 */
const SSE_IDLE_MS = 9_000;
const SSE_CHECK_MS = 5_000;
/** A WebSocket must send its first message within this. */
const WS_FIRST_MESSAGE_MS = 10_000;
/**
 * Bytes a WebSocket may hold unsent before its subscriber counts as behind: WS_HIGH_WATER, or
 * less when many subscribers share the process, so that all together hold at most about
 * WS_BUFFERED_TOTAL (at 10,000 subscribers 256 KB each was up to 2.5 GB outside the V8 heap;
 * the web process's RSS reached 1.5 GB), never less than WS_HIGH_WATER_MIN. What a subscriber
 * cannot send waits in its queue, within CHANGES_SUBSCRIBER_BUFFER.
 */
const WS_HIGH_WATER = 256 * 1024;
const WS_HIGH_WATER_MIN = 16 * 1024;
const WS_BUFFERED_TOTAL = 256 * 1024 * 1024;
/**
 * WebSocket close codes: a bad token, a bad first message, an expired cursor, a subscriber that
 * did not read or a user past CHANGES_MAX_STREAMS_PER_USER (429), a process past
 * CHANGES_MAX_SUBSCRIBERS (503; RFC 6455's "try again later").
 */
export const WS_CLOSE = { unauthorized: 4401, badRequest: 4400, gone: 4410, tooSlow: 4429, tryAgainLater: 1013 } as const;
/** Retry-After (s) of a stream refused for the per-user or the per-process bound. */
const STREAM_RETRY_AFTER_SECONDS = 5;
/** The longest first message of a WebSocket subscriber (a token, a cursor and three lists). */
const FIRST_MESSAGE_MAX = 64 * 1024;

interface WsData {
  started: boolean;
  /** The client's address as the per-address bound counts it (CHANGES_WS_WAITING_PER_ADDRESS). */
  address: string;
  /** Counted among the sockets waiting for their first message (ChangesService.waitingBy). */
  waiting?: boolean;
  /** The feed decided to close this socket. */
  closed: boolean;
  /** uWS closed it: the socket object must not be touched any more. */
  gone: boolean;
  sub?: FeedSubscriber;
  timer?: NodeJS.Timeout;
  /** The socket drained: sends what the sink still holds, then lets the subscriber write again. */
  drained?: () => void;
  /** Gives back the stream slot this socket holds (ChangesService.takeSlot); called when uWS closes it. */
  release?: () => void;
}

const errorBody = (e: AppError) => ({ error: e.toBody() });

/**
 * The change feed over HTTP on the gateway's own uWS app: pages, long poll, server-sent events
 * (GET {base_url}/changes) and WebSocket ({base_url}/changes/ws). These are registered as their
 * own uWS routes: a stream that stays open for hours must not hold one of the gateway's
 * MAX_IN_FLIGHT slots. Every subscriber of this process shares one reader of the streams
 * (ChangeFanout); what it may see is decided by the domain (content/change-events.ts).
 */
export class ChangesService {
  /** The routes, for the OpenAPI document (under the content service's prefix). */
  static readonly routes = {
    describe: () => [
      { pattern: 'changes', methods: ['GET'] },
      { pattern: 'changes/ws', methods: ['GET'] },
    ],
  };

  readonly source: ChangeSource;
  readonly fanout: ChangeFanout;
  private readonly streams = new Set<FeedSubscriber>();
  /** Stream slots held (SSE, WebSocket, waiting long polls), per user id and in all (takeSlot). */
  private readonly heldBy = new KeyedCounts();
  private readonly ahead = new PagesAhead();
  /**
   * WebSockets open without their first message yet: they hold no stream slot (their user is not
   * known), so they are bounded apart, by CHANGES_MAX_SUBSCRIBERS in all (past it an upgrade
   * answers 503) and per client address (limitedAddress) by CHANGES_WS_WAITING_PER_ADDRESS: before,
   * one client that held the whole process's bound of silent sockets (reopening each after its
   * cut) made every other user's upgrade answer 503. Each is cut after WS_FIRST_MESSAGE_MS.
   */
  private readonly waitingBy = new KeyedCounts();

  constructor(private readonly d: ChangesServiceDeps) {
    this.source = new ChangeSource(d.redis, d.store, d.settings.PARTITIONS, new Reads(d));
    this.fanout = new ChangeFanout(this.source, d.redis, d.settings, d.log);
  }

  /**
   * Registers the feed's routes on the gateway's app (before its catch-all route). `framingRefused` is
   * the gateway's check of a request's framing (server.ts `refusedFraming`), first on each route:
   * true when it closed the connection.
   */
  mount(app: uWS.TemplatedApp, framingRefused: (res: uWS.HttpResponse, req: uWS.HttpRequest) => boolean): void {
    app.any(CHANGES_PATH, (res, req) => {
      if (!framingRefused(res, req)) this.http(res, req);
    });
    app.ws<WsData>(CHANGES_WS_PATH, {
      compression: 0,
      // Larger than a first message may be (FIRST_MESSAGE_MAX), so that a longer one is answered
      // 4400 with an error message rather than cut by uWS (1006, no reason).
      maxPayloadLength: 1024 * 1024,
      idleTimeout: 120,
      sendPingsAutomatically: true,
      // The sink sends nothing once its high water is buffered; this is only the outer bound. A
      // message past it would be dropped (send answers 2): the socket is closed instead.
      maxBackpressure: 16 * 1024 * 1024,
      closeOnBackpressureLimit: 1,
      upgrade: (res, req, context) => {
        if (framingRefused(res, req)) return;
        const peer = Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
        const address = limitedAddress(clientAddressOf(peer, req.getHeader('x-forwarded-for') || undefined, trustedProxies(this.d.settings.TRUSTED_PROXIES)));
        const refused =
          this.waitingBy.get(address) >= this.d.settings.CHANGES_WS_WAITING_PER_ADDRESS
            ? new AppError(
                'TOO_MANY_REQUESTS',
                'Too many WebSockets of this address wait for their first message: send it, or retry shortly',
                {},
                STREAM_RETRY_AFTER_SECONDS,
              )
            : this.waitingBy.total >= this.d.settings.CHANGES_MAX_SUBSCRIBERS
              ? new AppError('UNAVAILABLE', 'Too many WebSockets wait for their first message: retry shortly', {}, STREAM_RETRY_AFTER_SECONDS)
              : null;
        if (refused) {
          this.exchange(res, req, 'content-service/changes/ws').sendError(refused);
          return;
        }
        res.upgrade<WsData>(
          { started: false, address, closed: false, gone: false },
          req.getHeader('sec-websocket-key'),
          req.getHeader('sec-websocket-protocol'),
          req.getHeader('sec-websocket-extensions'),
          context,
        );
      },
      open: (ws) => {
        const data = ws.getUserData();
        data.waiting = true;
        this.waitingBy.add(data.address);
        // Refused after the I/O of the loop's turn (setImmediate): a first message that came in
        // time, while the loop was busy, is read before the refusal, not after.
        data.timer = setTimeout(
          () =>
            setImmediate(() => {
              if (!data.started && !data.gone)
                this.wsFail(ws, new AppError('NOT_AUTHENTICATED', 'The first message must carry a token'), WS_CLOSE.unauthorized);
            }),
          WS_FIRST_MESSAGE_MS,
        );
      },
      message: (ws, message, isBinary) => {
        const data = ws.getUserData();
        if (data.started) return; // the client has nothing more to say
        data.started = true;
        this.stopWaiting(data);
        clearTimeout(data.timer);
        if (message.byteLength > FIRST_MESSAGE_MAX) {
          this.wsFail(ws, new AppError('BAD_REQUEST', `The first message must be at most ${FIRST_MESSAGE_MAX / 1024} KB`), WS_CLOSE.badRequest);
          return;
        }
        // uWS reuses the message's memory after this callback: copy it.
        const text = Buffer.from(message.slice(0)).toString('utf8');
        void this.wsStart(ws, text, isBinary);
      },
      drain: (ws) => {
        const data = ws.getUserData();
        if (!data.closed) data.drained?.();
      },
      close: (ws) => {
        const data = ws.getUserData();
        data.closed = true;
        data.gone = true;
        this.stopWaiting(data);
        clearTimeout(data.timer);
        data.sub?.close('stopped');
        data.release?.();
      },
    });
  }

  /** A WebSocket's first message came, or it closed: it waits no longer. */
  private stopWaiting(data: WsData): void {
    if (!data.waiting) return;
    data.waiting = false;
    this.waitingBy.remove(data.address);
  }

  /** Ends every subscriber (the gateway is closing). */
  async close(): Promise<void> {
    await this.fanout.stop();
  }

  /** Open streams and queued events, and the stream slots held (takeSlot), for tests and metrics. */
  stats(): { subscribers: number; queued: number; streams: number } {
    return { subscribers: this.fanout.subscriberCount, queued: this.fanout.queuedTotal, streams: this.heldBy.total };
  }

  /**
   * Takes a slot for one stream of `userId` (an SSE stream, a WebSocket, a waiting long poll), or
   * refuses it: 429 while the user holds CHANGES_MAX_STREAMS_PER_USER in this process (counted per
   * user, not per token: tokens are minted freely), 503 while the process holds
   * CHANGES_MAX_SUBSCRIBERS. Streams sit outside MAX_IN_FLIGHT, and each costs memory, a timer and
   * a share of every commit's fan-out: before, one reader token held 2,000 of them. Answers the
   * function that gives the slot back (once; it is called however the stream ends).
   */
  private takeSlot(userId: string): () => void {
    const { CHANGES_MAX_STREAMS_PER_USER: perUser, CHANGES_MAX_SUBSCRIBERS: total } = this.d.settings;
    const mine = this.heldBy.get(userId);
    if (mine >= perUser)
      throw new AppError(
        'TOO_MANY_REQUESTS',
        `At most ${perUser} change-feed streams of one user may be open at once; close one first`,
        {},
        STREAM_RETRY_AFTER_SECONDS,
      );
    if (this.heldBy.total >= total) throw new AppError('UNAVAILABLE', 'Too many change-feed streams are open: retry shortly', {}, STREAM_RETRY_AFTER_SECONDS);
    this.heldBy.add(userId);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.heldBy.remove(userId);
    };
  }

  // ---- HTTP: pages, long poll, server-sent events ----

  /** A request of the feed's routes, answered with the content service's headers. */
  private exchange(res: uWS.HttpResponse, req: uWS.HttpRequest, route: string): Exchange {
    // The feed reads no body (GET and HEAD; anything else answers 405): a limit of 0 holds none of
    // one. With MAX_BODY_BYTES, a POST's body was collected after its 405, outside the bodies'
    // bound (bodies-held.ts) and MAX_IN_FLIGHT: up to that much per connection.
    const x = new Exchange(res, req, 0);
    x.baseHeaders.push(['Svc-Api-Version', this.d.settings.API_VERSION], ['Svc-Response-Origin', 'content-service']);
    x.route = route;
    return x;
  }

  private http(res: uWS.HttpResponse, req: uWS.HttpRequest): void {
    // Read now: uWS's request is gone once this returns, and Exchange does not keep this header.
    const lastEventId = req.getHeader('last-event-id');
    const x = this.exchange(res, req, 'content-service/changes');
    this.serve(x, lastEventId)
      .catch((e: unknown) => {
        x.sendError(e, (err) => this.d.log.error({ err, path: x.path, requestId: x.requestId }, 'change feed request failed'));
      })
      .catch((e: unknown) => this.d.log.error({ err: e, path: x.path }, 'answer failed'))
      .finally(() => this.d.metrics.observe(x.route, x.method, x.status || 499, (performance.now() - x.started) / 1000));
  }

  private async serve(x: Exchange, lastEventId: string): Promise<void> {
    if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', 'Use GET', { allow: ['GET'] });
    const principal = await this.d.tokens.required(x.header('x-auth-token'));
    for (const name of x.query.keys()) {
      if (!PARAMS.has(name)) throw new AppError('BAD_REQUEST', `Unknown parameter ${name}`, { parameter: name });
      // Each is single-valued: `kinds=create&kinds=bogus` took the first and dropped the second unseen.
      if (x.query.getAll(name).length > 1) throw new AppError('BAD_REQUEST', `Parameter ${name} given more than once`, { parameter: name });
    }
    const filter = parseFilter({
      types: x.query.get('types') ?? undefined,
      views: x.query.get('views') ?? undefined,
      kinds: x.query.get('kinds') ?? undefined,
    });
    const limit = intParam(x.query.get('limit'), 'limit', FEED_LIMIT);
    const feed = x.query.get('feed');
    if (feed !== null && feed !== 'longpoll' && feed !== 'sse')
      throw new AppError('BAD_REQUEST', 'Parameter feed must be longpoll or sse', { parameter: 'feed' });
    const sse = feed === 'sse' || (feed === null && (x.header('accept') ?? '').includes('text/event-stream'));
    const timeout = intParam(x.query.get('timeout'), 'timeout', FEED_TIMEOUT);
    const since = sse && lastEventId ? lastEventId : (x.query.get('since') ?? undefined);
    const stream = sse && x.method === 'GET';
    // Taken before anything is awaited, so that starts in flight count too; given back however
    // the request ends (the stream's promise settles once it ended, an abort included).
    const release = stream ? this.takeSlot(principal.userId) : undefined;
    try {
      await this.fanout.ensureStarted();
      const positions = await this.positionsOf(since);
      if (stream) return await this.sse(x, principal, filter, positions, x.header('x-auth-token')!);
      const page =
        (await this.ahead.take(principal, filter, positions, limit)) ??
        (await this.fanout.pages.run(principal.userId, () => this.source.page(principal, filter, positions, limit)));
      // A caller that has not reached the end pages on: its next page is made while it reads this one.
      if (!page.exhausted)
        this.ahead.make(principal, filter, page.positions, limit, () =>
          this.fanout.pages.spare(principal.userId, () => this.source.page(principal, filter, page.positions, limit, undefined, page.carry)),
        );
      if (page.changes.length || feed !== 'longpoll' || timeout === 0) {
        sendPage(x, page.changes, this.source.cursors.encode(page.positions));
        return;
      }
      // A long poll holds a slot while it waits.
      const releasePoll = this.takeSlot(principal.userId);
      try {
        return await this.longPoll(x, principal, filter, page.positions, limit, timeout, x.header('x-auth-token')!);
      } finally {
        releasePoll();
      }
    } finally {
      release?.();
    }
  }

  /** The positions a `since` names: absent, the oldest kept; `now`, after the last event; else a cursor (400, 410). */
  private async positionsOf(since: string | undefined): Promise<StreamPosition[]> {
    // Every answer of the feed carries a cursor: the key that seals them first.
    const cursors = await this.source.ready();
    if (since === undefined || since === '') return this.source.startPositions('oldest');
    if (since === 'now') return this.source.startPositions('now');
    const opened = cursors.open(since);
    const positions = Array.isArray(opened) ? opened : await this.fanout.checkpoints.positions(opened, this.source.partitions);
    await this.source.checkKept(positions);
    return positions;
  }

  /**
   * Waits for the first matching event (or the timeout) and answers a page of what came. A token
   * revoked meanwhile answers 401; roles changed meanwhile, an empty page from where the poll
   * started (what came was chosen for the roles of before: the client polls again).
   */
  private longPoll(
    x: Exchange,
    principal: Principal,
    filter: ChangeFilter,
    positions: StreamPosition[],
    limit: number,
    timeout: number,
    token: string,
  ): Promise<void> {
    // Aborted while its first page was read: its onAborted has been called already.
    if (x.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const got: Delivered[] = [];
      let answered = false;
      let sub: FeedSubscriber | undefined;
      const finish = (send: () => void) => {
        if (answered) return;
        answered = true;
        clearTimeout(timer);
        stopWatch();
        sub?.close('stopped');
        send();
        resolve();
      };
      const answer = () =>
        finish(() => {
          const changes = got.slice(0, limit);
          const last = changes.length ? changes[changes.length - 1].cursor : this.source.cursors.encode(sub?.positions ?? positions);
          sendPage(x, changes, last);
        });
      const stopWatch = this.watchToken(
        token,
        principal,
        () => finish(() => x.sendError(new AppError('NOT_AUTHENTICATED', 'The token was revoked or expired'))),
        () => finish(() => sendPage(x, [], this.source.cursors.encode(positions))),
      );
      const timer = setTimeout(answer, timeout);
      const sink: FeedSink = {
        write: (batch) => {
          got.push(...batch);
          // Events that come in the same turn go into the same answer.
          setImmediate(answer);
          return true;
        },
        close: () => setImmediate(answer),
      };
      sub = new FeedSubscriber(this.fanout, principal, filter, positions, sink, limit);
      x.res.onAborted(() => {
        x.aborted = true;
        answered = true;
        clearTimeout(timer);
        stopWatch();
        sub?.close('stopped');
        resolve();
      });
      void sub.run();
    });
  }

  /** Server-sent events: `id: <cursor>`, `event: <kind>`, `data: <event>`, a comment when idle. */
  private sse(x: Exchange, principal: Principal, filter: ChangeFilter, positions: StreamPosition[], token: string): Promise<void> {
    const res = x.res;
    if (x.aborted) return Promise.resolve();
    x.responded = true;
    x.status = 200;
    return new Promise<void>((resolve) => {
      let ended = false;
      let lastWrite = Date.now();
      /** Writes in one cork (one send): a comment, or each event's frame. False when the client is behind. */
      const write = (comment: string | null, batch?: readonly Delivered[]): boolean => {
        if (ended || x.aborted) return true;
        let ok = true;
        res.cork(() => {
          // One write: each write to a socket that is behind makes uWS try to send all it holds.
          if (comment !== null) ok = res.write(comment);
          else ok = res.write(sseBytes(batch!));
        });
        lastWrite = Date.now();
        return ok;
      };
      const finish = (hard: boolean) => {
        if (ended) return;
        ended = true;
        clearInterval(keepAlive);
        stopWatch();
        this.streams.delete(sub);
        if (!x.aborted) {
          // A client that does not read would never take a graceful end: it is cut.
          if (hard) res.close();
          else res.cork(() => res.end());
        }
        resolve();
      };
      const sink: FeedSink = {
        write: (batch) => write(null, batch),
        close: (reason) => finish(reason === 'slow' || reason === 'failed'),
      };
      const sub = new FeedSubscriber(this.fanout, principal, filter, positions, sink, this.d.settings.CHANGES_SUBSCRIBER_BUFFER);
      this.streams.add(sub);
      res.onAborted(() => {
        x.aborted = true;
        sub.close('stopped');
        finish(false);
      });
      res.onWritable(() => {
        sub.writable();
        return true;
      });
      res.cork(() => {
        res.writeStatus('200 OK');
        for (const [k, v] of x.baseHeaders) res.writeHeader(k, v);
        res.writeHeader('Content-Type', 'text/event-stream; charset=utf-8');
        res.writeHeader('Cache-Control', 'no-cache, no-transform');
        res.writeHeader('X-Accel-Buffering', 'no');
        res.write(': change feed\n\n');
      });
      const keepAlive = setInterval(() => {
        if (Date.now() - lastWrite >= SSE_IDLE_MS) write(': keep-alive\n\n');
      }, SSE_CHECK_MS);
      const stopWatch = this.watchToken(token, principal, () => sub.close('stopped'));
      void sub.run();
    });
  }

  // ---- WebSocket ----

  private async wsStart(ws: uWS.WebSocket<WsData>, text: string, isBinary: boolean): Promise<void> {
    const data = ws.getUserData();
    let first: Record<string, unknown>;
    try {
      if (isBinary) throw new Error('binary');
      const parsed: unknown = JSON.parse(text);
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
      first = parsed as Record<string, unknown>;
    } catch {
      return this.wsFail(
        ws,
        new AppError('BAD_REQUEST', 'The first message must be a JSON object {"token", "since"?, "types"?, "views"?, "kinds"?}'),
        WS_CLOSE.badRequest,
      );
    }
    try {
      const principal = typeof first.token === 'string' && first.token ? await this.d.tokens.authenticate(first.token) : null;
      if (data.closed) return;
      if (!principal) return this.wsFail(ws, new AppError('NOT_AUTHENTICATED', 'A valid token is required'), WS_CLOSE.unauthorized);
      const unknown = Object.keys(first).find((k) => !['token', 'since', 'types', 'views', 'kinds'].includes(k));
      if (unknown) throw new AppError('BAD_REQUEST', `Unknown field ${unknown}`, { parameter: unknown });
      if (first.since !== undefined && typeof first.since !== 'string') throw new AppError('BAD_REQUEST', 'since must be a string', { parameter: 'since' });
      const filter = parseFilter(first);
      // Given back when uWS closes the socket (the `close` handler), however that comes about.
      data.release = this.takeSlot(principal.userId);
      await this.fanout.ensureStarted();
      const positions = await this.positionsOf(first.since as string | undefined);
      if (data.closed) return;
      /**
       * Events taken from the subscriber but not sent yet: at most the one batch the last write
       * got (the subscriber queues, within its bound, until the sink is writable again).
       */
      let pending: Buffer[] = [];
      /**
       * Sends pending events one by one while the socket holds less than its high water (so uWS
       * never has to drop one, CONTRACT §13); the rest waits for `drain`. True when all went and
       * the socket takes more. A message uWS dropped all the same (2) ends the socket as a
       * subscriber that did not read: the client resumes from the last event it received.
       */
      const flush = (): boolean => {
        const highWater = Math.max(WS_HIGH_WATER_MIN, Math.min(WS_HIGH_WATER, Math.floor(WS_BUFFERED_TOTAL / Math.max(1, this.fanout.subscriberCount))));
        let sent = 0;
        let dropped = false;
        ws.cork(() => {
          while (sent < pending.length && ws.getBufferedAmount() < highWater) {
            if (ws.send(pending[sent], false) === 2) {
              dropped = true;
              break;
            }
            sent++;
          }
        });
        pending = sent === pending.length ? [] : pending.slice(sent);
        if (dropped) {
          pending = [];
          data.sub?.close('slow');
          return true;
        }
        return !pending.length && ws.getBufferedAmount() < highWater;
      };
      data.drained = () => {
        if (flush()) data.sub?.writable();
        // The client took bytes: it is behind, not stalled.
        else data.sub?.progressed();
      };
      const sink: FeedSink = {
        write: (batch) => {
          if (data.closed) return true;
          pending = pending.length ? pending.concat(wsMessages(batch)) : wsMessages(batch).slice();
          return flush();
        },
        close: (reason) => {
          pending = [];
          if (data.closed) return;
          if (reason === 'slow')
            this.wsFail(
              ws,
              new AppError('TOO_MANY_REQUESTS', 'The subscriber did not read its events; resume from the last cursor received'),
              WS_CLOSE.tooSlow,
            );
          else if (reason === 'failed') this.wsFail(ws, new AppError('UNAVAILABLE', 'The feed failed; resume from the last cursor received'), 1011);
          else {
            data.closed = true;
            ws.end(1001, 'going away');
          }
        },
      };
      data.sub = new FeedSubscriber(this.fanout, principal, filter, positions, sink, this.d.settings.CHANGES_SUBSCRIBER_BUFFER);
      const stopWatch = this.watchToken(
        first.token as string,
        principal,
        () => this.wsFail(ws, new AppError('NOT_AUTHENTICATED', 'The token is no longer valid'), WS_CLOSE.unauthorized),
        () => data.sub?.close('stopped'),
      );
      const close = sink.close;
      sink.close = (reason) => {
        stopWatch();
        close(reason);
      };
      void data.sub.run();
    } catch (e) {
      if (e instanceof AppError && e.code === 'GONE') return this.wsFail(ws, e, WS_CLOSE.gone);
      if (e instanceof AppError)
        return this.wsFail(
          ws,
          e,
          e.http === 401 ? WS_CLOSE.unauthorized : e.http === 429 ? WS_CLOSE.tooSlow : e.http === 503 ? WS_CLOSE.tryAgainLater : WS_CLOSE.badRequest,
        );
      this.d.log.error({ err: e }, 'change feed WebSocket failed');
      return this.wsFail(ws, new AppError('INTERNAL'), 1011);
    }
  }

  /**
   * Calls `onInvalid` once the token is revoked or expired, and `onChanged` (by default the same)
   * once its user's roles differ from those the stream was opened with: a stream delivers what
   * its caller may read now, so it ends, and the client resumes from its cursor with the roles it
   * has then. Answers the function that stops watching.
   */
  private watchToken(token: string, opened: Principal, onInvalid: () => void, onChanged: () => void = onInvalid): () => void {
    return this.d.tokens.watch(token, opened, (now) => (now ? onChanged() : onInvalid()));
  }

  /** Sends `{"error": {...}}`, then closes with `code`. */
  private wsFail(ws: uWS.WebSocket<WsData>, e: AppError, code: number): void {
    const data = ws.getUserData();
    if (data.closed) return;
    data.closed = true;
    clearTimeout(data.timer);
    ws.cork(() => {
      ws.send(JSON.stringify(errorBody(e)), false);
      ws.end(code, e.message.slice(0, 100));
    });
    // A client that does not read never takes the close frame: it is cut after a grace period.
    setTimeout(() => {
      if (!data.gone) ws.close();
    }, 2000).unref();
  }
}

/** An integer query parameter within bounds; 400 naming it otherwise. */
function intParam(v: string | null, name: string, { min, max, default: dflt }: { min: number; max: number; default: number }): number {
  if (v === null) return dflt;
  if (!/^\d{1,9}$/.test(v) || Number(v) < min || Number(v) > max)
    throw new AppError('BAD_REQUEST', `Parameter ${name} must be an integer from ${min} to ${max}`, { parameter: name });
  return Number(v);
}

/**
 * The server-sent events of a batch in UTF-8, made once per batch: subscribers of one group are
 * written the same batch (ChangeFanout.dispatch), and 10,000 of them each joining a copy of the
 * same frames made gigabytes of strings a minute for the collector. Bytes, not a string: uWS
 * encodes a string on every write, and 10,000 writes of the same batch spent about half the web
 * process's time there. (uWS copies what it cannot send at once.)
 */
const sseFrames = new WeakMap<readonly Delivered[], Buffer>();
function sseBytes(batch: readonly Delivered[]): Buffer {
  let bytes = sseFrames.get(batch);
  if (bytes === undefined) {
    bytes = Buffer.from(batch.length === 1 ? batch[0].sse() : batch.map((e) => e.sse()).join(''), 'utf8');
    sseFrames.set(batch, bytes);
  }
  return bytes;
}

/**
 * The WebSocket messages of a batch (each event's JSON) in UTF-8, made once per batch for the
 * subscribers of a group, for the reason of sseBytes.
 */
const wsBatches = new WeakMap<readonly Delivered[], Buffer[]>();
function wsMessages(batch: readonly Delivered[]): Buffer[] {
  let messages = wsBatches.get(batch);
  if (messages === undefined) {
    messages = batch.map((e) => Buffer.from(e.json(), 'utf8'));
    wsBatches.set(batch, messages);
  }
  return messages;
}

/** `{"changes": [...], "last"}`, each event serialised once for all its subscribers. */
function sendPage(x: Exchange, changes: Delivered[], last: string): void {
  x.send(200, [['Content-Type', 'application/json']], pageBody(changes, last));
}

/**
 * A page's JSON, `{"changes":[...],"last":"<cursor>"}`, written event by event into one buffer:
 * a page of 1,000 events is about a megabyte, and joining the events' strings and converting the
 * whole to UTF-8 made and copied it twice more. The buffer is reused by the next page (uWS's `end`
 * copies the body, as its documentation says); one larger than PAGE_BUFFER_KEPT is made for its page only.
 */
export function pageBody(changes: Delivered[], last: string): Buffer {
  let need = 32 + last.length;
  for (const d of changes) need += 1 + d.maxBytes();
  let buf = pageBuffer;
  if (need > buf.length) {
    buf = Buffer.allocUnsafe(need);
    if (need <= PAGE_BUFFER_KEPT) pageBuffer = buf;
  }
  let at = buf.write('{"changes":[', 0, 'latin1');
  for (let i = 0; i < changes.length; i++) {
    if (i > 0) buf[at++] = 0x2c; // ,
    at = changes[i].writeJson(buf, at);
  }
  at += buf.write(`],"last":"${last}"}`, at, 'latin1');
  return buf.subarray(0, at);
}

const PAGE_BUFFER_KEPT = 8 * 2 ** 20;
let pageBuffer = Buffer.allocUnsafe(0);
