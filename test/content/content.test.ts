import { expect } from 'chai';
import { Redis } from 'ioredis';
import { Client, article, startTestPlatform } from '../support/platform.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

describe('content service: content (spec Endpoints/Content, CONTRACT §5, §11, §12)', () => {
  let p: P;
  let editor: Client;
  let reader: Client;
  let sysadmin: Client;

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
    sysadmin = await new Client(p.base).login('sysadmin');
  });
  after(async () => p.stop());

  const aliasOf = (id: string) => `/content/alias/${id}`;

  describe('create', () => {
    it('answers 201 with Location (versioned resource), ETag and status 20100', async () => {
      const r = await editor.create(article('Hello'));
      expect(r.status).to.equal(201);
      const id: string = r.json.system.id;
      expect(id).to.match(/^contentid\/[A-Za-z0-9_-]+$/);
      const key = id.split('/')[1];
      expect(r.headers.get('location')).to.equal(`${p.base}/content/alias/${id}/1`);
      expect(r.headers.get('etag')).to.equal(`W/"${key}/1"`);
      expect(r.json.status).to.deep.equal({ message: 'CREATED', statusCode: '20100', extraInfo: {} });
      expect(r.json.system.version).to.match(new RegExp(`^c:${key}:[A-Za-z0-9]+$`));
      expect(r.json.system.contentType).to.equal('article');
      expect(r.json.system.creationTime).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(r.json.aspects).to.deep.equal({ _type: 'article', body: { _type: 'body', title: 'Hello' } });
      expect(r.headers.get('svc-api-version')).to.match(/^\d+(\.\d+)+$/);
      expect(r.headers.get('svc-response-origin')).to.equal('content-service');
    });

    it('refuses a create with If-Match: 412, statusCode 41200, nothing created', async () => {
      const ns = `im${Date.now()}`;
      const ops = [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }];
      const r = await editor.create({ ...article('x'), operations: ops }, { 'If-Match': 'W/"a/1"' });
      expect(r.status).to.equal(412);
      expect(r.json.statusCode).to.equal('41200');
      expect(r.headers.get('location')).to.equal(null);
      // no content holds the alias the refused create named, and another content may take it
      expect((await editor.req('GET', `/content/alias/${ns}/a`)).status).to.equal(404);
      const other = await editor.create({ ...article('y'), operations: ops });
      expect(other.json.status.statusCode).to.equal('20100');
      expect((await editor.read(`/content/alias/${ns}/a`)).json.aspects.body.title).to.equal('y');
    });

    it('requires a token (401) and the Create permission (403)', async () => {
      const anon = await editor.req('POST', '/content', { body: article('x'), token: null });
      expect(anon.status).to.equal(401);
      expect(anon.json.statusCode).to.equal('40100');
      const r = await reader.create(article('x'));
      expect(r.status).to.equal(403);
      expect(r.json).to.include({ statusCode: '40300' });
    });

    it('requires system.contentType (400)', async () => {
      const r = await editor.create({ aspects: {} });
      expect(r.status).to.equal(400);
      expect(r.json.statusCode).to.equal('40000');
    });
  });

  describe('read', () => {
    let id: string;
    let key: string;
    before(async () => {
      const r = await editor.create(article('Read me'));
      id = r.json.system.id;
      key = id.split('/')[1];
    });

    it('redirects an unversioned read with 303, Location and the 30300 body', async () => {
      const r = await reader.req('GET', aliasOf(id));
      expect(r.status).to.equal(303);
      const loc = `${p.base}/content/alias/${id}/1`;
      expect(r.headers.get('location')).to.equal(loc);
      expect(r.json).to.deep.equal({ statusCode: 30300, message: 'Symbolic version resolved', location: loc });
    });

    it('answers the versioned resource with 200, ETag, Cache-Control and status 20000', async () => {
      const r = await reader.req('GET', `${aliasOf(id)}/1`);
      expect(r.status).to.equal(200);
      expect(r.headers.get('etag')).to.equal(`W/"${key}/1"`);
      expect(r.headers.get('cache-control')).to.equal('private, no-transform, proxy-revalidate, max-age=31536000');
      expect(r.headers.get('content-type')).to.equal('application/json');
      expect(r.json.status).to.deep.equal({ message: 'OK', statusCode: '20000', extraInfo: {} });
      expect(r.json.aspects.body.title).to.equal('Read me');
    });

    it('answers 304 with ETag and no body for a matching If-None-Match', async () => {
      const etag = `W/"${key}/1"`;
      for (const path of [aliasOf(id), `${aliasOf(id)}/1`]) {
        const r = await reader.req('GET', path, { headers: { 'If-None-Match': etag } });
        expect(r.status).to.equal(304);
        expect(r.headers.get('etag')).to.equal(etag);
        expect(r.text).to.equal('');
      }
    });

    it('keeps variant and format in the redirect', async () => {
      const r = await reader.req('GET', `${aliasOf(id)}?format=json%2Bpretty&other=1`);
      expect(r.headers.get('location')).to.equal(`${p.base}/content/alias/${id}/1?format=json%2Bpretty`);
    });

    it('formats: json+pretty indents, json+allTypes marks maps, Accept selects the same', async () => {
      const pretty = await reader.req('GET', `${aliasOf(id)}/1?format=json%2Bpretty`);
      expect(pretty.text).to.contain('\n  "system"');
      expect(pretty.headers.get('content-type')).to.equal('application/json');
      const viaAccept = await reader.req('GET', `${aliasOf(id)}/1`, { headers: { Accept: 'application/json;pretty=true' } });
      expect(viaAccept.text).to.equal(pretty.text);
      const all = await reader.req('GET', `${aliasOf(id)}/1?format=json%2BallTypes`);
      expect(all.json.system._type).to.match(/^MAP::/);
      expect(all.json.aspects._type).to.equal('article');
      const bad = await reader.req('GET', `${aliasOf(id)}/1?format=xml`);
      expect(bad.status).to.equal(400);
      // A `_type` the content holds is answered as stored, whatever its value; a map without one gets the marker.
      const own = await editor.create({
        system: { contentType: 'article' },
        aspects: { body: { _type: 'body', a: { _type: 5, b: { c: 1 } }, n: { _type: null } } },
      });
      expect(own.status, own.text).to.equal(201);
      const typed = await reader.req('GET', `${aliasOf(own.json.system.id)}/1?format=json%2BallTypes`);
      expect(typed.status, typed.text).to.equal(200);
      expect(typed.json.aspects.body.a._type).to.equal(5);
      expect(typed.json.aspects.body.n._type).to.equal(null);
      expect(typed.json.aspects.body.a.b._type).to.equal('MAP::long');
    });

    it('answers 404/40400 for unknown content and 404/40403 for a revision that never existed', async () => {
      const r = await reader.req('GET', '/content/alias/contentid/NOPE');
      expect(r.status).to.equal(404);
      expect(r.json.statusCode).to.equal('40400');
      const v = await reader.req('GET', `${aliasOf(id)}/99`);
      expect(v.status).to.equal(404);
      expect(v.json.statusCode).to.equal('40403');
    });

    it('atLeastRevision: a newer revision than the server has is refused, an older one redirects', async () => {
      const ahead = await reader.req('GET', `${aliasOf(id)}?atLeastRevision=5`);
      expect(ahead.status).to.equal(404);
      expect(ahead.json.statusCode).to.equal('40403');
      const ok = await reader.req('GET', `${aliasOf(id)}?atLeastRevision=1`);
      expect(ok.status).to.equal(303);
    });

    it('requires a token (401) and Read in the content context (403)', async () => {
      expect((await reader.req('GET', aliasOf(id), { token: null })).status).to.equal(401);
      expect((await reader.req('GET', aliasOf(id), { token: 'not-a-token' })).status).to.equal(401);
      const sports = await new Client(p.base).login('sportseditor');
      expect((await sports.req('GET', aliasOf(id))).status).to.equal(403);
    });
  });

  describe('update', () => {
    it('needs If-Match (400), answers 200 with status 20000 and a new ETag', async () => {
      const c = await editor.create(article('v1', { tags: ['a'] }));
      const id = c.json.system.id;
      const key = id.split('/')[1];
      const none = await editor.req('PUT', aliasOf(id), { body: article('v2') });
      expect(none.status).to.equal(400);
      const r = await editor.req('PUT', aliasOf(id), { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
      expect(r.status).to.equal(200);
      expect(r.json.status.statusCode).to.equal('20000');
      expect(r.headers.get('etag')).to.equal(`W/"${key}/2"`);
      expect(r.json.system.version).to.not.equal(c.json.system.version);
      expect(r.json.system.creationTime).to.equal(c.json.system.creationTime);
      const read = await editor.read(aliasOf(id));
      expect(read.json.aspects.body.title).to.equal('v2');
      // the old revision still reads as it was
      const old = await editor.req('GET', `${aliasOf(id)}/1`);
      expect(old.json.aspects.body.title).to.equal('v1');
    });

    it('a stale If-Match is 409/40900 with revision, conflictingVersion, committer, lastModified, ETag', async () => {
      const c = await editor.create(article('v1'));
      const id = c.json.system.id;
      const key = id.split('/')[1];
      const etag1 = c.headers.get('etag')!;
      const u = await editor.req('PUT', aliasOf(id), { body: article('v2'), headers: { 'If-Match': etag1 } });
      const stale = await editor.req('PUT', aliasOf(id), { body: article('v3'), headers: { 'If-Match': etag1 } });
      expect(stale.status).to.equal(409);
      expect(stale.json.statusCode).to.equal('40900');
      const info = stale.json.extraInfo;
      expect(info.revision).to.equal(2);
      expect(info.conflictingVersion).to.equal(u.json.system.version);
      expect(info.committer).to.equal('editor');
      expect(info.lastModified).to.be.a('number');
      expect(info.ETag).to.equal(`W/"${key}/2"`);
      expect((await editor.read(aliasOf(id))).json.aspects.body.title).to.equal('v2');
    });

    it('unsafeUpdate=true skips the If-Match check', async () => {
      const c = await editor.create(article('v1'));
      const r = await editor.req('PUT', `${aliasOf(c.json.system.id)}?unsafeUpdate=true`, { body: article('forced') });
      expect(r.status).to.equal(200);
      expect(r.json.aspects.body.title).to.equal('forced');
    });

    it('update modes: update keeps absent aspects, replace removes them, merge patches', async () => {
      const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 't', tags: ['a'], n: { x: 1 } }, extra: { v: 1 } } });
      const id = c.json.system.id;
      let etag = c.headers.get('etag')!;
      const put = async (mode: string, aspects: unknown) => {
        const r = await editor.req('PUT', `${aliasOf(id)}?updateMode=${mode}`, { body: { aspects }, headers: { 'If-Match': etag } });
        expect(r.status, r.text).to.equal(200);
        etag = r.headers.get('etag')!;
        return r.json.aspects;
      };
      const merged = await put('merge', { body: { tags: ['b'], n: { y: 2 }, title: 'T' } });
      expect(merged.body).to.deep.equal({ _type: 'body', title: 'T', tags: ['a', 'b'], n: { x: 1, y: 2 } });
      expect(merged.extra).to.deep.equal({ _type: 'extra', v: 1 });
      const updated = await put('update', { body: { title: 'U' } });
      expect(updated.body).to.deep.equal({ _type: 'body', title: 'U' });
      expect(updated.extra).to.deep.equal({ _type: 'extra', v: 1 });
      const replaced = await put('replace', { body: { title: 'R' } });
      expect(replaced).to.deep.equal({ _type: 'article', body: { _type: 'body', title: 'R' } });
      const bad = await editor.req('PUT', `${aliasOf(id)}?updateMode=patch`, { body: { aspects: {} }, headers: { 'If-Match': etag } });
      expect(bad.status).to.equal(400);
    });

    it('refuses a variant on update (400)', async () => {
      const c = await editor.create(article('v1'));
      const r = await editor.req('PUT', `${aliasOf(c.json.system.id)}?variant=x`, { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
      expect(r.status).to.equal(400);
    });

    it('unknown content: 404/40400; deleted content: 409/40904', async () => {
      const unknown = await editor.req('PUT', '/content/alias/contentid/NOPE', { body: article('x'), headers: { 'If-Match': 'W/"NOPE/1"' } });
      expect(unknown.status).to.equal(404);
      expect(unknown.json.statusCode).to.equal('40400');
      const c = await editor.create(article('x'));
      const id = c.json.system.id;
      const d = await editor.req('DELETE', aliasOf(id), { headers: { 'If-Match': c.headers.get('etag')! } });
      expect(d.status).to.equal(204);
      const r = await editor.req('PUT', `${aliasOf(id)}?unsafeUpdate=true`, { body: article('y') });
      expect(r.status).to.equal(409);
      expect(r.json.statusCode).to.equal('40904');
    });

    it('reader may not update (403), nothing changes', async () => {
      const c = await editor.create(article('v1'));
      const r = await reader.req('PUT', aliasOf(c.json.system.id), { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
      expect(r.status).to.equal(403);
      expect((await editor.read(aliasOf(c.json.system.id))).json.aspects.body.title).to.equal('v1');
    });
  });

  describe('delete (spec Errors, rule 2)', () => {
    it('400 without If-Match, 404 unknown, 403 without permission, 409 stale, then 204', async () => {
      const c = await editor.create(article('d'));
      const id = c.json.system.id;
      const etag = c.headers.get('etag')!;
      expect((await editor.req('DELETE', aliasOf(id))).status).to.equal(400);
      expect((await editor.req('DELETE', '/content/alias/contentid/NOPE', { headers: { 'If-Match': etag } })).status).to.equal(404);
      expect((await reader.req('DELETE', aliasOf(id), { headers: { 'If-Match': etag } })).status).to.equal(403);
      const stale = await editor.req('DELETE', aliasOf(id), { headers: { 'If-Match': `W/"${id.split('/')[1]}/7"` } });
      expect(stale.status).to.equal(409);
      expect(stale.json.statusCode).to.equal('40900');
      const ok = await editor.req('DELETE', aliasOf(id), { headers: { 'If-Match': etag } });
      expect(ok.status).to.equal(204);
      expect(ok.text).to.equal('');
      expect((await editor.req('GET', aliasOf(id))).status).to.equal(404);
      expect((await editor.req('GET', `${aliasOf(id)}/1`)).status).to.equal(404);
    });
  });

  describe('aliases (svcSetAlias, ALIAS_EXISTS, release)', () => {
    it('assigns several aliases; each reads the content', async () => {
      const ns = `ns${Date.now()}`;
      const c = await editor.create({
        ...article('aliased'),
        operations: [
          { _type: 'svcSetAlias', namespace: ns, alias: 'one' },
          { _type: 'svcSetAlias', namespace: ns, alias: 'two' },
        ],
      });
      expect(c.status).to.equal(201);
      for (const a of ['one', 'two']) {
        const r = await editor.read(`/content/alias/${ns}/${a}`);
        expect(r.status).to.equal(200);
        expect(r.json.system.id).to.equal(c.json.system.id);
      }
    });

    it('an alias taken already gives 20107 PARTIAL_CREATED with an ALIAS_EXISTS (40910) subResult', async () => {
      const ns = `dup${Date.now()}`;
      await editor.create({ ...article('first'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'x' }] });
      const op = { _type: 'svcSetAlias', namespace: ns, alias: 'x' };
      const r = await editor.create({ ...article('second'), operations: [op, { _type: 'svcSetAlias', namespace: ns, alias: 'y' }] });
      expect(r.status).to.equal(201);
      expect(r.json.status.statusCode).to.equal('20107');
      expect(r.json.status.message).to.equal('PARTIAL_CREATED');
      expect(r.json.status.subResults).to.have.length(1);
      expect(r.json.status.subResults[0].operation).to.deep.equal(op);
      expect(r.json.status.subResults[0].status.statusCode).to.equal('40910');
      expect(r.json.status.subResults[0].status.extraInfo.aliases).to.deep.equal([`${ns}/x`]);
      expect((await editor.read(`/content/alias/${ns}/x`)).json.aspects.body.title).to.equal('first');
      expect((await editor.read(`/content/alias/${ns}/y`)).json.aspects.body.title).to.equal('second');
    });

    it('release: sysadmin only, 204 when released, 200 when it does not exist; the main alias is refused while the content exists', async () => {
      const ns = `rel${Date.now()}`;
      const c = await editor.create({ ...article('r'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] });
      expect((await editor.req('DELETE', `/content/alias/${ns}/a/release`)).status).to.equal(403);
      const r = await sysadmin.req('DELETE', `/content/alias/${ns}/a/release`);
      expect(r.status).to.equal(204);
      expect((await editor.req('GET', `/content/alias/${ns}/a`)).status).to.equal(404);
      const again = await sysadmin.req('DELETE', `/content/alias/${ns}/a/release`);
      expect(again.status).to.equal(200);
      expect(again.text).to.equal('');
      const main = await sysadmin.req('DELETE', `/content/alias/${c.json.system.id}/release`);
      expect(main.status).to.equal(409);
      // an alias change raises the revision
      const meta = await editor.read(`/content/alias/${c.json.system.id}/metadata`);
      expect(meta.json.aspects.svcAliases.aliases).to.not.have.property(ns);
      expect((await editor.req('GET', `/content/alias/${c.json.system.id}`)).headers.get('location')).to.match(/\/2$/);
      // the freed alias can be taken by other content
      const other = await editor.create({ ...article('other'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] });
      expect(other.json.status.statusCode).to.equal('20100');
    });

    it('a delete frees the content aliases: another content takes them (20100)', async () => {
      const ns = `del${Date.now()}`;
      const ops = [
        { _type: 'svcSetAlias', namespace: ns, alias: 'a' },
        { _type: 'svcSetAlias', namespace: ns, alias: 'b' },
      ];
      const c = await editor.create({ ...article('d'), operations: ops });
      expect(c.json.status.statusCode).to.equal('20100');
      // held while the content lives
      expect((await editor.create({ ...article('early'), operations: ops })).json.status.statusCode).to.equal('20107');
      const d = await editor.req('DELETE', aliasOf(c.json.system.id), { headers: { 'If-Match': c.headers.get('etag')! } });
      expect(d.status, d.text).to.equal(204);
      expect((await editor.req('GET', `/content/alias/${ns}/a`)).status).to.equal(404);
      const other = await editor.create({ ...article('other'), operations: ops });
      expect(other.json.status.statusCode).to.equal('20100');
      for (const a of ['a', 'b']) expect((await editor.read(`/content/alias/${ns}/${a}`)).json.system.id).to.equal(other.json.system.id);
    });

    it('the main alias is released after its content is deleted: 409/40905 before, 200 with an empty body after', async () => {
      const c = await editor.create(article('main'));
      const id = c.json.system.id;
      const before = await sysadmin.req('DELETE', `/content/alias/${id}/release`);
      expect(before.status).to.equal(409);
      expect(before.json.statusCode).to.equal('40905');
      expect((await editor.read(aliasOf(id))).status).to.equal(200);
      const d = await editor.req('DELETE', aliasOf(id), { headers: { 'If-Match': c.headers.get('etag')! } });
      expect(d.status, d.text).to.equal(204);
      // the delete released it already: nothing is left to release
      const after = await sysadmin.req('DELETE', `/content/alias/${id}/release`);
      expect(after.status, after.text).to.equal(200);
      expect(after.text).to.equal('');
      expect((await editor.req('GET', aliasOf(id))).status).to.equal(404);
      expect((await editor.req('DELETE', `/content/alias/${id}/release`)).status).to.equal(403);
    });
  });

  describe('metadata and history', () => {
    it('metadata (_contentInfo): svcWorkflowState, svcContentState, svcAliases (MAP::LIST::string), svcViewInfo, metadata aspects', async () => {
      const ns = `m${Date.now()}`;
      const c = await editor.create({
        ...article('m'),
        operations: [
          { _type: 'svcSetAlias', namespace: ns, alias: 'a' },
          {
            _type: 'svcContentMetadata',
            aspects: { svcContentState: { hidden: true }, svcTimeState: { views: { svcPublic: { onTime: '2026-01-01T00:00:00Z' } } } },
          },
        ],
      });
      const id = c.json.system.id;
      const redirect = await editor.req('GET', `${aliasOf(id)}/metadata`);
      expect(redirect.status).to.equal(303);
      expect(redirect.headers.get('location')).to.equal(`${p.base}/content/alias/${id}/1/metadata`);
      const m = await editor.read(`${aliasOf(id)}/metadata`);
      expect(m.status).to.equal(200);
      expect(m.json.system.contentType).to.equal('_contentInfo');
      const a = m.json.aspects;
      expect(a._type).to.equal('_contentInfo');
      expect(a.svcWorkflowState).to.deep.equal({ _type: 'svcWorkflowState', workflows: [] });
      expect(a.svcContentState).to.deep.equal({ _type: 'svcContentState', hidden: true });
      expect(a.svcAliases.aliases).to.deep.equal({ _type: 'MAP::LIST::string', contentid: [id.split('/')[1]], [ns]: ['a'] });
      const latest = a.svcViewInfo.views.svcLatest.history;
      expect(latest).to.have.length(1);
      expect(latest[0]).to.include({ userId: 'editor', version: c.json.system.version, revision: 1 });
      expect(latest[0].timestamp).to.match(/Z$/);
      expect(a.svcTimeState.views.svcPublic.onTime).to.equal('2026-01-01T00:00:00Z');
    });

    it('svcContentMetadata on update changes metadata and raises the revision', async () => {
      const c = await editor.create(article('m'));
      const id = c.json.system.id;
      const u = await editor.req('PUT', aliasOf(id), {
        body: { aspects: {}, operations: [{ _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: true } } }] },
        headers: { 'If-Match': c.headers.get('etag')! },
      });
      expect(u.status).to.equal(200);
      const m = await editor.read(`${aliasOf(id)}/metadata`);
      expect(m.json.aspects.svcContentState.hidden).to.equal(true);
      const old = await editor.req('GET', `${aliasOf(id)}/1/metadata`);
      expect(old.json.aspects.svcContentState.hidden).to.equal(false);
    });

    it('history lists each version once with its first revision, creation time, creator and views', async () => {
      const c = await editor.create(article('h1'));
      const id = c.json.system.id;
      const key = id.split('/')[1];
      const u = await editor.req('PUT', aliasOf(id), { body: article('h2'), headers: { 'If-Match': c.headers.get('etag')! } });
      const redirect = await editor.req('GET', `${aliasOf(id)}/history`);
      expect(redirect.status).to.equal(303);
      expect(redirect.headers.get('location')).to.equal(`${p.base}/content/alias/${id}/2/history`);
      const h = await editor.read(`${aliasOf(id)}/history`);
      expect(h.json.versions).to.have.length(2);
      const [v1, v2] = h.json.versions;
      expect(v1).to.deep.include({ version: c.json.system.version, revision: { contentId: key, revisionNumber: 1 }, creatorId: 'editor', views: [] });
      expect(v2).to.deep.include({ version: u.json.system.version, revision: { contentId: key, revisionNumber: 2 }, views: ['svcLatest'] });
      expect(v1.creationTime).to.be.a('number');
      const ahead = await editor.req('GET', `${aliasOf(id)}/history?atLeastRevision=3`);
      expect(ahead.status).to.equal(404);
      const asOf1 = await editor.req('GET', `${aliasOf(id)}/1/history`);
      expect(asOf1.json.versions).to.have.length(1);
      expect(asOf1.json.versions[0].views).to.deep.equal(['svcLatest']);
    });
  });

  describe('security endpoints', () => {
    it('permission: own information only (403 for another user)', async () => {
      const own = await editor.req('GET', '/security/permission/editor');
      expect(own.status).to.equal(200);
      expect(own.json.contexts).to.deep.equal({ __global__: ['editor'] });
      expect(own.json.roles.editor['*']).to.include.members(['Create', 'Read', 'Update', 'Delete', 'Write', 'AssignToView']);
      expect((await editor.req('GET', '/security/permission/reader')).status).to.equal(403);
      expect((await editor.req('GET', '/security/permission/editor', { token: null })).status).to.equal(401);
    });

    it('token: login, then renew with the current token', async () => {
      const r = await editor.req('POST', '/security/token', { body: { username: 'editor', password: 'editor' }, token: null });
      expect(r.status).to.equal(200);
      expect(r.json.userId).to.equal('editor');
      expect(r.json.expireTime).to.match(/^\d+$/);
      expect(r.json.renewTime).to.match(/^\d+$/);
      const renewed = await editor.req('POST', '/security/token', { body: { username: 'editor', token: r.json.token }, token: null });
      expect(renewed.status).to.equal(200);
      expect(renewed.json.token).to.not.equal(r.json.token);
      const bad = await editor.req('POST', '/security/token', { body: { username: 'editor', password: 'nope' }, token: null });
      expect(bad.status).to.equal(401);
    });

    it('a content in a security context: sportseditor may create and update it, editor of __global__ too, reader reads', async () => {
      const sports = await new Client(p.base).login('sportseditor');
      const body = { ...article('match'), operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }] };
      const c = await sports.create(body);
      expect(c.status).to.equal(201);
      const id = c.json.system.id;
      const bySports = await sports.req('PUT', aliasOf(id), { body: article('match, half time'), headers: { 'If-Match': c.headers.get('etag')! } });
      expect(bySports.status, bySports.text).to.equal(200);
      const byEditor = await editor.req('PUT', aliasOf(id), { body: article('match, full time'), headers: { 'If-Match': bySports.headers.get('etag')! } });
      expect(byEditor.status, byEditor.text).to.equal(200);
      expect(byEditor.headers.get('etag')).to.equal(`W/"${id.split('/')[1]}/3"`);
      for (const who of [sports, editor, reader]) {
        const r = await who.read(aliasOf(id));
        expect(r.status).to.equal(200);
        expect(r.json.aspects.body.title).to.equal('match, full time');
      }
      expect((await editor.create(body)).status).to.equal(201);
      const refused = await reader.req('PUT', aliasOf(id), { body: article('reader'), headers: { 'If-Match': byEditor.headers.get('etag')! } });
      expect(refused.status).to.equal(403);
      expect((await sports.create(article('not in sports'))).status).to.equal(403);
    });
  });

  describe('errors (CONTRACT §11)', () => {
    it('unknown route 404/40400, wrong method 405/40500 with Allow', async () => {
      const r = await editor.req('GET', '/nothing/here');
      expect(r.status).to.equal(404);
      expect(r.json.statusCode).to.equal('40400');
      const m = await editor.req('PATCH', '/content');
      expect(m.status).to.equal(405);
      expect(m.json.statusCode).to.equal('40500');
      expect(m.headers.get('allow')).to.equal('POST');
    });

    it('metrics: Prometheus text with request counts per route and actor queue gauges', async () => {
      await editor.req('GET', '/content/alias/contentid/NOPE');
      const r = await editor.req('GET', `${p.url}/metrics`);
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^text\/plain/);
      expect(r.text).to.match(/http_requests_total\{route="content-service\/content\/alias\/:ns\/:alias",method="GET",status="404"\} \d+/);
      expect(r.text).to.contain('http_request_duration_seconds_bucket');
      expect(r.text).to.match(/actor_queue_depth\{partition="0"\} \d+/);
      // other tests of the run may have dead-lettered commands in any partition: the gauge is there
      expect(r.text).to.match(/actor_dead_letters\{partition="0"\} \d+/);
      // Answered without a token: no server version (the threat model's "anyone on the network").
      expect(r.text).not.to.include('nodejs_version_info');
      expect(r.text).not.to.include(process.version);
    });

    it('every response carries X-Request-Id: the client one when sane, a new one otherwise', async () => {
      const mine = await editor.req('GET', `${p.url}/health`, { headers: { 'X-Request-Id': 'abc-123' } });
      expect(mine.headers.get('x-request-id')).to.equal('abc-123');
      const bad = await editor.req('GET', `${p.url}/health`, { headers: { 'X-Request-Id': 'a b<script>' } });
      expect(bad.headers.get('x-request-id')).to.match(/^[A-Za-z0-9_-]{12}$/);
      // Random, never a count that would tell how many requests others sent in between.
      const ids = new Set<string>();
      for (let i = 0; i < 20; i++) ids.add((await editor.req('GET', `${p.url}/health`)).headers.get('x-request-id')!);
      expect(ids.size).to.equal(20);
      for (const id of ids) expect(id).to.match(/^[A-Za-z0-9_-]{12}$/);
      // A prefix and a counter would share their first characters; random ids almost never do.
      expect(new Set([...ids].map((id) => id.slice(0, 4))).size).to.be.at.least(18);
    });

    it('GET /openapi.json: an OpenAPI 3.1 document of every route, bodies from the zod schemas', async () => {
      const r = await editor.req('GET', `${p.url}/openapi.json`);
      expect(r.status).to.equal(200);
      expect(r.json.openapi).to.equal('3.1.0');
      expect(r.json.paths['/content-service/content'].post.requestBody.content['application/json'].schema).to.deep.equal({
        $ref: '#/components/schemas/ContentEnvelope',
      });
      expect(r.json.components.schemas.ContentEnvelope.properties).to.have.property('aspects');
      const params = r.json.paths['/content-service/content/alias/{ns}/{alias}/{rev}'].get.parameters as { name: string; in: string }[];
      expect(params.filter((x) => x.in === 'path').map((x) => x.name)).to.deep.equal(['ns', 'alias', 'rev']);
      expect(r.json.paths).to.have.property('/search-service/{collection}/select');
      expect(r.json.paths).to.have.property('/content-service/content/workspace/{ws}/alias/{ns}/{alias}/promote');
    });

    it('health answers 200 with status ok', async () => {
      const r = await editor.req('GET', `${p.url}/health`);
      expect(r.status).to.equal(200);
      expect(r.json.status).to.equal('ok');
      expect(r.headers.get('svc-api-version')).to.match(/^\d/);
    });

    it('health requests that come together share one check: a flood of them is not a flood of pings to the backends', async () => {
      const redis = new Redis(process.env.REDIS_URL!);
      try {
        const pings = async () => Number(/^cmdstat_ping:calls=(\d+)/m.exec(await redis.info('commandstats'))?.[1] ?? 0);
        const before = await pings();
        const answers = await Promise.all(Array.from({ length: 40 }, () => fetch(`${p.url}/health`).then((r) => r.json() as Promise<{ status: string }>)));
        expect(answers.every((a) => a.status === 'ok')).to.equal(true);
        // The gateway's one ping per check, plus this client's INFO: far fewer than 40.
        expect((await pings()) - before).to.be.below(20);
      } finally {
        redis.disconnect();
      }
    });
  });
});
