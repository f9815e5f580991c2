import { expect } from 'chai';
import type { LifecycleHook } from '../../src/actors/content/lifecycle-hooks.js';
import { pack, unpack } from '../../src/adapters/codec.js';
import { partitionOf } from '../../src/adapters/ids.js';
import { Client, article, startTestPlatform } from '../support/platform.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

describe('content service: workspaces (spec Workspace, draft and alias reservation tables, CONTRACT §7)', () => {
  let p: P;
  let editor: Client;
  let reader: Client;
  let sysadmin: Client;
  let sports: Client;
  let n = 0;
  const wsName = () => `ws${Date.now()}x${n++}`;

  before(async () => {
    p = await startTestPlatform({}, undefined, undefined, [recorder]);
    editor = await new Client(p.base).login('editor');
    reader = await new Client(p.base).login('reader');
    sysadmin = await new Client(p.base).login('sysadmin');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => {
    await p.stop();
  });

  const wsPath = (ws: string, id: string) => `/content/workspace/${ws}/alias/${id}`;

  /** Every lifecycle hook call of this process's actors, in order. */
  type HookCall = { hook: string; cid: string; action: 'create' | 'update' | 'delete'; via: string; rev?: number };
  const calls: HookCall[] = [];
  const recorder: LifecycleHook = {
    name: 'recorder',
    beforeCreate: (c) => void calls.push({ hook: 'before', cid: c.cid, action: 'create', via: c.via }),
    afterCreate: (c) => void calls.push({ hook: 'after', cid: c.cid, action: 'create', via: c.via, rev: c.snapshot.rev }),
    beforeUpdate: (c) => void calls.push({ hook: 'before', cid: c.cid, action: 'update', via: c.via }),
    afterUpdate: (c) => void calls.push({ hook: 'after', cid: c.cid, action: 'update', via: c.via, rev: c.snapshot.rev }),
    beforeDelete: (c) => void calls.push({ hook: 'before', cid: c.cid, action: 'delete', via: c.via }),
    afterDelete: (c) => void calls.push({ hook: 'after', cid: c.cid, action: 'delete', via: c.via, rev: c.snapshot.rev }),
  };

  /** The after-hook calls for one content; every one was preceded by its before-hook. */
  async function audit(cid: string): Promise<HookCall[]> {
    const mine = calls.filter((c) => c.cid === cid);
    const befores = mine.filter((c) => c.hook === 'before').map((c) => [c.action, c.via]);
    const afters = mine.filter((c) => c.hook === 'after');
    expect(
      afters.map((c) => [c.action, c.via]),
      'before-hooks',
    ).to.deep.equal(befores);
    return afters;
  }

  describe('draft state table', () => {
    it('no draft, content absent everywhere -> workspace create: draft on the workspace only, operations pending, 201/20100', async () => {
      const ws = wsName();
      const ns = `wsns${n}`;
      const ops = [
        { _type: 'svcSetAlias', namespace: ns, alias: 'a' },
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
      ];
      const r = await editor.req('POST', `/content/workspace/${ws}`, { body: { ...article('draft'), operations: ops } });
      expect(r.status).to.equal(201);
      expect(r.json.status.statusCode).to.equal('20100');
      const id: string = r.json.system.id;
      const key = id.split('/')[1];
      expect(r.json.system.version).to.equal(`draft:${key}:WORKSPACE-${ws}`);
      expect(r.json.operations).to.deep.equal(ops);
      // invisible to main, visible on the workspace, through its reserved alias too
      expect((await editor.req('GET', `/content/alias/${id}`)).status).to.equal(404);
      expect((await editor.req('GET', `/content/alias/${ns}/a`)).status).to.equal(404);
      const read = await editor.req('GET', wsPath(ws, `${ns}/a`));
      expect(read.status).to.equal(200);
      expect(read.json.aspects.body.title).to.equal('draft');
      expect(read.json.operations).to.deep.equal(ops);
      // invisible to other workspaces
      expect((await editor.req('GET', wsPath(wsName(), id))).status).to.equal(404);
      const info = await editor.req('GET', `/content/workspace/${ws}`);
      expect(info.json).to.deep.equal({ workspaceId: ws, drafts: { [id]: {} } });
      // lifecycle hooks did not run
      expect(await audit(key)).to.deep.equal([]);
    });

    it('no draft, content in main only -> workspace update: a new draft (in workspace and main), origin and mode kept', async () => {
      const ws = wsName();
      const c = await editor.create(article('main v1', { keep: 1 }));
      const id = c.json.system.id;
      const r = await editor.req('PUT', `${wsPath(ws, id)}?updateMode=update`, { body: { aspects: { extra: { v: 1 } }, origin: c.headers.get('etag') } });
      expect(r.status).to.equal(200);
      expect(r.json.system.version).to.equal(`draft:${id.split('/')[1]}:WORKSPACE-${ws}`);
      expect(r.json.aspects.body.title).to.equal('main v1');
      expect(r.json.aspects.extra.v).to.equal(1);
      // main unchanged
      const m = await editor.read(`/content/alias/${id}`);
      expect(m.json.aspects).to.not.have.property('extra');
      // the workspace read gives the draft; without a draft it gives main's latest version
      expect((await editor.req('GET', wsPath(ws, id))).json.aspects.extra.v).to.equal(1);
      const other = await editor.req('GET', wsPath(wsName(), id));
      expect(other.status).to.equal(200);
      expect(other.json.system.version).to.equal(c.json.system.version);
      expect(other.json.operations).to.deep.equal([]);
    });

    it('draft -> workspace update: the draft is replaced, pending operations replaced', async () => {
      const ws = wsName();
      const r = await editor.req('POST', `/content/workspace/${ws}`, { body: { ...article('d1'), operations: [{ _type: 'svcAssignToViews', views: ['a'] }] } });
      const id = r.json.system.id;
      const u = await editor.req('PUT', `${wsPath(ws, id)}?updateMode=replace`, {
        body: { aspects: { other: { x: 1 } }, operations: [{ _type: 'svcAssignToViews', views: ['b'] }] },
      });
      expect(u.status).to.equal(200);
      expect(u.json.aspects).to.deep.equal({ _type: 'article', other: { _type: 'other', x: 1 } });
      expect(u.json.operations).to.deep.equal([{ _type: 'svcAssignToViews', views: ['b'] }]);
    });

    it('draft -> workspace delete: no draft; only the workspace is affected; its reserved aliases are released', async () => {
      const ws = wsName();
      const ns = `del${n}`;
      const r = await editor.req('POST', `/content/workspace/${ws}`, {
        body: { ...article('d'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] },
      });
      const id = r.json.system.id;
      const d = await editor.req('DELETE', wsPath(ws, id));
      expect(d.status).to.equal(204);
      expect((await editor.req('GET', wsPath(ws, id))).status).to.equal(404);
      expect((await editor.req('DELETE', wsPath(ws, id))).status).to.equal(404);
      // the alias is free: another content may take it
      const other = await editor.create({ ...article('o'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] });
      expect(other.json.status.statusCode).to.equal('20100');
      expect((await editor.req('GET', `/content/workspace/${ws}`)).json.drafts).to.deep.equal({});
    });

    it('any drafts -> clear workspace: no drafts (204), any logged-in user may', async () => {
      const ws = wsName();
      const a = await editor.req('POST', `/content/workspace/${ws}`, { body: article('a') });
      const c = await editor.create(article('main'));
      await editor.req('PUT', wsPath(ws, c.json.system.id), { body: { aspects: { x: { y: 1 } } } });
      expect(Object.keys((await editor.req('GET', `/content/workspace/${ws}`)).json.drafts)).to.have.length(2);
      const clear = await reader.req('DELETE', `/content/workspace/${ws}`);
      expect(clear.status).to.equal(204);
      expect((await editor.req('GET', `/content/workspace/${ws}`)).json.drafts).to.deep.equal({});
      expect((await editor.req('GET', wsPath(ws, a.json.system.id))).status).to.equal(404);
      expect((await editor.read(`/content/alias/${c.json.system.id}`)).status).to.equal(200);
      expect((await editor.req('DELETE', `/content/workspace/${ws}`, { token: null })).status).to.equal(401);
    });

    it('draft from a create -> promote: a create in main, hooks run, pending operations run, reserved aliases assigned', async () => {
      const ws = wsName();
      const ns = `prom${n}`;
      const r = await editor.req('POST', `/content/workspace/${ws}`, {
        body: {
          ...article('to promote'),
          operations: [
            { _type: 'svcSetAlias', namespace: ns, alias: 'a' },
            { _type: 'svcAssignToViews', views: ['svcPublic'] },
          ],
        },
      });
      const id = r.json.system.id;
      const key = id.split('/')[1];
      const pr = await editor.req('POST', `${wsPath(ws, id)}/promote`);
      expect(pr.status).to.equal(200);
      expect(pr.json.status.statusCode).to.equal('20000');
      expect(pr.json.system.version).to.match(new RegExp(`^c:${key}:`));
      expect(pr.headers.get('etag')).to.equal(`W/"${key}/1"`);
      const main = await editor.read(`/content/alias/${ns}/a`);
      expect(main.status).to.equal(200);
      expect(main.json.aspects.body.title).to.equal('to promote');
      expect((await editor.read(`/content/view/svcPublic/alias/${id}`)).status).to.equal(200);
      // the draft is removed
      const after = await editor.req('GET', wsPath(ws, id));
      expect(after.json.system.version).to.match(/^c:/);
      expect((await editor.req('GET', `/content/workspace/${ws}`)).json.drafts).to.deep.equal({});
      const trail = await audit(key);
      expect(trail.map((e) => [e.action, e.via])).to.deep.equal([['create', 'promote']]);
    });

    it('draft from an update -> promote (main not updated since origin): an update in main with the stored mode (replace removes the aspects the draft lacks, update keeps them)', async () => {
      // main has two aspects; the draft sends only body: `replace` removes extra, `update` keeps it
      for (const mode of ['replace', 'update'] as const) {
        const ws = wsName();
        const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 'v1', keep: true }, extra: { v: 1 } } });
        const id = c.json.system.id;
        const key = id.split('/')[1];
        const d = await editor.req('PUT', `${wsPath(ws, id)}?updateMode=${mode}`, {
          body: { aspects: { body: { title: 'v2' } }, origin: c.headers.get('etag') },
        });
        expect(d.status, d.text).to.equal(200);
        // main is untouched until the promote
        expect((await editor.read(`/content/alias/${id}`)).json.aspects.extra).to.deep.equal({ _type: 'extra', v: 1 });
        const pr = await editor.req('POST', `${wsPath(ws, id)}/promote`);
        expect(pr.status, pr.text).to.equal(200);
        expect(pr.headers.get('etag')).to.equal(`W/"${key}/2"`);
        const main = await editor.read(`/content/alias/${id}`);
        const expected =
          mode === 'replace'
            ? { _type: 'article', body: { _type: 'body', title: 'v2' } }
            : { _type: 'article', body: { _type: 'body', title: 'v2' }, extra: { _type: 'extra', v: 1 } };
        expect(main.json.aspects, mode).to.deep.equal(expected);
        expect(pr.json.aspects, mode).to.deep.equal(expected);
        const trail = await audit(key);
        expect(trail.map((e) => [e.action, e.via])).to.deep.equal([
          ['create', 'main'],
          ['update', 'promote'],
        ]);
      }
    });

    it('draft from an update -> promote after main changed: 409/40900, the draft stays', async () => {
      const ws = wsName();
      const c = await editor.create(article('v1'));
      const id = c.json.system.id;
      await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: { title: 'draft' } }, origin: c.headers.get('etag') } });
      await editor.req('PUT', `/content/alias/${id}`, { body: article('main moved on'), headers: { 'If-Match': c.headers.get('etag')! } });
      const pr = await editor.req('POST', `${wsPath(ws, id)}/promote`);
      expect(pr.status).to.equal(409);
      expect(pr.json.statusCode).to.equal('40900');
      expect((await editor.req('GET', wsPath(ws, id))).json.aspects.body.title).to.equal('draft');
      expect((await editor.read(`/content/alias/${id}`)).json.aspects.body.title).to.equal('main moved on');
      // updating the draft with the new origin makes the promote succeed
      const now = await editor.read(`/content/alias/${id}`);
      const etag = now.headers.get('etag')!;
      expect(etag).to.equal(`W/"${id.split('/')[1]}/2"`);
      const redo = await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: { title: 'draft 2' } }, origin: etag } });
      expect(redo.status, redo.text).to.equal(200);
      const pr2 = await editor.req('POST', `${wsPath(ws, id)}/promote`);
      expect(pr2.status, pr2.text).to.equal(200);
      expect(pr2.headers.get('etag')).to.equal(`W/"${id.split('/')[1]}/3"`);
      expect((await editor.read(`/content/alias/${id}`)).json.aspects.body.title).to.equal('draft 2');
    });

    it('lifecycle hooks run on main create, update and delete, and on no workspace operation but promote', async () => {
      const ws = wsName();
      const c = await editor.create(article('h'));
      const id = c.json.system.id;
      const key = id.split('/')[1];
      await editor.req('PUT', wsPath(ws, id), { body: { aspects: { x: { v: 1 } } } });
      await editor.req('PUT', wsPath(ws, id), { body: { aspects: { x: { v: 2 } } } });
      await editor.req('DELETE', wsPath(ws, id));
      const u = await editor.req('PUT', `/content/alias/${id}`, { body: article('h2'), headers: { 'If-Match': c.headers.get('etag')! } });
      await editor.req('DELETE', `/content/alias/${id}`, { headers: { 'If-Match': u.headers.get('etag')! } });
      expect((await audit(key)).map((e) => [e.action, e.via, e.rev])).to.deep.equal([
        ['create', 'main', 1],
        ['update', 'main', 2],
        ['delete', 'main', 3],
      ]);
    });
  });

  it('workspace reads take variants like normal reads (spec: workspace read supports variants)', async () => {
    const ws = wsName();
    const d = await editor.req('POST', `/content/workspace/${ws}`, {
      body: { system: { contentType: 'article' }, aspects: { body: { title: 't' }, secret: { v: 1 } } },
    });
    const t = await editor.req('GET', `${wsPath(ws, d.json.system.id)}?variant=teaser`);
    expect(t.status).to.equal(200);
    expect(t.json.aspects).to.deep.equal({ _type: 'article', body: { _type: 'body', title: 't' } });
    expect((await editor.req('GET', `${wsPath(ws, d.json.system.id)}?variant=nope`)).status).to.equal(404);
    const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 'm' }, secret: { v: 1 } } });
    const m = await editor.req('GET', `${wsPath(ws, c.json.system.id)}?variant=teaser`);
    expect(m.json.aspects).to.not.have.property('secret');
  });

  describe('alias reservation table', () => {
    it('free -> reserved by a workspace write: usable on the workspace, refused to any other content', async () => {
      const ws = wsName();
      const ns = `res${n}`;
      const r = await editor.req('POST', `/content/workspace/${ws}`, {
        body: { ...article('r'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] },
      });
      expect((await editor.req('GET', wsPath(ws, `${ns}/a`))).json.system.id).to.equal(r.json.system.id);
      const other = await editor.create({ ...article('o'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] });
      expect(other.json.status.statusCode).to.equal('20107');
      const otherDraft = await editor.req('POST', `/content/workspace/${wsName()}`, {
        body: { ...article('o2'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] },
      });
      expect(otherDraft.json.status.statusCode).to.equal('20107');
      expect(otherDraft.json.status.subResults[0].status.statusCode).to.equal('40910');
    });

    it('reserved -> promote: assigned in main', async () => {
      const ws = wsName();
      const ns = `res${n}`;
      const r = await editor.req('POST', `/content/workspace/${ws}`, {
        body: { ...article('r'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] },
      });
      await editor.req('POST', `${wsPath(ws, r.json.system.id)}/promote`);
      const m = await editor.read(`/content/alias/${r.json.system.id}/metadata`);
      expect(m.json.aspects.svcAliases.aliases[ns]).to.deep.equal(['a']);
    });

    it('reserved -> content removed from the workspace (draft delete, clear): free', async () => {
      for (const how of ['delete', 'clear']) {
        const ws = wsName();
        const ns = `res${n}`;
        const r = await editor.req('POST', `/content/workspace/${ws}`, {
          body: { ...article('r'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] },
        });
        if (how === 'delete') await editor.req('DELETE', wsPath(ws, r.json.system.id));
        else await editor.req('DELETE', `/content/workspace/${ws}`);
        const other = await editor.create({ ...article('o'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] });
        expect(other.json.status.statusCode, how).to.equal('20100');
      }
    });

    it('reserved -> explicitly released (sysadmin): free, gone from the pending operations', async () => {
      const ws = wsName();
      const ns = `res${n}`;
      const r = await editor.req('POST', `/content/workspace/${ws}`, {
        body: { ...article('r'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] },
      });
      const rel = await sysadmin.req('DELETE', `/content/alias/${ns}/a/release`);
      expect(rel.status).to.equal(204);
      expect((await editor.req('GET', wsPath(ws, r.json.system.id))).json.operations).to.deep.equal([]);
      const other = await editor.create({ ...article('o'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] });
      expect(other.json.status.statusCode).to.equal('20100');
    });

    it('reserved -> content updated on the workspace without an operation assigning it: free', async () => {
      const ws = wsName();
      const ns = `res${n}`;
      const r = await editor.req('POST', `/content/workspace/${ws}`, {
        body: {
          ...article('r'),
          operations: [
            { _type: 'svcSetAlias', namespace: ns, alias: 'a' },
            { _type: 'svcSetAlias', namespace: ns, alias: 'b' },
          ],
        },
      });
      const id = r.json.system.id;
      await editor.req('PUT', wsPath(ws, id), { body: { aspects: {}, operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'b' }] } });
      const a = await editor.create({ ...article('o'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'a' }] });
      expect(a.json.status.statusCode).to.equal('20100');
      const b = await editor.create({ ...article('o'), operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'b' }] });
      expect(b.json.status.statusCode).to.equal('20107');
    });
  });

  describe('permission table', () => {
    it('create a draft: workspace-only content needs Create in any context; content in main needs Update on it', async () => {
      const ws = wsName();
      expect((await reader.req('POST', `/content/workspace/${ws}`, { body: article('x') })).status).to.equal(403);
      // sportseditor could create in context sports
      expect((await sports.req('POST', `/content/workspace/${ws}`, { body: article('x') })).status).to.equal(201);
      const c = await editor.create(article('global'));
      expect((await sports.req('PUT', wsPath(ws, c.json.system.id), { body: { aspects: {} } })).status).to.equal(403);
      expect((await editor.req('PUT', wsPath(ws, c.json.system.id), { body: { aspects: {} } })).status).to.equal(200);
    });

    it('read a draft: workspace-only if it could be read in any context; else if the original can be read', async () => {
      const ws = wsName();
      const d = await editor.req('POST', `/content/workspace/${ws}`, { body: article('x') });
      expect((await reader.req('GET', wsPath(ws, d.json.system.id))).status).to.equal(200);
      const c = await editor.create(article('global'));
      await editor.req('PUT', wsPath(ws, c.json.system.id), { body: { aspects: {} } });
      expect((await sports.req('GET', wsPath(ws, c.json.system.id))).status).to.equal(403);
      expect((await reader.req('GET', wsPath(ws, c.json.system.id))).status).to.equal(200);
    });

    it('delete a draft: if the caller could have created it', async () => {
      const ws = wsName();
      const d = await editor.req('POST', `/content/workspace/${ws}`, { body: article('x') });
      expect((await reader.req('DELETE', wsPath(ws, d.json.system.id))).status).to.equal(403);
      expect((await sports.req('DELETE', wsPath(ws, d.json.system.id))).status).to.equal(204);
      const c = await editor.create(article('global'));
      await editor.req('PUT', wsPath(ws, c.json.system.id), { body: { aspects: {} } });
      expect((await sports.req('DELETE', wsPath(ws, c.json.system.id))).status).to.equal(403);
      expect((await editor.req('DELETE', wsPath(ws, c.json.system.id))).status).to.equal(204);
    });

    it('the answers of the sportseditor are the same whether or not a workspace holds a draft of deleted content it may not read (GET and PUT)', async () => {
      // culture content with a draft on one workspace, then deleted in main
      const c = await editor.create({
        ...article('culture only'),
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }],
      });
      expect(c.status, c.text).to.equal(201);
      const id: string = c.json.system.id;
      const key = id.split('/')[1];
      const [withDraft, without] = [wsName(), wsName()];
      const d = await editor.req('PUT', wsPath(withDraft, id), { body: { aspects: { body: { title: 'culture draft' } } } });
      expect(d.status, d.text).to.equal(200);
      const del = await editor.req('DELETE', `/content/alias/${id}`, { headers: { 'If-Match': c.headers.get('etag')! } });
      expect(del.status, del.text).to.be.oneOf([200, 204]);

      // every request the sportseditor may send to the draft's path: reads and updates in every form
      const requests: [string, string, object | undefined][] = [
        ['GET', '', undefined],
        ['GET', '?variant=teaser', undefined],
        ['GET', '?format=json', undefined],
        ['PUT', '', { aspects: { body: { title: 'taken over' } } }],
        ['PUT', '?updateMode=replace', { aspects: { body: { title: 'taken over' } } }],
        ['PUT', '?updateMode=update', { aspects: {}, operations: [{ _type: 'svcAssignToViews', views: ['desk'] }] }],
      ];
      const answers = async (ws: string): Promise<string[]> => {
        const out: string[] = [];
        for (const [method, query, body] of requests) {
          const r = await sports.req(method, `${wsPath(ws, id)}${query}`, body ? { body } : {});
          out.push(JSON.stringify({ method, query, status: r.status, body: r.text.split(ws).join('<ws>') }));
        }
        return out;
      };
      const [a, b] = [await answers(withDraft), await answers(without)];
      expect(a).to.deep.equal(b);
      // the 404 of a key that never existed (deleted content the caller may not read or update is
      // told apart from none by nobody; it was 403 before the eighteenth session's review)
      for (const s of a) {
        expect(JSON.parse(s).status, s).to.equal(404);
        expect(s, 'names neither the content key nor the draft').to.not.include(key).and.not.include('culture');
      }

      // a caller who may read the content keeps the spec's answers: the draft, and 404 where there is none
      const read = await editor.req('GET', wsPath(withDraft, id));
      expect(read.status, read.text).to.equal(200);
      expect(read.json.aspects.body.title, 'the sportseditor changed nothing').to.equal('culture draft');
      const none = await editor.req('GET', wsPath(without, id));
      expect(none.status, none.text).to.equal(404);
      const put = await editor.req('PUT', wsPath(without, id), { body: { aspects: {} } });
      expect(put.status, put.text).to.equal(404);
      expect((await editor.req('PUT', wsPath(withDraft, id), { body: { aspects: { body: { title: 'culture draft 2' } } } })).status).to.equal(200);
      expect((await editor.req('GET', `/content/workspace/${without}`)).json.drafts).to.deep.equal({});
    });
  });

  describe('promote under concurrent main writes', () => {
    it('50 writers update main while a promote runs: the promote wins before them or answers 409; never a silent overwrite', async () => {
      const ws = wsName();
      const c = await editor.create(article('base'));
      const id = c.json.system.id;
      const etag0 = c.headers.get('etag')!;
      await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: { title: 'draft' } }, origin: etag0 } });
      const writers = Array.from({ length: 50 }, (_, i) => editor.req('PUT', `/content/alias/${id}?unsafeUpdate=true`, { body: article(`w${i}`) }));
      const promote = editor.req('POST', `${wsPath(ws, id)}/promote`);
      const [pr, ...ws2] = await Promise.all([promote, ...writers]);
      expect(ws2.every((w) => w.status === 200)).to.equal(true);
      const h = await editor.read(`/content/alias/${id}/history`);
      expect(h.json.versions).to.have.length(pr.status === 200 ? 52 : 51);
      if (pr.status === 200) {
        // the promote was applied at revision 2, right after the origin (revision 1)
        expect(pr.headers.get('etag')).to.equal(`W/"${id.split('/')[1]}/2"`);
      } else {
        expect(pr.status).to.equal(409);
        expect(pr.json.statusCode).to.equal('40900');
        expect((await editor.req('GET', wsPath(ws, id))).json.aspects.body.title).to.equal('draft');
      }
    });
  });

  describe('the listing costs in proportion to its answer', () => {
    /** Bytes Redis has answered so far (all clients): what a request between two reads made it send. */
    const redisSent = async () => Number(/total_net_output_bytes:(\d+)/.exec(await p.redis.info('stats'))![1]);
    /** The drafts hash of a content, and the field beside its draft that keeps the listing's summary of it. */
    const draftsKey = (key: string) => `dr:{${partitionOf(key, p.settings.PARTITIONS)}}:${key}`;
    const summaryField = (ws: string) => `${ws}:summary`;
    /** A draft of about 1.3 MB stored (msgpack), of many small values. */
    const big = (title: string) => ({ _type: 'body', title, items: Array.from({ length: 50_000 }, (_, i) => `item ${i} of a big draft`) });

    /** Drafts of about 1.3 MB: three of new content, one over content in main. Their ids. */
    async function bigDrafts(ws: string): Promise<string[]> {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await editor.req('POST', `/content/workspace/${ws}`, { body: { system: { contentType: 'article' }, aspects: { body: big(`new ${i}`) } } });
        expect(r.status, r.text).to.equal(201);
        ids.push(r.json.system.id);
      }
      const c = await editor.create(article('in main'));
      expect((await editor.req('PUT', wsPath(ws, c.json.system.id), { body: { aspects: { body: big('over main') } } })).status).to.equal(200);
      ids.push(c.json.system.id);
      return ids;
    }

    /** The listing's drafts, and how many bytes Redis sent while it was answered. */
    async function listing(ws: string, who = editor): Promise<{ ids: string[]; sent: number }> {
      const before = await redisSent();
      const r = await who.req('GET', `/content/workspace/${ws}`);
      const sent = (await redisSent()) - before;
      expect(r.status, r.text).to.equal(200);
      expect(Object.values(r.json.drafts)).to.deep.equal(Object.keys(r.json.drafts).map(() => ({})));
      return { ids: Object.keys(r.json.drafts), sent };
    }

    it('a listing reads what each write kept beside its draft, never the drafts: 4 drafts of 1.3 MB, under 64 KB from Redis (the old code read them all, 5.2 MB)', async () => {
      const ws = wsName();
      const ids = await bigDrafts(ws);
      const stored = await Promise.all(ids.map((id) => p.redis.hstrlen(draftsKey(id.split('/')[1]), ws)));
      expect(Math.min(...stored)).to.be.above(1_000_000);
      const seen = await listing(ws);
      expect(seen.ids).to.have.members(ids);
      expect(seen.sent).to.be.below(64 * 1024);
      // the permission still decides, on the original in main and on the type for the others
      expect((await listing(ws, sports)).ids).to.have.members(ids.slice(0, 3));
      expect((await listing(ws, reader)).ids).to.have.members(ids);
    });

    it("drafts stored before summaries were kept list as before, each read once and its summary kept; a summary that is not its draft's is not used; one without its draft lists nothing", async () => {
      const ws = wsName();
      const ids = await bigDrafts(ws);
      const keys = ids.map((id) => draftsKey(id.split('/')[1]));
      // as stored before: no summary beside any draft, and one summary of an earlier draft (another size)
      for (const key of keys) await p.redis.hdel(key, summaryField(ws));
      await p.redis.hset(keys[0], summaryField(ws), pack({ type: 'article', size: 12 }));
      const first = await listing(ws);
      expect(first.ids).to.have.members(ids);
      expect(first.sent, 'the drafts read once').to.be.above(4_000_000);
      for (const key of keys) {
        const summary = unpack((await p.redis.hgetBuffer(key, summaryField(ws))) as Buffer) as Record<string, unknown>;
        expect(summary).to.deep.include({ type: 'article', size: await p.redis.hstrlen(key, ws), views: false });
        // the draft's origin kept too, read from the draft (a promote then needs not read it either)
        expect(summary.fromCreate, key).to.equal(key !== keys[3]);
        expect(summary.origin, key).to.equal(key === keys[3] ? `W/"${ids[3].split('/')[1]}/1"` : undefined);
      }
      const second = await listing(ws);
      expect(second.ids).to.have.members(ids);
      expect(second.sent, 'then only their summaries').to.be.below(64 * 1024);
      expect((await listing(ws, sports)).ids).to.have.members(ids.slice(0, 3));
      // a summary left without its draft (a removal by code that kept none) lists nothing
      await p.redis.hdel(keys[1], ws);
      expect((await listing(ws)).ids).to.have.members([ids[0], ids[2], ids[3]]);
    });

    it('a removed, promoted or cleared draft leaves no summary behind', async () => {
      const ws = wsName();
      const made = await Promise.all([0, 1, 2].map((i) => editor.req('POST', `/content/workspace/${ws}`, { body: article(`d${i}`) })));
      const [removed, promoted, cleared] = made.map((r) => r.json.system.id as string);
      const keys = [removed, promoted, cleared].map((id) => draftsKey(id.split('/')[1]));
      for (const key of keys) expect(await p.redis.hkeys(key)).to.have.members([ws, summaryField(ws)]);
      expect((await editor.req('DELETE', wsPath(ws, removed))).status).to.equal(204);
      expect((await editor.req('POST', `${wsPath(ws, promoted)}/promote`)).status).to.equal(200);
      expect((await editor.req('DELETE', `/content/workspace/${ws}`)).status).to.equal(204);
      for (const key of keys) expect(await p.redis.hkeys(key)).to.deep.equal([]);
    });
  });

  describe("a promote that conflicts is decided from the draft's summary (review s23d)", () => {
    const redisSent = async () => Number(/total_net_output_bytes:(\d+)/.exec(await p.redis.info('stats'))![1]);
    const draftsKey = (key: string) => `dr:{${partitionOf(key, p.settings.PARTITIONS)}}:${key}`;
    const summaryField = (ws: string) => `${ws}:summary`;
    /** A body of about 1.3 MB stored (msgpack). */
    const big = (title: string) => ({ _type: 'body', title, items: Array.from({ length: 50_000 }, (_, i) => `item ${i} of a big draft`) });
    /** The summary as a build before origins were kept wrote it: the draft's type and size only. */
    async function forgetOrigin(key: string, ws: string): Promise<void> {
      const k = draftsKey(key);
      const kept = unpack((await p.redis.hgetBuffer(k, summaryField(ws))) as Buffer) as Record<string, unknown>;
      expect(kept).to.have.property('fromCreate');
      await p.redis.hset(k, summaryField(ws), pack({ type: kept.type, size: kept.size }));
    }
    /** A promote's answer and what Redis sent meanwhile. */
    async function promote(ws: string, id: string): Promise<{ status: number; json: Record<string, unknown>; sent: number }> {
      const before = await redisSent();
      const r = await editor.req('POST', `${wsPath(ws, id)}/promote`);
      return { status: r.status, json: r.json, sent: (await redisSent()) - before };
    }

    it('a draft of 1.3 MB over content main changed since: 409/40900 with the conflict of the head, the draft never sent by Redis, and it stays', async () => {
      const ws = wsName();
      const c = await editor.create(article('v1'));
      const id = c.json.system.id;
      const key = id.split('/')[1];
      expect((await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: big('draft') } } })).status).to.equal(200);
      expect(await p.redis.hstrlen(draftsKey(key), ws)).to.be.above(1_000_000);
      const u = await editor.req('PUT', `/content/alias/${id}`, { body: article('main moved on'), headers: { 'If-Match': c.headers.get('etag')! } });
      expect(u.status, u.text).to.equal(200);
      const r = await promote(ws, id);
      expect(r.status).to.equal(409);
      expect(r.json.statusCode).to.equal('40900');
      expect(r.json.extraInfo).to.include({ revision: 2, ETag: `W/"${key}/2"` });
      expect(r.sent, 'bytes Redis sent for the promote').to.be.below(64 * 1024);
      expect((await editor.req('GET', wsPath(ws, id))).json.aspects.body.title).to.equal('draft');
      // the draft's content deleted in main: 409/40904 as before, the draft not read either
      expect((await editor.req('DELETE', `/content/alias/${id}`, { headers: { 'If-Match': u.headers.get('etag')! } })).status).to.be.oneOf([200, 204]);
      const gone = await promote(ws, id);
      expect(gone.status).to.equal(409);
      expect(gone.json.statusCode).to.equal('40904');
      expect(gone.sent).to.be.below(64 * 1024);
    });

    it("a draft whose summary keeps no origin (written before origins were kept) conflicts as before, with the same answer, and promotes once its origin is main's head", async () => {
      const ws = wsName();
      const c = await editor.create(article('v1'));
      const id = c.json.system.id;
      const key = id.split('/')[1];
      expect((await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: big('draft') } } })).status).to.equal(200);
      await editor.req('PUT', `/content/alias/${id}`, { body: article('main moved on'), headers: { 'If-Match': c.headers.get('etag')! } });
      const kept = await promote(ws, id);
      expect(kept.status).to.equal(409);
      await forgetOrigin(key, ws);
      const old = await promote(ws, id);
      expect(old.status).to.equal(409);
      expect(old.json).to.deep.equal(kept.json);
      expect(old.sent, 'the draft read, as before').to.be.above(1_000_000);
      expect((await editor.req('GET', wsPath(ws, id))).json.aspects.body.title).to.equal('draft');

      // a draft over main whose origin is main's head, its summary without origin: promoted
      const etag = (await editor.read(`/content/alias/${id}`)).headers.get('etag')!;
      expect((await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: { title: 'draft 2' } }, origin: etag } })).status).to.equal(200);
      await forgetOrigin(key, ws);
      const pr = await promote(ws, id);
      expect(pr.status, JSON.stringify(pr.json)).to.equal(200);
      expect((await editor.read(`/content/alias/${id}`)).json.aspects.body.title).to.equal('draft 2');
      expect(await p.redis.hkeys(draftsKey(key))).to.deep.equal([]);

      // a draft of new content, its summary without origin: promoted (a create in main)
      const d = await editor.req('POST', `/content/workspace/${ws}`, { body: article('new') });
      expect(d.status, d.text).to.equal(201);
      await forgetOrigin(d.json.system.id.split('/')[1], ws);
      const created = await promote(ws, d.json.system.id);
      expect(created.status, JSON.stringify(created.json)).to.equal(200);
      expect((await editor.read(`/content/alias/${d.json.system.id}`)).json.aspects.body.title).to.equal('new');
    });

    it('a draft whose operations need AssignToView: its summary says so; its promote conflicts from the summary for a writer who has it, and promotes when main has not changed', async () => {
      const ws = wsName();
      const c = await editor.create(article('v1'));
      const id = c.json.system.id;
      const key = id.split('/')[1];
      const ops = [{ _type: 'svcAssignToViews', views: ['svcPublic'] }];
      expect((await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: big('draft') }, operations: ops } })).status).to.equal(200);
      const summary = unpack((await p.redis.hgetBuffer(draftsKey(key), summaryField(ws))) as Buffer) as Record<string, unknown>;
      expect(summary).to.deep.include({ fromCreate: false, origin: `W/"${key}/1"`, views: true });
      const u = await editor.req('PUT', `/content/alias/${id}`, { body: article('main moved on'), headers: { 'If-Match': c.headers.get('etag')! } });
      const r = await promote(ws, id);
      expect(r.status).to.equal(409);
      expect(r.json.statusCode).to.equal('40900');
      expect(r.sent).to.be.below(64 * 1024);
      const redo = await editor.req('PUT', wsPath(ws, id), {
        body: { aspects: { body: { title: 'draft 2' } }, operations: ops, origin: u.headers.get('etag') },
      });
      expect(redo.status, redo.text).to.equal(200);
      const pr = await promote(ws, id);
      expect(pr.status, JSON.stringify(pr.json)).to.equal(200);
      expect((await editor.read(`/content/view/svcPublic/alias/${id}`)).json.aspects.body.title).to.equal('draft 2');
    });

    it('a draft whose summary keeps its origin and main has not changed since: promoted', async () => {
      const ws = wsName();
      const c = await editor.create(article('v1'));
      const id = c.json.system.id;
      expect((await editor.req('PUT', wsPath(ws, id), { body: { aspects: { body: { title: 'draft' } } } })).status).to.equal(200);
      const pr = await promote(ws, id);
      expect(pr.status, JSON.stringify(pr.json)).to.equal(200);
      expect((await editor.read(`/content/alias/${id}`)).json.aspects.body.title).to.equal('draft');
    });
  });

  describe('bad input', () => {
    it('workspace names with /, .., spaces or 300 characters: 400; promote of a missing draft 404; merge 400; If-Match 400', async () => {
      const c = await editor.create(article('x'));
      const id = c.json.system.id;
      for (const bad of ['a%2Fb', 'a..b', 'a%20b', 'w'.repeat(300)]) {
        const r = await editor.req('POST', `/content/workspace/${bad}`, { body: article('x') });
        expect(r.status, bad).to.equal(400);
        expect(r.json.statusCode).to.equal('40000');
      }
      const ws = wsName();
      expect((await editor.req('POST', `${wsPath(ws, id)}/promote`)).status).to.equal(404);
      expect((await editor.req('PUT', `${wsPath(ws, id)}?updateMode=merge`, { body: { aspects: {} } })).status).to.equal(400);
      expect((await editor.req('PUT', wsPath(ws, id), { body: { aspects: {} }, headers: { 'If-Match': c.headers.get('etag')! } })).status).to.equal(400);
      expect((await editor.req('GET', `/content/workspace/${ws}`)).json.drafts).to.deep.equal({});
      expect((await editor.req('GET', `/content/workspace/${ws}`, { token: null })).status).to.equal(401);
    });
  });
});
