import type { BlockList } from 'node:net';
import { Readable } from 'node:stream';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { AppError } from '../errors.js';
import { newRequestId } from '../adapters/ids.js';
import { redisUnreachable } from '../adapters/redis.js';
import { clientAddressOf } from '../security/client-address.js';
import type { Principal } from '../content/permissions.js';
import { MAX_CONTAINERS_PER_BODY, MAX_KEYS_PER_BODY, checkCountsIn, checkStorable, parsedWeight } from './body-limits.js';
import type { BodiesHeld } from './bodies-held.js';

/** Reason phrases of the status lines the platform answers. */
const REASONS: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  206: 'Partial Content',
  303: 'See Other',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  412: 'Precondition Failed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  416: 'Range Not Satisfiable',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};
/** How often a paused body's idle timer is re-armed (holdPaused): under uWS's 10 s, which it counts in 4-s ticks. */
const PAUSE_KEEPALIVE_MS = 3000;
/**
 * How long a chunked answer may wait for a client that takes none of it before the connection
 * is cut (`drained`): the length of uWS's own idle timeout, which pausing the body turns off.
 */
const STALLED_ANSWER_MS = 10_000;
/**
 * Most bytes of a paused body held unread. uWS cannot poll a socket for writing only: each write
 * that finds the socket behind has it read again (a read of up to 512 KB) though the body is
 * paused, so a client that sends and takes its answers only slowly (its kernel's buffers, which
 * can grow to 32 MB here) could make the gateway hold its body as it arrives. Past this, the
 * connection is cut, as for a client that takes nothing (STALLED_ANSWER_MS).
 */
const PAUSED_BODY_LIMIT = 16 * 1024 * 1024;

const statusLine = (code: number) => `${code} ${REASONS[code] ?? 'Unknown'}`;

/**
 * Ends a HEAD answer: the Content-Length a GET would have, no body. Not uWS's
 * endWithoutBody(length): in this uWS it leaves the answer unfinished, and the connection
 * then answers no further request (a keep-alive client waits for nothing).
 */
function endHead(res: HttpResponse, length: number): void {
  res.writeHeader('Content-Length', String(length));
  res.endWithoutBody();
}

/**
 * Headers read once, synchronously, from the uWS request (it is invalid after the handler
 * returns). Those of a request body only for methods that have one: each read crosses into uWS
 * (about 0.1 µs), and a GET's body headers are never looked at.
 */
const REQUEST_HEADERS = ['x-auth-token', 'if-match', 'if-none-match', 'accept', 'x-request-id', 'range', 'x-forwarded-for'] as const;
const BODY_HEADERS = ['content-type', 'content-length', 'transfer-encoding'] as const;
const READ_HEADERS = [...REQUEST_HEADERS, ...BODY_HEADERS] as const;

/** What the key of a body whose token is not checked yet starts with, before its address's (`Exchange.callerPending`). */
const UNCHECKED = 'unchecked ';

/** Where a collected body is counted while its request is under way (`BodiesHeld`), and the caller it counts under. */
export interface BodyAccounting {
  held: BodiesHeld;
  /** The caller's key (`callerKey`): its user when given, else its client address. */
  callerOf(x: Exchange, user: Principal | null): string;
}

