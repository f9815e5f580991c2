/**
 * Node load generators of `npm run bench` for the workloads wrk cannot express (state carried
 * from one answer to the next request). bench/bench.ts runs each in its own process against a
 * running platform; each prints `RESULT {json}` lines.
 *
 *   node --import tsx bench/load.ts seed <root> <count> <out dir>
 *       creates <count> articles; writes <out dir>/versioned.txt and unversioned.txt (request
 *       paths, one a line) for the wrk read workloads
 *   node --import tsx bench/load.ts contention <root[,root...]> <seconds> [writers 200] [contents 50]
 *       update with If-Match under contention: every writer updates one of the contents with the
 *       ETag it last saw; a 409 gives it the current ETag (extraInfo.ETag) and it tries again.
 *       Verified at the end: every 200 moved its content from the If-Match revision to the next
 *       one (so every stale write was a 409), no revision was acknowledged twice, and each
 *       content's final revision is 1 + its acknowledged updates (no lost update).
 *   node --import tsx bench/load.ts promote <root> <seconds> [workers 50]
 *       each worker owns one content: a draft over main in workspace `bench` (PUT, origin = the
 *       main ETag), then POST .../promote; promotes/s and the promote latency
 *   node --import tsx bench/load.ts searchable <root> <seconds> [creates per second 200]
 *       paced creates; a poller asks the search service (every 25 ms, one query for all pending
 *       version ids) and times each from the create's answer (the commit) to the first search
 *       that finds it
 *   node --import tsx bench/load.ts follow <rootA,rootB> <seconds>
 *       a head cached by gateway A, updated through gateway B: the time from B's answer until A
 *       serves the new head without atLeastRevision (A's tail of the event streams dropping
 *       it; A's cache keeps a head 5 s at most without news, so a figure near 5 s means the
 *       events did not arrive), one update at a time
 *
 * <root> is a gateway's address, e.g. http://127.0.0.1:8080; several (comma-separated) for the
 * contention workload are used in turn (a fleet's gateways).
 */
import http from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { json, latencyOf, login, request, result, revOf, round2, sleep, type HttpAnswer } from './lib.js';

const [mode, rootArg, ...rest] = process.argv.slice(2);
if (!mode || !rootArg) throw new Error('usage: load.ts seed|contention|promote|searchable|follow <root> ...');
const roots = rootArg.split(',');
const root = roots[0];
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const article = (title: string) => ({
  system: { contentType: 'article' },
  aspects: {
    body: {
      _type: 'body',
      title,
      lead: 'A short lead for the benchmark.',
      text: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.',
    },
  },
});

/** Creates `n` articles with `parallel` requests at a time; their ids, ETags and versioned Locations. */
async function createMany(token: string, n: number, parallel = 32): Promise<{ id: string; etag: string; location: string; version: string }[]> {
  const out: { id: string; etag: string; location: string; version: string }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(parallel, n) }, async () => {
      while (next < n) {
        const i = next++;
        const r = await request(
          agent,
          'POST',
          `${root}/content-service/content`,
          { 'X-Auth-Token': token, 'Content-Type': 'application/json' },
          JSON.stringify(article(`seed ${i}`)),
        );
        if (r.status !== 201) throw new Error(`create: ${r.status} ${r.body.toString().slice(0, 300)}`);
        const body = json(r);
        out.push({ id: body.system.id, etag: String(r.headers.etag), location: String(r.headers.location), version: body.system.version });
      }
    }),
  );
  return out;
}

async function seed(): Promise<void> {
  const [countArg, outDir] = rest;
  const token = await login(root, 'editor');
  const t0 = performance.now();
  const made = await createMany(token, Number(countArg ?? 1000));
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'versioned.txt'), `${made.map((m) => new URL(m.location).pathname + new URL(m.location).search).join('\n')}\n`);
  writeFileSync(join(outDir, 'unversioned.txt'), `${made.map((m) => `/content-service/content/alias/${m.id}`).join('\n')}\n`);
  result({ workload: 'seed', contents: made.length, seconds: round2((performance.now() - t0) / 1000) });
}

