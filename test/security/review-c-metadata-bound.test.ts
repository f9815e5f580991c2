import { expect } from 'chai';
import { pack, unpack } from '../../src/adapters/codec.js';
import { partitionOf } from '../../src/adapters/ids.js';
import { keys } from '../../src/adapters/redis.js';
import { MAX_METADATA_VALUES } from '../../src/content/metadata.js';
import type { Snapshot } from '../../src/content/model.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';

/**
 * Review C of 294c26b (the metadata bound). The bound is checked only where `applyOperations`
 * commits to main: a workspace draft takes metadata past it (201) and can then never be promoted
 * (400); content stored past it before the bound (which the commit keeps) neither survives an
 * export → import round trip (CONTRACT §16) nor can be hidden.
 */
describe('review C: the metadata bound where content and drafts already hold metadata', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let editor: Client;

  before(async () => {
    p = await startIsolatedPlatform();
    editor = await new Client(p.base).login('editor');
  });
  after(async () => p?.stop());

  const past = () => ({ _type: 'legacy', a: Array.from({ length: MAX_METADATA_VALUES + 2_000 }, (_, i) => i) });

  /** Gives a content's head the metadata a build before the bound stored (as taxonomy-size.test.ts does for versions). */
  const storeBefore = async (id: string, meta: Snapshot['meta']) => {
    const key = id.replace(/^contentid\//, '');
    const k = keys.content(partitionOf(key, p.settings.PARTITIONS), key);
    const head = unpack<Snapshot>((await p.redis.hgetBuffer(k, 's'))!);
    await p.redis.hset(k, 's', pack({ ...head, meta: { ...head.meta, ...meta } }));
  };

  it('a draft whose pending operations take metadata past the bound is refused when written, not only at its promote', async () => {
    const ws = `rc-meta-${Date.now()}`;
    const d = await editor.req('POST', `/content/workspace/${ws}`, {
      body: {
        system: { contentType: 'article' },
        aspects: { body: { _type: 'body', title: 'draft' } },
        operations: [{ _type: 'svcContentMetadata', aspects: { legacy: past() } }],
      },
    });
    const promote = d.status === 201 ? await editor.req('POST', `/content/workspace/${ws}/alias/${d.json.system.id}/promote`) : null;
    expect({ draft: d.status, promote: promote?.status ?? null }, 'draft write, then promote (a draft that can never be promoted was accepted)').to.deep.equal({
      draft: 400,
      promote: null,
    });
  });

  it("content stored past the bound before it can still be hidden, scheduled and moved (the platform's own aspects are bounded apart)", async () => {
    const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: 'legacy' } } });
    expect(c.status, c.text).to.equal(201);
    const id = c.json.system.id as string;
    await storeBefore(id, { legacy: past() });
    // A takedown of that content (svcContentState.hidden) grows its metadata by three values.
    const head = await editor.req('GET', `/content/alias/${id}`);
    const hide = await editor.update(
      id,
      { aspects: head.json.aspects, operations: [{ _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: true } } }] },
      head.headers.get('etag'),
    );
    expect(hide.status, JSON.stringify(hide.json).slice(0, 300)).to.equal(200);
    // More of the other metadata is still refused.
    const grow = await editor.update(
      id,
      { aspects: head.json.aspects, operations: [{ _type: 'svcContentMetadata', aspects: { more: { a: [1, 2, 3] } } }] },
      hide.headers.get('etag'),
    );
    expect(grow.status, grow.text.slice(0, 300)).to.equal(400);
  });
});
