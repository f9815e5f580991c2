import net from 'node:net';
import { expect } from 'chai';
import { KeepAliveConnection } from '../support/keepalive-http.js';
import { article, Client, startTestPlatform } from '../support/platform.js';
import { parseHead } from '../support/raw-http.js';
import { until } from '../support/wait.js';

/**
 * Requests pipelined on one connection: sent back to back without waiting for the answers (RFC
 * 9112 §9.3.2), which must come back in the order of the requests. uWebSockets.js keeps one
 * response a connection: it answers pipelined requests in order as long as each is answered
 * before the next one is parsed (a route that answers without waiting on I/O), and closes the
 * connection when a request comes while the one before it is still unanswered (uWebSockets
 * src/HttpContext.h: "Are we not ready for another request yet? Terminate the connection"). The
 * gateway never sees that request, so it can neither hold nor answer it; what it guarantees is
 * what these tests check: the connection never hangs, an answer never comes out of order or in
 * part, a request behind the unanswered one is never run, and each is answered when sent again.
 */

/** One request as sent: the target byte for byte; an `X-Request-Id` naming its place is added. */
interface Piped {
  method: string;
  target: string;
  headers?: [string, string][];
  body?: string;
  /** The status it answers when sent alone. */
  expect: number;
}

interface PipedAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** A raw connection on which several requests are written at once and their answers read in turn. */
class PipelinedConnection {
  private buf: Buffer = Buffer.alloc(0);
  closed = false;
  private wake: (() => void) | null = null;
  private static runs = 0;

  private constructor(private readonly sock: net.Socket) {
    sock.setNoDelay(true);
    sock.on('data', (d: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.wake?.();
    });
    const gone = () => {
      this.closed = true;
      this.wake?.();
    };
    sock.on('end', gone);
    sock.on('close', gone);
    // A reset is a close too (uWS closes with unread bytes left).
    sock.on('error', gone);
  }

  static open(port: number): Promise<PipelinedConnection> {
    return new Promise((resolve, reject) => {
      const sock = net.connect(port, '127.0.0.1');
      sock.once('connect', () => resolve(new PipelinedConnection(sock)));
      sock.once('error', reject);
    });
  }

  /** The X-Request-Id of request `i` of run `run`. */
  static idOf(run: number, i: number): string {
    return `pipe-${run}-${i}`;
  }