/** One request as the route handlers see it: copied out of uWS, with its body to come. */
export class Exchange {
  readonly method: string;
  readonly path: string;
  private parsedQuery?: URLSearchParams;
  readonly rawQuery: string;
  readonly headers: Record<string, string | undefined> = {};
  aborted = false;
  responded = false;
  /** The HTTP status answered (0 until then), and the route pattern matched, for metrics. */
  status = 0;
  route = 'unmatched';
  /** The request id: the client's X-Request-Id when sane, else a new one; carried to the actors. */
  readonly requestId: string;
  readonly started = performance.now();
  /** Headers every response of this exchange carries (version, origin). */
  readonly baseHeaders: [string, string][] = [];
  private bodyPromise?: Promise<Buffer>;
  /** Settles once the collected body is in, refused or cut off (`whole`); absent without one. */
  private bodySettled?: Promise<void>;
  /** Whether the request has arrived whole: no collected body, or that body settled (`whole`). */
  private settled = true;
  private upload?: Readable;
  /** Set once an upload stopped being read: later chunks are dropped and never pause the socket. */
  private discarding = false;
  /** Whether uWS was told to pause the body (the upload's reader is behind). */
  private paused = false;
  /** Keeps a paused body's connection open (holdPaused). */
  private pauseKeeper?: NodeJS.Timeout;
  /** The answer was ended (whole, streamed or chunked): nothing more is done with the socket. */
  private ended = false;
  /** Fails the collected body (set while it is being collected). */
  private abortBody?: (e: Error) => void;
  /** The socket's peer address, read when first asked for. */
  private peer?: string;
  /** Waiting for the socket to take a chunked answer's backlog (`drained`). */
  private drainWaiters: (() => void)[] = [];
  /** A chunked answer's bytes not handed to uWS yet: it is behind (`writeChunk`, `writeHeld`). */
  private held: Buffer[] = [];
  /** A write to uWS failed: nothing more is handed over until the socket is writable again. */
  private behind = false;
  /** uWS may still hold bytes it could not send: the next write hands it one byte first (`writeHeld`). */
  private unsure = false;
  /** Cuts a connection whose client took none of the answer for STALLED_ANSWER_MS (`drained`). */
  private stallTimer?: NodeJS.Timeout;
  /** The caller the collected body is counted under in `bodies`, and what it holds there (`hold`). */
  private holder = '';
  private holding = 0;
  /** The request ended (`release`): what its body held is given back, and later chunks are dropped. */
  private released = false;
  /**
   * The request carries a token its handler has not checked yet: its body counts under a share
   * of the client address for such bodies (`unchecked address:…`) until the handler checks the
   * token (`countUnder`: its user) or reads the body without one (`body`: the address). In the
   * address's own share, a caller there that sends no token (logins it never finishes) had every
   * signed-in writer there refused.
   */
  private callerPending = false;
  /** The handler wants no body (`noBody`): what comes of one is measured, not kept. */
  private bodyRefused = false;
  /** The body was refused when it changed caller (`settleCaller`): what `body` answers from then on. */
  private refusedBody?: AppError;
  /** Lets go of the chunks of a collected body (`collectBody`), at `release`. */
  private dropBody?: () => void;

  /**
   * `streamed`: the body is not collected but handed out as a stream (`bodyStream`), read with
   * backpressure; for file uploads, which may be far larger than memory.
   */
  constructor(
    readonly res: HttpResponse,
    req: HttpRequest,
    private readonly maxBody: number,
    streamed = false,
    /** Counts the collected body while the request is under way; absent, it is not counted. */
    private readonly bodies?: BodyAccounting,
  ) {
    this.method = req.getMethod().toUpperCase();
    this.path = req.getUrl();
    this.rawQuery = req.getQuery() ?? '';
    for (const h of this.method === 'GET' || this.method === 'HEAD' ? REQUEST_HEADERS : READ_HEADERS) {
      const v = req.getHeader(h);
      if (v !== '') this.headers[h] = v;
    }
    const rid = this.headers['x-request-id'];
    this.requestId = rid && /^[A-Za-z0-9._:-]{1,128}$/.test(rid) ? rid : newRequestId();
    this.baseHeaders.push(['X-Request-Id', this.requestId]);
    this.callerPending = bodies !== undefined && this.headers['x-auth-token'] !== undefined;
    res.onAborted(() => {
      this.aborted = true;
      this.upload?.destroy(new Error('The client went away during the upload'));
      // A body that will never be complete: the handler waiting for it must end (it holds an
      // in-flight slot of the gateway until it does).
      this.abortBody?.(new AppError('BAD_REQUEST', 'The client went away before the body was complete'));
      this.releaseDrainWaiters();
    });
    // The body must be subscribed to now, before the handler goes async.
    if (streamed) this.upload = this.streamBody();
    else if (this.method === 'POST' || this.method === 'PUT' || this.method === 'PATCH' || this.method === 'DELETE') {
      this.bodyPromise = this.collectBody();
      this.settled = false;
      const settled = () => {
        this.settled = true;
      };
      this.bodySettled = this.bodyPromise.then(settled, settled);
    }
  }

