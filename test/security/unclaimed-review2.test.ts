import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import { newObjectId } from '../../src/adapters/file-store.js';
import { fileKeyOfUri } from '../../src/security/file-access.js';
import { ASIDE_GRACE_MS } from '../../src/security/unclaimed-files.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';

/**
 * Review of b3f6aa8 (unclaimed files, second version). Both cases fail on b3f6aa8.
 *
 * - R2-1: the mark is written in `beforeCommit`, before the store places the file. When the
 *   store then fails (disk full, an S3 PUT or CompleteMultipartUpload answering 5xx, here a host
 *   directory that cannot be made), the upload answers an error, no file exists, yet the mark
 *   stays and counts against the uploader until the sweep takes it (TMP_TTL_SECONDS and an
 *   hour: 3 days by default). The uploader cannot free it (there is no file to DELETE): a client
 *   retrying through a store outage locks itself out of that partition for days.
 * - R2-2: `Workspaces.update` claims before it reserves aliases; a draft write refused with
 *   ALIAS_EXISTS after the claim stores nothing, but its files' marks are gone: nothing maps
 *   them, they never expire and count for nobody (SECURITY.md: "a refused write claims
 *   nothing"). Any user with Create in some context keeps any number of files for good, unseen.
 */
describe('unclaimed files: review of b3f6aa8', function () {
  this.timeout(120_000);
  const CAP = 2;
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let reader: Client;
  let editor: Client;

  before(async () => {
    p = await startIsolatedPlatform({ UNCLAIMED_FILES_PER_USER: String(CAP) });
    [reader, editor] = await Promise.all(['reader', 'editor'].map((u) => new Client(p.base).login(u)));
  });
  after(async () => p?.stop());

  const ttlMs = () => p.settings.TMP_TTL_SECONDS * 1000;
  const exists = async (uri: string) => (await p.files!.stat(fileKeyOfUri(uri)!)) !== null;
  async function sweepPastTheTtl(): Promise<void> {
    const past = Date.now() + ttlMs() + 60_000;
    await p.unclaimed!.sweep(p.files!, past, ttlMs());
    await p.unclaimed!.sweep(p.files!, past + ASIDE_GRACE_MS + 60_000, ttlMs());
  }

  it('R2-1: uploads the store failed to place (after their marks) leave their uploader at the bound with no file to delete', async () => {
    const host = `no-such-host-${newObjectId()}`;
    const hostDir = join(p.settings.FILES_DIR, 'content', host);
    // The store fails after beforeCommit: its mkdir of the host directory meets a file.
    await mkdir(join(p.settings.FILES_DIR, 'content'), { recursive: true });
    await writeFile(hostDir, 'in the way');
    for (let i = 0; i < CAP; i++) {
      const r = await reader.upload(`content/${host}/f${i}.txt`, Buffer.from('x'), 'text/plain');
      expect(r.status, `upload ${i} fails in the store: ${r.text}`).to.be.at.least(500);
    }
    await rm(hostDir, { force: true });
    // The store works again; the reader holds no file of this partition.
    const r = await reader.upload(`content/${host}/after.txt`, Buffer.from('x'), 'text/plain');
    expect(r.status, `the reader holds no unclaimed file, yet: ${r.text}`).to.equal(201);
  });

  it('R2-2: a draft write refused with ALIAS_EXISTS after its claim leaves its files claimed: mapped by nothing, they never expire', async () => {
    const ns = `rv${Date.now().toString(36)}`;
    const holder = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'holds the alias' } },
      operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'taken' }],
    });
    expect(holder.status, holder.text).to.equal(201);
    const ws = `rv${Date.now().toString(36)}`;
    const d = await editor.createDraft(ws, { system: { contentType: 'article' }, aspects: { body: { title: 'draft' } } });
    expect(d.status, d.text).to.equal(201);
    const id = d.json.system!.id as string;

    const up = await editor.upload('content/editor/kept.bin', Buffer.from('never mapped by anything'), 'application/octet-stream');
    expect(up.status, up.text).to.equal(201);
    const uri = up.json.URI as string;
    const refused = await editor.updateDraft(ws, id, {
      aspects: { body: { title: 'draft' }, svcFiles: { files: { 'kept.bin': { fileUri: uri, filePath: 'kept.bin' } } } },
      operations: [{ _type: 'svcSetAlias', namespace: ns, alias: 'taken' }],
    });
    expect(refused.status, refused.text).to.equal(409);
    // Nothing was written: the draft maps no file.
    const draft = await editor.readDraft(ws, id);
    expect(JSON.stringify(draft.json)).to.not.include(uri);

    await sweepPastTheTtl();
    expect(await exists(uri), 'a file no write stored a mapping of expires as tmp/').to.equal(false);
  });
});
