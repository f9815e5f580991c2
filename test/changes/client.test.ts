import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { type ChangeEvent, ChangesGoneError, changes } from '../../src/client/changes.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { scheduleOwner } from './feed-clients.js';

/**
 * The typed client's feed iterator (src/client/changes.ts): it resumes by itself through failed
 * requests (503s, connections cut) and hands out every event once, in order per content.
 */
describe('typed client: change feed iterator (CONTRACT §13, §18)', function () {
  this.timeout(60000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;
  let proxy: Server;
  let proxyBase: string;
  let n = 0;

  before(async () => {
    p = await startTestPlatform();
    c = await new Client(p.base).login('editor');
    const target = new URL(p.url);
    // A faulty way to the gateway: every 4th request answers 503, every 7th loses its connection.
    proxy = createServer((req, res) => {
      n++;
      if (n % 4 === 0) {
        res.writeHead(503, { 'Retry-After': '0' }).end('{}');
        return;
      }
      if (n % 7 === 0) {
        req.socket.destroy();
        return;
      }
      const fwd = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      fwd.on('error', () => res.destroy());
      req.pipe(fwd);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxyBase = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/content-service`;
  });
  after(async () => {
    proxy?.close();
    await p.stop();
  });

  it('hands out every commit once, in order per content, through failures', async () => {
    const since: string = (await c.req('GET', '/changes?since=now')).json.last;
    const ac = new AbortController();
    const got: ChangeEvent[] = [];
    let retries = 0;
    const expected = new Map<string, number>();
    const reading = (async () => {
      for await (const e of changes(proxyBase, c.token, { since, limit: 7, pollMs: 300, signal: ac.signal, onRetry: () => retries++ })) {
        got.push(e);
      }
    })();
    await Promise.all(
      Array.from({ length: 10 }, async (_, w) => {
        const r = await c.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', t: w } } });
        const id: string = r.json.system.id;
        expected.set(id, 1);
        let etag = r.headers.get('etag');
        for (let i = 1; i < 20; i++) {
          const u = await c.update(id, { aspects: { body: { _type: 'body', t: i } } }, etag);
          expect(u.status).to.equal(200);
          etag = u.headers.get('etag');
          expected.set(id, i + 1);
        }
      }),
    );
    await until(async () => got.filter((g) => expected.has(g.id)).length >= 200, 20000, 'every event');
    ac.abort();
    await reading;
    expect(retries).to.be.greaterThan(0);
    for (const [id, revs] of expected) {
      expect(got.filter((e) => e.id === id).map((e) => e.revision)).to.deep.equal(Array.from({ length: revs }, (_, i) => i + 1));
    }
  });

  it('throws ChangesGoneError for an expired cursor, or restarts from the oldest kept when asked', async () => {
    const early: string = (await c.req('GET', '/changes?since=now')).json.last;
    await c.create({ system: { contentType: 'article' }, aspects: {} });
    await (await scheduleOwner(p)).trim(Date.now() + 1);
    const created = await c.create({ system: { contentType: 'article' }, aspects: {} });
    let error: unknown;
    try {
      for await (const _ of changes(p.base, c.token, { since: early })) break;
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(ChangesGoneError);
    for await (const e of changes(p.base, c.token, { since: early, onGone: 'restart' })) {
      expect(e.id).to.equal(created.json.system.id);
      break;
    }
  });
});
