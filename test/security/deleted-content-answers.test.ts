import { expect } from 'chai';
import { newContentKey } from '../../src/adapters/ids.js';
import type { Answer } from '../../src/client/index.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Deleted content the caller may not update is answered as a key that never existed (the
 * eighteenth session's review, finding 5). Before, the sportseditor got 403 for deleted culture
 * content from update, restore, bulk update lines and the workspace's PUT, DELETE, promote and
 * GET, where read, history, delete, PUT view, DELETE view and compare answered 404 as for a key
 * that never existed: it learnt which keys had been culture content. Now every write path (and
 * the workspace read) answers such a caller the never-existing key's 40400, decided before any
 * draft is looked up, so a workspace holding a draft of the deleted content changes nothing
 * either; a caller who could update it still gets 409/40904 (spec "Status codes in bodies").
 * The table is every write path of the sportseditor against live culture content (C), deleted
 * culture content with a draft on the workspace (D) and a key that never existed (N).
 */
describe('security: deleted content answers as a key that never existed, to who may not update it (sec18a finding 5)', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let sports: Client;
  const R = `dc${Date.now().toString(36)}`;
  const W = `${R}-ws`;
  const culture = [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }];

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => p?.stop());

  /** Every write path (and the workspace read) of the sportseditor for key K, with version `version` of it. */
  const requests = (K: string, version: string, other: string): [string, () => Promise<Answer>][] => [
    ['update', () => sports.update(`contentid/${K}`, { aspects: { body: { title: 'x' } } }, `W/"${K}/1"`)],
    ['update stale', () => sports.update(`contentid/${K}`, { aspects: { body: { title: 'x' } } }, `W/"${K}/99"`)],
    ['update unsafe', () => sports.update(`contentid/${K}`, { aspects: { body: { title: 'x' } } }, null)],
    ['update merge', () => sports.update(`contentid/${K}`, { aspects: {} }, `W/"${K}/2"`, 'updateMode=merge')],
    ['update alias op', () => sports.update(`contentid/${K}`, { aspects: {}, operations: [{ _type: 'svcSetAlias', namespace: R, alias: 'c' }] }, null)],
    ['delete', () => sports.remove(`contentid/${K}`, `W/"${K}/1"`)],
    ['delete stale', () => sports.remove(`contentid/${K}`, `W/"${K}/99"`)],
    ['restore', () => sports.restore(`contentid/${K}`, version, `W/"${K}/1"`)],
    ['restore other', () => sports.restore(`contentid/${K}`, other, `W/"${K}/1"`)],
    ['putView', () => sports.putView('svcPublic', { version }, `W/"${K}/1"`)],
    ['putView symbolic', () => sports.putView('webfront', { symbolic: { alias: `contentid/${K}`, targetView: '@svcLatest' } }, `W/"${K}/1"`)],
    ['removeFromView', () => sports.removeFromView('svcPublic', `contentid/${K}`)],
    ['ws read', () => sports.readDraft(W, `contentid/${K}`)],
    ['ws read variant', () => sports.readDraft(W, `contentid/${K}`, 'variant=teaser')],
    ['ws update', () => sports.updateDraft(W, `contentid/${K}`, { aspects: { body: { title: 'x' } } })],
    ['ws replace', () => sports.updateDraft(W, `contentid/${K}`, { aspects: { body: { title: 'x' } } }, 'replace')],
    ['ws delete', () => sports.deleteDraft(W, `contentid/${K}`)],
    ['ws promote', () => sports.promote(W, `contentid/${K}`)],
    ['compare', () => sports.req('GET', `/content/alias/contentid/${K}/compare?from=${encodeURIComponent(version)}`)],
    ['read', () => sports.req('GET', `/content/alias/contentid/${K}`)],
    ['history', () => sports.req('GET', `/content/alias/contentid/${K}/history`)],
    [
      'bulk',
      () =>
        sports.req('POST', '/bulk', {
          raw: `${[
            { op: 'update', id: `contentid/${K}`, ifMatch: `W/"${K}/1"`, content: { aspects: {} } },
            { op: 'update', id: `contentid/${K}`, content: { aspects: {} } },
            { op: 'update', id: `contentid/${K}`, mode: 'merge', content: { aspects: {} } },
            { op: 'delete', id: `contentid/${K}`, ifMatch: `W/"${K}/1"` },
          ]
            .map((l) => JSON.stringify(l))
            .join('\n')}\n`,
          headers: { 'Content-Type': 'application/x-ndjson' },
        }),
    ],
  ];

  /** Status, body, ETag and Location of each request, the key written K. */
  async function table(K: string, version: string, other: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const norm = (t: string | null) => (t ?? '').split(K).join('K');
    for (const [name, send] of requests(K, version, other)) {
      const r = await send();
      out[name] = `${r.status} ${norm(r.text)} ETag=${norm(r.headers.get('etag'))} Location=${norm(r.headers.get('location'))}`;
    }
    return out;
  }

  it('every write path and the workspace read answer the sportseditor the same for deleted culture content (with a draft on the workspace) as for a key that never existed; the editor still gets 40904', async () => {
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'culture secret' } },
      operations: [...culture, { _type: 'svcSetAlias', namespace: R, alias: 'c' }],
    });
    expect(c.status, c.text).to.equal(201);
    const C = c.json.system.id.split('/')[1];
    const d = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 'gone' } }, operations: culture });
    expect(d.status, d.text).to.equal(201);
    const D = d.json.system.id.split('/')[1];
    const dEtag = d.headers.get('etag')!;
    // a draft of D on the workspace, then D deleted in main
    expect((await editor.updateDraft(W, d.json.system.id, { aspects: { body: { title: 'culture draft' } }, origin: dEtag })).status).to.equal(200);
    expect((await editor.remove(d.json.system.id, dEtag)).status).to.equal(204);
    const N = newContentKey();
    const before = await editor.read(`/content/alias/contentid/${C}/metadata`);

    const deleted = await table(D, d.json.system.version, c.json.system.version);
    const never = await table(N, `c:${N}:01ARZ3NDEKTSV4RRFFQ69G5FAV`, c.json.system.version);
    // every path whose answer tells D from N, with both answers
    const differing = Object.keys(never)
      .filter((name) => deleted[name] !== never[name])
      .map((name) => `${name}: deleted ${deleted[name]} / never ${never[name]}`);
    expect(differing).to.deep.equal([]);
    for (const name of Object.keys(never)) expect(never[name], name).to.not.match(/^(403|409)/);
    const live = await table(C, c.json.system.version, c.json.system.version);
    expect(live.update, 'live culture content stays 403 (Authentication 4)').to.match(/^403 /);
    expect(live['ws promote']).to.match(/^403 /);
    expect((await editor.read(`/content/alias/contentid/${C}/metadata`)).text, 'nothing of C changed').to.equal(before.text);

    // The editor, who could update D: 409/40904 (with the last revision) on update, restore and
    // promote; the draft is still there.
    const byEditor: Answer[] = [
      await editor.update(d.json.system.id, { aspects: {} }, dEtag),
      await editor.restore(d.json.system.id, d.json.system.version, dEtag),
      await editor.promote(W, d.json.system.id),
    ];
    for (const r of byEditor) {
      expect([r.status, r.json.statusCode], r.text).to.deep.equal([409, '40904']);
      expect(r.json.extraInfo.revision).to.be.a('number');
    }
    const draft = await editor.readDraft(W, d.json.system.id);
    expect([draft.status, draft.json.aspects?.body?.title]).to.deep.equal([200, 'culture draft']);
  });
});
