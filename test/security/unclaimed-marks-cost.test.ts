import { expect } from 'chai';
import { newObjectId } from '../../src/adapters/file-store.js';
import { fileKeyOfUri } from '../../src/security/file-access.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';

/**
 * What the marks of unclaimed files (src/security/unclaimed-files.ts) cost Redis (review of
 * 4f900b9, where both cases failed).
 *
 * - Each upload of any signed-in user, a reader included, into a content host no live content
 *   holds adds a mark of its storage key (up to 1,024 bytes), kept TMP_TTL_SECONDS (3 days) and
 *   an hour. Nothing bounded them: a reader's stream of one-byte uploads with long paths made
 *   Redis keep about a kilobyte an upload (300 uploads: 303,936 bytes), for days. Now an
 *   uploader has at most UNCLAIMED_FILES_PER_USER marks in a partition: 429 past it, nothing
 *   stored; a claim or a delete makes room.
 * - A write claimed every content file its version mapped, also those its base mapped and
 *   claimed already: an update that changed only a title of a content mapping 1,000 files ran
 *   2,000 ZREMs and 1,000 ZSCOREs in one script, on every write of that content. Now a write
 *   claims only what it adds.
 */
describe('unclaimed-file marks: what they cost Redis (review of 4f900b9)', function () {
  this.timeout(180_000);
  const CAP = 50;
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let reader: Client;
  let editor: Client;

  before(async () => {
    p = await startIsolatedPlatform({ UNCLAIMED_FILES_PER_USER: String(CAP) });
    [reader, editor] = await Promise.all(['reader', 'editor'].map((u) => new Client(p.base).login(u)));
  });
  after(async () => p?.stop());

  /** Bytes Redis holds for the keys `unclaimed:*`. */
  async function unclaimedBytes(): Promise<number> {
    let n = 0;
    for (const k of await p.redis.keys('unclaimed:*')) n += Number(await p.redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0'));
    return n;
  }

  it("a reader's tiny uploads cost Redis at most UNCLAIMED_FILES_PER_USER marks of a partition: 429 past it, room again once one is deleted", async () => {
    const UPLOADS = 300;
    // A path of 900 bytes: the storage key stays under 1,024 bytes. One host: one partition.
    const long = `${'x'.repeat(200)}/${'y'.repeat(200)}/${'z'.repeat(200)}/${'w'.repeat(200)}/f`;
    const host = `no-such-host-${newObjectId()}`;
    const before = await unclaimedBytes();
    const statuses: number[] = [];
    let kept: string | undefined;
    for (let i = 0; i < UPLOADS; i++) {
      const r = await reader.upload(`content/${host}/${long}${i}`, Buffer.from('1'), 'text/plain');
      statuses.push(r.status);
      if (r.status === 201) kept = r.json.URI;
      else expect(r.status, r.text).to.equal(429);
    }
    const grown = (await unclaimedBytes()) - before;
    console.log(`      ${UPLOADS} one-byte uploads of a reader: ${statuses.filter((s) => s === 201).length} kept, Redis grew ${grown} bytes`);
    expect(statuses.filter((s) => s === 201).length).to.equal(CAP);
    expect(grown, 'bytes of marks a reader made Redis keep').to.be.below(CAP * 3 * 1024);
    // Refused uploads stored nothing.
    const listed = await p.files!.stat(fileKeyOfUri(kept!)!);
    expect(listed).to.not.equal(null);
    // A delete makes room for one more.
    expect((await reader.deleteFile(kept!.replace('content://', 'content/'))).status).to.equal(200);
    expect((await reader.upload(`content/${host}/again`, Buffer.from('1'), 'text/plain')).status).to.equal(201);
    expect((await reader.upload(`content/${host}/again`, Buffer.from('1'), 'text/plain')).status).to.equal(429);
  });

  it("an editor's write that maps its files makes room: a claim no longer counts", async () => {
    const uris: string[] = [];
    for (let i = 0; i < CAP; i++) {
      const r = await editor.upload('content/editor/f.txt', Buffer.from(String(i)), 'text/plain');
      expect(r.status, r.text).to.equal(201);
      uris.push(r.json.URI);
    }
    expect((await editor.upload('content/editor/f.txt', Buffer.from('x'), 'text/plain')).status).to.equal(429);
    const files = Object.fromEntries(uris.slice(0, 10).map((u, i) => [`f${i}.txt`, { fileUri: u, filePath: `f${i}.txt` }]));
    const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 'maps ten' }, svcFiles: { files } } });
    expect(c.status, c.text).to.equal(201);
    for (let i = 0; i < 10; i++) expect((await editor.upload('content/editor/f.txt', Buffer.from('y'), 'text/plain')).status).to.equal(201);
    expect((await editor.upload('content/editor/f.txt', Buffer.from('z'), 'text/plain')).status).to.equal(429);
  });

  it('an update that adds no file mapping claims nothing', async () => {
    const c = await editor.create({ system: { contentType: 'article' }, aspects: { body: { title: 'gallery' } } });
    expect(c.status, c.text).to.equal(201);
    const id = c.json.system.id as string;
    const host = id.split('/')[1];
    const files: Record<string, { fileUri: string; filePath: string }> = {};
    for (let i = 0; i < 1000; i++) files[`img${i}.jpg`] = { fileUri: `content://${host}/${newObjectId()}/img${i}.jpg`, filePath: `img${i}.jpg` };
    const mapped = await editor.update(id, { aspects: { body: { title: 'gallery' }, svcFiles: { files } } }, c.headers.get('etag'));
    expect(mapped.status, mapped.text).to.equal(200);
    const stats = async () => {
      const info = await p.redis.info('commandstats');
      const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return { zrem: calls('zrem'), zscore: calls('zscore') };
    };
    const before = await stats();
    const retitled = await editor.update(id, { aspects: { body: { title: 'gallery, retitled' } } }, mapped.headers.get('etag'));
    expect(retitled.status, retitled.text).to.equal(200);
    const after = await stats();
    const zrem = after.zrem - before.zrem;
    const zscore = after.zscore - before.zscore;
    console.log(`      a title change of a content mapping 1,000 files: ${zrem} ZREM, ${zscore} ZSCORE`);
    expect(zrem + zscore, 'claim commands of a write that maps nothing new').to.be.below(100);
  });
});
