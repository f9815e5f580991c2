import net from 'node:net';
import { expect } from 'chai';
import { startTestPlatform } from '../support/platform.js';

/**
 * /health with a search engine that accepts connections and never answers (a hung JVM): the check
 * answers 503 naming the engine within its part's second, and so does every health request that
 * shares or follows it. Health checks are shared by the requests that come together, so one
 * that never ended would hang them all.
 */
describe('health with a search engine that never answers', function () {
  this.timeout(60_000);
  let silent: net.Server;
  const sockets = new Set<net.Socket>();
  let p: Awaited<ReturnType<typeof startTestPlatform>>;

  before(async () => {
    silent = net.createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as net.AddressInfo).port;
    p = await startTestPlatform({ SOLR_URL: `http://127.0.0.1:${port}/solr` }, ['web', 'actors']);
  });
  after(async () => {
    await p?.stop();
    for (const s of sockets) s.destroy();
    silent?.close();
  });

  it('answers 503 naming the engine within seconds, to requests together and one after the other, with one ping held open at most', async () => {
    // Twice: the first check's end must not leave the next one waiting. A request that hangs is cut
    // at 15 s and fails the test.
    const open: number[] = [];
    for (let round = 0; round < 4; round++) {
      const answers = await Promise.all(
        Array.from({ length: 5 }, () =>
          fetch(`${p.url}/health`, { signal: AbortSignal.timeout(15_000) }).then(async (r) => ({
            status: r.status,
            body: (await r.json()) as Record<string, string>,
          })),
        ),
      );
      for (const a of answers) {
        expect(a.status).to.equal(503);
        expect(a.body.search).to.equal('failing: the search engine does not answer');
        expect(a.body.redis).to.equal('ok');
      }
      open.push(sockets.size);
    }
    // The hung ping is reused, not repeated: no socket more per check.
    expect(open[3], open.join(', ')).to.equal(open[1]);
  });
});