  /**
   * Resolves once the whole request has arrived: its collected body is in, refused (413) or cut
   * off (the client went away: `aborted`); at once for a request without one (GET, HEAD, and a
   * streamed body, which its handler reads). Never rejects: a body's failure is met where the
   * body is read. For the caller's second token check (request-auth.ts).
   */
  whole(): Promise<void> {
    return this.bodySettled ?? Promise.resolve();
  }

  /** Whether the whole request has arrived already (`whole` would resolve at once). */
  get arrived(): boolean {
    return this.settled;
  }

  /** The query parameters, parsed when first asked for. */
  get query(): URLSearchParams {
    this.parsedQuery ??= new URLSearchParams(this.rawQuery);
    return this.parsedQuery;
  }

  /** One query parameter (`query.get`), without parsing a query that is not there. */
  param(name: string): string | null {
    return this.rawQuery === '' ? null : this.query.get(name);
  }

  header(name: (typeof READ_HEADERS)[number]): string | undefined {
    return this.headers[name];
  }

  /**
   * The request body, refused with 413 past the limit (announced or streamed). A handler that
   * reads it without having checked the token has it counted under the client address from now
   * on (`callerPending`).
   */
  body(): Promise<Buffer> {
    if (this.callerPending) this.settleCaller(null);
    if (this.refusedBody) return Promise.reject(this.refusedBody);
    return this.bodyPromise ?? Promise.resolve(Buffer.alloc(0));
  }

  /**
   * For methods that define no request body (DELETE): 400 when one is sent anyway, so that a
   * body is never silently ignored; 413 past the limit, like every other body. Read before the
   * token is checked, an anonymous DELETE's body was held whole, up to MAX_BODY_BYTES for as long
   * as its client took to send it, before its 401: now one of a Content-Length is refused at
   * once, and a chunked one is only measured as it comes, nothing of it kept (`collectBody`).
   */
  async noBody(): Promise<void> {
    this.bodyRefused = true;
    const declared = Number(this.headers['content-length'] ?? 0);
    if (declared > 0 && declared <= this.maxBody) throw new AppError('BAD_REQUEST', `${this.method} takes no request body`);
    if ((await this.body()).length > 0) throw new AppError('BAD_REQUEST', `${this.method} takes no request body`);
  }

  /**
   * The body parsed as JSON; 400 when it is not JSON, 400 or 413 when it holds what the platform
   * cannot store as sent (body-limits.ts). From then on the body counts at its parsed weight,
   * under `user` when given (`BodiesHeld`): 429 or 503 when that is past a bound.
   */
  async json(user: Principal | null = null): Promise<unknown> {
    const buf = await this.body();
    if (buf.length === 0) throw new AppError('BAD_REQUEST', 'A JSON body is required');
    const weighed = { weight: buf.length };
    const value = parseJsonBody(buf, undefined, undefined, undefined, weighed);
    if (this.bodies && !this.released) {
      if (user) this.settleCaller(user);
      if (this.refusedBody) throw this.refusedBody;
      const refused = this.hold(weighed.weight - this.holding);
      if (refused) throw refused;
    }
    return value;
  }

  /**
   * The request's token is checked and names `user` (request-auth.ts, the first check): what its
   * body holds, and what comes of it, counts under that user from now on (`BodiesHeld.move`,
   * checked there as if it came now: past a bound, `body` answers 429 or 503).
   */
  countUnder(user: Principal): void {
    this.settleCaller(user);
  }

