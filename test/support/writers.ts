import { expect } from 'chai';
import { Client } from './platform.js';

/**
 * Writers under load for the fleet and fault tests: each writer updates its own content with
 * If-Match, one marker per write, through whichever gateway it is given, and remembers what
 * the server acknowledged. `verify` then reads every revision: each holds one marker that was
 * sent, none twice, and every acknowledged write is at the revision its answer named.
 */
export interface Writer {
  id: string;
  /** Markers of writes answered 200, with the revision the answer named. */
  acked: { marker: string; rev: number; at: number }[];
  /** Markers of writes whose outcome the client never learnt (5xx, connection lost). */
  unknown: string[];
  /** Markers of writes answered 409, with the answer's body (a stored one is a wrong answer). */
  conflicted?: Map<string, string>;
}

/** A gateway's content-service base URL and a token valid there. */
export type Gateway = { base: string; token: string };

const revOf = (etag: string) => Number(/\/(\d+)"$/.exec(etag)![1]);

export async function newWriters(c: Client, n: number): Promise<Writer[]> {
  const out: Writer[] = [];
  for (let i = 0; i < n; i++) {
    const res = await c.create({ system: { contentType: 'article' }, aspects: { body: { title: 'start' } } });
    expect(res.status, res.text).to.equal(201);
    out.push({ id: res.json.system.id, acked: [], unknown: [] });
  }
  return out;
}

/**
 * Runs the writers until `stop()`, each write through `gateways()[i % n]`; `statuses` counts
 * the answers (HTTP status, `read <status>`, `connection error`) with the time of each.
 */
export function runWriters(writers: Writer[], gateways: () => Gateway[], statuses: Record<string, number>, events: { at: number; what: string }[] = []) {
  let running = true;
  let n = 0;
  const count = (k: string) => {
    statuses[k] = (statuses[k] ?? 0) + 1;
    events.push({ at: Date.now(), what: k });
  };
  const one = async (w: Writer) => {
    for (let i = 0; running; i++) {
      const gs = gateways();
      const g = gs[(i + writers.indexOf(w)) % gs.length];
      const c = new Client(g.base, g.token);
      const marker = `${w.id}#${i}`;
      try {
        const cur = await c.read(`/content/alias/${w.id}`);
        if (cur.status !== 200) {
          count(`read ${cur.status}`);
          await new Promise((res) => setTimeout(res, 50));
          continue;
        }
        const res = await c.req('PUT', `/content/alias/${w.id}`, {
          body: { aspects: { body: { _type: 'body', title: marker } } },
          headers: { 'If-Match': cur.headers.get('etag')! },
        });
        count(String(res.status));
        n++;
        if (res.status === 200) w.acked.push({ marker, rev: revOf(res.headers.get('etag')!), at: Date.now() });
        else if (res.status !== 409) w.unknown.push(marker);
        else {
          w.conflicted ??= new Map();
          w.conflicted.set(marker, `${res.text.slice(0, 300)} at ${Date.now()}`);
        }
      } catch {
        count('connection error');
        w.unknown.push(marker);
        await new Promise((res) => setTimeout(res, 50));
      }
    }
  };
  const done = Promise.all(writers.map(one));
  return {
    count: () => n,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

/** The markers of every revision of a writer's content (revision 2 on), read one by one. */
export async function markersOf(c: Client, w: Writer): Promise<string[]> {
  const head = await c.read(`/content/alias/${w.id}`);
  expect(head.status, `read ${w.id}`).to.equal(200);
  const rev = revOf(head.headers.get('etag')!);
  const markers: string[] = [];
  for (let i = 2; i <= rev; i++) {
    const v = await c.req('GET', `/content/alias/${w.id}/${i}`);
    expect(v.status, `revision ${i} of ${w.id}`).to.equal(200);
    markers.push(v.json.aspects.body.title);
  }
  return markers;
}

/**
 * Reads every writer's revisions after a fault that may lose the last acknowledged writes:
 * asserts none was applied twice; answers each writer's markers and the acknowledged writes
 * not found at their revision.
 */
export async function auditWriters(
  writers: Writer[],
  c: Client,
): Promise<{ markers: Map<Writer, string[]>; lost: { w: Writer; marker: string; at: number }[] }> {
  const all = new Map<Writer, string[]>();
  const lost: { w: Writer; marker: string; at: number }[] = [];
  for (const w of writers) {
    const markers = await markersOf(c, w);
    all.set(w, markers);
    expect(new Set(markers).size, `${w.id}: no write applied twice`).to.equal(markers.length);
    for (const a of w.acked) if (markers[a.rev - 2] !== a.marker) lost.push({ w, marker: a.marker, at: a.at });
  }
  return { markers: all, lost };
}

/** Asserts nothing acknowledged was lost and nothing applied twice; answers the revisions read. */
export async function verifyWriters(writers: Writer[], c: Client): Promise<number> {
  let revisions = 0;
  for (const w of writers) {
    const markers = await markersOf(c, w);
    revisions += markers.length;
    expect(new Set(markers).size, `${w.id}: no write applied twice`).to.equal(markers.length);
    const sent = new Set([...w.acked.map((a) => a.marker), ...w.unknown]);
    for (const m of markers) {
      const conflict = w.conflicted?.get(m);
      expect(conflict, `${w.id}: revision marker ${m} is stored, yet its write was answered 409: ${conflict}`).to.equal(undefined);
      expect(sent.has(m), `${w.id}: revision marker ${m} was sent`).to.equal(true);
    }
    for (const a of w.acked) expect(markers[a.rev - 2], `${w.id}: acknowledged ${a.marker} is revision ${a.rev}`).to.equal(a.marker);
  }
  return revisions;
}
