import net from 'node:net';
import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { KeepAliveConnection } from '../support/keepalive-http.js';
import { eventually, until } from '../support/wait.js';

/**
 * Overload and slow clients (issue 8, item 5): a flood of concurrent requests beyond
 * MAX_IN_FLIGHT, slowloris sockets (request heads sent a byte at a time, never finished, or
 * never started), slow and abandoned request bodies. The gateway must shed what it cannot take
 * with 503 and Retry-After, store nothing for a shed request, keep GET /health answering 200
 * quickly throughout, close the slow sockets itself, and give every in-flight slot back.
 */

const MAX_IN_FLIGHT = 16;
/**
 * How long a health check may wait for its answer before it counts as not answered. Not a speed
 * figure (the latencies are logged; a shed or dropped health check fails at once): only a bound
 * for a check that never comes back.
 */
const HEALTH_NO_ANSWER_MS = 30_000;

type P = Awaited<ReturnType<typeof startTestPlatform>>;

interface Raw {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses one answer out of raw bytes (null when there is none). */
function parseAnswer(bytes: string): Raw | null {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine, ...lines] = bytes.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
  const len = Number(headers['content-length'] ?? 0);
  return { status: Number(statusLine.split(' ')[1]), headers, body: bytes.slice(end + 4, end + 4 + len) };
}

/** Polls GET /health on a keep-alive connection until `stop()`; collects statuses and latencies. */
function watchHealth(port: number, everyMs: number) {
  const c = new KeepAliveConnection(port);
  const seen: { status: number; ms: number }[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const started = performance.now();
      const o = await c.send({ method: 'GET', target: '/health', headers: [] }, HEALTH_NO_ANSWER_MS);
      seen.push({ status: o.ok ? o.res.status : 0, ms: performance.now() - started });
      await new Promise((r) => setTimeout(r, everyMs));
    }
    c.close();
  })();
  return {
    seen,
    async stop() {
      running = false;
      await done;
      return seen;
    },
  };
}

function summary(seen: { status: number; ms: number }[]): string {
  const ms = seen.map((s) => s.ms).sort((a, b) => a - b);
  return `${seen.length} health checks, p50 ${ms[ms.length >> 1]?.toFixed(1)} ms, max ${ms[ms.length - 1]?.toFixed(1)} ms`;
}

/** Every health check was answered 200: none shed, none dropped. How fast is logged, not asserted. */
function expectHealthy(seen: { status: number; ms: number }[], what: string): void {
  expect(seen.length, `${what}: health was polled`).to.be.greaterThan(0);
  const bad = seen.filter((s) => s.status !== 200);
  expect(bad, `${what}: health answers other than 200 (0: none) (${summary(seen)})`).to.deep.equal([]);
}