  /**
   * Writes every request in one write, then reads the answers in order until each request has
   * its answer or the connection is closed; fails when neither happens within `ms` (the
   * connection hangs). The run's number names the requests' X-Request-Ids (`idOf`).
   */
  async send(reqs: Piped[], ms = 8000): Promise<{ run: number; answers: PipedAnswer[]; closed: boolean }> {
    const run = ++PipelinedConnection.runs;
    const wire = reqs.map((r, i) => {
      const body = r.body === undefined ? undefined : Buffer.from(r.body);
      let head = `${r.method} ${r.target} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: ${PipelinedConnection.idOf(run, i)}\r\n`;
      for (const [k, v] of r.headers ?? []) head += `${k}: ${v}\r\n`;
      if (body) head += `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`;
      return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), body ?? Buffer.alloc(0)]);
    });
    const answers: PipedAnswer[] = [];
    this.sock.write(Buffer.concat(wire));
    const deadline = Date.now() + ms;
    for (;;) {
      while (answers.length < reqs.length) {
        const a = this.take(reqs[answers.length].method === 'HEAD');
        if (!a) break;
        answers.push(a);
      }
      if (answers.length === reqs.length || this.closed) break;
      const left = deadline - Date.now();
      if (left <= 0) {
        this.close();
        throw new Error(`the connection hangs: ${answers.length} of ${reqs.length} answers in ${ms} ms, still open`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
    if (this.closed) expect(this.buf.length, `bytes of an answer in part before the close: ${this.buf.subarray(0, 200).toString('latin1')}`).to.equal(0);
    return { run, answers, closed: this.closed };
  }

  /** The whole answer at the start of the buffer, taken out of it; null until it is whole. */
  private take(isHead: boolean): PipedAnswer | null {
    const head = parseHead(this.buf);
    if (!head) return null;
    const { status, headers, bodyStart } = head;
    let length = 0;
    if (!isHead && status !== 204 && status !== 304) {
      // Every answer of these routes has a Content-Length: one without could not be delimited.
      expect(headers['content-length'], `the framing of a ${status} answer`).to.match(/^\d+$/);
      length = Number(headers['content-length']);
    }
    if (this.buf.length < bodyStart + length) return null;
    const body = this.buf.subarray(bodyStart, bodyStart + length);
    this.buf = this.buf.subarray(bodyStart + length);
    return { status, headers, body };
  }

  close(): void {
    this.sock.destroy();
  }
}

/** The answers came whole, each that of its own request (its X-Request-Id and status), in order. */
function expectInOrder(run: number, reqs: Piped[], answers: PipedAnswer[]): void {
  answers.forEach((a, i) => {
    const what = `answer ${i} (${reqs[i].method} ${reqs[i].target.slice(0, 80)})`;
    expect(a.headers['x-request-id'], `${what}: whose request`).to.equal(PipelinedConnection.idOf(run, i));
    expect(a.status, what).to.equal(reqs[i].expect);
  });
}

describe('gateway: requests pipelined on one connection (RFC 9112 §9.3.2)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let port = 0;
  let editor: Client;
  let token = '';
  /** A content's alias path, and the compare of its two versions. */
  let alias = '';
  let compare = '';
  let envelope = '';
  const auth = (): [string, string][] => [['X-Auth-Token', token]];

  before(async () => {
    p = await startTestPlatform({}, ['web', 'actors']);
    port = Number(new URL(p.url).port);
    editor = await new Client(p.base).login('editor');
    token = editor.token!;
    const c = await editor.create(article('pipelined'));
    expect(c.status, c.text).to.equal(201);
    const u = await editor.update(c.json.system.id, article('pipelined, again'), c.headers.get('etag'));
    expect(u.status, u.text).to.equal(200);
    alias = `/content-service/content/alias/${c.json.system.id}`;
    compare = `${alias}/compare?from=${encodeURIComponent(c.json.system.version)}&to=${encodeURIComponent(u.json.system!.version as string)}`;
    envelope = JSON.stringify(article('pipelined create'));
  });
  after(async () => p?.stop());

  it('requests answered without waiting on I/O come back whole and in order, and the connection stays usable', async () => {
    const reqs: Piped[] = [
      // 170 KB: uWS cannot send it at once, and holds the rest while it parses the next request.
      { method: 'GET', target: '/openapi.json', expect: 200 },
      { method: 'HEAD', target: '/openapi.json', expect: 200 },
      { method: 'GET', target: '/nothing', expect: 404 },
      { method: 'POST', target: '/nothing', body: '{"a":1}', expect: 404 },
      { method: 'POST', target: '/metrics', body: '{}', expect: 405 },
      { method: 'GET', target: '/content-service/%zz', expect: 400 },
      { method: 'GET', target: '/console/', expect: 200 },
      { method: 'HEAD', target: '/console/', expect: 200 },
      { method: 'GET', target: '/console', expect: 308 },
    ];
    const conn = await PipelinedConnection.open(port);
    try {
      const first = await conn.send(reqs);
      expect(first.answers, 'every request answered').to.have.length(reqs.length);
      expectInOrder(first.run, reqs, first.answers);
      expect(first.closed, 'the connection closed').to.equal(false);
      // The HEAD answers announce the length of the GET's body, and carry none.
      expect(Number(first.answers[1].headers['content-length'])).to.equal(first.answers[0].body.length);
      expect(JSON.parse(first.answers[0].body.toString()).openapi).to.be.a('string');
      expect(Number(first.answers[7].headers['content-length'])).to.equal(first.answers[6].body.length);
      // The same connection then serves a request that waits on Redis, and pipelines again.
      const next = await conn.send([{ method: 'GET', target: alias, headers: auth(), expect: 303 }]);
      expectInOrder(next.run, [{ method: 'GET', target: alias, expect: 303 }], next.answers);
      const again = await conn.send(reqs.slice(0, 4));
      expect(again.answers).to.have.length(4);
      expectInOrder(again.run, reqs, again.answers);
      expect(again.closed).to.equal(false);
    } finally {
      conn.close();
    }
  });

  it('behind a request that waits on I/O the connection is closed at once: never left hanging, no answer out of order or in part, each answered when sent again', async () => {
    const get = (target: string, expectStatus: number, method = 'GET'): Piped => ({ method, target, headers: auth(), expect: expectStatus });
    const post: Piped = { method: 'POST', target: '/content-service/content', headers: auth(), body: envelope, expect: 201 };
    /**
     * `closed`: the connection must be closed with that many answers (a readiness check always
     * asks Redis). Without it, either outcome may come: a read or compare whose content and token
     * are cached is answered at once, the first of them seldom is.
     */
    const cases: { name: string; reqs: Piped[]; closed?: number }[] = [
      { name: 'health first', reqs: [get('/health', 200), get('/nothing', 404), get('/openapi.json', 200), get(alias, 303, 'HEAD')], closed: 0 },
      // The first is answered at once, but uWS holds that answer (corked) until it has parsed the
      // whole read, and closing the connection at the third drops it.
      { name: 'an answer at once, one that waits, another', reqs: [get('/nothing', 404), get('/health', 200), get('/nothing', 404)], closed: 0 },
      {
        name: 'a compare first, then fast ones',
        reqs: [get(compare, 200), get('/nothing', 404), get('/openapi.json', 200), get(alias, 303, 'HEAD'), get(alias, 303)],
      },
      { name: 'eight reads', reqs: Array.from({ length: 8 }, () => get(alias, 303)) },
      { name: 'eight compares', reqs: Array.from({ length: 8 }, () => get(compare, 200)) },
      { name: 'a read, a create with a body, a HEAD', reqs: [get(alias, 303), post, get(alias, 303, 'HEAD')] },
    ];
    for (const { name, reqs, closed } of cases) {
      const conn = await PipelinedConnection.open(port);
      const started = Date.now();
      let out: Awaited<ReturnType<PipelinedConnection['send']>>;
      try {
        out = await conn.send(reqs);
      } finally {
        conn.close();
      }
      const ms = Date.now() - started;
      expectInOrder(out.run, reqs, out.answers);
      if (out.answers.length < reqs.length)
        expect(out.closed, `${name}: ${out.answers.length} of ${reqs.length} answered, and the connection open`).to.equal(true);
      // Closed when the second request came, not by an idle timer (uWS's is 10 s).
      expect(ms, `${name}: ms until every answer or the close`).to.be.below(5000);
      if (closed !== undefined) {
        // uWS answers no request pipelined behind one not yet answered (the day it does, this test,
        // the comment at Gateway.listen and RELIABILITY.md "Pipelined requests" change).
        expect(out.closed, `${name}: closed`).to.equal(true);
        expect(out.answers, `${name}: answered before the connection closed`).to.have.length(closed);
      }
      // What was not answered is answered when sent again, one request at a time.
      const retry = new KeepAliveConnection(port);
      try {
        for (const r of reqs.slice(out.answers.length)) {
          const headers: [string, string][] = [...(r.headers ?? []), ...(r.body ? ([['Content-Type', 'application/json']] as [string, string][]) : [])];
          const o = await retry.send({ method: r.method, target: r.target, headers, body: r.body === undefined ? undefined : Buffer.from(r.body) });
          expect(o.ok && o.res.status, `${name}: ${r.method} ${r.target.slice(0, 80)} sent again`).to.equal(r.expect);
        }
      } finally {
        retry.close();
      }
    }
  });

  it('a create pipelined behind a request not yet answered is never run; a create itself waiting when the connection closes runs, unanswered', async () => {
    const ns = `pipe${Date.now()}`;
    /** A create that sets the alias `<ns>/<alias>`: whether it ran is read back by that alias. */
    const create = (alias: string): Piped => ({
      method: 'POST',
      target: '/content-service/content',
      headers: auth(),
      body: JSON.stringify({ ...article('pipelined create'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias }] }),
      expect: 201,
    });
    const exists = async (alias: string) => (await editor.req('GET', `/content/alias/${ns}/${alias}`)).status;
    const send = async (reqs: Piped[]) => {
      const conn = await PipelinedConnection.open(port);
      try {
        return await conn.send(reqs);
      } finally {
        conn.close();
      }
    };
    const behind = await send([{ method: 'GET', target: '/health', expect: 200 }, create('behind')]);
    expect(behind.closed, 'the connection closed').to.equal(true);
    expect(behind.answers).to.have.length(0);
    const ahead = await send([create('ahead'), { method: 'GET', target: '/nothing', expect: 404 }]);
    expect(ahead.closed, 'the connection closed').to.equal(true);
    expect(ahead.answers).to.have.length(0);
    // The create ahead ran all the same: the client learns nothing of it, and as for any connection
    // lost during a write, must look before it sends it again (RFC 9112 §9.3.2: no pipelining after a write).
    await until(async () => (await exists('ahead')) === 303, 15_000, 'the create ahead of the 404');
    // The one behind never reached the gateway (uWS closed the connection before routing it).
    expect(await exists('behind'), 'the create behind the health check').to.equal(404);
    // Sent again alone, the create behind is run once.
    const alone = new KeepAliveConnection(port);
    const r = create('behind');
    const again = await alone.send({
      method: r.method,
      target: r.target,
      headers: [...auth(), ['Content-Type', 'application/json']],
      body: Buffer.from(r.body!),
    });
    alone.close();
    expect(again.ok && again.res.status).to.equal(201);
    expect(await exists('behind')).to.equal(303);
  });
});
