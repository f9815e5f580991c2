import { expect } from 'chai';
import { fileKeyOf, type StoredFile } from '../adapters/file-store.js';
import type { Snapshot } from '../content/model.js';
import { AppError } from '../errors.js';
import { checkFileReferences, fileAccess, fileKeyOfUri, fileReferencesOf, MAX_FILE_REFERENCES, readableFileUris, type FileAccessDeps } from './file-access.js';
import { GLOBAL_CONTEXT, type Principal } from '../content/permissions.js';
import { loadSecurityConfig } from './security-config.js';

// CONTRACT §20 "Files in content/<key>/", "Files in tmp/", "File references": the one rule,
// over an in-memory store of heads and files.
describe('security: file access (CONTRACT §20)', () => {
  const p = (userId: string, contexts: Record<string, string[]>): Principal => ({ userId, contexts });
  const sysadmin = p('sysadmin', { [GLOBAL_CONTEXT]: ['sysadmin'] });
  const editor = p('editor', { [GLOBAL_CONTEXT]: ['editor'] });
  const reader = p('reader', { [GLOBAL_CONTEXT]: ['reader'] });
  const sports = p('sportseditor', { sports: ['editor'] });
  const ID = '01HZZZZZZZZZZZZZZZZZZZZZZZ';

  const head = (cid: string, owners: string[], deleted = false): Snapshot => ({
    cid,
    rev: 1,
    type: 'memo',
    head: 'v',
    created: 0,
    modified: 0,
    committer: 'editor',
    deleted,
    views: {},
    symbolic: {},
    aliases: [],
    meta: { svcSecurityContext: { owners } },
  });
  const heads: Record<string, Snapshot> = {
    CULTURE: head('CULTURE', ['culture']),
    SPORTS: head('SPORTS', ['sports']),
    GONE: head('GONE', ['sports'], true),
    // Created at 1000 from a draft whose editor had uploaded two files to its future host; it maps one.
    TAKEN: { ...head('TAKEN', ['sports']), created: 1000 },
  };
  const versions: Record<string, Awaited<ReturnType<FileAccessDeps['store']['version']>>> = {
    TAKEN: { aspects: { svcFiles: { files: { m: { fileUri: `content://TAKEN/${ID}/mapped.txt` } } } } },
  };
  const stored: Record<string, { uploader?: string; creationTime?: number }> = {
    [`content/TAKEN/${ID}/early.txt`]: { uploader: 'editor', creationTime: 999 },
    [`content/TAKEN/${ID}/mapped.txt`]: { uploader: 'editor', creationTime: 999 },
    [`content/TAKEN/${ID}/later.txt`]: { uploader: 'editor', creationTime: 1000 },
    [`tmp/editor/${ID}/a.txt`]: { uploader: 'editor' },
    [`tmp/editor/${ID}/old.txt`]: {},
    [`content/CULTURE/${ID}/c.txt`]: { uploader: 'editor' },
    [`content/GONE/${ID}/g.txt`]: { uploader: 'sportseditor' },
    [`content/FUTURE/${ID}/f.txt`]: { uploader: 'sportseditor' },
  };
  let stats = 0;
  const deps: FileAccessDeps = {
    security: loadSecurityConfig(),
    store: { head: async (cid) => heads[cid] ?? null, version: async (cid) => versions[cid] ?? null },
    files: {
      stat: async (key) => {
        stats++;
        const f = stored[`${key.space}/${key.host}/${key.path}`];
        return f ? ({ key, uploader: f.uploader, creationTime: f.creationTime ?? 0 } as StoredFile) : null;
      },
    },
  };
  const key = (addr: string) => {
    const [space, host, ...path] = addr.split('/');
    return fileKeyOf(space, host, path.join('/'));
  };

  it('content/<key> of an existing content: its permissions decide, before any file lookup', async () => {
    stats = 0;
    expect(await fileAccess(deps, sports, key(`content/CULTURE/${ID}/c.txt`), 'read')).to.deep.equal({ kind: 'denied', permission: 'Read' });
    expect(await fileAccess(deps, sports, key(`content/CULTURE/${ID}/nothing.txt`), 'read')).to.deep.equal({ kind: 'denied', permission: 'Read' });
    expect(await fileAccess(deps, reader, key(`content/CULTURE/${ID}/c.txt`), 'update')).to.deep.equal({ kind: 'denied', permission: 'Update' });
    expect(await fileAccess(deps, reader, key(`content/CULTURE/${ID}/c.txt`), 'upload')).to.deep.equal({ kind: 'denied', permission: 'Update' });
    expect(stats).to.equal(0);
    expect((await fileAccess(deps, reader, key(`content/CULTURE/${ID}/c.txt`), 'read')).kind).to.equal('allowed');
    expect((await fileAccess(deps, sports, key(`content/SPORTS/${ID}/x.txt`), 'update')).kind).to.equal('allowed');
    expect((await fileAccess(deps, sports, key(`content/SPORTS/${ID}/x.txt`), 'upload')).kind).to.equal('allowed');
  });

  it("a file uploaded to the host before the content existed: the content's once its head maps it, else its uploader's", async () => {
    for (const action of ['read', 'update'] as const) {
      expect(await fileAccess(deps, sports, key(`content/TAKEN/${ID}/early.txt`), action)).to.deep.equal({ kind: 'hidden' });
      expect(await fileAccess(deps, reader, key(`content/TAKEN/${ID}/early.txt`), action)).to.deep.equal(
        action === 'read' ? { kind: 'hidden' } : { kind: 'denied', permission: 'Update' },
      );
      expect((await fileAccess(deps, editor, key(`content/TAKEN/${ID}/early.txt`), action)).kind).to.equal('allowed');
      expect((await fileAccess(deps, sysadmin, key(`content/TAKEN/${ID}/early.txt`), action)).kind).to.equal('allowed');
      expect((await fileAccess(deps, sports, key(`content/TAKEN/${ID}/mapped.txt`), action)).kind).to.equal('allowed');
      expect((await fileAccess(deps, sports, key(`content/TAKEN/${ID}/later.txt`), action)).kind).to.equal('allowed');
    }
    // Missing: as before, the service answers 404 after an allowed decision.
    expect(await fileAccess(deps, sports, key(`content/TAKEN/${ID}/none.txt`), 'read')).to.deep.equal({ kind: 'allowed', file: null });
  });

  it('tmp, and content hosts with no live content: the uploader and sysadmin; to others the same answer as a missing file', async () => {
    for (const addr of [`tmp/editor/${ID}/a.txt`, `content/GONE/${ID}/g.txt`, `content/FUTURE/${ID}/f.txt`]) {
      const owner = stored[addr].uploader === 'editor' ? editor : sports;
      const other = owner === editor ? sports : editor;
      for (const action of ['read', 'update'] as const) {
        expect((await fileAccess(deps, owner, key(addr), action)).kind, addr).to.equal('allowed');
        expect((await fileAccess(deps, sysadmin, key(addr), action)).kind, addr).to.equal('allowed');
        expect(await fileAccess(deps, other, key(addr), action), addr).to.deep.equal({ kind: 'hidden' });
        expect(await fileAccess(deps, reader, key(addr), action), addr).to.deep.equal({ kind: 'hidden' });
      }
    }
    expect(await fileAccess(deps, editor, key(`tmp/editor/${ID}/missing.txt`), 'read')).to.deep.equal({ kind: 'hidden' });
    expect(await fileAccess(deps, sysadmin, key(`tmp/editor/${ID}/missing.txt`), 'read')).to.deep.equal({ kind: 'hidden' });
    expect((await fileAccess(deps, reader, key('tmp/editor/anything'), 'upload')).kind).to.equal('allowed');
  });

  it('a file without a recorded uploader: sysadmin only', async () => {
    expect(await fileAccess(deps, editor, key(`tmp/editor/${ID}/old.txt`), 'read')).to.deep.equal({ kind: 'hidden' });
    expect((await fileAccess(deps, sysadmin, key(`tmp/editor/${ID}/old.txt`), 'update')).kind).to.equal('allowed');
  });

  it('fileReferencesOf lists what delivery serves: entries with a string fileUri, under filePath or their key', () => {
    expect(
      fileReferencesOf({ files: { a: { fileUri: 'tmp://x/1/a' }, b: { fileUri: 'tmp://x/1/b', filePath: 'p/b' }, c: { filePath: 'c' }, d: 'x', e: [1] } }),
    ).to.deep.equal([
      { path: 'a', fileUri: 'tmp://x/1/a' },
      { path: 'p/b', fileUri: 'tmp://x/1/b' },
    ]);
    expect(fileReferencesOf({ files: [] })).to.deep.equal([]);
    expect(fileReferencesOf(undefined)).to.deep.equal([]);
  });

  it('fileKeyOfUri takes both URI forms and refuses what is no file address', () => {
    expect(fileKeyOfUri(`tmp://editor/${ID}/a.txt`)).to.deep.include({ space: 'tmp', host: 'editor', path: `${ID}/a.txt` });
    expect(fileKeyOfUri(`content:CULTURE/${ID}/c.txt`)).to.deep.include({ space: 'content', host: 'CULTURE' });
    for (const bad of ['https://example.com/x', 'tmp://editor/../x', 'tmp:///x/y', 'nothing']) expect(fileKeyOfUri(bad), bad).to.equal(null);
  });

  it('readableFileUris keeps the URIs the writer may read, once each', async () => {
    const aspect = {
      files: {
        mine: { fileUri: `tmp://editor/${ID}/a.txt` },
        again: { fileUri: `tmp://editor/${ID}/a.txt` },
        culture: { fileUri: `content://CULTURE/${ID}/c.txt` },
        web: { fileUri: 'https://example.com/x.png' },
      },
    };
    expect(await readableFileUris(deps, editor, aspect)).to.deep.equal([`tmp://editor/${ID}/a.txt`, `content://CULTURE/${ID}/c.txt`]);
    expect(await readableFileUris(deps, sports, aspect)).to.deep.equal([]);
  });

  it("readableFileUris reads each host's head and head version once, however many URIs name its files (review 15)", async () => {
    let heads = 0;
    let versions = 0;
    const counted: FileAccessDeps = {
      ...deps,
      // A store of its own: the versions' mapped files are kept per store.
      store: {
        head: async (cid) => {
          heads++;
          return deps.store.head(cid);
        },
        version: async (cid, k) => {
          versions++;
          return deps.store.version(cid, k);
        },
      },
    };
    const files: Record<string, { fileUri: string }> = {};
    for (let i = 0; i < 20; i++) {
      files[`a${i}`] = { fileUri: `content://TAKEN/${ID}/early.txt` };
      files[`b${i}`] = { fileUri: `content:TAKEN/${ID}/early.txt` };
      files[`c${i}`] = { fileUri: `content://TAKEN/${ID}/x${i}.txt` };
    }
    files.mapped = { fileUri: `content:TAKEN/${ID}/mapped.txt` };
    const readable = await readableFileUris(counted, sports, { files });
    expect(readable).to.include(`content:TAKEN/${ID}/mapped.txt`);
    expect(readable.filter((u) => u.includes('early'))).to.deep.equal([]);
    expect({ heads, versions }).to.deep.equal({ heads: 1, versions: 1 });
    // The version's mapped files are kept: later checks and reads do not read it again.
    expect((await fileAccess(counted, sports, key(`content/TAKEN/${ID}/mapped.txt`), 'read')).kind).to.equal('allowed');
    expect(await fileAccess(counted, reader, key(`content/TAKEN/${ID}/early.txt`), 'read')).to.deep.equal({ kind: 'hidden' });
    expect(versions).to.equal(1);
  });

  it(`readableFileUris refuses more than ${MAX_FILE_REFERENCES} file URIs with 400 before any lookup`, async () => {
    const before = stats;
    const files = Object.fromEntries(Array.from({ length: MAX_FILE_REFERENCES + 1 }, (_, i) => [`f${i}`, { fileUri: `tmp://editor/${ID}/${i}.txt` }]));
    const e = await readableFileUris(deps, editor, { files }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).to.be.instanceOf(AppError);
    expect((e as AppError).http).to.equal(400);
    expect(stats).to.equal(before);
    files[`f${MAX_FILE_REFERENCES}`] = files.f0;
    expect(await readableFileUris(deps, editor, { files })).to.have.length(0);
  });

  it('checkFileReferences: a URI the write adds must be approved; one the base already maps is kept; 400 names the path and URI', () => {
    const files = (m: Record<string, string>) => ({ files: Object.fromEntries(Object.entries(m).map(([k, v]) => [k, { fileUri: v }])) });
    checkFileReferences(files({ a: 'tmp://x/1/a' }), undefined, ['tmp://x/1/a']);
    checkFileReferences(files({ a: 'tmp://x/1/a', b: 'tmp://y/1/b' }), files({ old: 'tmp://y/1/b' }), ['tmp://x/1/a']);
    checkFileReferences(undefined, undefined, undefined);
    let e: unknown;
    try {
      checkFileReferences(files({ a: 'tmp://x/1/a', b: 'tmp://y/1/b' }), undefined, ['tmp://x/1/a']);
    } catch (err) {
      e = err;
    }
    expect(e).to.be.instanceOf(AppError);
    expect((e as AppError).http).to.equal(400);
    expect((e as AppError).extraInfo).to.deep.equal({ path: 'b', fileUri: 'tmp://y/1/b' });
    expect(() => checkFileReferences(files({ a: 'tmp://x/1/a' }), undefined, undefined)).to.throw(AppError);
  });
});
