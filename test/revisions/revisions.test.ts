import { expect } from 'chai';
import { applyPatch } from 'rfc6902';
import { AuditLog } from '../../src/adapters/audit-log.js';
import { Client, article, startTestPlatform } from '../support/platform.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;
type Entry = { time: string; user: string; action: string; id: string; version: string | null; revision: number; via: string; requestId: string | null };

describe('revisions: compare, restore, audit (CONTRACT §15)', function () {
  this.timeout(30_000);
  let p: P;
  let editor: Client;
  let reader: Client;
  let sysadmin: Client;
  let sports: Client;
  let n = 0;

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
    sysadmin = await new Client(p.base).login('sysadmin');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => {
    await p.stop();
  });

  /** A content with three versions: titles one, two, three; its alias, key, version ids and ETag. */
  async function threeVersions() {
    const alias = `rev${Date.now()}x${n++}`;
    const c = await editor.req('POST', '/content', {
      body: { ...article('one', { 'a/b': [1, 2, 3], '~t': 'x' }), operations: [{ _type: 'svcSetAlias', namespace: 'news', alias }] },
    });
    expect(c.status).to.equal(201);
    const versions: string[] = [c.json.system.version];
    let etag = c.headers.get('etag')!;
    for (const title of ['two', 'three']) {
      const u = await editor.req('PUT', `/content/alias/news/${alias}`, {
        body: article(title, { 'a/b': [title], extra: { k: 1 } }),
        headers: { 'If-Match': etag },
      });
      expect(u.status).to.equal(200);
      versions.push(u.json.system.version);
      etag = u.headers.get('etag')!;
    }
    return { alias, id: c.json.system.id as string, key: (c.json.system.id as string).split('/')[1], versions, etag };
  }

  const aspectsOf = async (alias: string) => {
    const r = await editor.req('GET', `/content/alias/news/${alias}`);
    return (await editor.req('GET', r.headers.get('location')!)).json;
  };

  describe('compare', () => {
    it('answers the patch from one version to another, and to the current one by default; rfc6902 applies it', async () => {
      const c = await threeVersions();
      const first = await editor.req('GET', `/content/alias/news/${c.alias}/compare?from=${c.versions[0]}&to=${c.versions[1]}`);
      expect(first.status).to.equal(200);
      expect(first.json.from).to.equal(c.versions[0]);
      expect(first.json.to).to.equal(c.versions[1]);
      const dflt = await reader.req('GET', `/content/alias/news/${c.alias}/compare?from=${c.versions[0]}`);
      expect(dflt.status).to.equal(200);
      expect(dflt.json.to).to.equal(c.versions[2]);
      const v0 = { body: { _type: 'body', title: 'one', 'a/b': [1, 2, 3], '~t': 'x' } };
      applyPatch(v0, dflt.json.patch);
      expect(v0).to.deep.equal({ body: { _type: 'body', title: 'three', 'a/b': ['three'], extra: { k: 1 } } });
      const same = await editor.req('GET', `/content/alias/news/${c.alias}/compare?from=${c.versions[2]}`);
      expect(same.json.patch).to.deep.equal([]);
    });

    it('a version of another content, an unknown version, an unknown content: 404; a bad version id or none: 400', async () => {
      const a = await threeVersions();
      const b = await threeVersions();
      const q = (alias: string, s: string) => editor.req('GET', `/content/alias/news/${alias}/compare?${s}`);
      expect((await q(a.alias, `from=${b.versions[0]}`)).status).to.equal(404);
      expect((await q(a.alias, `from=${a.versions[0]}&to=${b.versions[1]}`)).status).to.equal(404);
      expect((await q(a.alias, `from=c:${a.key}:NOSUCHVERSION`)).status).to.equal(404);
      expect((await q('nosuchalias-x', `from=${a.versions[0]}`)).status).to.equal(404);
      const bad = await q(a.alias, 'from=not-a-version');
      expect(bad.status).to.equal(400);
      expect((await q(a.alias, '')).status).to.equal(400);
    });

    it('a caller without Read gets the answer of a missing content; without a token 401', async () => {
      const a = await threeVersions();
      const hidden = await sports.req('GET', `/content/alias/news/${a.alias}/compare?from=${a.versions[0]}`);
      const missing = await sports.req('GET', `/content/alias/news/nosuch${a.alias}/compare?from=${a.versions[0]}`);
      expect(hidden.status).to.equal(404);
      expect(missing.status).to.equal(404);
      expect(hidden.json.statusCode).to.equal(missing.json.statusCode);
      // Also for a version of another content or a malformed one: nothing tells the versions apart.
      expect((await sports.req('GET', `/content/alias/news/${a.alias}/compare?from=garbage`)).status).to.equal(404);
      expect((await editor.req('GET', `/content/alias/news/${a.alias}/compare?from=${a.versions[0]}`, { token: null })).status).to.equal(401);
    });
    it('a patch whose paths would be immense (deep long keys) answers 413, never a 500', async function () {
      this.timeout(120_000);
      const alias = `revdeep${Date.now()}x${n++}`;
      // 40 levels of 5,000-character keys above 2,000 leaves: 200 KB of keys, each leaf's path 200 KB.
      const deep = (leaf: number) => {
        let v: Record<string, unknown> = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`l${i}`, leaf]));
        for (let d = 0; d < 40; d++) v = { [`${String(d).padStart(2, '0')}${'k'.repeat(4998)}`]: v };
        return v;
      };
      const c = await editor.req('POST', '/content', {
        body: { ...article('deep', { deep: deep(0) }), operations: [{ _type: 'svcSetAlias', namespace: 'news', alias }] },
      });
      expect(c.status, c.text.slice(0, 200)).to.equal(201);
      const u = await editor.req('PUT', `/content/alias/news/${alias}`, {
        body: article('deep', { deep: deep(1) }),
        headers: { 'If-Match': c.headers.get('etag')! },
      });
      expect(u.status, u.text.slice(0, 200)).to.equal(200);
      const r = await editor.req('GET', `/content/alias/news/${alias}/compare?from=${c.json.system.version}`);
      expect([r.status, r.json.statusCode]).to.deep.equal([413, '41300']);
    });
  });

  describe('restore', () => {
    it('with a valid If-Match: 200/20000, a new ETag, the old aspects, restoredFrom in history', async () => {
      const c = await threeVersions();
      const r = await editor.req('POST', `/content/alias/news/${c.alias}/restore?version=${c.versions[0]}`, { headers: { 'If-Match': c.etag } });
      expect(r.status).to.equal(200);
      expect(r.json.status.statusCode).to.equal('20000');
      expect(r.headers.get('etag')).to.equal(`W/"${c.key}/4"`);
      expect(r.json.system.version).to.not.be.oneOf(c.versions);
      expect(r.json.aspects.body).to.deep.equal({ _type: 'body', title: 'one', 'a/b': [1, 2, 3], '~t': 'x' });
      expect(Object.keys(r.json.aspects).filter((k) => k !== '_type')).to.deep.equal(['body']);
      const now = await aspectsOf(c.alias);
      expect(now.aspects).to.deep.equal(r.json.aspects);
      const h = await editor.req('GET', `/content/alias/news/${c.alias}/4/history`);
      const entry = h.json.versions.find((v: { version: string }) => v.version === r.json.system.version);
      expect(entry.restoredFrom).to.equal(c.versions[0]);
      expect(h.json.versions.filter((v: { restoredFrom?: string }) => v.restoredFrom)).to.have.length(1);
      const diff = await editor.req('GET', `/content/alias/news/${c.alias}/compare?from=${c.versions[0]}`);
      expect(diff.json.patch).to.deep.equal([]);
    });

    it('stale If-Match: 409/40900; missing or malformed If-Match: 400; nothing written', async () => {
      const c = await threeVersions();
      const stale = await editor.req('POST', `/content/alias/news/${c.alias}/restore?version=${c.versions[0]}`, { headers: { 'If-Match': `W/"${c.key}/1"` } });
      expect(stale.status).to.equal(409);
      expect(String(stale.json.statusCode)).to.equal('40900');
      const none = await editor.req('POST', `/content/alias/news/${c.alias}/restore?version=${c.versions[0]}`);
      expect(none.status).to.equal(400);
      // The right revision without W/"..." is a syntax error (400 naming the form), not a conflict
      const bare = await editor.req('POST', `/content/alias/news/${c.alias}/restore?version=${c.versions[0]}`, { headers: { 'If-Match': `${c.key}/3` } });
      expect(bare.status, bare.text).to.equal(400);
      expect(bare.json.extraInfo.expected).to.equal('W/"<content key>/<revision>"');
      expect((await aspectsOf(c.alias)).aspects.body.title).to.equal('three');
    });

    it('Update permission: a reader 403, a caller without Update 403 before the version id is read; bad versions 400/404', async () => {
      const c = await threeVersions();
      const other = await threeVersions();
      const post = (cl: Client, s: string) => cl.req('POST', `/content/alias/news/${c.alias}/restore?${s}`, { headers: { 'If-Match': c.etag } });
      expect((await post(reader, `version=${c.versions[0]}`)).status).to.equal(403);
      expect((await post(sports, `version=${c.versions[0]}`)).status).to.equal(403);
      expect((await post(sports, `version=c:${c.key}:NOSUCH`)).status).to.equal(403);
      // Nor which content key the alias names, nor whether the id is well formed.
      expect((await post(sports, `version=${other.versions[0]}`)).status).to.equal(403);
      expect((await post(sports, 'version=nope')).status).to.equal(403);
      expect((await post(editor, `version=${other.versions[0]}`)).status).to.equal(404);
      expect((await post(editor, `version=c:${c.key}:NOSUCH`)).status).to.equal(404);
      expect((await post(editor, 'version=nope')).status).to.equal(400);
      expect((await post(editor, '')).status).to.equal(400);
      const unknown = await editor.req('POST', `/content/alias/news/nosuch${c.alias}/restore?version=${c.versions[0]}`, { headers: { 'If-Match': c.etag } });
      expect(unknown.status).to.equal(404);
      expect((await aspectsOf(c.alias)).aspects.body.title).to.equal('three');
    });
  });

  describe('audit', () => {
    const audit = async (q: string, who: Client = sysadmin) => who.req('GET', `/audit?${q}`);

    /** Entries of a content, waiting for the copier to bring `count` of them. */
    async function entriesOf(content: string, count: number): Promise<Entry[]> {
      for (let i = 0; i < 100; i++) {
        const r = await audit(`content=${encodeURIComponent(content)}&limit=1000`);
        expect(r.status).to.equal(200);
        if (r.json.entries.length >= count) return r.json.entries;
        await new Promise((res) => setTimeout(res, 100));
      }
      throw new Error(`fewer than ${count} audit entries for ${content}`);
    }

    it('records every write kind (create, update, view change, alias release, restore, promote, delete), newest first', async () => {
      const c = await threeVersions();
      const req = { headers: { 'If-Match': c.etag, 'X-Request-Id': 'restore-req-1' } };
      const r = await editor.req('POST', `/content/alias/news/${c.alias}/restore?version=${c.versions[1]}`, req);
      expect(r.status).to.equal(200);
      let etag = r.headers.get('etag')!;
      const pv = await editor.req('PUT', '/view/svcPublic', { body: { version: c.versions[0] }, headers: { 'If-Match': etag } });
      expect(pv.status).to.equal(200);
      etag = pv.headers.get('etag')!;
      expect((await sysadmin.req('DELETE', `/content/alias/news/${c.alias}/release`)).status).to.equal(204);
      // Promote a draft of the content
      const ws = `aud${Date.now()}`;
      // The release answers no ETag: it made revision 6.
      const d = await editor.req('PUT', `/content/workspace/${ws}/alias/${c.id}`, {
        body: { aspects: { body: { title: 'drafted' } }, origin: `W/"${c.key}/6"` },
      });
      expect(d.status).to.be.oneOf([200, 201]);
      const pr = await editor.req('POST', `/content/workspace/${ws}/alias/${c.id}/promote`);
      expect(pr.status, JSON.stringify(pr.json)).to.equal(200);
      etag = pr.headers.get('etag')!;
      expect((await editor.req('DELETE', `/content/alias/${c.id}`, { headers: { 'If-Match': etag } })).status).to.equal(204);

      const entries = await entriesOf(c.id, 8);
      expect(entries.map((e) => [e.action, e.via, e.revision])).to.deep.equal([
        ['delete', 'main', 8],
        ['update', 'promote', 7],
        ['alias', 'main', 6],
        ['view', 'main', 5],
        ['update', 'restore', 4],
        ['update', 'main', 3],
        ['update', 'main', 2],
        ['create', 'main', 1],
      ]);
      const restored = entries.find((e) => e.via === 'restore')!;
      expect(restored.user).to.equal('editor');
      expect(restored.id).to.equal(c.id);
      expect(restored.version).to.match(new RegExp(`^c:${c.key}:`));
      expect(restored.requestId).to.equal('restore-req-1');
      expect(Date.parse(restored.time)).to.be.closeTo(Date.now(), 60_000);
      expect(entries.find((e) => e.action === 'alias')!.user).to.equal('sysadmin');
    });

    it('filters by user and time range, pages with a cursor newest first', async () => {
      const start = new Date().toISOString();
      const c = await threeVersions();
      const entries = await entriesOf(c.id, 3);
      expect(entries.map((e) => e.revision)).to.deep.equal([3, 2, 1]);
      const page1 = await audit(`content=${encodeURIComponent(c.id)}&limit=2`);
      expect(page1.json.entries.map((e: Entry) => e.revision)).to.deep.equal([3, 2]);
      expect(page1.json.next).to.be.a('string');
      const page2 = await audit(`content=${encodeURIComponent(c.id)}&limit=2&cursor=${page1.json.next}`);
      expect(page2.json.entries.map((e: Entry) => e.revision)).to.deep.equal([1]);
      expect(page2.json.next).to.equal(null);
      // Through the named alias too, and across every content by user and time
      expect((await audit(`content=news/${c.alias}`)).json.entries).to.have.length(3);
      const byUser = await audit(`user=editor&from=${encodeURIComponent(start)}&limit=1000`);
      expect(byUser.json.entries.filter((e: Entry) => e.id === c.id)).to.have.length(3);
      expect(byUser.json.entries.every((e: Entry) => e.user === 'editor')).to.equal(true);
      const times = byUser.json.entries.map((e: Entry) => Date.parse(e.time));
      expect(times).to.deep.equal([...times].sort((a, b) => b - a));
      expect((await audit('user=nobody-at-all')).json).to.deep.equal({ entries: [], next: null });
      const before = await audit(`content=${encodeURIComponent(c.id)}&to=${encodeURIComponent(new Date(Date.parse(start) - 1000).toISOString())}`);
      expect(before.json.entries).to.deep.equal([]);
      // Paging through everything by one user sees each entry once
      const seen = new Set<string>();
      let cursor: string | null = null;
      do {
        const r: { json: { entries: Entry[]; next: string | null } } = await audit(
          `user=editor&from=${encodeURIComponent(start)}&limit=1${cursor ? `&cursor=${cursor}` : ''}`,
        );
        for (const e of r.json.entries) {
          const k = `${e.id}/${e.revision}`;
          expect(seen.has(k)).to.equal(false);
          seen.add(k);
        }
        cursor = r.json.next;
      } while (cursor);
      expect(seen.size).to.equal(byUser.json.entries.length);
    });

    it('sysadmin only: 403 for others, 401 without a token; bad parameters 400', async () => {
      expect((await audit('', editor)).status).to.equal(403);
      expect((await audit('', reader)).status).to.equal(403);
      expect((await sysadmin.req('GET', '/audit', { token: null })).status).to.equal(401);
      for (const q of [
        'limit=0',
        'limit=5000',
        'limit=x',
        'from=yesterday',
        'cursor=%%%',
        'cursor=abc',
        'content=noslash',
        'from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z',
      ]) {
        const r = await audit(q);
        expect(r.status, q).to.equal(400);
      }
      expect((await audit('content=news/never-set-alias-x')).json).to.deep.equal({ entries: [], next: null });
      // The copier's lag is a metric, like the indexer's.
      expect((await sysadmin.metrics()).text).to.match(/audit_lag\{partition="0"\} \d+/);
    });

    it('dates before 1970 and cursors at 0-0 answer an empty page, no lower bound or 400, never 500', async () => {
      const c = await threeVersions();
      await entriesOf(c.id, 3);
      const of = encodeURIComponent(c.id);
      for (const t of ['1969-12-31T23:59:59.999Z', '0001-01-01T00:00:00Z']) {
        const at = encodeURIComponent(t);
        // A `to` before 1970 can match nothing (stream ids are unsigned): an empty page.
        for (const q of [`to=${at}`, `content=${of}&to=${at}`, `from=${at}&to=${at}`]) {
          const r = await audit(q);
          expect(r.status, `${q}: ${r.text}`).to.equal(200);
          expect(r.json, q).to.deep.equal({ entries: [], next: null });
        }
        // A `from` before 1970 bounds nothing.
        const r = await audit(`content=${of}&from=${at}`);
        expect(r.status, `from=${t}: ${r.text}`).to.equal(200);
        expect(r.json.entries.map((e: Entry) => e.revision)).to.deep.equal([3, 2, 1]);
        expect((await audit(`user=editor&from=${at}&limit=1`)).status, `from=${t}, every partition`).to.equal(200);
      }
      // Cursors at `0-0` (XREVRANGE refuses `(0-0`) or with a non-canonical id: this trail never made them.
      const cursor = (s: string) => Buffer.from(s).toString('base64url');
      for (const q of ['cursor=MDowLTA', 'cursor=MzowLTA', `content=${of}&cursor=MzowLTA`, `cursor=${cursor('1:00-0')}`, `cursor=${cursor('2:0-00')}`]) {
        const r = await audit(q);
        expect(r.status, `${q}: ${r.text}`).to.equal(400);
        expect(r.json.extraInfo.parameter, q).to.equal('cursor');
      }
      // The log itself, whatever its caller: a position at 0-0 leaves every partition done.
      const log = new AuditLog(p.redis, p.settings.PARTITIONS);
      for (const after of [
        { id: '0-0', p: 0 },
        { id: '0-0', p: 3 },
        { id: '0-0', p: p.settings.PARTITIONS - 1 },
      ]) {
        expect(await log.query({ limit: 10, after }), `after ${after.p}:0-0`).to.deep.equal({ entries: [], next: null });
      }
      expect(await log.query({ limit: 10, to: -1 })).to.deep.equal({ entries: [], next: null });
      expect((await log.query({ limit: 1, from: Date.parse('0001-01-01T00:00:00Z') })).entries).to.have.length(1);
    });
  });
});
