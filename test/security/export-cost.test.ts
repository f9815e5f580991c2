import { expect } from 'chai';
import { redisSettled, sentByRedis } from '../support/redis-bytes.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';

/**
 * The sixteenth session's review: an export read every content's current version with its
 * snapshot (export-read-n.lua) before the renderer decided whether the caller may read it, or
 * whether it is on a view asked for. A sportseditor's export that answered one line made Redis send
 * every culture content's version (40 MB for 40 contents of 1 MB, four exports at once 160 MB and
 * 270 MB of the gateway's memory); `views=<a view nobody uses>` did the same for any reader. Now
 * an export reads the snapshots, and the versions of the contents it writes only.
 */
describe('security: what an export of content the caller may not read costs (review 16)', function () {
  this.timeout(300_000);
  type P = Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let p: P;
  let editor: Client;
  let sports: Client;
  let reader: Client;

  const sent = (): Promise<number> => sentByRedis(p.redis);
  const settled = (): Promise<void> => redisSettled(p.redis);
  const exportOf = async (c: Client, query = '') => {
    await settled();
    const before = await sent();
    const r = await c.req('GET', `/export${query}`);
    expect(r.status).to.equal(200);
    return { text: r.text, lines: r.text.split('\n').filter(Boolean).length, redisBytes: (await sent()) - before };
  };

  before(async () => {
    p = await startIsolatedPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
    reader = await new Client(p.base).login('reader');
    const own = await sports.create({
      system: { contentType: 'article' },
      aspects: { body: { _type: 'body', title: 'mine' } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
    });
    expect(own.status, own.text.slice(0, 200)).to.equal(201);
  });
  after(async () => p?.stop());

  it('the answer and what Redis sends are the same with and without 20 culture contents of 500 KB; an editor still exports them all', async () => {
    const alone = await exportOf(sports);
    const aloneViews = await exportOf(reader, '?views=nosuchview');
    const big = 'x'.repeat(500_000);
    for (let i = 0; i < 20; i++) {
      const r = await editor.create({
        system: { contentType: 'article' },
        aspects: { body: { _type: 'body', title: `culture ${i}` }, blob: { _type: 'blob', data: big } },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['culture'] } } }],
      });
      expect(r.status, r.text.slice(0, 200)).to.equal(201);
    }
    const withCulture = await exportOf(sports);
    const withCultureViews = await exportOf(reader, '?views=nosuchview');
    expect(withCulture.text).to.equal(alone.text);
    expect(withCultureViews.lines).to.equal(0);
    // The snapshots of the culture contents are read (a few KB); their versions (10 MB) are not.
    // The code before sent 10 MB more for each of the two.
    expect(withCulture.redisBytes - alone.redisBytes, 'sportseditor').to.be.below(200_000);
    expect(withCultureViews.redisBytes - aloneViews.redisBytes, 'views=nosuchview').to.be.below(200_000);
    // Whoever may read them gets every line, each with its aspects.
    const all = await exportOf(editor);
    expect(all.lines).to.equal(21);
    expect(all.text.split('\n').filter((l) => l.includes(big)).length).to.equal(20);
  });
});