  /** The caller the body counts under from now on: `user`, or without one the client address. */
  private settleCaller(user: Principal | null): void {
    const pending = this.callerPending;
    this.callerPending = false;
    // Nothing to count for a request without a collected body (a read: no string made for it).
    if (!this.bodies || !this.bodyPromise || this.released) return;
    if (!user && (!pending || !this.holder)) return; // the address, when its first chunk comes
    const caller = user ? this.bodies.callerOf(this, user) : this.holder.slice(UNCHECKED.length);
    if (caller === this.holder) return;
    const refused = this.holder ? this.bodies.held.move(this.holder, caller, this.holding) : undefined;
    this.holder = caller;
    if (!refused) return;
    // Past a bound of its new caller: nothing of it is held, and the rest is dropped as it comes.
    this.holding = 0;
    this.refusedBody = refused;
    this.abortBody?.(refused);
  }

  /** Counts `n` more bytes of the collected body under its caller; the error when refused. */
  private hold(n: number): AppError | undefined {
    if (!this.bodies || n === 0) return undefined;
    if (!this.holder) this.holder = this.callerPending ? UNCHECKED + this.bodies.callerOf(this, null) : this.bodies.callerOf(this, null);
    const refused = this.bodies.held.take(this.holder, n, this.holding);
    if (!refused) this.holding += n;
    return refused;
  }

  /** The request ended: what its body held is given back (once), and chunks still to come are dropped. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.dropBody?.();
    this.bodies?.held.give(this.holder, this.holding);
    this.holding = 0;
  }

  /**
   * The client's address: the socket's peer, or behind a trusted proxy the address it forwarded
   * (src/security/client-address.ts). '' once the client went away.
   */
  clientAddress(trusted: BlockList | null): string {
    if (this.peer === undefined) {
      if (this.aborted) return '';
      this.peer = Buffer.from(this.res.getRemoteAddressAsText()).toString('latin1');
    }
    return clientAddressOf(this.peer, this.headers['x-forwarded-for'], trusted);
  }

  /** The body of a streamed exchange; throws for any other. */
  bodyStream(): Readable {
    if (!this.upload) throw new Error('This exchange does not stream its body');
    return this.upload;
  }

  /**
   * Stops reading a streamed body that was not used up (an upload refused part-way): the rest
   * is dropped as it arrives, so the answer can still be read by the client.
   */
  discardBody(): void {
    if (!this.upload || this.discarding) return;
    this.discarding = true;
    this.upload.destroy();
    // resume() on a socket that is not paused upsets uWS's keep-alive handling: only when paused.
    if (this.paused && !this.aborted) {
      this.paused = false;
      this.res.resume();
    }
  }

  /**
   * Keeps the connection of a paused body open for as long as its reader is behind. uWS arms its
   * 10-s idle timeout on resume() and again after each data callback and each write that finds
   * the socket behind: a body paused for longer (a bulk import waiting for slow actors, an upload
   * waiting for the file store) had its connection cut, with the lines taken answered to nobody.
   * While the body is paused, a resume() and a pause() in the same tick re-arm the timer every
   * few seconds and read nothing (the socket is not polled in between). Not while an answer
   * waits for the client to take what was written (`drained`): a client that neither sends nor
   * reads is cut by the answer's stall timer (STALLED_ANSWER_MS) and gives its slot back.
   */
  private holdPaused(): void {
    if (this.pauseKeeper) return;
    this.pauseKeeper = setInterval(() => {
      if (!this.paused || this.aborted || this.discarding || this.ended) {
        clearInterval(this.pauseKeeper);
        this.pauseKeeper = undefined;
        return;
      }
      if (this.drainWaiters.length) return;
      this.res.resume();
      this.res.pause();
    }, PAUSE_KEEPALIVE_MS);
    this.pauseKeeper.unref();
  }

