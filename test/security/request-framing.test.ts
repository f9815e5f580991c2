import net from 'node:net';
import { expect } from 'chai';
import { startTestPlatform } from '../support/platform.js';

/**
 * Request smuggling through two Content-Length headers (the security review of the seventeenth
 * session, F4). uWebSockets.js 20.30 frames a body by the first of them: `Content-Length: 3` and
 * `Content-Length: 30`, then `abcGET /smuggled …` had it answer the first request and then the
 * second, which a proxy in front that takes the other length forwards as the first one's body.
 * Now the gateway closes the connection of such a request, on every uWS route (server.ts
 * `refusedFraming`): the catch-all and the change feed's.
 */
describe('security: a request with two Content-Length headers is refused, never split into two', function () {
  this.timeout(30_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let port = 0;
  before(async () => {
    p = await startTestPlatform();
    port = Number(new URL(p.url).port);
  });
  after(async () => p?.stop());

  /**
   * Sends `raws` on a fresh connection, each once something came back for the one before (uWS
   * does not take a request while an answer is pending); what came back until the gateway closed
   * the connection, or 2 s passed.
   */
  const exchange = (...raws: string[]) =>
    new Promise<{ text: string; closed: boolean }>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.write(raws.shift()!));
      let text = '';
      let closed = true;
      s.setEncoding('latin1');
      s.on('data', (c: string) => {
        text += c;
        const next = raws.shift();
        if (next !== undefined) setTimeout(() => s.write(next), 50);
      });
      s.setTimeout(2000, () => {
        closed = false;
        s.destroy();
      });
      s.on('error', () => undefined);
      s.on('close', () => resolve({ text, closed }));
    });
  const statusLines = (text: string) => text.match(/HTTP\/1\.1 \d{3}/g) ?? [];

  const smuggled = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
  const cases: [string, string][] = [
    [
      'a POST to the content service',
      `POST /content-service/security/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: ${2 + smuggled.length}\r\n\r\n{}${smuggled}`,
    ],
    [
      'a GET',
      `GET /content-service/security/permission/reader HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: ${3 + smuggled.length}\r\n\r\nabc${smuggled}`,
    ],
    ['the same length twice', `POST /content-service/security/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n{}${smuggled}`],
    [
      "the change feed's route",
      `GET /content-service/changes HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: ${3 + smuggled.length}\r\n\r\nabc${smuggled}`,
    ],
  ];
  for (const [what, raw] of cases) {
    it(`${what}: the connection is closed, and the request within the body is never answered`, async () => {
      const { text, closed } = await exchange(raw);
      expect(statusLines(text), text.slice(0, 2000)).to.deep.equal([]);
      expect(closed, 'closed by the gateway').to.equal(true);
    });
  }

  it("the change feed's WebSocket upgrade: the connection is closed, not upgraded", async () => {
    const { text, closed } = await exchange(
      `GET /content-service/changes/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nContent-Length: 3\r\nContent-Length: ${3 + smuggled.length}\r\n\r\nabc${smuggled}`,
    );
    expect(statusLines(text), text.slice(0, 2000)).to.deep.equal([]);
    expect(closed, 'closed by the gateway').to.equal(true);
  });

  it('a request with one Content-Length is answered, and so is the next one on its connection', async () => {
    const body = JSON.stringify({ username: 'reader', password: 'reader' });
    const { text } = await exchange(
      `POST /content-service/security/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      smuggled,
    );
    expect(statusLines(text), text).to.deep.equal(['HTTP/1.1 200', 'HTTP/1.1 200']);
    expect(text).to.include('"token"');
  });
});
