import { WebSocket } from 'ws';
import type { TimestateSchedule } from '../../src/actors/timestate-schedule.js';
import type { ChangeEvent } from '../../src/client/changes.js';

/**
 * Feed clients for the change-feed tests: server-sent events over fetch, and WebSocket through the
 * `ws` package (Node 20 has no WebSocket client without a flag; `ws` comes with uWebSockets.js and
 * has no types here, hence the small interface below).
 */
/** An event as a client receives it (the typed client's, CONTRACT §13). */
export type FeedEvent = ChangeEvent;

export interface WsLike {
  on(event: 'open', cb: () => void): void;
  on(event: 'message', cb: (data: Buffer) => void): void;
  on(event: 'close', cb: (code: number, reason: Buffer) => void): void;
  on(event: 'error', cb: (e: Error) => void): void;
  send(text: string): void;
  terminate(): void;
  close(): void;
  readonly _socket?: { pause(): void };
}

const WebSocketCtor = WebSocket as unknown as new (url: string) => WsLike;

export function openWs(url: string): WsLike {
  return new WebSocketCtor(url);
}

/** One WebSocket session: the messages it got and how it was closed. */
export interface WsSession {
  ws: WsLike;
  messages: Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string }>;
}

export function wsSession(url: string, first: unknown, onMessage?: (m: Record<string, unknown>, s: WsSession) => void): WsSession {
  const ws = openWs(url);
  const messages: Record<string, unknown>[] = [];
  const session: WsSession = {
    ws,
    messages,
    closed: new Promise((resolve) => {
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
      ws.on('error', () => resolve({ code: -1, reason: 'error' }));
    }),
  };
  ws.on('open', () => ws.send(typeof first === 'string' ? first : JSON.stringify(first)));
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as Record<string, unknown>;
    messages.push(m);
    onMessage?.(m, session);
  });
  return session;
}

/**
 * Reads server-sent events until `stop(event)` answers true (then the connection is dropped) or
 * the stream ends. Only whole records count; `lastEventId` is sent as Last-Event-ID.
 */
export async function readSse(
  url: string,
  token: string,
  lastEventId: string | undefined,
  stop: (e: FeedEvent) => boolean,
  maxMs = 30000,
): Promise<{ events: FeedEvent[]; status: number; ended: boolean; comments: number }> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), maxMs);
  const headers: Record<string, string> = { 'X-Auth-Token': token, Accept: 'text/event-stream' };
  if (lastEventId) headers['Last-Event-ID'] = lastEventId;
  const res = await fetch(url, { headers, signal: ac.signal });
  const events: FeedEvent[] = [];
  let comments = 0;
  if (res.status !== 200 || !res.body) return { events, status: res.status, ended: true, comments };
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { events, status: 200, ended: true, comments };
      buf += dec.decode(value, { stream: true });
      let at = buf.indexOf('\n\n');
      while (at >= 0) {
        const record = buf.slice(0, at);
        buf = buf.slice(at + 2);
        at = buf.indexOf('\n\n');
        if (record.startsWith(':')) {
          comments++;
          continue;
        }
        const fields: Record<string, string> = {};
        for (const line of record.split('\n')) {
          const c = line.indexOf(': ');
          fields[line.slice(0, c)] = line.slice(c + 2);
        }
        const e = JSON.parse(fields.data) as FeedEvent;
        if (fields.id !== e.cursor || fields.event !== e.kind) throw new Error(`record fields disagree: ${record}`);
        events.push(e);
        if (stop(e)) {
          ac.abort();
          return { events, status: 200, ended: false, comments };
        }
      }
    }
  } catch (e) {
    if ((e as Error).name === 'AbortError') return { events, status: 200, ended: false, comments };
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Two subscribers that resume by themselves from their last cursor through whichever gateway
 * lives (`bases()`, each `{base_url}`): a WebSocket that reconnects whenever its connection ends,
 * and a long poll that goes round the gateways. For the fault tests.
 */
export function resumingSubscribers(bases: () => string[], token: string, since: string) {
  let done = false;
  const ws: FeedEvent[] = [];
  const poll: FeedEvent[] = [];
  const errors: unknown[] = [];
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const wsLoop = (async () => {
    let cursor = since;
    for (let i = 0; !done; i++) {
      const live = bases();
      if (!live.length) {
        await pause(100);
        continue;
      }
      const s = wsSession(`${live[i % live.length].replace('http', 'ws')}/changes/ws`, { token, since: cursor }, (m, sess) => {
        if ('error' in m) return;
        ws.push(m as unknown as FeedEvent);
        cursor = (m as unknown as FeedEvent).cursor;
        if (done) sess.ws.close();
      });
      const stop = setInterval(() => done && s.ws.close(), 200);
      await s.closed;
      clearInterval(stop);
      errors.push(...s.messages.filter((m) => 'error' in m && (m.error as { statusCode: string }).statusCode !== '50300'));
      await pause(50);
    }
  })();
  const pollLoop = (async () => {
    let cursor = since;
    for (let i = 0; !done; i++) {
      const live = bases();
      if (!live.length) {
        await pause(100);
        continue;
      }
      try {
        const r = await fetch(`${live[i % live.length]}/changes?since=${cursor}&feed=longpoll&timeout=500&limit=${1 + (i % 50)}`, {
          headers: { 'X-Auth-Token': token },
        });
        const body = (await r.json()) as { changes: FeedEvent[]; last: string };
        if (r.status === 200) {
          poll.push(...body.changes);
          cursor = body.last;
        } else if (r.status !== 503) errors.push(body);
      } catch {
        await pause(50);
      }
    }
  })();
  return {
    ws,
    poll,
    errors,
    async stop() {
      done = true;
      await Promise.all([wsLoop, pollLoop]);
    },
  };
}

/** Asserts that `got` holds revisions 1..head of each content, once each, in order. */
export function exactlyOnce(
  name: string,
  got: FeedEvent[],
  heads: Map<string, number>,
  check: (actual: number[], expected: number[], what: string) => void,
): void {
  for (const [id, rev] of heads) {
    check(
      got.filter((e) => e.id === id).map((e) => e.revision),
      Array.from({ length: rev }, (_, i) => i + 1),
      `${name}: ${id}`,
    );
  }
}

/**
 * The schedule (among these platforms' own) that holds the owner lease, once one does: a lease
 * left by an earlier run's process may need its LEASE_MS to expire first.
 */
export async function scheduleOwner(...platforms: { timestate?: TimestateSchedule }[]): Promise<TimestateSchedule> {
  const end = Date.now() + 15_000;
  for (;;) {
    const owner = platforms.find((p) => p.timestate?.isOwner)?.timestate;
    if (owner) return owner;
    if (Date.now() > end) throw new Error('no schedule owner');
    await new Promise((r) => setTimeout(r, 50));
  }
}