  /** The body as a Readable fed by uWS: the socket is paused while the reader is behind. */
  private streamBody(): Readable {
    const stream = new Readable({
      highWaterMark: 256 * 1024,
      read: () => {
        if (this.paused && !this.aborted && !this.discarding) {
          this.paused = false;
          this.res.resume();
        }
      },
    });
    // A client that goes away destroys the stream with an error; whoever reads it sees that
    // error, and one nobody reads must not bring the process down.
    stream.on('error', () => undefined);
    this.res.onData((ab, isLast) => {
      if (this.discarding || stream.destroyed) return;
      // uWS reuses the chunk's memory after the callback: copy it.
      if (!stream.push(Buffer.from(ab.slice(0))) && !isLast) {
        if (this.paused && stream.readableLength > PAUSED_BODY_LIMIT) {
          this.aborted = true;
          this.res.close();
          stream.destroy(new AppError('BAD_REQUEST', 'The client sends faster than it takes its answers: the connection is cut'));
          this.releaseDrainWaiters();
          return;
        }
        // Also when already paused: data while paused means uWS reads on (a write that finds
        // the socket behind arms reading again), so pause again rather than take the body in.
        this.res.pause();
        if (!this.paused) {
          this.paused = true;
          this.holdPaused();
        }
      }
      if (isLast) {
        stream.push(null);
        // uWS may hand over data it already holds after pause(); with the body complete, a
        // paused socket would never be resumed by a read and the connection would stall.
        if (this.paused && !this.aborted) {
          this.paused = false;
          this.res.resume();
        }
      }
    });
    return stream;
  }

