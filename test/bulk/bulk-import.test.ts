import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';
import { eventually, until } from '../support/wait.js';
import { bulk, type AnswerLine } from './ndjson.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const sportsOwned = { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } };
const setAlias = (alias: string) => ({ _type: 'svcSetAlias', namespace: 'bk', alias });
const line = (v: unknown) => `${JSON.stringify(v)}\n`;

/**
 * Bulk import (CONTRACT §16): each line answers as its single request would (compared with
 * real single requests on a twin content), in input order, with the audit's `via: bulk`;
 * a caller without permission changes nothing.
 */
describe('bulk import: each line as its single request (CONTRACT §16)', function () {
  this.timeout(60_000);
  let p: P;
  let sports: Client;
  let sysadmin: Client;
  let reader: Client;
  const tag = `t${Date.now().toString(36)}`;

  before(async () => {
    p = await startTestPlatform();
    sports = await new Client(p.base).login('sportseditor');
    sysadmin = await new Client(p.base).login('sysadmin');
    reader = await new Client(p.base).login('reader');
  });
  after(async () => {
    await p.stop();
  });

  /** A content of the sports context with `versions` versions: its id and ETag. */
  async function sportsContent(title: string, versions = 1, by = sports, owned = true) {
    const c = await by.create({ ...article(title), operations: owned ? [sportsOwned] : [] });
    expect(c.status, c.text).to.equal(201);
    let etag = c.headers.get('etag')!;
    for (let i = 1; i < versions; i++) {
      const u = await by.update(c.json.system.id, article(`${title} v${i + 1}`), etag);
      expect(u.status).to.equal(200);
      etag = u.headers.get('etag')!;
    }
    return { id: c.json.system.id as string, cid: (c.json.system.id as string).split('/')[1], etag };
  }

  /**
   * An error body with the content keys of the twin named as those of the bulk line's content,
   * and the twin's own version key and time of change (a 409's extraInfo) left as placeholders.
   */
  const normalized = (body: unknown, from: string[] = [], to: string[] = []) => {
    let s = JSON.stringify(body);
    from.forEach((f, i) => {
      s = s.split(f).join(to[i]);
    });
    const v = JSON.parse(s);
    if (v?.extraInfo?.lastModified !== undefined) v.extraInfo.lastModified = 'time';
    if (v?.extraInfo?.conflictingVersion !== undefined) v.extraInfo.conflictingVersion = v.extraInfo.conflictingVersion.replace(/:[^:]+$/, ':version');
    return v;
  };

  it('a mixed batch: creates with aliases, good and stale ETags, deletes, a malformed and a forbidden line', async () => {
    const taken = `${tag}-taken`;
    await sports.create({ ...article('holder'), operations: [sportsOwned, setAlias(taken)] });
    // Twins: the bulk line goes to the first, the single request to the second.
    const twin = async (title: string, versions = 1) => [await sportsContent(title, versions), await sportsContent(title, versions)];
    const [u1, u1s] = await twin('good etag');
    const [u2, u2s] = await twin('stale etag', 2);
    const [u3, u3s] = await twin('unsafe');
    const [d1, d1s] = await twin('delete');
    const [d2, d2s] = await twin('stale delete', 2);
    const [d3, d3s] = await twin('delete without etag');
    const g = await sportsContent('global', 1, sysadmin, false);
    const gs = await sportsContent('global', 1, sysadmin, false);
    const stale = (c: { cid: string }) => `W/"${c.cid}/1"`;

    const lines = [
      line({ op: 'create', content: { ...article('new'), operations: [sportsOwned, setAlias(`${tag}-new`)] } }),
      line({ op: 'create', content: { ...article('taken'), operations: [sportsOwned, setAlias(taken)] } }),
      line({ op: 'create', content: { aspects: { body: { title: 'no type' } } } }),
      line({ op: 'update', id: u1.id, ifMatch: u1.etag, content: article('good etag, new') }),
      line({ op: 'update', id: u2.id, ifMatch: stale(u2), content: article('stale etag, new') }),
      line({ op: 'update', id: u3.id, content: article('unsafe, new') }),
      line({ op: 'delete', id: d1.id, ifMatch: d1.etag }),
      line({ op: 'delete', id: d2.id, ifMatch: stale(d2) }),
      line({ op: 'delete', id: d3.id }),
      '{"op": "create", "content": \n',
      line({ op: 'update', id: g.id, ifMatch: g.etag, content: article('forbidden') }),
      line({ op: 'update', id: `bk/${tag}-nowhere`, ifMatch: 'W/"x/1"', content: article('missing') }),
      line({ op: 'create', content: { ...article('first'), operations: [sportsOwned, setAlias(`${tag}-seq`)] } }),
      line({ op: 'update', id: `bk/${tag}-seq`, content: article('second') }),
      '   \n',
      line({ op: 'rename', id: u1.id }),
      line({ op: 'update', id: u1s.id, mode: 'sideways', content: article('bad mode') }),
    ];
    const feedFrom = (await sysadmin.req('GET', '/changes?since=now')).json.last as string;
    const r = await bulk(p.base, sports.token!, lines);
    expect(r.status).to.equal(200);
    const a = r.answers;
    // One answer per line but the blank one, in input order, numbered by the body's lines.
    expect(a.map((x) => x.line)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17]);
    const byLine = new Map(a.map((x) => [x.line, x]));

    // The single requests on the twins.
    const s1 = await sports.create({ ...article('new'), operations: [sportsOwned, setAlias(`${tag}-new-single`)] });
    const s2 = await sports.create({ ...article('taken'), operations: [sportsOwned, setAlias(taken)] });
    const s3 = await sports.create({ aspects: { body: { title: 'no type' } } });
    const s4 = await sports.update(u1s.id, article('good etag, new'), u1s.etag);
    const s5 = await sports.update(u2s.id, article('stale etag, new'), stale(u2s));
    const s6 = await sports.update(u3s.id, article('unsafe, new'), null);
    const s7 = await sports.remove(d1s.id, d1s.etag);
    const s8 = await sports.remove(d2s.id, stale(d2s));
    const s9 = await sports.remove(d3s.id);
    const s11 = await sports.update(gs.id, article('forbidden'), gs.etag);
    const s12 = await sports.update(`bk/${tag}-nowhere`, article('missing'), 'W/"x/1"');
    const s17 = await sports.update(u1s.id, article('bad mode'), null, 'updateMode=sideways');

    const rev = (etag: string | null | undefined) => Number(/\/(\d+)"$/.exec(etag ?? '')?.[1]);
    // biome-ignore lint/suspicious/noExplicitAny: the JSON of an answer
    const success = (n: number, single: { status: number; headers: Headers; json: any }) => {
      const b = byLine.get(n)!;
      expect(b.status, `line ${n}: ${JSON.stringify(b)}`).to.equal(single.status);
      if (single.status === 204) return;
      expect(rev(b.etag), `line ${n}`).to.equal(rev(single.headers.get('etag')));
      expect(b.version).to.match(/^c:[^:]+:[^:]+$/);
      expect(b.subResults ?? []).to.deep.equal(single.json.status?.subResults ?? []);
    };
    const failure = (n: number, single: { status: number; json: unknown }, from: string[] = [], to: string[] = []) => {
      const b = byLine.get(n)!;
      expect(b.status, `line ${n}: ${JSON.stringify(b)}`).to.equal(single.status);
      expect(normalized(b.error), `line ${n}`).to.deep.equal(normalized(single.json, from, to));
    };
    success(1, s1);
    success(2, s2);
    expect(byLine.get(2)!.subResults).to.have.length(1); // ALIAS_EXISTS, as PARTIAL_CREATED
    failure(3, s3);
    success(4, s4);
    failure(5, s5, [u2s.cid], [u2.cid]);
    success(6, s6);
    success(7, s7);
    failure(8, s8, [d2s.cid], [d2.cid]);
    failure(9, s9);
    expect(byLine.get(10)!).to.include({ status: 400 });
    expect(byLine.get(10)!.error!.statusCode).to.equal('40000');
    failure(11, s11);
    failure(12, s12);
    expect(byLine.get(13)!.status).to.equal(201);
    // Line 14 names the alias line 13 sets: it ran after it.
    expect(byLine.get(14)).to.include({ status: 200, id: byLine.get(13)!.id });
    expect(rev(byLine.get(14)!.etag)).to.equal(2);
    expect(byLine.get(16)!.status).to.equal(400);
    failure(17, s17);

    // What the lines did is what the single requests did.
    expect((await sports.readContent(byLine.get(1)!.id!)).json.aspects!.body.title).to.equal('new');
    expect((await sports.readContent(`bk/${tag}-new`)).status).to.equal(200);
    expect((await sports.readContent(u1.id)).json.aspects!.body.title).to.equal('good etag, new');
    expect((await sports.readContent(u2.id)).json.aspects!.body.title).to.equal('stale etag v2');
    expect((await sports.readContent(u3.id)).json.aspects!.body.title).to.equal('unsafe, new');
    expect((await sports.readContent(d1.id)).status).to.equal(404);
    expect((await sports.readContent(d2.id)).status).to.equal(200);
    expect((await sysadmin.readContent(g.id)).json.aspects!.body.title).to.equal('global');
    expect((await sports.readContent(`bk/${tag}-seq`)).json.aspects!.body.title).to.equal('second');

    // Change-feed events as for any write.
    const events = (await sysadmin.req('GET', `/changes?since=${feedFrom}&limit=1000`)).json.changes as { kind: string; id: string; revision: number }[];
    const kinds = (id: string) => events.filter((e) => e.id === id).map((e) => `${e.kind}:${e.revision}`);
    expect(kinds(byLine.get(1)!.id!)).to.deep.equal(['create:1']);
    expect(kinds(u1.id)).to.deep.equal(['update:2']);
    expect(kinds(u2.id)).to.deep.equal([]);
    expect(kinds(d1.id)).to.deep.equal(['delete:2']);
    expect(kinds(byLine.get(13)!.id!)).to.deep.equal(['create:1', 'update:2']);

    // The audit trail says how the writes came.
    const vias = async (id: string) =>
      ((await sysadmin.audit({ content: id })).json.entries as { action: string; via: string }[]).map((e) => `${e.action}:${e.via}`);
    await eventually(async () => {
      expect(await vias(byLine.get(1)!.id!)).to.deep.equal(['create:bulk']);
      expect(await vias(u1.id)).to.deep.equal(['update:bulk', 'create:main']);
      expect(await vias(d1.id)).to.deep.equal(['delete:bulk', 'create:main']);
      expect(await vias(u1s.id)).to.deep.equal(['update:main', 'create:main']);
    }, 10_000);
  });

  it('a caller without the permission gets 403 lines and changes nothing', async () => {
    const u = await sportsContent('keep me');
    const d = await sportsContent('keep me too');
    const lines = [
      line({ op: 'create', content: { ...article('intruder'), operations: [setAlias(`${tag}-intruder`)] } }),
      line({ op: 'update', id: u.id, ifMatch: u.etag, content: article('changed') }),
      line({ op: 'update', id: u.id, content: article('changed unsafely') }),
      line({ op: 'delete', id: d.id, ifMatch: d.etag }),
    ];
    const r = await bulk(p.base, reader.token!, lines);
    expect(r.answers.map((x) => [x.line, x.status, x.error?.statusCode])).to.deep.equal([
      [1, 403, '40300'],
      [2, 403, '40300'],
      [3, 403, '40300'],
      [4, 403, '40300'],
    ]);
    const after = await sports.readContent(u.id);
    expect(after.json.aspects!.body.title).to.equal('keep me');
    expect(after.headers.get('etag')).to.equal(u.etag);
    expect((await sports.readContent(d.id)).headers.get('etag')).to.equal(d.etag);
    expect((await sysadmin.readContent(`bk/${tag}-intruder`)).status).to.equal(404);
  });

  it('a line may hold what a single request stores: content nested to the body limit imports, one level more is 400', async () => {
    const nested = (n: number): unknown => {
      let v: unknown = 1;
      for (let i = 0; i < n; i++) v = { a: v };
      return v;
    };
    // The body of 64 levels that a single create stores (envelope, aspects, aspect, then 61 more).
    const deepest = { system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: nested(61) } }, operations: [sportsOwned] };
    expect((await sports.create(deepest)).status).to.equal(201);
    const tooDeep = { system: { contentType: 'article' }, aspects: { body: { _type: 'body', x: nested(62) } }, operations: [sportsOwned] };
    expect((await sports.create(tooDeep)).status).to.equal(400);
    const r = await bulk(p.base, sports.token!, [line({ op: 'create', content: deepest }), line({ op: 'create', content: tooDeep })]);
    expect(r.answers.map((x) => [x.line, x.status])).to.deep.equal([
      [1, 201],
      [2, 400],
    ]);
    const made = await sports.readContent(r.answers[0].id!);
    expect(made.json.aspects!.body).to.deep.equal(deepest.aspects.body);
  });

  it('answers 401 without a token and 415 for another body type, before reading a line', async () => {
    const body = [line({ op: 'create', content: { ...article('x'), operations: [setAlias(`${tag}-unauth`)] } })];
    const r401 = await bulk(p.base, null, body);
    expect(r401.status).to.equal(401);
    expect(JSON.parse(r401.text).statusCode).to.equal('40100');
    const r415 = await bulk(p.base, sports.token!, body, { contentType: 'application/json' });
    expect(r415.status).to.equal(415);
    expect((await sysadmin.readContent(`bk/${tag}-unauth`)).status).to.equal(404);
  });

  it('a percent-encoded path to the import or the upload is served as the plain one: never a hung answer or a 500', async () => {
    for (const [i, path] of ['/content-service/%62ulk', '/%63ontent-service/bul%6B'].entries()) {
      const body = `${line({ op: 'create', content: { ...article('encoded path'), operations: [setAlias(`${tag}-encoded-${i}`)] } })}\n`;
      const r = await fetch(`${p.url}${path}`, {
        method: 'POST',
        headers: { 'X-Auth-Token': sysadmin.token!, 'Content-Type': 'application/x-ndjson' },
        body,
        signal: AbortSignal.timeout(20_000),
      });
      expect(r.status, path).to.equal(200);
      const answers = (await r.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { status: number });
      expect(
        answers.map((a) => a.status),
        path,
      ).to.deep.equal([201]);
      expect((await sysadmin.readContent(`bk/${tag}-encoded-${i}`)).status, path).to.equal(200);
    }
    const up = await fetch(`${p.url}/%66ile-service/file/tmp/sportseditor/encoded.txt`, {
      method: 'POST',
      headers: { 'X-Auth-Token': sports.token!, 'Content-Type': 'text/plain' },
      body: 'hello',
      signal: AbortSignal.timeout(20_000),
    });
    expect(up.status, await up.text()).to.equal(201);
  });

  it('an open import acts as its caller is when each line runs: roles taken away answer 403, a revoked token 401, and nothing after is applied', async () => {
    const user = `bk${tag}`;
    await p.tokens!.createAccount(user, 'a password', { sports: ['editor'] });
    const c = await new Client(p.base).login(user, 'a password');
    const body = new PassThrough();
    const answers: AnswerLine[] = [];
    const run = bulk(p.base, c.token!, body, { onAnswer: (a) => void answers.push(a) });
    // uWS cuts a request whose body comes slower than 16 KB/s for 10 s (its slow-client guard):
    // blank lines, which are not answered, keep this slow import above that (README, bulk import).
    const blank = `${' '.repeat(4096)}\n`;
    let n = 0;
    const pump = setInterval(() => {
      body.write(blank);
      n++;
    }, 100);
    const lines: number[] = [];
    const sendLine = (name: string) => {
      n++;
      body.write(line({ op: 'create', content: { ...article(name), operations: [sportsOwned, setAlias(`${tag}-w${n}`)] } }));
      lines.push(n);
      return n;
    };
    const answerOf = (k: number) => answers.find((a) => a.line === k);
    /** Sends a line every 200 ms until one answers `status`: the lines before it may be answered either way. */
    const sendUntil = async (status: number) => {
      let found = 0;
      await until(
        async () => {
          const sent = sendLine('line');
          await until(async () => answerOf(sent) !== undefined, 10000, `the answer of line ${sent}`);
          if (answerOf(sent)!.status === status) found = sent;
          else await new Promise((r) => setTimeout(r, 200));
          return found > 0;
        },
        20000,
        `a line answered ${status}`,
      );
      return found;
    };
    let denied = 0;
    let revoked = 0;
    try {
      expect(await sendUntil(201)).to.equal(lines[0]);
      // The sports roles taken away (the token stays valid): the lines after are the caller's now.
      await p.tokens!.createAccount(user, 'a password', {});
      denied = await sendUntil(403);
      const afterDenied = sendLine('after the roles went');
      await until(async () => answerOf(afterDenied) !== undefined, 10000, 'the answer');
      expect(answerOf(afterDenied)!.status).to.equal(403);
      // The token revoked: every line after answers 401, as its single request would.
      expect((await c.req('DELETE', '/security/token')).status).to.equal(204);
      revoked = await sendUntil(401);
      sendLine('after the revocation');
    } finally {
      clearInterval(pump);
      body.end();
    }
    const r = await run;
    expect(r.status, r.error?.message).to.equal(200);
    expect(r.error).to.equal(undefined);
    expect(answers.map((a) => a.line)).to.deep.equal(lines);
    expect(answers.at(-1)!.status).to.equal(401);
    expect(answerOf(revoked)!.error!.statusCode).to.equal('40100');
    // Nothing answered 403 or 401 was applied.
    for (const a of answers) {
      const read = await sysadmin.readContent(`bk/${tag}-w${a.line}`);
      expect(read.status, `line ${a.line} answered ${a.status}`).to.equal(a.status === 201 ? 200 : 404);
    }
    expect(denied).to.be.greaterThan(lines[0]);
  });

  it('the OpenAPI document describes both operations as NDJSON', async () => {
    const doc = (await sports.openApi()).json;
    expect(doc.paths['/content-service/bulk'].post.requestBody.content).to.have.property('application/x-ndjson');
    expect(doc.paths['/content-service/export'].get.responses[200].content).to.have.property('application/x-ndjson');
  });

  it('a line longer than a request body may be answers 413, and the lines after it go on', async () => {
    const big = 'x'.repeat(11 * 1024 * 1024); // MAX_BODY_BYTES is 10 MiB
    const r = await bulk(p.base, sports.token!, [
      line({ op: 'create', content: { ...article('before'), operations: [sportsOwned] } }),
      line({ op: 'create', content: { ...article(big), operations: [sportsOwned] } }),
      line({ op: 'create', content: { ...article('after'), operations: [sportsOwned] } }),
    ]);
    expect(r.answers.map((x: AnswerLine) => [x.line, x.status])).to.deep.equal([
      [1, 201],
      [2, 413],
      [3, 201],
    ]);
    expect(r.answers[1].error!.statusCode).to.equal('41300');
  });
});
