import { expect } from 'chai';
import { keys } from '../../src/adapters/redis.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * An alias a draft reserves is that workspace's (spec "Alias reservation on a workspace": no
 * other content may be given it). Before, drafts of one content on workspaces W1 and W2 both
 * answered a svcSetAlias of alias A without ALIAS_EXISTS, but the global key named W1 only: once
 * W1's draft was deleted, A was free, another content took it, and W2's promote answered 409
 * (the eighteenth session's review, finding 6). Now a workspace's reservation counts as the
 * content's own only when the key holds the content key or `~<the same workspace>|<key>`
 * (reserve-alias-1.lua): W2 gets ALIAS_EXISTS while W1 holds A, and a draft's write asks again
 * for the reservations it lists (`Workspaces.reserve`), so a double reservation left by the old
 * code is found at W2's next write instead of at its promote.
 */
describe('security: an alias reservation is one workspace’s (sec18a finding 6)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  const R = `ar${Date.now().toString(36)}`;
  const setAlias = (alias: string) => ({ _type: 'svcSetAlias', namespace: R, alias });

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
  });
  after(async () => p?.stop());

  async function content(): Promise<{ id: string; key: string }> {
    const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 'x' } } });
    expect(c.status, c.text).to.equal(201);
    return { id: c.json.system.id, key: c.json.system.id.split('/')[1] };
  }

  it('drafts of one content on two workspaces: the second gets ALIAS_EXISTS while the first holds the alias, and takes it once it is free; its promote then assigns it', async () => {
    const x = await content();
    const [w1, w2] = [`${R}-1`, `${R}-2`];
    const first = await editor.updateDraft(w1, x.id, { aspects: {}, operations: [setAlias('a')] });
    expect(first.status, first.text).to.equal(200);
    expect(first.json.operations).to.deep.equal([setAlias('a')]);

    const second = await editor.updateDraft(w2, x.id, { aspects: {}, operations: [setAlias('a')] });
    expect([second.status, second.json.statusCode], second.text).to.deep.equal([409, '40910']);
    expect((await editor.readDraft(w2, `${R}/a`)).status, 'A names nothing on W2').to.equal(404);
    expect((await editor.readDraft(w1, `${R}/a`)).json.system?.id).to.equal(x.id);
    expect(await p.redis.get(keys.alias(R, 'a'))).to.equal(`~${w1}|${x.key}`);

    // W1's draft goes: A is free, W2 reserves it, and no other content can take it any more
    expect((await editor.deleteDraft(w1, x.id)).status).to.equal(204);
    const retry = await editor.updateDraft(w2, x.id, { aspects: {}, operations: [setAlias('a')] });
    expect(retry.status, retry.text).to.equal(200);
    const other = await editor.create({ system: { contentType: 'article' }, aspects: {}, operations: [setAlias('a')] });
    expect([other.status, other.json.status?.statusCode], other.text).to.deep.equal([201, '20107']);
    const promoted = await editor.promote(w2, x.id);
    expect(promoted.status, promoted.text).to.equal(200);
    expect((await editor.readContent(`${R}/a`)).json.system?.id).to.equal(x.id);
  });

  it('a double reservation the old code left (W2 lists A, the key names W1) is refused at W2’s next write, and taken again once free', async () => {
    const x = await content();
    const [w1, w2] = [`${R}-3`, `${R}-4`];
    expect((await editor.updateDraft(w2, x.id, { aspects: {}, operations: [setAlias('b')] })).status).to.equal(200);
    // What the old script left when W1 reserved first and W2 was answered "yours" too.
    expect((await editor.updateDraft(w1, x.id, { aspects: {} })).status).to.equal(200);
    await p.redis.set(keys.alias(R, 'b'), `~${w1}|${x.key}`);

    const again = await editor.updateDraft(w2, x.id, { aspects: { body: { title: 'y' } }, operations: [setAlias('b')] });
    expect([again.status, again.json.statusCode], again.text).to.deep.equal([409, '40910']);
    expect(await p.redis.get(keys.alias(R, 'b'))).to.equal(`~${w1}|${x.key}`);

    await p.redis.del(keys.alias(R, 'b')); // W1's draft deleted under the old code
    const taken = await editor.updateDraft(w2, x.id, { aspects: { body: { title: 'y' } }, operations: [setAlias('b')] });
    expect(taken.status, taken.text).to.equal(200);
    expect(await p.redis.get(keys.alias(R, 'b'))).to.equal(`~${w2}|${x.key}`);
  });

  it('main takes the content’s own reservation of any workspace (a write of the content itself, or a promote), never another content’s', async () => {
    const x = await content();
    const y = await content();
    const w = `${R}-5`;
    expect((await editor.updateDraft(w, x.id, { aspects: {}, operations: [setAlias('c')] })).status).to.equal(200);
    const byY = await editor.update(y.id, { aspects: {}, operations: [setAlias('c')] }, null);
    expect([byY.status, byY.json.statusCode], byY.text).to.deep.equal([409, '40910']);
    const byX = await editor.update(x.id, { aspects: {}, operations: [setAlias('c')] }, null);
    expect(byX.status, byX.text).to.equal(200);
    expect(await p.redis.get(keys.alias(R, 'c'))).to.equal(x.key);
    // the draft's promote still assigns it (it is the content's now); origin: main moved, so replace it first
    expect((await editor.updateDraft(w, x.id, { aspects: {}, operations: [setAlias('c')], origin: byX.headers.get('etag')! })).status).to.equal(200);
    const promoted = await editor.promote(w, x.id);
    expect(promoted.status, promoted.text).to.equal(200);
    expect((await editor.readContent(`${R}/c`)).json.system?.id).to.equal(x.id);
  });
});