  private collectBody(): Promise<Buffer> {
    const declared = Number(this.headers['content-length'] ?? 0);
    return new Promise<Buffer>((resolve, reject) => {
      if (declared > this.maxBody) {
        reject(new AppError('PAYLOAD_TOO_LARGE', `Body larger than ${this.maxBody} bytes`));
        this.res.onData(() => undefined);
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let failed = false;
      this.abortBody = (e) => {
        failed = true;
        chunks.length = 0;
        reject(e);
      };
      // What was collected is let go of when the request ends, whole or not: uWS keeps this data
      // handler, and with it `chunks`, for as long as the client goes on sending the body, also
      // after the answer. Kept, a body refused (413) or answered early (401) held its chunks after
      // `release` had given them back, outside both bounds: one connection trickling 16 KB/s held
      // MAX_BODY_BYTES for as long as it liked.
      this.dropBody = () => {
        chunks.length = 0;
      };
      this.res.onData((ab, isLast) => {
        if (failed) return;
        if (this.released || this.ended) {
          // Answered before the body was whole: the rest is not wanted, and uWS must be asked
          // nothing more of this response (its address, for `hold`: uWS throws, and the process
          // stops). Whoever still waits for the body is let go.
          failed = true;
          chunks.length = 0;
          reject(new AppError('BAD_REQUEST', 'The request was answered before its body was complete'));
          return;
        }
        size += ab.byteLength;
        if (this.bodyRefused) {
          // `noBody`: measured for its 413, nothing of it kept; 400 at its end when it had bytes.
          chunks.length = 0;
          if (size > this.maxBody || (isLast && size > 0)) {
            failed = true;
            reject(
              size > this.maxBody
                ? new AppError('PAYLOAD_TOO_LARGE', `Body larger than ${this.maxBody} bytes`)
                : new AppError('BAD_REQUEST', `${this.method} takes no request body`),
            );
          } else if (isLast) resolve(Buffer.alloc(0));
          return;
        }
        if (size > this.maxBody) {
          failed = true;
          chunks.length = 0;
          reject(new AppError('PAYLOAD_TOO_LARGE', `Body larger than ${this.maxBody} bytes`));
          return;
        }
        const refused = this.hold(ab.byteLength);
        if (refused) {
          failed = true;
          chunks.length = 0;
          reject(refused);
          return;
        }
        // uWS reuses the chunk's memory after the callback: copy it.
        chunks.push(Buffer.from(ab.slice(0)));
        if (isLast) resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
      });
    });
  }

  /** Writes a whole response at once (corked into one syscall). */
  send(status: number, headers: [string, string][], body?: string | Buffer): void {
    if (this.aborted || this.responded) return;
    this.responded = true;
    this.status = status;
    try {
      this.res.cork(() => {
        this.res.writeStatus(statusLine(status));
        for (const [k, v] of this.baseHeaders) this.res.writeHeader(k, v);
        for (const [k, v] of headers) this.res.writeHeader(k, v);
        if (status === 204 || status === 304) this.res.endWithoutBody();
        // HEAD: the length a GET would have, and no body (uWS would send one, and a keep-alive
        // client would read it as the start of the next answer).
        else if (this.method === 'HEAD') endHead(this.res, body === undefined ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length);
        else this.res.end(body ?? '');
      });
      this.ended = true;
    } catch (e) {
      // uWS refused a part (a header value that is not a string): part of the answer may be out
      // already, so the connection is closed rather than left waiting for the rest.
      if (!this.aborted) {
        this.aborted = true;
        this.res.close();
      }
      throw e;
    }
  }

  /**
   * Streams `length` bytes from `stream` as the body, following the socket's backpressure
   * (uWS tryEnd/onWritable): memory stays flat whatever the length. Resolves when the body is
   * sent, the client went away, or the stream failed (the connection is then closed, since
   * the status line is gone already).
   */
  sendStream(status: number, headers: [string, string][], stream: Readable, length: number): Promise<void> {
    if (this.aborted || this.responded) {
      stream.destroy();
      return Promise.resolve();
    }
    this.responded = true;
    this.status = status;
    const res = this.res;
    let headSent = false;
    const writeHead = () => {
      if (headSent) return;
      headSent = true;
      res.writeStatus(statusLine(status));
      for (const [k, v] of this.baseHeaders) res.writeHeader(k, v);
      for (const [k, v] of headers) res.writeHeader(k, v);
    };
    if (this.method === 'HEAD' || length === 0) {
      stream.destroy();
      res.cork(() => {
        writeHead();
        if (this.method === 'HEAD') endHead(res, length);
        else res.end('');
      });
      this.ended = true;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      let done = false;
      /** A chunk waits for the socket to drain (the stream is paused meanwhile). */
      let pending = false;
      let ended = false;
      const finish = () => {
        if (done) return;
        done = true;
        this.ended = true;
        stream.destroy();
        resolve();
      };
      /** The body cannot be completed (stream failed or ended short): the client must not wait for it. */
      const cut = () => {
        if (!done && !this.aborted) res.close();
        finish();
      };
      /** Sends what it can of `chunk` (which starts at write offset `at`); false when the socket is full. */
      const attempt = (chunk: Buffer, at: number): boolean => {
        let result: [boolean, boolean] = [false, false];
        res.cork(() => {
          writeHead();
          result = res.tryEnd(chunk.subarray(res.getWriteOffset() - at), length);
        });
        const [ok, responded] = result;
        if (responded) finish();
        return ok;
      };
      stream.on('data', (chunk: Buffer) => {
        if (this.aborted) return finish();
        const at = res.getWriteOffset();
        if (attempt(chunk, at) || done) return;
        pending = true;
        stream.pause();
        res.onWritable(() => {
          if (this.aborted || done) {
            finish();
            return true;
          }
          const ok = attempt(chunk, at);
          if (ok) {
            pending = false;
            if (ended) cut();
            else if (!done) stream.resume();
          }
          return ok;
        });
      });
      stream.once('error', cut);
      // 'end' can come while the last chunk still waits for the socket: it finishes then.
      stream.once('end', () => {
        ended = true;
        if (!pending) cut();
      });
      stream.once('close', () => {
        if (!ended) cut();
      });
    });
  }