async function contention(): Promise<void> {
  const SECONDS = Number(rest[0] ?? 8);
  const WRITERS = Number(rest[1] ?? 200);
  const CONTENTS = Number(rest[2] ?? 50);
  const tokens = await Promise.all(roots.map((r) => login(r, 'editor')));
  const contents = (await createMany(tokens[0], CONTENTS)).map((c) => ({ ...c, acked: new Map<number, number>(), unknown: 0 }));
  const statuses: Record<string, number> = {};
  const times: number[] = [];
  let staleAccepted = 0;
  let duplicateAcks = 0;
  let retriesByRead = 0;
  const count = (k: string) => (statuses[k] = (statuses[k] ?? 0) + 1);
  const t0 = performance.now();
  const until = t0 + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      const c = contents[w % CONTENTS];
      const at = roots[w % roots.length];
      const headers = { 'X-Auth-Token': tokens[w % roots.length], 'Content-Type': 'application/json' };
      let etag = c.etag;
      for (let i = 0; performance.now() < until; i++) {
        let r: HttpAnswer;
        try {
          r = await request(
            agent,
            'PUT',
            `${at}/content-service/content/alias/${c.id}`,
            { ...headers, 'If-Match': etag },
            JSON.stringify({ aspects: { body: { _type: 'body', title: `w${w}#${i}` } } }),
          );
        } catch {
          count('connection error');
          c.unknown++;
          await sleep(20);
          continue;
        }
        times.push(r.ms);
        count(String(r.status));
        if (r.status === 200) {
          const rev = revOf(r.headers.etag as string);
          if (rev !== revOf(etag) + 1) staleAccepted++;
          if (c.acked.has(rev)) duplicateAcks++;
          c.acked.set(rev, w);
          etag = String(r.headers.etag);
        } else if (r.status === 409 && json(r)?.extraInfo?.ETag) {
          etag = json(r).extraInfo.ETag;
        } else {
          if (r.status !== 409) c.unknown++;
          // No ETag in the answer: read the current one.
          retriesByRead++;
          const cur = await request(agent, 'GET', `${at}/content-service/content/alias/${c.id}`, { 'X-Auth-Token': headers['X-Auth-Token'] }).catch(() => null);
          const loc = cur?.headers.location;
          const head = loc ? await request(agent, 'GET', loc, { 'X-Auth-Token': headers['X-Auth-Token'] }).catch(() => null) : null;
          if (head?.headers.etag) etag = String(head.headers.etag);
        }
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  // Verification: each content's final revision against what was acknowledged.
  let lost = 0;
  let extra = 0;
  let unexplained = 0;
  let mismatched = 0;
  for (const c of contents) {
    const cur = await request(agent, 'GET', `${root}/content-service/content/alias/${c.id}`, { 'X-Auth-Token': tokens[0] });
    const head = await request(agent, 'GET', String(cur.headers.location), { 'X-Auth-Token': tokens[0] });
    const finalRev = revOf(head.headers.etag as string);
    const expected = 1 + c.acked.size;
    if (finalRev !== expected) mismatched++;
    // An acknowledged update that the final revision does not count was lost.
    if (finalRev < expected) lost += expected - finalRev;
    // Writes whose answer never came (5xx, connection) may have been applied: not lost, not acknowledged.
    if (finalRev > expected) extra += Math.min(finalRev - expected, c.unknown);
    if (finalRev > expected + c.unknown) unexplained += finalRev - expected - c.unknown;
  }
  const ok = statuses['200'] ?? 0;
  const conflicts = statuses['409'] ?? 0;
  const errors = Object.entries(statuses)
    .filter(([k]) => k !== '200' && k !== '409')
    .reduce((n, [, v]) => n + v, 0);
  const lat = latencyOf(times);
  const noLostUpdate = lost === 0 && staleAccepted === 0 && duplicateAcks === 0 && unexplained === 0;
  console.log(
    `update with If-Match, ${WRITERS} writers on ${CONTENTS} contents: ${Math.round(times.length / secs)} req/s (${Math.round(ok / secs)} updates/s), ` +
      `${conflicts} x 409, ${errors} errors, p50 ${lat.p50} ms, p99 ${lat.p99} ms; ` +
      `${noLostUpdate ? 'no lost update' : `LOST UPDATES: ${lost}, stale writes accepted ${staleAccepted}, revisions acknowledged twice ${duplicateAcks}`}`,
  );
  result({
    workload: 'update with If-Match under contention',
    writers: WRITERS,
    contents: CONTENTS,
    gateways: roots.length,
    seconds: round2(secs),
    requests: times.length,
    requestsPerSecond: Math.round(times.length / secs),
    updatesPerSecond: Math.round(ok / secs),
    statuses,
    conflicts,
    errors,
    ...lat,
    verify: {
      noLostUpdate,
      finalRevisionIsUpdatesPlusOne: mismatched === 0,
      contentsMismatched: mismatched,
      lost,
      staleAccepted,
      duplicateAcks,
      unacknowledgedApplied: extra,
      unexplained,
      retriesByRead,
    },
  });
}

async function promote(): Promise<void> {
  const SECONDS = Number(rest[0] ?? 8);
  const WORKERS = Number(rest[1] ?? 50);
  const token = await login(root, 'editor');
  const headers = { 'X-Auth-Token': token, 'Content-Type': 'application/json' };
  const contents = await createMany(token, WORKERS);
  const statuses: Record<string, number> = {};
  const count = (k: string) => (statuses[k] = (statuses[k] ?? 0) + 1);
  const promoteMs: number[] = [];
  const cycleMs: number[] = [];
  const t0 = performance.now();
  const until = t0 + SECONDS * 1000;
  await Promise.all(
    contents.map(async (c, w) => {
      let etag = c.etag;
      const draft = `${root}/content-service/content/workspace/bench/alias/${c.id}`;
      for (let i = 0; performance.now() < until; i++) {
        try {
          const d = await request(
            agent,
            'PUT',
            draft,
            headers,
            JSON.stringify({ aspects: { body: { _type: 'body', title: `draft ${w}#${i}` } }, origin: etag }),
          );
          count(`draft ${d.status}`);
          if (d.status !== 200) {
            await sleep(20);
            continue;
          }
          const p = await request(agent, 'POST', `${draft}/promote`, { 'X-Auth-Token': token });
          count(`promote ${p.status}`);
          promoteMs.push(p.ms);
          if (p.status === 200) {
            etag = String(p.headers.etag);
            cycleMs.push(d.ms + p.ms);
          } else if (p.status === 409) {
            etag = json(p)?.extraInfo?.ETag ?? etag;
          }
        } catch {
          count('connection error');
          await sleep(20);
        }
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const promoted = statuses['promote 200'] ?? 0;
  const errors = Object.entries(statuses)
    .filter(([k]) => k !== 'promote 200' && k !== 'draft 200')
    .reduce((n, [, v]) => n + v, 0);
  const lat = latencyOf(promoteMs);
  console.log(
    `workspace promote, ${WORKERS} workers: ${Math.round(promoted / secs)} promotes/s (each after a draft write), promote p50 ${lat.p50} ms, p99 ${lat.p99} ms, ${errors} errors`,
  );
  result({
    workload: 'workspace promote',
    workers: WORKERS,
    seconds: round2(secs),
    promotes: promoted,
    promotesPerSecond: Math.round(promoted / secs),
    statuses,
    errors,
    ...lat,
    cycle: latencyOf(cycleMs),
  });
}

async function searchable(): Promise<void> {
  const SECONDS = Number(rest[0] ?? 8);
  const RATE = Number(rest[1] ?? 200);
  const TIMEOUT_MS = 30_000;
  const token = await login(root, 'editor');
  const headers = { 'X-Auth-Token': token, 'Content-Type': 'application/json' };
  const pending = new Map<string, number>();
  const found: number[] = [];
  let errors = 0;
  let sent = 0;
  let creating = true;
  const t0 = performance.now();
  const poller = (async () => {
    let queries = 0;
    while (creating || pending.size) {
      const batch = [...pending.keys()].slice(0, 400);
      if (batch.length) {
        const form = new URLSearchParams({ q: `id:(${batch.map((v) => `"${v}"`).join(' OR ')})`, fl: 'id', rows: String(batch.length) });
        try {
          const r = await request(
            agent,
            'POST',
            `${root}/search-service/content/select`,
            { 'X-Auth-Token': token, 'Content-Type': 'application/x-www-form-urlencoded' },
            form.toString(),
          );
          queries++;
          const now = performance.now();
          if (r.status !== 200) throw new Error(`search ${r.status}: ${r.body.toString().slice(0, 300)}`);
          for (const d of (json(r)?.response?.docs ?? []) as { id: string }[]) {
            const at = pending.get(d.id);
            if (at !== undefined) {
              found.push(now - at);
              pending.delete(d.id);
            }
          }
          for (const [v, at] of pending)
            if (now - at > TIMEOUT_MS) {
              pending.delete(v);
              errors++;
            }
        } catch (e) {
          console.error(String(e));
          errors++;
          await sleep(200);
        }
      }
      await sleep(25);
    }
    return queries;
  })();
  // Paced creates: RATE per second, up to 32 at a time.
  const until = t0 + SECONDS * 1000;
  let inFlight = 0;
  const creates: Promise<void>[] = [];
  while (performance.now() < until) {
    const due = Math.floor(((performance.now() - t0) / 1000) * RATE);
    while (sent < due && inFlight < 32) {
      sent++;
      inFlight++;
      creates.push(
        request(agent, 'POST', `${root}/content-service/content`, headers, JSON.stringify(article(`searchable ${sent}`)))
          .then((r) => {
            if (r.status === 201) pending.set(json(r).system.version, performance.now());
            else errors++;
          })
          .catch(() => void errors++)
          .finally(() => inFlight--),
      );
    }
    await sleep(2);
  }
  await Promise.all(creates);
  creating = false;
  const queries = await poller;
  const secs = (performance.now() - t0) / 1000;
  const lat = latencyOf(found);
  console.log(
    `commit to searchable at ${RATE} creates/s: ${found.length} of ${sent} found, p50 ${lat.p50} ms, p99 ${lat.p99} ms, p999 ${lat.p999} ms, max ${lat.max} ms, ${errors} errors (${queries} search queries)`,
  );
  result({
    workload: 'commit to searchable',
    createsPerSecond: Math.round(sent / SECONDS),
    created: sent,
    found: found.length,
    seconds: round2(secs),
    errors,
    searchQueries: queries,
    ...lat,
  });
}

async function follow(): Promise<void> {
  if (roots.length < 2) throw new Error('follow needs two gateways: <rootA,rootB>');
  const [a, b] = roots;
  const SECONDS = Number(rest[0] ?? 8);
  const TIMEOUT_MS = 10_000;
  const token = await login(a, 'editor');
  const contents = await createMany(token, 20);
  const latest = (r: HttpAnswer) => /\/(\d+)$/.exec(String(r.headers.location ?? ''))?.[1];
  const followed: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  for (let i = 0; performance.now() - t0 < SECONDS * 1000; i++) {
    const c = contents[i % contents.length];
    const path = `/content-service/content/alias/${c.id}`;
    const cached = await request(agent, 'GET', `${a}${path}`, { 'X-Auth-Token': token });
    const u = await request(
      agent,
      'PUT',
      `${b}${path}`,
      { 'X-Auth-Token': token, 'Content-Type': 'application/json', 'If-Match': c.etag },
      JSON.stringify(article(`follow ${i}`)),
    );
    if (cached.status !== 303 || u.status !== 200) {
      errors++;
      await sleep(50);
      continue;
    }
    c.etag = String(u.headers.etag);
    const rev = String(revOf(c.etag));
    const updatedAt = performance.now();
    for (;;) {
      const r = await request(agent, 'GET', `${a}${path}`, { 'X-Auth-Token': token });
      const now = performance.now();
      if (latest(r) === rev) {
        followed.push(now - updatedAt);
        break;
      }
      if (now - updatedAt > TIMEOUT_MS) {
        errors++;
        break;
      }
      await sleep(1);
    }
  }
  const secs = (performance.now() - t0) / 1000;
  const lat = latencyOf(followed);
  console.log(`head follow across gateways: ${followed.length} updates, p50 ${lat.p50} ms, p99 ${lat.p99} ms, max ${lat.max} ms, ${errors} errors`);
  result({ workload: 'head follow across gateways', updates: followed.length, seconds: round2(secs), errors, ...lat });
}

try {
  if (mode === 'seed') await seed();
  else if (mode === 'contention') await contention();
  else if (mode === 'promote') await promote();
  else if (mode === 'searchable') await searchable();
  else if (mode === 'follow') await follow();
  else throw new Error(`unknown mode ${mode}`);
} finally {
  agent.destroy();
}
process.exit(0);