describe('gateway under overload and slow clients (issue 8, item 5)', function () {
  this.timeout(90_000);

  let p: P;
  let port: number;
  let editor: Client;
  let readPath: string;

  before(async () => {
    p = await startTestPlatform({ MAX_IN_FLIGHT: String(MAX_IN_FLIGHT) }, ['web', 'actors']);
    port = Number(new URL(p.url).port);
    editor = await new Client(p.base).login('editor');
    const c = await editor.create(article('Overload target'));
    expect(c.status, c.text).to.equal(201);
    readPath = `/content-service/content/alias/${c.json.system.id}`;
  });
  after(async () => p?.stop());

  /** Sequential requests that must all be served (not shed): the gateway has its slots back. */
  async function expectServed(what: string, n = 3 * MAX_IN_FLIGHT): Promise<void> {
    const c = new KeepAliveConnection(port);
    try {
      for (let i = 0; i < n; i++) {
        const o = await c.send({ method: 'GET', target: readPath, headers: [['X-Auth-Token', editor.token!]] }, 5000);
        expect(o.ok && o.res.status, `${what}: request ${i}`).to.equal(303);
      }
    } finally {
      c.close();
    }
  }

  it(`sheds a flood beyond MAX_IN_FLIGHT=${MAX_IN_FLIGHT} with 503 and Retry-After, stores nothing for it, and /health keeps answering`, async () => {
    const N = 600;
    const health = watchHealth(port, 10);
    // Every socket is connected first, then all requests go out at once: they arrive within a
    // few event-loop turns, far more of them than MAX_IN_FLIGHT.
    const sockets = await Promise.all(
      Array.from(
        { length: N },
        () =>
          new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect(port, '127.0.0.1', () => resolve(s));
            s.once('error', reject);
          }),
      ),
    );
    const answers = sockets.map(
      (s) =>
        new Promise<string>((resolve) => {
          let out = '';
          s.on('data', (d: Buffer) => {
            out += d.toString('latin1');
            const a = parseAnswer(out);
            if (a && out.length >= out.indexOf('\r\n\r\n') + 4 + Number(a.headers['content-length'] ?? 0)) s.destroy();
          });
          s.on('error', () => undefined);
          s.on('close', () => resolve(out));
        }),
    );
    const started = performance.now();
    sockets.forEach((s, i) => {
      const body = JSON.stringify({ ...article(`flood ${i}`), operations: [{ _type: 'svcSetAlias', namespace: 'flood', alias: `f${i}` }] });
      s.write(
        `POST /content-service/content HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${editor.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
    const raw = await Promise.all(answers);
    const floodMs = performance.now() - started;
    const seen = await health.stop();

    const parsed = raw.map((r, i) => ({ i, a: parseAnswer(r) }));
    const statuses = new Map<number, number>();
    for (const { a } of parsed) statuses.set(a?.status ?? 0, (statuses.get(a?.status ?? 0) ?? 0) + 1);
    console.log(`    flood: ${N} creates in ${floodMs.toFixed(0)} ms: ${[...statuses].map(([s, n]) => `${s}×${n}`).join(' ')}; ${summary(seen)}`);

    // Every request got an answer: created, or shed with 503 and Retry-After.
    expect(
      [...statuses.keys()].filter((k) => k !== 201 && k !== 503),
      'answers other than 201 and 503 (0: none)',
    ).to.deep.equal([]);
    expect(statuses.get(503) ?? 0, 'requests shed').to.be.greaterThan(0);
    expect(statuses.get(201) ?? 0, 'requests served').to.be.at.least(MAX_IN_FLIGHT);
    for (const { a } of parsed) {
      if (a!.status !== 503) continue;
      expect(a!.headers['retry-after'], 'Retry-After').to.match(/^[1-9]\d*$/);
      expect(JSON.parse(a!.body)).to.deep.include({ statusCode: '50300' }).and.to.have.all.keys('message', 'statusCode', 'extraInfo');
    }
    expectHealthy(seen, 'during the flood');

    // A shed create stored nothing: its alias names no content; a served one's does.
    const c = new KeepAliveConnection(port);
    try {
      for (const { i, a } of parsed) {
        const o = await c.send({ method: 'GET', target: `/content-service/content/alias/flood/f${i}`, headers: [['X-Auth-Token', editor.token!]] });
        expect(o.ok && o.res.status, `flood/f${i} after a ${a!.status}`).to.equal(a!.status === 201 ? 303 : 404);
      }
    } finally {
      c.close();
    }
    await expectServed('after the flood');
  });

  it('slowloris: heads sent a byte at a time, never finished or never started, and slow bodies do not stop /health; the server closes them and gives the slots back', async () => {
    const t0 = Date.now();
    const kinds = {
      /** A request head that grows by one byte every 200 ms and never ends. */
      trickle: 150,
      /** Connected, nothing sent. */
      silent: 100,
      /** Half a request line, then nothing. */
      partial: 100,
      /** A whole head of a POST announcing a body that comes a byte every 200 ms: each holds an in-flight slot. */
      slowBody: 2 * MAX_IN_FLIGHT,
    };
    const closedAfter: Record<string, number[]> = { trickle: [], silent: [], partial: [], slowBody: [] };
    const timers: NodeJS.Timeout[] = [];
    const sockets: net.Socket[] = [];
    const bodyAnswers: string[] = [];
    await Promise.all(
      Object.entries(kinds).flatMap(([kind, n]) =>
        Array.from(
          { length: n },
          () =>
            new Promise<void>((resolve) => {
              const s = net.connect(port, '127.0.0.1');
              sockets.push(s);
              let got = '';
              s.on('data', (d: Buffer) => (got += d.toString('latin1')));
              s.on('error', () => undefined);
              s.on('close', () => {
                closedAfter[kind].push(Date.now() - t0);
                if (kind === 'slowBody') bodyAnswers.push(got);
              });
              s.on('connect', () => {
                if (kind === 'trickle') {
                  s.write('GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ');
                  timers.push(setInterval(() => s.writable && s.write('a'), 200));
                } else if (kind === 'partial') s.write('GET /content-ser');
                else if (kind === 'slowBody') {
                  s.write(
                    `POST /content-service/content HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${editor.token}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":"`,
                  );
                  timers.push(setInterval(() => s.writable && s.write('x'), 200));
                }
                resolve();
              });
            }),
        ),
      ),
    );
    const health = watchHealth(port, 50);
    try {
      // Once the slow bodies hold every slot, other requests are shed with 503 and Retry-After.
      // (Their heads reach the server in its own time; the idle timeout frees them after 10 s.)
      let read: unknown;
      await until(
        async () => {
          const shed = new KeepAliveConnection(port);
          const o = await shed.send({ method: 'GET', target: readPath, headers: [['X-Auth-Token', editor.token!]] });
          shed.close();
          read = o.ok && [o.res.status, o.res.headers['retry-after']];
          return o.ok && o.res.status !== 303;
        },
        9_000,
        'a read to be shed while the slow bodies hold every slot',
      );
      expect(read, 'a read while slow bodies hold every slot').to.deep.equal([503, '1']);

      // uWS closes a socket that has not completed a request (head or body) within its idle
      // timeout (10 s, checked every 4 s); give it 20 s.
      const total = Object.values(kinds).reduce((a, b) => a + b, 0);
      while (Object.values(closedAfter).flat().length < total && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 200));
    } finally {
      timers.forEach(clearInterval);
    }
    const seen = await health.stop();
    const closed = Object.fromEntries(
      Object.entries(closedAfter).map(([k, v]) => [
        k,
        v.length
          ? `${v.length}/${kinds[k as keyof typeof kinds]} closed after ${(Math.min(...v) / 1000).toFixed(1)}-${(Math.max(...v) / 1000).toFixed(1)} s`
          : `0/${kinds[k as keyof typeof kinds]} closed`,
      ]),
    );
    console.log(`    slowloris: ${JSON.stringify(closed)}; ${summary(seen)}`);
    for (const s of sockets) s.destroy();

    expectHealthy(seen, 'during the slowloris attack');
    for (const [kind, n] of Object.entries(kinds)) expect(closedAfter[kind].length, `${kind} sockets closed by the server`).to.equal(n);
    // A slow body never completed: nothing was created from one (no answer, shed at once with
    // 503 when every slot was taken, or a clean 4xx).
    for (const a of bodyAnswers) if (a) expect(a, 'answer to an unfinished body').to.match(/^HTTP\/1\.1 (4\d\d|503) /);
    // Every slot the slow bodies held is free again.
    await expectServed('after the slowloris attack');
  });

  it('a client that goes away in the middle of its body gives its in-flight slot back', async () => {
    // 3 × MAX_IN_FLIGHT abandoned bodies, to endpoints that read the body before anything else.
    const heads = [
      `POST /content-service/security/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"user`,
      `POST /search-service/content/select HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nq=`,
      `POST /content-service/content HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${editor.token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"sys`,
      `DELETE ${readPath} HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${editor.token}\r\nIf-Match: x\r\nContent-Length: 1000\r\n\r\nabc`,
      `POST /content-service/security/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"use`,
    ];
    await Promise.all(
      Array.from(
        { length: 3 * MAX_IN_FLIGHT },
        (_, i) =>
          new Promise<void>((resolve) => {
            const s = net.connect(port, '127.0.0.1');
            s.on('error', () => undefined);
            s.on('connect', () => {
              s.write(heads[i % heads.length]);
              setTimeout(() => {
                s.destroy();
                resolve();
              }, 100);
            });
          }),
      ),
    );
    // The server learns of each close in its own time: poll until every request is served.
    await eventually(async () => {
      expect((await editor.health()).status).to.equal(200);
      await expectServed('after abandoned bodies');
    }, 20_000);
  });
});