  /**
   * Starts an answer whose length is not known (chunked): the status line and headers now, the
   * body in `writeChunk` calls, then `endChunked`. For answers streamed while the request body
   * is still read (bulk import) or from a scan (export).
   */
  beginChunked(status: number, headers: [string, string][]): void {
    if (this.aborted || this.responded) return;
    this.responded = true;
    this.status = status;
    this.res.onWritable(() => {
      if (this.aborted || this.ended) return true;
      this.behind = false;
      // Nothing held here: uWS holds the end of a failed write and sends it only when written to;
      // an empty cork makes it write what it holds. Whether all of it went is not told: the next
      // write starts with one byte (`unsure`).
      if (!this.held.length) {
        if (this.unsure) this.res.cork(() => undefined);
        this.releaseDrainWaiters();
      } else if (this.writeHeld()) this.releaseDrainWaiters();
      return true;
    });
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status));
      for (const [k, v] of this.baseHeaders) this.res.writeHeader(k, v);
      for (const [k, v] of headers) this.res.writeHeader(k, v);
    });
  }

  /**
   * Writes part of a chunked answer (`beginChunked`). False when the socket is behind: the writer
   * waits for `drained()` before it makes more.
   *
   * What a slow client has not taken stays here, not in uWS. With an `onWritable` handler, uWS
   * sends what it holds only when it is written to again, and it takes every write whole: when
   * each writable event let the writers go, each wrote a batch, and uWS's backlog grew by that
   * much at every event while the client took a little (an export held almost whole for a client
   * reading 400 KB/s; SECURITY.md). Now, once a write fails, uWS gets nothing more until the
   * socket is writable; then one byte first, which uWS sends after what it holds and answers
   * whether all of it went; only then the rest. uWS holds at most one chunk and a few bytes.
   */
  writeChunk(data: string | Buffer): boolean {
    if (this.aborted || data.length === 0) return true;
    this.held.push(typeof data === 'string' ? Buffer.from(data) : data);
    return !this.behind && this.writeHeld();
  }

  /** Hands uWS what is held, while it takes it; false (and `behind`) once it does not. */
  private writeHeld(): boolean {
    while (this.held.length) {
      const buf = this.held[0];
      const n = this.unsure ? 1 : buf.length;
      let ok = true;
      this.res.cork(() => {
        ok = this.res.write(n === buf.length ? buf : buf.subarray(0, n));
      });
      if (n === buf.length) this.held.shift();
      else this.held[0] = buf.subarray(n);
      if (!ok) {
        this.behind = true;
        this.unsure = true;
        return false;
      }
      // uWS sent all it held before this byte: the rest may go whole.
      this.unsure = false;
    }
    return true;
  }

  /**
   * Resolves once the socket took what was written, or the client went away. A client that
   * takes none of it for STALLED_ANSWER_MS is cut: uWS's idle timer cannot be relied on here,
   * as pausing and resuming the body (streamBody, holdPaused) turn it off and on.
   */
  drained(): Promise<void> {
    if (this.aborted) return Promise.resolve();
    this.stallTimer ??= setTimeout(() => {
      this.stallTimer = undefined;
      // Not once the answer is ended: uWS then forgets the response, and closing it would hit
      // a freed response or the next request on a keep-alive connection.
      if (!this.aborted && !this.ended && this.drainWaiters.length) {
        this.aborted = true;
        this.res.close();
        this.releaseDrainWaiters();
      }
    }, STALLED_ANSWER_MS).unref();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private releaseDrainWaiters(): void {
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    for (const f of this.drainWaiters.splice(0)) f();
  }

  /** Ends a chunked answer, with what is still held (uWS sends it as the socket takes it). */
  endChunked(): void {
    if (this.aborted) return;
    const rest = this.held.splice(0);
    this.res.cork(() => {
      for (const b of rest) this.res.write(b);
      this.res.end();
    });
    this.ended = true;
    // uWS calls neither onWritable nor onAborted for an ended response: whoever waits is let go.
    this.releaseDrainWaiters();
  }

  sendJson(status: number, value: unknown, headers: [string, string][] = [], pretty = false): void {
    this.send(status, [['Content-Type', 'application/json'], ...headers], pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value));
  }

  /** The one place an error becomes an HTTP answer: the spec's error body and status. */
  sendError(e: unknown, log?: (err: unknown) => void): void {
    const err = errorOf(e, log);
    if (this.responded && !this.ended && !this.aborted) {
      // A streamed or chunked answer failed part-way: its status line is out, so the client is
      // cut off rather than left waiting for an end that never comes.
      this.aborted = true;
      this.res.close();
      return;
    }
    const headers: [string, string][] = [];
    if (err.retryAfter !== undefined) headers.push(['Retry-After', String(err.retryAfter)]);
    if (err.code === 'METHOD_NOT_ALLOWED' && Array.isArray(err.extraInfo.allow)) headers.push(['Allow', err.extraInfo.allow.join(', ')]);
    if (err.code === 'RANGE_NOT_SATISFIABLE') headers.push(['Content-Range', `bytes */${String(err.extraInfo.length)}`]);
    this.sendJson(err.http, err.toBody(), headers);
  }
}

