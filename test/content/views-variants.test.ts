import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

describe('content service: views, time state, variants (spec Views, CONTRACT §6)', () => {
  let p: P;
  let editor: Client;
  let reader: Client;
  let now = Date.parse('2026-06-01T12:00:00Z');

  before(async () => {
    p = await startTestPlatform({}, undefined, () => now);
    editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
  });
  after(async () => p.stop());

  const path = (id: string) => `/content/alias/${id}`;
  const viewPath = (view: string, id: string) => `/content/view/${view}/alias/${id}`;

  async function twoVersions() {
    const c = await editor.create(article('v1'));
    const id = c.json.system.id as string;
    const u = await editor.req('PUT', path(id), { body: article('v2'), headers: { 'If-Match': c.headers.get('etag')! } });
    return { id, key: id.split('/')[1], v1: c.json.system.version as string, v2: u.json.system.version as string, etag: u.headers.get('etag')! };
  }

  describe('PUT view and view reads', () => {
    it('puts a version on a view: 200, empty body, new ETag; the view read redirects (303/30300) to it', async () => {
      const { id, key, v1, etag } = await twoVersions();
      const r = await editor.req('PUT', '/view/svcPublic', { body: { version: v1 }, headers: { 'If-Match': etag } });
      expect(r.status).to.equal(200);
      expect(r.text).to.equal('');
      expect(r.headers.get('etag')).to.equal(`W/"${key}/3"`);
      const redirect = await reader.req('GET', viewPath('svcPublic', id));
      expect(redirect.status).to.equal(303);
      expect(redirect.json.statusCode).to.equal(30300);
      expect(redirect.headers.get('location')).to.equal(`${p.base}/content/view/svcPublic/alias/${id}/3`);
      const read = await reader.read(viewPath('svcPublic', id));
      expect(read.status).to.equal(200);
      expect(read.json.system.version).to.equal(v1);
      expect(read.json.aspects.body.title).to.equal('v1');
      // the unversioned read still gives the latest version
      expect((await reader.read(path(id))).json.aspects.body.title).to.equal('v2');
    });

    it('needs If-Match (400) and a current one (409/40900)', async () => {
      const { v1, etag, key } = await twoVersions();
      expect((await editor.req('PUT', '/view/svcPublic', { body: { version: v1 } })).status).to.equal(400);
      const stale = await editor.req('PUT', '/view/svcPublic', { body: { version: v1 }, headers: { 'If-Match': `W/"${key}/1"` } });
      expect(stale.status).to.equal(409);
      expect(stale.json.statusCode).to.equal('40900');
      expect(stale.json.extraInfo.ETag).to.equal(etag);
    });

    it('a content not on the view answers 404 to a view read', async () => {
      const c = await editor.create(article('x'));
      const r = await reader.req('GET', viewPath('svcPublic', c.json.system.id));
      expect(r.status).to.equal(404);
    });

    it('svcAssignToViews on create and update; a version moved off a view disappears from it', async () => {
      const c = await editor.create({ ...article('on public'), operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }] });
      const id = c.json.system.id;
      expect((await reader.read(viewPath('svcPublic', id))).json.aspects.body.title).to.equal('on public');
      const d = await editor.req('DELETE', `/view/svcPublic/alias/${id}`);
      expect(d.status).to.equal(204);
      expect(d.headers.get('etag')).to.equal(`W/"${id.split('/')[1]}/2"`);
      expect((await reader.req('GET', viewPath('svcPublic', id))).status).to.equal(404);
      const h = await reader.read(`${path(id)}/history`);
      expect(h.json.versions[0].views).to.deep.equal(['svcLatest']);
    });

    it('every version is on svcLatest; history shows the views of each version', async () => {
      const { id, v1, v2, etag } = await twoVersions();
      await editor.req('PUT', '/view/svcPublic', { body: { version: v1 }, headers: { 'If-Match': etag } });
      const h = await reader.read(`${path(id)}/history`);
      expect(h.json.versions.map((v: { version: string }) => v.version)).to.deep.equal([v1, v2]);
      expect(h.json.versions[0].views).to.deep.equal(['svcPublic']);
      expect(h.json.versions[1].views).to.deep.equal(['svcLatest']);
      expect((await reader.read(viewPath('svcLatest', id))).json.system.version).to.equal(v2);
    });

    it('svcViewInfo records each view assignment with userId, version, revision and timestamp', async () => {
      const { id, v1, etag } = await twoVersions();
      await editor.req('PUT', '/view/svcPublic', { body: { version: v1 }, headers: { 'If-Match': etag } });
      const m = await reader.read(`${path(id)}/metadata`);
      const views = m.json.aspects.svcViewInfo.views;
      expect(views.svcLatest.history.map((e: { revision: number }) => e.revision)).to.deep.equal([1, 2]);
      expect(views.svcPublic.history).to.have.length(1);
      expect(views.svcPublic.history[0]).to.include({ userId: 'editor', version: v1, revision: 3 });
    });

    it('refuses svcLatest (maintained by the system), bad view names and a version of another content', async () => {
      const a = await twoVersions();
      const b = await twoVersions();
      expect((await editor.req('PUT', '/view/svcLatest', { body: { version: a.v1 }, headers: { 'If-Match': a.etag } })).status).to.equal(400);
      expect((await editor.req('PUT', '/view/a%2Fb', { body: { version: a.v1 }, headers: { 'If-Match': a.etag } })).status).to.equal(400);
      expect((await editor.req('PUT', '/view/a..b', { body: { version: a.v1 }, headers: { 'If-Match': a.etag } })).status).to.equal(400);
      // a version of content B with the ETag of content A: refused, neither changes
      const cross = await editor.req('PUT', '/view/svcPublic', { body: { version: b.v1 }, headers: { 'If-Match': a.etag } });
      expect(cross.status).to.be.within(400, 499);
      expect((await reader.req('GET', viewPath('svcPublic', a.id))).status).to.equal(404);
      expect((await reader.req('GET', viewPath('svcPublic', b.id))).status).to.equal(404);
      // a version id that does not exist in the content
      const missing = await editor.req('PUT', '/view/svcPublic', { body: { version: `c:${a.key}:NOPE` }, headers: { 'If-Match': a.etag } });
      expect(missing.status).to.equal(400);
      const garbage = await editor.req('PUT', '/view/svcPublic', { body: { version: 'garbage' }, headers: { 'If-Match': a.etag } });
      expect(garbage.status).to.equal(400);
      const noBody = await editor.req('PUT', '/view/svcPublic', { body: { nothing: 1 }, headers: { 'If-Match': a.etag } });
      expect(noBody.status).to.equal(400);
      expect((await editor.read(`${path(a.id)}/history`)).json.versions).to.have.length(2);
    });

    it('names of Object.prototype are plain view names and namespaces; _type (the marker of the svcViewInfo and svcAliases maps) and __proto__ are refused (400)', async () => {
      for (const name of ['constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
        const { id, v1, v2, etag } = await twoVersions();
        // not on the view: 404 on a view read, not a version found on the prototype
        expect((await reader.req('GET', viewPath(name, id))).status, `${name}: not on it`).to.equal(404);
        const put = await editor.req('PUT', `/view/${name}`, { body: { version: v1 }, headers: { 'If-Match': etag } });
        expect(put.status, `${name}: PUT view`).to.equal(200);
        expect((await reader.read(viewPath(name, id))).json.system.version, `${name}: view read`).to.equal(v1);
        const u = await editor.req('PUT', path(id), {
          body: {
            ...article('v3'),
            operations: [
              { _type: 'svcSetAlias', namespace: name, alias: `a-${id.split('/')[1]}` },
              { _type: 'svcAssignToSymbolicViews', views: [`${name}-sym`], targetView: `@${name}` },
            ],
          },
          headers: { 'If-Match': put.headers.get('etag')! },
        });
        expect(u.status, `${name}: update with alias and symbolic view`).to.equal(200);
        expect((await reader.read(`/content/alias/${name}/a-${id.split('/')[1]}`)).json.system.id, `${name}: alias read`).to.equal(id);
        expect((await reader.read(viewPath(`${name}-sym`, id))).json.system.version, `${name}: symbolic view read`).to.equal(v1);
        const m = await reader.read(`${path(id)}/metadata`);
        expect(m.status, `${name}: metadata`).to.equal(200);
        const views = m.json.aspects.svcViewInfo.views;
        expect(Object.hasOwn(views, name) && views[name].history.map((e: { version: string }) => e.version), `${name}: svcViewInfo`).to.deep.equal([v1]);
        const aliases = m.json.aspects.svcAliases.aliases;
        expect(Object.hasOwn(aliases, name) && aliases[name], `${name}: svcAliases`).to.deep.equal([`a-${id.split('/')[1]}`]);
        const h = await reader.read(`${path(id)}/history`);
        expect(h.json.versions.find((v: { version: string }) => v.version === v1).views, `${name}: history`).to.include(name);
        expect(h.json.versions.map((v: { version: string }) => v.version)).to.include(v2);
        const off = await editor.req('DELETE', `/view/${name}/alias/${id}`);
        expect(off.status, `${name}: off the view`).to.equal(204);
        expect((await reader.req('GET', viewPath(name, id))).status, `${name}: off the view, view read`).to.equal(404);
      }
      const { id, v1, etag } = await twoVersions();
      for (const name of ['_type', '__proto__']) {
        const refusedBodies = [
          { ...article('x'), operations: [{ _type: 'svcAssignToViews', views: [name] }] },
          { ...article('x'), operations: [{ _type: 'svcAssignToSymbolicViews', views: [name], targetView: '@svcPublic' }] },
          { ...article('x'), operations: [{ _type: 'svcSetAlias', namespace: name, alias: 'x' }] },
          { ...article('x'), operations: [{ _type: 'svcContentMetadata', aspects: { [name]: { note: 'x' } } }] },
        ];
        for (const body of refusedBodies) {
          expect((await editor.req('PUT', path(id), { body, headers: { 'If-Match': etag } })).status, JSON.stringify(body.operations)).to.equal(400);
          expect((await editor.req('POST', '/content', { body })).status, JSON.stringify(body.operations)).to.equal(400);
        }
        expect((await editor.req('PUT', `/view/${name}`, { body: { version: v1 }, headers: { 'If-Match': etag } })).status, name).to.equal(400);
        expect((await reader.req('GET', viewPath(name, id))).status, `${name}: view read`).to.equal(404);
        // taken off like any view (one stored before such names were refused): nothing to take off here
        expect((await editor.req('DELETE', `/view/${name}/alias/${id}`)).status, `${name}: off the view`).to.equal(204);
        expect((await reader.req('GET', `/content/alias/${name}/x`)).status, `${name}: alias read`).to.equal(404);
      }
      expect((await reader.read(`${path(id)}/history`)).json.versions).to.have.length(2);
      const meta = (await reader.read(`${path(id)}/metadata`)).json.aspects;
      expect([meta._type, meta.svcViewInfo.views._type, meta.svcAliases.aliases._type]).to.deep.equal([
        '_contentInfo',
        'MAP::svcViewInfoEntry',
        'MAP::LIST::string',
      ]);
    });

    it('reader may not assign views (403)', async () => {
      const { v1, etag } = await twoVersions();
      expect((await reader.req('PUT', '/view/svcPublic', { body: { version: v1 }, headers: { 'If-Match': etag } })).status).to.equal(403);
    });
  });

  describe('symbolic views', () => {
    it('follow their target, also after a retarget; the target itself is unchanged', async () => {
      const { id, key, v1, v2, etag } = await twoVersions();
      let r = await editor.req('PUT', '/view/svcPublic', { body: { version: v1 }, headers: { 'If-Match': etag } });
      r = await editor.req('PUT', '/view/mobile', {
        body: { symbolic: { alias: id, targetView: '@svcPublic' } },
        headers: { 'If-Match': r.headers.get('etag')! },
      });
      expect(r.status).to.equal(200);
      expect(r.headers.get('etag')).to.equal(`W/"${key}/4"`);
      expect((await reader.read(viewPath('mobile', id))).json.system.version).to.equal(v1);
      // retarget svcPublic: mobile follows
      r = await editor.req('PUT', '/view/svcPublic', { body: { version: v2 }, headers: { 'If-Match': r.headers.get('etag')! } });
      expect((await reader.read(viewPath('mobile', id))).json.system.version).to.equal(v2);
      expect((await reader.read(viewPath('svcPublic', id))).json.system.version).to.equal(v2);
      const h = await reader.read(`${path(id)}/history`);
      expect(h.json.versions[1].views).to.deep.equal(['mobile', 'svcLatest', 'svcPublic']);
    });

    it('svcAssignToSymbolicViews on create', async () => {
      const c = await editor.create({ ...article('s'), operations: [{ _type: 'svcAssignToSymbolicViews', views: ['web'], targetView: '@svcLatest' }] });
      expect(c.status).to.equal(201);
      expect((await reader.read(viewPath('web', c.json.system.id))).json.aspects.body.title).to.equal('s');
    });

    it('refuses a view that follows itself or closes a cycle of two or three views (400), nothing changes', async () => {
      const { id, key, v1 } = await twoVersions();
      const names = ['loop', 'a', 'b', 'c', 'd'];
      /** Everything a refused view change could touch: revision, view info, and what each view reads. */
      const state = async () => {
        const latest = await editor.read(path(id));
        const meta = await editor.read(`${path(id)}/metadata`);
        const views: Record<string, string> = {};
        for (const v of names) {
          const r = await editor.read(viewPath(v, id));
          views[v] = r.status === 200 ? r.json.system.version : String(r.status);
        }
        return { etag: latest.headers.get('etag'), viewInfo: meta.json.aspects.svcViewInfo, views };
      };
      const put = async (view: string, targetView: string, ifMatch: string) =>
        editor.req('PUT', `/view/${view}`, { body: { symbolic: { alias: id, targetView } }, headers: { 'If-Match': ifMatch } });
      const refused = async (view: string, targetView: string) => {
        const before = await state();
        const r = await put(view, targetView, before.etag!);
        expect(r.status, `${view} -> ${targetView}: ${r.text}`).to.equal(400);
        expect(r.json.statusCode).to.equal('40000');
        expect(await state(), `${view} -> ${targetView}`).to.deep.equal(before);
      };
      await refused('loop', '@loop');
      expect((await state()).etag).to.equal(`W/"${key}/2"`);
      // c holds v1; two views: a follows b, then b following a is refused
      expect((await editor.req('PUT', '/view/c', { body: { version: v1 }, headers: { 'If-Match': `W/"${key}/2"` } })).status).to.equal(200);
      expect((await put('a', '@b', `W/"${key}/3"`)).status).to.equal(200);
      await refused('b', '@a');
      // three views: b follows c, then c following a (a -> b -> c -> a) or b is refused
      expect((await put('b', '@c', `W/"${key}/4"`)).status).to.equal(200);
      await refused('c', '@a');
      await refused('c', '@b');
      // a target view without @ is refused
      await refused('d', 'a');
      const end = await state();
      expect(end.etag).to.equal(`W/"${key}/5"`);
      expect(end.views).to.deep.equal({ loop: '404', a: v1, b: v1, c: v1, d: '404' });
      // a create whose operations make a view follow itself is refused whole: its alias stays free
      const ns = `cyc${Date.now()}`;
      const ops = [{ _type: 'svcSetAlias', namespace: ns, alias: 'x' }];
      const create = await editor.create({ ...article('x'), operations: [...ops, { _type: 'svcAssignToSymbolicViews', views: ['z'], targetView: '@z' }] });
      expect(create.status).to.equal(400);
      expect((await editor.req('GET', `/content/alias/${ns}/x`)).status).to.equal(404);
      expect((await editor.create({ ...article('y'), operations: ops })).json.status.statusCode).to.equal('20100');
    });
  });

  describe('time state (svcTimeState.views.<view>.onTime / offTime)', () => {
    it('outside the window the content is not on the view (404); inside it is', async () => {
      now = Date.parse('2026-06-01T12:00:00Z');
      const c = await editor.create({
        ...article('timed'),
        operations: [
          { _type: 'svcAssignToViews', views: ['svcPublic'] },
          {
            _type: 'svcContentMetadata',
            aspects: { svcTimeState: { views: { svcPublic: { onTime: '2026-07-01T00:00:00Z', offTime: '2026-08-01T00:00:00Z' } } } },
          },
        ],
      });
      const id = c.json.system.id;
      expect((await reader.req('GET', viewPath('svcPublic', id))).status).to.equal(404);
      expect((await reader.req('GET', `${viewPath('svcPublic', id)}/1`)).status).to.equal(404);
      now = Date.parse('2026-07-01T00:00:00Z');
      expect((await reader.read(viewPath('svcPublic', id))).status).to.equal(200);
      now = Date.parse('2026-08-01T00:00:00Z');
      expect((await reader.req('GET', viewPath('svcPublic', id))).status).to.equal(404);
      // other views are not affected
      expect((await reader.read(viewPath('svcLatest', id))).status).to.equal(200);
      now = Date.parse('2026-06-01T12:00:00Z');
    });
  });

  describe('variants', () => {
    it('projects aspects (article teaser keeps body only); 404 for a variant the type does not have', async () => {
      const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 't' }, secret: { v: 1 } } });
      const id = c.json.system.id;
      const redirect = await reader.req('GET', `${path(id)}?variant=teaser`);
      expect(redirect.headers.get('location')).to.equal(`${p.base}/content/alias/${id}/1?variant=teaser`);
      const t = await reader.read(`${path(id)}?variant=teaser`);
      expect(t.json.aspects).to.deep.equal({ _type: 'article', body: { _type: 'body', title: 't' } });
      expect((await reader.req('GET', `${path(id)}?variant=nope`)).status).to.equal(404);
      expect((await reader.req('GET', `${path(id)}/1?variant=nope`)).status).to.equal(404);
      const other = await editor.create({ system: { contentType: 'image' }, aspects: { body: { title: 't' } } });
      expect((await reader.req('GET', `${path(other.json.system.id)}?variant=teaser`)).status).to.equal(404);
      // view reads take variants too
      expect((await reader.read(`${viewPath('svcLatest', id)}?variant=teaser`)).json.aspects).to.not.have.property('secret');
    });

    it('svcIndexing: the search document with every system field, categorization paths and the content fields (its own svc_ fields are not among them, CONTRACT §20)', async () => {
      // a taxonomy entity with content, so that its id path is indexed
      await editor.create({
        system: { contentType: 'svcEntityDefinitionContent' },
        aspects: { svcEntityDefinition: { id: 'football', name: 'Football' } },
        operations: [{ _type: 'svcSetAlias', namespace: '_taxonomy', alias: 'football' }],
      });
      const c = await editor.create({
        system: { contentType: 'article' },
        aspects: {
          body: { title: 'Cup final' },
          svcSolrDocument: { headline_s: 'Cup final', parts: [{ part_s: 'one' }] },
          svcCategorization: {
            dimensions: [
              { id: 'sports', entities: [{ id: 'football', name: 'Football', entities: [{ id: 'premier', name: 'Premier League', entities: [] }] }] },
            ],
          },
        },
        operations: [
          { _type: 'svcAssignToViews', views: ['svcPublic'] },
          {
            _type: 'svcContentMetadata',
            aspects: {
              svcContentState: { hidden: true },
              svcSecurityContext: { owners: ['sports'] },
              svcTimeState: { views: { svcPublic: { onTime: '2026-01-01T00:00:00Z', offTime: '2027-01-01T00:00:00Z' } } },
            },
          },
        ],
      });
      const id = c.json.system.id;
      const vid = c.json.system.version;
      const r = await reader.read(`${path(id)}?variant=svcIndexing`);
      expect(r.status).to.equal(200);
      const doc = r.json.aspects.svcSolrDocument;
      expect(doc).to.deep.equal({
        _type: 'svcSolrDocument',
        id: vid,
        root: vid,
        version: 1,
        headline_s: 'Cup final',
        parts: [{ part_s: 'one', id: `${vid}/parts/0`, root: vid }],
        svc_type_s: 'article',
        svc_modificationTime_dt: c.json.system.modificationTime,
        svc_views_ss: ['svcLatest', 'svcPublic'],
        svc_security_context_ss: ['sports'],
        svc_timestate__drange: ['[0000 TO 9999]', '[2026-01-01T00:00:00.000Z TO 2027-01-01T00:00:00.000Z]'],
        svc_timestate_svcLatest_drange: '[0000 TO 9999]',
        svc_timestate_svcPublic_drange: '[2026-01-01T00:00:00.000Z TO 2027-01-01T00:00:00.000Z]',
        svc_contentstate_hidden_b: true,
        // the catch-all text field: the text of the own aspects (not of svcSolrDocument or svcCategorization)
        svc_text: 'Cup final',
        svc_tag_sports_ss: ['Football', 'Football/Premier League'],
        svc_tag_autocomplete_sports_lc: ['Football', 'Football/Premier League'],
        svc_tag_id_sports_ss: ['football'],
      });
    });
  });
});
