import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { type FeedEvent, wsSession } from './feed-clients.js';

/**
 * CONTRACT §13: a WebSocket subscriber resuming far behind, with large events (a catch-up page of
 * them is tens of MB), gets every later event exactly once: the gateway never writes more than the
 * socket takes (nothing is dropped silently), or it closes with 4429 after the last event sent and
 * a resume from that event's cursor delivers the rest.
 */
describe('change feed WebSocket backpressure (CONTRACT §13)', function () {
  this.timeout(180000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;

  before(async () => {
    // A client that takes nothing for 2 s is cut (4429); one that reads, however slowly, is not.
    p = await startTestPlatform({ CHANGES_STALL_SECONDS: '2' });
    c = await new Client(p.base).login('editor');
  });
  after(async () => p.stop());

  it('WebSocket: 601 events of ~41 KB resumed from before them arrive exactly once, in order, read fast or slowly (never dropped past the backpressure limit)', async () => {
    const since: string = (await c.req('GET', '/changes?since=now')).json.last;
    const stamp = Date.now();
    const ops = Array.from({ length: 100 }, (_, i) => ({
      _type: 'svcSetAlias',
      // namespace/alias ~400 characters: each event ~41 KB.
      namespace: `bp-${'n'.repeat(150)}`,
      alias: `${stamp}-${i}-${'x'.repeat(230)}`,
    }));
    const created = await c.create({ system: { contentType: 'article' }, aspects: {}, operations: ops });
    expect(created.status, created.text).to.equal(201);
    const id: string = created.json.system.id;
    let etag = created.headers.get('etag');
    for (let n = 0; n < 600; n++) {
      const u = await c.update(id, { aspects: { body: { _type: 'body', n } } }, etag);
      expect(u.status, u.text).to.equal(200);
      etag = u.headers.get('etag');
    }
    const expected = Array.from({ length: 601 }, (_, i) => i + 1);
    const wsUrl = `${p.url.replace('http', 'ws')}/content-service/changes/ws`;

    /** Reads from `cursor` until revision 601 came or the socket closed; resumes on 4429 (at most 5 times). */
    const readAll = async (mode: 'fast' | 'slow' | 'stall') => {
      const got: FeedEvent[] = [];
      const closes: number[] = [];
      let cursor = since;
      for (let attempt = 0; attempt < 6; attempt++) {
        let done = false;
        const started = Date.now();
        const s = wsSession(wsUrl, { token: c.token, since: cursor }, (m, sess) => {
          if ('error' in m) return;
          const e = m as unknown as FeedEvent;
          if (e.id !== id) return;
          got.push(e);
          cursor = e.cursor;
          if (e.revision === 601) {
            done = true;
            sess.ws.close();
          } else if ((mode === 'slow' && got.length % 25 === 0) || (mode === 'stall' && got.length === 100)) {
            // A slow reader pauses now and then, so the gateway's buffers fill; a stalled one
            // stops for longer than the stall bound once.
            sess.ws._socket?.pause();
            setTimeout(() => (sess.ws._socket as { resume?: () => void } | undefined)?.resume?.(), mode === 'slow' ? 150 : 5000);
          }
        });
        // Cut after 30 s, noting what the gateway held then (live subscribers, open streams, queued events).
        let atCut = '';
        const timer = setTimeout(() => {
          atCut = JSON.stringify(p.gateway!.changes.stats());
          s.ws.terminate();
        }, 30000);
        const closed = await s.closed;
        clearTimeout(timer);
        if (done) break;
        closes.push(closed.code);
        // Only a subscriber cut for not reading may end early, after an error message naming 4429.
        expect(
          closed.code,
          `${mode} reader: closed with ${closed.code} after ${got.length} events (last revision ${got[got.length - 1]?.revision}, ${Date.now() - started} ms, errors: ${JSON.stringify(s.messages.filter((m) => 'error' in m))}, gateway at the cut: ${atCut || 'not cut'})`,
        ).to.equal(4429);
        const err = s.messages.find((m) => 'error' in m)?.error as { statusCode: string } | undefined;
        expect(err?.statusCode).to.equal('42900');
      }
      return { got, closes };
    };

    for (const mode of ['fast', 'slow', 'stall'] as const) {
      const { got, closes } = await readAll(mode);
      expect(
        got.map((e) => e.revision),
        `${mode} reader (closes: ${closes.join(',') || 'none'})`,
      ).to.deep.equal(expected);
      expect(new Set(got.map((e) => e.cursor)).size).to.equal(601);
      // The stalled one was cut with 4429 and resumed from its last cursor; the others never were.
      expect(closes, mode).to.deep.equal(mode === 'stall' ? [4429] : []);
    }
  });
});