/**
 * The AppError a failure is answered with: itself, 503 when Redis does not answer, else 500; `log`
 * is told of any failure that is not an AppError.
 */
export function errorOf(e: unknown, log?: (err: unknown) => void): AppError {
  if (e instanceof AppError) return e;
  log?.(e);
  return redisUnreachable(e) ? new AppError('UNAVAILABLE', 'Store unavailable', {}, 1) : new AppError('INTERNAL');
}

/** Splits a path into decoded segments; 400 for a bad percent-encoding or control characters. */
export function segmentsOf(path: string): string[] {
  const parts = path.split('/').filter((s, i) => i > 0 || s !== '');
  // Without a `%` nothing decodes: one look at the whole path for control characters.
  if (!path.includes('%')) {
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(path)) throw new AppError('BAD_REQUEST', 'Control characters in path');
    return parts;
  }
  return parts.map((p) => {
    let s: string;
    try {
      s = decodeURIComponent(p);
    } catch {
      throw new AppError('BAD_REQUEST', 'Malformed percent-encoding in path');
    }
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(s)) throw new AppError('BAD_REQUEST', 'Control characters in path');
    return s;
  });
}

/** parseJsonBody's decoder: throws on invalid UTF-8; a BOM is kept (and refused by JSON.parse, as before). */
const UTF8_STRICT = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * A JSON body (or one NDJSON line): 400 when it is not UTF-8 or does not parse (invalid UTF-8
 * would otherwise be stored as U+FFFD), 400 or 413 when it could not be stored. A body with more
 * objects and arrays than `maxContainers` or keys than `maxKeys` is refused on its bytes, before JSON.parse spends
 * seconds of the gateway's thread on it (body-limits.ts).
 */
export function parseJsonBody(
  buf: Buffer,
  maxDepth?: number,
  maxContainers = MAX_CONTAINERS_PER_BODY,
  maxKeys = MAX_KEYS_PER_BODY,
  /** Given, its `weight` is set to what the body holds parsed (`parsedWeight`). */
  weighed?: { weight: number },
): unknown {
  checkCountsIn(buf, maxContainers, maxKeys);
  let text: string;
  try {
    text = UTF8_STRICT.decode(buf);
  } catch {
    throw new AppError('BAD_REQUEST', 'Malformed JSON: the body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new AppError('BAD_REQUEST', `Malformed JSON: ${(e as Error).message}`);
  }
  const counts = checkStorable(value, maxDepth, maxContainers);
  if (weighed) weighed.weight = parsedWeight(buf.length, counts);
  return value;
}
