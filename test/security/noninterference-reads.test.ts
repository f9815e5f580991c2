import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * Non-interference of the content and workspace reads (CONTRACT §20): what a caller gets from
 * any read that does not address a forbidden content itself is the same whether or not content
 * the caller may not read exists. The sportseditor (roles only in `sports`) and the anonymous
 * caller read a fixed set of URLs (sports content, its history and metadata, a workspace
 * listing, unknown aliases and ids, the taxonomy structure), then an editor adds culture-only
 * content in the same alias namespace, on the same views, with drafts on the same workspace;
 * every answer is read again and must be byte for byte what it was.
 *
 * Reads that address the forbidden content directly answer 403 where it exists and 404 where
 * it does not: the spec asks for 403 (Authentication 4), so those are not part of the property
 * (SECURITY.md, "What a caller can still learn").
 */
describe('security: reads answer the same whether or not content the caller may not read exists (CONTRACT §20)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;
  let anon: Client;
  const T = `ni${Date.now().toString(36)}`;
  const WS = `${T}ws`;
  let sportsId = '';

  const urls = (): string[] => [
    `/content/alias/${sportsId}`,
    `/content/alias/${sportsId}/1`,
    `/content/alias/${sportsId}/metadata`,
    `/content/alias/${sportsId}/history`,
    `/content/alias/${T}/sports`,
    `/content/view/desk/alias/${T}/sports`,
    `/content/alias/${T}/nothing-here`,
    `/content/workspace/${WS}`,
    `/content/workspace/${WS}/alias/${sportsId}`,
    `/content/workspace/${WS}/alias/${T}/nothing-here`,
    `${p.url}/taxonomy-service/structure/contentHierarchy?depth=2`,
    `${p.url}/taxonomy-service/structure/${sportsId}`,
    `${p.url}/taxonomy-service/complete/contentHierarchy.contents/${encodeURIComponent(T)}`,
  ];

  /** Status, the headers that carry state, and the body of every read, for one caller. */
  async function answers(c: Client): Promise<string[]> {
    const out: string[] = [];
    for (const u of urls()) {
      const a = await c.req('GET', u);
      out.push(JSON.stringify({ u, status: a.status, location: a.headers.get('location'), etag: a.headers.get('etag'), body: a.text }));
    }
    return out;
  }

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    anon = new Client(p.base);
    const s = await sports.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'sports desk' } },
      operations: [
        { _type: 'svcSetAlias', namespace: T, alias: 'sports' },
        { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } },
        { _type: 'svcAssignToViews', views: ['desk', 'svcPublic'] },
      ],
    });
    expect(s.status, s.text).to.equal(201);
    sportsId = s.json.system.id;
    // the sports content is a node of the content hierarchy (public, on svcPublic)
    const n = await sports.update(sportsId, { aspects: { svcContentHierarchy: { name: `${T}node ${T}sports` } } }, s.headers.get('etag')!, 'updateMode=merge');
    expect(n.status, n.text).to.equal(200);
    await eventually(async () => expect((await sports.req('GET', `${p.url}/taxonomy-service/structure/${sportsId}`)).status).to.equal(200));
    const d = await sports.req('PUT', `/content/workspace/${WS}/alias/${sportsId}`, { body: { aspects: { body: { title: 'sports draft' } } } });
    expect(d.status, d.text).to.be.oneOf([200, 201]);
  });
  after(async () => p?.stop());

  it('the sportseditor and an anonymous caller see the same answers before and after culture-only content, drafts and hierarchy nodes appear', async () => {
    const before = { sports: await answers(sports), anon: await answers(anon) };
    // The forbidden world: culture-only content in the same namespace and on the same views,
    // a draft of it and a new culture draft on the sportseditor's workspace.
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'culture desk' } },
      operations: [
        { _type: 'svcSetAlias', namespace: T, alias: 'culture' },
        { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } },
        { _type: 'svcAssignToViews', views: ['desk'] },
      ],
    });
    expect(c.status, c.text).to.equal(201);
    const cid = c.json.system.id as string;
    // culture-only and non-public nodes of the content hierarchy, naming the sports node too: one
    // without owners (__global__ only, which the sportseditor may not read either) and a culture
    // one name it but hang under it for nobody (their writers are not the sports node's)
    const nodes: string[] = [];
    for (const [name, parent, owners] of [
      [`${T}node ${T}culture`, undefined, ['culture']],
      [`${T}node ${T}child`, sportsId, []],
      [`${T}node ${T}culture child`, sportsId, ['culture']],
    ] as const) {
      const h = await editor.create({
        system: { contentType: 'page' },
        aspects: { svcContentHierarchy: { name, ...(parent ? { parent } : {}) } },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners } } }],
      });
      expect(h.status, h.text).to.equal(201);
      nodes.push(h.json.system.id as string);
    }
    const d1 = await editor.req('PUT', `/content/workspace/${WS}/alias/${cid}`, { body: { aspects: { body: { title: 'culture draft' } } } });
    expect(d1.status, d1.text).to.be.oneOf([200, 201]);
    // The workspace listing shows the culture draft to a caller who may read it: the listing
    // would show it to the sportseditor too if it were not filtered.
    const asEditor = await editor.req('GET', `/content/workspace/${WS}`);
    expect(Object.keys(asEditor.json.drafts)).to.include(cid);
    // the hierarchy nodes are in the structure for a caller who may see them (loaded within a second)
    await eventually(async () => {
      for (const id of nodes) expect((await editor.req('GET', `${p.url}/taxonomy-service/structure/${id}`)).status, id).to.equal(200);
    });
    const h = await editor.req('GET', `${p.url}/taxonomy-service/structure/${sportsId}`);
    expect(h.status, h.text).to.equal(200);
    expect(h.json.entities).to.deep.equal([]);
    const after = { sports: await answers(sports), anon: await answers(anon) };
    expect(after.sports).to.deep.equal(before.sports);
    expect(after.anon).to.deep.equal(before.anon);
  });

  it('removing or promoting a draft of content the caller may not update answers the same whether or not the draft exists, and names no content key', async () => {
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'culture, drafted' } },
      operations: [
        { _type: 'svcSetAlias', namespace: T, alias: 'culture-drafted' },
        { _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } },
      ],
    });
    expect(c.status, c.text).to.equal(201);
    const cid = (c.json.system.id as string).split('/')[1];
    const [withDraft, without] = [`${T}drafted`, `${T}undrafted`];
    const d = await editor.req('PUT', `/content/workspace/${withDraft}/alias/${T}/culture-drafted`, {
      body: { aspects: { body: { title: 'culture draft' } } },
    });
    expect(d.status, d.text).to.equal(200);
    const answer = async (ws: string) => {
      const out: string[] = [];
      for (const [method, path] of [
        ['DELETE', `/content/workspace/${ws}/alias/${T}/culture-drafted`],
        ['POST', `/content/workspace/${ws}/alias/${T}/culture-drafted/promote`],
      ]) {
        const r = await sports.req(method, path);
        expect(r.text).to.not.include(cid);
        out.push(JSON.stringify({ method, status: r.status, body: r.text.split(ws).join('<ws>') }));
      }
      return out;
    };
    expect(await answer(withDraft)).to.deep.equal(await answer(without));
    // the draft is still there for the editor
    expect((await editor.req('GET', `/content/workspace/${withDraft}/alias/${T}/culture-drafted`)).json.aspects.body.title).to.equal('culture draft');
  });

  it('a draft of culture content stays culture-only after the content is deleted in main: not listed, read, replaced or removed by the sportseditor', async () => {
    const ws = `${T}deleted`;
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'culture secret' } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }],
    });
    expect(c.status, c.text).to.equal(201);
    const cid = c.json.system.id as string;
    const d = await editor.req('PUT', `/content/workspace/${ws}/alias/${cid}`, { body: { aspects: { body: { title: 'culture secret, draft' } } } });
    expect(d.status, d.text).to.equal(200);
    const del = await editor.req('DELETE', `/content/alias/${cid}`, { headers: { 'If-Match': c.headers.get('etag')! } });
    expect(del.status, del.text).to.be.oneOf([200, 204]);
    // the editor, who may read culture, still has the draft
    expect(Object.keys((await editor.req('GET', `/content/workspace/${ws}`)).json.drafts)).to.deep.equal([cid]);
    expect((await editor.req('GET', `/content/workspace/${ws}/alias/${cid}`)).json.aspects.body.title).to.equal('culture secret, draft');
    // the sportseditor gets the listing of an empty workspace, and on the draft itself the 404 of
    // a key that never existed, naming no key (before this was mended: listed, read, and
    // replaceable, as a draft of new content; then 403, which told deleted content from none;
    // test/security/deleted-content-answers.test.ts has every path)
    expect((await sports.req('GET', `/content/workspace/${ws}`)).json).to.deep.equal({ workspaceId: ws, drafts: {} });
    const notFound = (r: { status: number; text: string; json: { statusCode?: string } }) => {
      expect([r.status, r.json.statusCode], r.text).to.deep.equal([404, '40400']);
      expect(r.text).to.not.include('culture secret').and.not.include(cid.split('/')[1]);
    };
    notFound(await sports.req('GET', `/content/workspace/${ws}/alias/${cid}`));
    notFound(await sports.req('PUT', `/content/workspace/${ws}/alias/${cid}`, { body: { aspects: { body: { title: 'taken over' } } } }));
    notFound(await sports.req('DELETE', `/content/workspace/${ws}/alias/${cid}`));
    // nor brought back to main by a promote (an update of a deleted content)
    notFound(await sports.req('POST', `/content/workspace/${ws}/alias/${cid}/promote`));
    expect((await sports.req('GET', `/content/alias/${cid}`)).status).to.equal(404);
    // An update of the deleted content: 40904 with its last revision to whoever could update it,
    // to the sportseditor the 404 of a key that never existed (it named the revisions before).
    const etag = c.headers.get('etag')!;
    const asEditor = await editor.req('PUT', `/content/alias/${cid}`, { headers: { 'If-Match': etag }, body: { aspects: { body: { title: 'x' } } } });
    expect([asEditor.status, asEditor.json.statusCode]).to.deep.equal([409, '40904']);
    const asSports = await sports.req('PUT', `/content/alias/${cid}`, { headers: { 'If-Match': etag }, body: { aspects: { body: { title: 'x' } } } });
    expect([asSports.status, asSports.json.statusCode], asSports.text).to.deep.equal([404, '40400']);
    expect(asSports.text).to.not.include('revision');
    expect((await editor.req('GET', `/content/workspace/${ws}/alias/${cid}`)).json.aspects.body.title).to.equal('culture secret, draft');
  });
});
