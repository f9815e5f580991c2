import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * Searches of one caller under way at once (SECURITY.md "Search service"): at most
 * SEARCH_AT_ONCE_PER_CALLER on a web process, counted by user id for a signed-in caller and by
 * client address for anonymous ones (IPv6 by its /64; behind TRUSTED_PROXIES the forwarded
 * address). Past it 429 with Retry-After and the platform's error body, before the engine is
 * asked. The slot is held until the engine has answered, whatever comes of the search (an
 * answer, an engine error, an engine that broke off, a client that went away), then given back.
 * Taxonomy completion that asks the engine counts among the same searches.
 *
 * The engine is a stub that holds every select until the test answers it, so "under way" is
 * decided by the test, not by the clock. Before, every search went to the engine.
 */
describe('searches of one caller at once: at most SEARCH_AT_ONCE_PER_CALLER, past it 429 before the engine is asked', function () {
  this.timeout(120_000);
  const T = `once${Date.now().toString(36)}`;
  /** A select the stub engine holds until the test answers it. */
  interface Held {
    params: URLSearchParams;
    res: http.ServerResponse;
  }
  let engine: http.Server;
  const held: Held[] = [];
  let waiters: (() => boolean)[] = [];
  /** Selects the engine has been sent in all. */
  let selects = 0;
  /** While set, selects are answered so as they come (a failed javabin search asks again in JSON). */
  let answerAtOnce: 'error' | null = null;
  /** TRUSTED_PROXIES=127.0.0.1: anonymous callers are told apart by X-Forwarded-For. */
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  /** No trusted proxy: X-Forwarded-For is the client's own word, and changes nothing. */
  let plain: Awaited<ReturnType<typeof startTestPlatform>>;
  /** SEARCH_AT_ONCE 2, SEARCH_WAITING 2 (TRUSTED_PROXIES=127.0.0.1): the process's bounds. */
  let small: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: string;
  let reader: string;

  before(async () => {
    engine = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        if (!path.endsWith('/select')) {
          res.writeHead(path.endsWith('/admin/ping') ? 200 : 404, { 'Content-Type': 'application/json' });
          return void res.end(JSON.stringify({ status: 'OK' }));
        }
        selects++;
        held.push({ params: new URLSearchParams(Buffer.concat(chunks).toString('utf8')), res });
        if (answerAtOnce) return answerAll(answerAtOnce);
        waiters = waiters.filter((w) => !w());
      });
    });
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
    const SOLR_URL = `http://127.0.0.1:${(engine.address() as AddressInfo).port}/solr`;
    p = await startTestPlatform({ SOLR_URL, TRUSTED_PROXIES: '127.0.0.1', SEARCH_AT_ONCE_PER_CALLER: '4' }, ['web', 'actors']);
    plain = await startTestPlatform({ SOLR_URL }, ['web']);
    small = await startTestPlatform({ SOLR_URL, TRUSTED_PROXIES: '127.0.0.1', SEARCH_AT_ONCE: '2', SEARCH_WAITING: '2' }, ['web']);
    editor = (await new Client(p.base).login('editor')).token!;
    reader = (await new Client(p.base).login('reader')).token!;
  });
  after(async () => {
    answerAll('ok');
    await small?.stop();
    await plain?.stop();
    await p?.stop();
    engine?.closeAllConnections();
    await new Promise((r) => engine?.close(r));
  });
  afterEach(() => {
    // Nothing left held for the next case, whatever this one did.
    answerAll('ok');
  });

  /** Resolves once the engine holds `n` selects. */
  const engineHolds = (n: number) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (held.length < n) return false;
        resolve();
        return true;
      };
      if (!check()) waiters.push(check);
    });

  /**
   * Answers every held select: `ok` as the engine would (javabin bytes for wt=javabin, facets for
   * a completion), `error` a 500 of the engine, `cut` the connection broken off.
   */
  function answerAll(how: 'ok' | 'error' | 'cut'): void {
    for (const { params, res } of held.splice(0)) {
      if (how === 'cut') {
        res.socket?.destroy();
      } else if (how === 'error') {
        res.writeHead(500, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ responseHeader: { status: 500, QTime: 1 }, error: { msg: 'java.lang.IllegalStateException: boom', code: 500 } }));
      } else if (params.get('wt') === 'javabin') {
        res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
        res.end(Buffer.from([2, 0xa1, 0xe0]));
      } else {
        const facet = params.get('facet.field');
        res.writeHead(200, { 'Content-Type': 'application/json;charset=utf-8' });
        res.end(
          JSON.stringify({
            responseHeader: { status: 0, QTime: 1 },
            response: { numFound: 0, start: 0, docs: [] },
            ...(facet ? { facet_counts: { facet_queries: {}, facet_fields: { [facet]: [] } } } : {}),
          }),
        );
      }
    }
  }

  interface Who {
    token?: string;
    /** X-Forwarded-For (the client's address behind the trusted proxy). */
    from?: string;
    on?: typeof p;
    wt?: 'json' | 'javabin';
    post?: boolean;
    signal?: AbortSignal;
    /** Marks the search's query (`q=svc_text:hold<tag>`), to tell which one the engine was sent. */
    tag?: string;
  }
  interface Answer {
    status: number;
    retryAfter: string | null;
    json: { statusCode?: string; message?: string } | null;
  }
  /** A search as a caller sends it (GET or POST form, JSON or javabin); `settled` once it answered. */
  function search(who: Who = {}): Promise<Answer> & { settled: boolean } {
    const headers: Record<string, string> = {};
    if (who.token) headers['X-Auth-Token'] = who.token;
    if (who.from) headers['X-Forwarded-For'] = who.from;
    const params = `q=svc_text:hold${who.tag ?? ''}&wt=${who.wt ?? 'json'}`;
    const on = who.on ?? p;
    const sent = who.post
      ? fetch(`${on.url}/search-service/content/select`, {
          method: 'POST',
          headers: { ...headers, 'Content-Type': 'application/x-www-form-urlencoded' },
          body: params,
          signal: who.signal,
        })
      : fetch(`${on.url}/search-service/content/select?${params}`, { headers, signal: who.signal });
    const answer = sent.then(async (r) => {
      const body = Buffer.from(await r.arrayBuffer());
      const json = (r.headers.get('content-type') ?? '').startsWith('application/json') ? JSON.parse(body.toString('utf8')) : null;
      return { status: r.status, retryAfter: r.headers.get('retry-after'), json };
    });
    const out = Object.assign(answer, { settled: false });
    answer.then(
      () => (out.settled = true),
      () => (out.settled = true),
    );
    return out;
  }
  /** The first of `searches` to answer, unless the engine is sent another select first (the bound did not hold). */
  async function firstAnswer(searches: Promise<Answer>[], engineHad: number): Promise<Answer> {
    return Promise.race([
      ...searches,
      engineHolds(engineHad + 1).then(() => {
        throw new Error(`the engine was sent search ${engineHad + 1} of the caller: nothing refused it (${held.map((h) => h.params.get('q')).join(', ')})`);
      }),
    ]);
  }
  const refused = (r: Answer, what: string) => {
    expect(r.status, `${what}: ${JSON.stringify(r.json)}`).to.equal(429);
    expect(r.retryAfter, what).to.match(/^[1-9][0-9]*$/);
    expect(r.json?.statusCode, what).to.equal('42900');
    expect(r.json?.message, what).to.contain('SEARCH_AT_ONCE_PER_CALLER');
  };
  /** Four searches of `who` under way, then a fifth refused at once: the caller's whole bound is free. */
  async function boundIsFree(who: Who, what: string): Promise<Promise<Answer>[]> {
    const before = selects;
    const four = [search(who), search({ ...who, post: true }), search({ ...who, wt: 'javabin' }), search(who)];
    await engineHolds(4);
    refused(await firstAnswer([search(who)], 4), what);
    expect(selects - before, what).to.equal(4);
    return four;
  }

  it('five searches of one caller sent at once: four reach the engine, exactly one answers 429 with Retry-After and the error body; the four then answer 200', async () => {
    const before = selects;
    const five = [
      search({ token: editor }),
      search({ token: editor, post: true }),
      search({ token: editor, wt: 'javabin' }),
      search({ token: editor, post: true, wt: 'javabin' }),
      search({ token: editor }),
    ];
    await engineHolds(4);
    const first = await firstAnswer(five, 4);
    refused(first, 'the fifth');
    expect(five.filter((s) => s.settled)).to.have.length(1);
    expect(selects - before, 'selects sent to the engine').to.equal(4);
    answerAll('ok');
    const all = await Promise.all(five);
    expect(all.map((a) => a.status).sort()).to.deep.equal([200, 200, 200, 200, 429]);
    // and once they are done, the caller searches again
    const again = search({ token: editor, post: true });
    await engineHolds(1);
    answerAll('ok');
    expect((await again).status).to.equal(200);
  });

  it('each caller has its own bound: two users get four each, and the anonymous callers of their address are counted apart', async () => {
    const editors = await boundIsFree({ token: editor }, 'the editor');
    const readers = [search({ token: reader }), search({ token: reader }), search({ token: reader, post: true }), search({ token: reader, wt: 'javabin' })];
    await engineHolds(8);
    refused(await firstAnswer([search({ token: reader })], 8), 'the reader');
    // anonymous callers of the same address are another caller
    const anonymous = search({ from: '198.51.100.4' });
    await engineHolds(9);
    answerAll('ok');
    for (const r of await Promise.all([...editors, ...readers, anonymous])) expect(r.status).to.equal(200);
  });

  it('anonymous callers of one address share a bound (IPv6: one /64; behind a trusted proxy the forwarded address); another address has its own', async () => {
    const first = [
      search({ from: '2001:db8:1:2::1' }),
      search({ from: '2001:db8:1:2::2', post: true }),
      search({ from: '2001:db8:1:2:abcd::1', wt: 'javabin' }),
      search({ from: '2001:db8:1:2::1' }),
    ];
    await engineHolds(4);
    refused(await firstAnswer([search({ from: '2001:0db8:0001:0002:ffff::9' })], 4), 'the same /64');
    const others = [search({ from: '2001:db8:1:3::1' }), search({ from: '203.0.113.7' }), search({ from: '203.0.113.8' })];
    await engineHolds(7);
    // Without a trusted proxy X-Forwarded-For is the client's own word: one address, one bound.
    const forged = [
      search({ on: plain, from: '192.0.2.1' }),
      search({ on: plain, from: '192.0.2.2' }),
      search({ on: plain, from: '192.0.2.3' }),
      search({ on: plain }),
    ];
    await engineHolds(11);
    refused(await firstAnswer([search({ on: plain, from: '192.0.2.5' })], 11), 'a forged X-Forwarded-For');
    answerAll('ok');
    for (const r of await Promise.all([...first, ...others, ...forged])) expect(r.status).to.equal(200);
  });

  it('the slots are given back after the engine failed (an error, a connection broken off): the caller again has its four, then answers 200', async () => {
    const who = { from: '198.51.100.20' };
    const failed = await boundIsFree(who, 'before');
    answerAtOnce = 'error';
    answerAll('error');
    const errors = await Promise.all(failed).finally(() => (answerAtOnce = null));
    expect(errors.map((a) => a.status)).to.satisfy((s: number[]) => s.every((x) => x >= 400 && x !== 429));
    const cut = await boundIsFree(who, 'after engine errors');
    answerAll('cut');
    for (const r of await Promise.all(cut)) expect(r.status).to.equal(503);
    const ok = await boundIsFree(who, 'after broken-off answers');
    answerAll('ok');
    for (const r of await Promise.all(ok)) expect(r.status).to.equal(200);
    // and a search refused before the engine (400) takes no slot
    const bad = await search({ ...who, wt: 'xml' as 'json' });
    expect(bad.status).to.equal(400);
    const after = search(who);
    await engineHolds(1);
    answerAll('ok');
    expect((await after).status).to.equal(200);
  });

  it('a search whose client went away holds its slot until the engine has answered it, then gives it back', async () => {
    const who = { from: '198.51.100.30' };
    const abort = new AbortController();
    const gone = [
      search({ ...who, signal: abort.signal }),
      search({ ...who, signal: abort.signal, post: true }),
      search({ ...who, signal: abort.signal, wt: 'javabin' }),
      search({ ...who, signal: abort.signal }),
    ];
    await engineHolds(4);
    abort.abort();
    for (const g of gone) await g.catch(() => undefined);
    // the engine still runs them: the caller may not start more
    refused(await firstAnswer([search(who)], 4), 'while the engine runs the searches of a client gone');
    answerAll('ok');
    // Once the engine answered them (to nobody), the caller has its four again. Nothing answers
    // the client gone, so the moment the gateway gives the slots back is not seen: tried until then.
    const four = await eventually(async () => {
      const tried = [search(who), search({ ...who, post: true }), search({ ...who, wt: 'javabin' }), search(who)];
      try {
        await Promise.race([
          engineHolds(4),
          ...tried.map((t) =>
            t.then((a) => {
              throw new Error(`answered ${a.status} before the engine had it`);
            }),
          ),
        ]);
      } catch (e) {
        answerAll('ok');
        await Promise.allSettled(tried);
        throw e;
      }
      return tried;
    }, 5000);
    refused(await firstAnswer([search(who)], 4), 'after the client went away');
    answerAll('ok');
    for (const r of await Promise.all(four)) expect(r.status).to.equal(200);
  });

  it('a taxonomy completion that asks the engine counts among the searches of its caller', async () => {
    const creator = await new Client(p.base).login('editor');
    const dim = `${T}-tags`;
    const r = await creator.create({
      system: { contentType: 'svcDimensionDefinitionContent' },
      aspects: { svcDimensionDefinition: { id: dim, name: 'Tags', enumerable: false, localizations: {} } },
      operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: dim }],
    });
    expect(r.status, r.text).to.equal(201);
    const complete = (from: string) =>
      fetch(`${p.url}/taxonomy-service/complete/${encodeURIComponent(dim)}/cli`, { headers: { 'X-Forwarded-For': from } }).then(async (a) => ({
        status: a.status,
        retryAfter: a.headers.get('retry-after'),
        json: (await a.json()) as Answer['json'],
      }));
    // the model knows the dimension (it loads in the background)
    await eventually(async () => {
      const c = complete('198.51.100.40');
      await Promise.race([engineHolds(1), c]);
      answerAll('ok');
      expect((await c).status).to.equal(200);
    }, 10_000);
    const who = { from: '198.51.100.41' };
    const three = [search(who), search(who), search({ ...who, post: true })];
    const completing = complete(who.from);
    await engineHolds(4);
    // the completion's query carries the bounds of every search (before, neither)
    const asked = held.find((h) => h.params.get('facet.field')?.startsWith('svc_tag_'));
    expect(asked?.params.get('timeAllowed'), 'timeAllowed of the completion').to.equal('5000');
    expect(asked?.params.get('cpuAllowed'), 'cpuAllowed of the completion').to.equal('1000');
    refused(await firstAnswer([complete(who.from)], 4), 'a completion past the bound');
    refused(await firstAnswer([search(who)], 4), 'a search past the bound');
    answerAll('ok');
    for (const a of await Promise.all([...three, completing])) expect(a.status).to.equal(200);
  });
  /** The queries (their tags) of the selects the engine holds, in the order it was sent them. */
  const heldTags = () => held.map((h) => (h.params.get('q') ?? '').replace('svc_text:hold', ''));
  /** Resolves once `n` searches wait for one of the small platform's SEARCH_AT_ONCE. */
  const waitingAre = (n: number) => eventually(async () => expect(small.gateway?.searchesUnderWay.waiting).to.equal(n), 10_000);
  const unavailable = (r: Answer, what: string) => {
    expect(r.status, `${what}: ${JSON.stringify(r.json)}`).to.equal(503);
    expect(r.retryAfter, what).to.match(/^[1-9][0-9]*$/);
    expect(r.json?.statusCode, what).to.equal('50300');
    expect(r.json?.message, what).to.contain('SEARCH_AT_ONCE');
  };

  it('a web process asks the engine at most SEARCH_AT_ONCE searches of all callers at once; SEARCH_WAITING more wait their turn, first come first; past them 503 with Retry-After before the engine is asked', async () => {
    const before = selects;
    // five callers, each far within its own bound of four
    const asking = [search({ on: small, from: '192.0.2.101', tag: 'a' }), search({ on: small, token: editor, tag: 'b', post: true })];
    await engineHolds(2);
    const waiting = [search({ on: small, from: '192.0.2.102', tag: 'c', wt: 'javabin' })];
    await waitingAre(1);
    waiting.push(search({ on: small, token: reader, tag: 'd' }));
    await waitingAre(2);
    unavailable(await firstAnswer([search({ on: small, from: '192.0.2.103', tag: 'e' })], 2), 'the fifth caller');
    expect(selects - before, 'selects sent to the engine').to.equal(2);
    expect(heldTags().sort()).to.deep.equal(['a', 'b']);
    // one answered: the first waiting takes its place, then the next
    const [first] = held.splice(heldTags().indexOf('a'), 1);
    first.res.writeHead(200, { 'Content-Type': 'application/json' });
    first.res.end(JSON.stringify({ responseHeader: { status: 0, QTime: 1 }, response: { numFound: 0, start: 0, docs: [] } }));
    expect((await asking[0]).status).to.equal(200);
    await engineHolds(2);
    expect(heldTags()).to.deep.equal(['b', 'c']);
    answerAll('ok');
    await engineHolds(1);
    expect(heldTags()).to.deep.equal(['d']);
    answerAll('ok');
    for (const r of await Promise.all([...asking, ...waiting])) expect(r.status).to.equal(200);
    expect(selects - before).to.equal(4);
  });

  it('a waiting search whose client went away asks the engine nothing; its turn goes to the next', async () => {
    const before = selects;
    const asking = [search({ on: small, from: '192.0.2.111', tag: 'f' }), search({ on: small, from: '192.0.2.112', tag: 'g' })];
    await engineHolds(2);
    const abort = new AbortController();
    const gone = search({ on: small, from: '192.0.2.113', tag: 'h', signal: abort.signal });
    await waitingAre(1);
    const next = search({ on: small, from: '192.0.2.114', tag: 'i' });
    await waitingAre(2);
    abort.abort();
    await gone.catch(() => undefined);
    // the gateway has seen the client go (uWS tells it on the socket's close)
    await new Promise((r) => setTimeout(r, 100));
    answerAll('ok');
    await engineHolds(1);
    expect(heldTags()).to.deep.equal(['i']);
    answerAll('ok');
    for (const r of await Promise.all([...asking, next])) expect(r.status).to.equal(200);
    expect(selects - before, 'the search of the client gone was not sent').to.equal(3);
    // and the process's slots are all free again
    const two = [search({ on: small, from: '192.0.2.115' }), search({ on: small, from: '192.0.2.116' })];
    await engineHolds(2);
    answerAll('ok');
    for (const r of await Promise.all(two)) expect(r.status).to.equal(200);
  });
});
