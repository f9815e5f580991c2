import { expect } from 'chai';
import { WebSocket } from 'ws';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';

type Ws = { on(event: string, cb: (...args: never[]) => void): void; send(text: string): void; terminate(): void };
const WsCtor = WebSocket as unknown as new (url: string, opts?: { headers?: Record<string, string> }) => Ws;

/**
 * WebSockets of the feed that have not sent their first message hold no stream slot (their user
 * is not known), so only their client address tells one client from another: one address holds
 * at most CHANGES_WS_WAITING_PER_ADDRESS of them. Before, one anonymous client that held the
 * process's whole bound (CHANGES_MAX_SUBSCRIBERS), reopening each socket after its 10-s cut,
 * made every other user's upgrade answer 503: the console's live feed and every pipeline on
 * WebSocket (the fourteenth session's review). The addresses come from X-Forwarded-For of a
 * trusted proxy (TRUSTED_PROXIES), as the login limit tells clients apart.
 */
describe('feed WebSockets waiting for their first message, per client address (security review 14)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let wsUrl: string;
  const opened: Ws[] = [];

  before(async () => {
    p = await startTestPlatform({ CHANGES_MAX_SUBSCRIBERS: '5', CHANGES_WS_WAITING_PER_ADDRESS: '2', TRUSTED_PROXIES: '127.0.0.1,::1' });
    wsUrl = `${p.url.replace('http', 'ws')}/content-service/changes/ws`;
  });
  after(async () => {
    for (const w of opened) w.terminate();
    await p?.stop();
  });

  const upgrade = (from: string) =>
    new Promise<{ ws: Ws; error?: string }>((resolve) => {
      const ws = new WsCtor(wsUrl, { headers: { 'X-Forwarded-For': from } });
      opened.push(ws);
      ws.on('open', () => resolve({ ws }));
      ws.on('error', (e: Error) => resolve({ ws, error: e.message }));
    });

  it('one address holds at most CHANGES_WS_WAITING_PER_ADDRESS silent sockets (429); an editor from another address still opens its feed', async () => {
    const editor = await new Client(p.base).login('editor');
    const silent = [];
    for (let i = 0; i < 5; i++) silent.push(await upgrade('203.0.113.7'));
    expect(silent.map((s) => s.error ?? 'open')).to.deep.equal(['open', 'open', ...Array(3).fill('Unexpected server response: 429')]);
    // The same /64 of IPv6 counts as one address.
    const v6 = [await upgrade('2001:db8:1:2::10'), await upgrade('2001:db8:1:2::11'), await upgrade('2001:db8:1:2:ffff::1')];
    expect(v6.map((s) => s.error ?? 'open')).to.deep.equal(['open', 'open', 'Unexpected server response: 429']);

    const mine = await upgrade('198.51.100.20');
    expect(mine.error, 'the editor WebSocket upgrade').to.equal(undefined);
    mine.ws.send(JSON.stringify({ token: editor.token, since: 'now' }));
    await until(async () => p.gateway!.changes.stats().subscribers === 1, 5000, 'the editor subscriber');
    // A silent socket that goes gives its address's place back.
    silent[0].ws.terminate();
    await new Promise((r) => setTimeout(r, 200));
    expect((await upgrade('203.0.113.7')).error).to.equal(undefined);
  });
});
