import { execFile } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { type RedisServerHandle, startRedisServer } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { bulkImport, exportContents } from '../../src/client/bulk.js';
import { bulk, exportChunks, type ExportLine as Line } from './ndjson.js';

const run = promisify(execFile);
type P = Awaited<ReturnType<typeof startTestPlatform>>;

const exportOf = async (c: Client, query = '') => {
  const r = await c.req('GET', `/export${query}`);
  expect(r.status, r.text).to.equal(200);
  expect(r.headers.get('content-type')).to.equal('application/x-ndjson');
  // In id order: the export's own order (partitions scanned at once) is not part of the contract.
  return r.text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line)
    .sort((a, b) => a.id.localeCompare(b.id));
};

/** A content as the round trip must keep it: everything but its key, version id and times. */
const essence = (l: Line) => ({
  type: l.content.system.contentType,
  aspects: l.content.aspects,
  aliases: l.aliases.filter((a) => !a.startsWith('contentid/')).sort(),
  views: l.views,
  metadata: l.metadata,
});
const sortedEssences = (lines: Line[]) => lines.map(essence).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

/**
 * Export (CONTRACT §16): the current version of every content the caller may read, filtered by
 * types and views; never a content the caller may not read (the same export whether or not such
 * content exists, CONTRACT §20); and an export imported into an empty platform, by the command
 * line of the README, gives the same aspects, aliases, metadata and views.
 */
describe('bulk export (CONTRACT §16)', function () {
  this.timeout(120_000);
  // Each platform on its own private Redis: an export reads everything there is.
  let redisA: RedisServerHandle;
  let redisB: RedisServerHandle;
  let a: P;
  let b: P;
  let sysadmin: Client;
  let sports: Client;

  before(async () => {
    [redisA, redisB] = await Promise.all([startRedisServer({ appendonly: false }), startRedisServer({ appendonly: false })]);
    a = await startTestPlatform({ REDIS_URL: redisA.url });
    b = await startTestPlatform({ REDIS_URL: redisB.url });
    sysadmin = await new Client(a.base).login('sysadmin');
    sports = await new Client(a.base).login('sportseditor');
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
    await Promise.all([redisA?.stop(), redisB?.stop()]);
  });

  const owners = (o: readonly string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: o } } });
  const alias = (namespace: string, a: string) => ({ _type: 'svcSetAlias', namespace, alias: a });
  const create = async (c: Client, type: string, aspects: Record<string, unknown>, operations: unknown[] = []) => {
    const r = await c.create({ system: { contentType: type }, aspects, operations });
    expect(r.status, r.text).to.equal(201);
    return { id: r.json.system.id as string, etag: r.headers.get('etag')! };
  };

  it('answers 401 without a token and 400 for a bad filter', async () => {
    expect((await sysadmin.req('GET', '/export', { token: null })).status).to.equal(401);
    expect((await sysadmin.req('GET', '/export?types=a%20b')).status).to.equal(400);
    const head = await sysadmin.req('HEAD', '/export');
    expect([head.status, head.headers.get('content-type'), head.text]).to.deep.equal([200, 'application/x-ndjson', '']);
    // The connection is still usable after the HEAD (no body was sent on it).
    expect((await sysadmin.req('GET', '/export?types=none')).status).to.equal(200);
  });

  it('exports the current version of each readable content once, filtered by types and views; deleted content never', async () => {
    const x = await create(sports, 'brief', { body: { _type: 'body', title: 'x1' } }, [owners(['sports']), alias('news', 'x')]);
    const u = await sports.update(x.id, { aspects: { body: { title: 'x2' } } }, x.etag);
    expect(u.status).to.equal(200);
    const y = await create(sports, 'gallery', { body: { _type: 'body', title: 'y' } }, [
      owners(['sports']),
      { _type: 'svcAssignToViews', views: ['svcPublic'] },
    ]);
    const z = await create(sports, 'brief', { body: { _type: 'body', title: 'z' } }, [owners(['sports'])]);
    expect((await sports.remove(z.id, z.etag)).status).to.equal(204);
    const all = await exportOf(sysadmin);
    const byId = new Map(all.map((l) => [l.id, l]));
    expect(all.length).to.equal(byId.size);
    const lx = byId.get(x.id)!;
    expect(lx.version).to.equal(u.json.system!.version);
    expect(lx.content.aspects.body).to.deep.include({ title: 'x2' });
    expect(lx.aliases).to.deep.equal([x.id, 'news/x']);
    expect(lx.views).to.deep.equal(['svcLatest']);
    expect(lx.metadata).to.deep.equal({ svcSecurityContext: { _type: 'svcSecurityContext', owners: ['sports'] } });
    // The envelope is the read's.
    expect(lx.content).to.deep.equal((await sysadmin.readContent(x.id)).json);
    expect(byId.get(y.id)!.views).to.deep.equal(['svcLatest', 'svcPublic']);
    expect(byId.has(z.id)).to.equal(false);
    expect((await exportOf(sysadmin, '?types=brief')).map((l) => l.id)).to.deep.equal([x.id]);
    expect((await exportOf(sysadmin, '?types=brief,gallery')).map((l) => l.id).sort()).to.deep.equal([x.id, y.id].sort());
    expect((await exportOf(sysadmin, '?views=svcPublic')).map((l) => l.id)).to.deep.equal([y.id]);
  });

  it('never exports what the caller may not read: the same export whether or not such content exists (property)', async () => {
    await create(sports, 'brief', { body: { _type: 'body', title: 'mine' } }, [owners(['sports']), { _type: 'svcAssignToViews', views: ['svcPublic'] }]);
    const queries = ['', '?types=brief', '?types=article,brief', '?views=svcPublic'];
    const baseline = await Promise.all(queries.map((q) => exportOf(sports, q)));
    expect(baseline[0].length).to.be.greaterThan(0);
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            type: fc.constantFrom('article', 'brief', 'gallery'),
            owners: fc.constantFrom([], ['news'], ['news', 'finance']),
            publicView: fc.boolean(),
            alias: fc.boolean(),
          }),
          { minLength: 1, maxLength: 4 },
        ),
        async (forbidden) => {
          for (const f of forbidden) {
            const ops: unknown[] = [];
            if (f.owners.length) ops.push(owners(f.owners));
            if (f.publicView) ops.push({ _type: 'svcAssignToViews', views: ['svcPublic'] });
            if (f.alias) ops.push(alias('news', `forbidden${n++}`));
            await create(sysadmin, f.type, { body: { _type: 'body', title: 'not for sports' } }, ops);
          }
          const now = await Promise.all(queries.map((q) => exportOf(sports, q)));
          expect(now).to.deep.equal(baseline);
        },
      ),
      { numRuns: 6 },
    );
  });

  it('export, then import into an empty platform with the command line, gives the same aspects, aliases, metadata and views', async () => {
    await create(
      sysadmin,
      'article',
      { body: { _type: 'body', title: 'round trip', tags: ['a', 'b'], nested: { k: [1, { v: null }] } }, teaser: { text: 't' } },
      [alias('news', 'round-trip'), alias('web', 'rt'), owners(['sports']), { _type: 'svcAssignToViews', views: ['svcPublic', 'frontpage'] }],
    );
    await create(sysadmin, 'image', { image: { _type: 'image', width: 10 } });
    // The typed client's helpers give the same export.
    expect(sortedEssences((await exportContents(sysadmin)) as unknown as Line[])).to.deep.equal(sortedEssences(await exportOf(sysadmin)));
    const viaClient = await bulkImport(sysadmin, [{ op: 'create', content: { system: { contentType: 'note' }, aspects: { n: { k: 1 } } } }]);
    expect(viaClient.map((x) => x.status)).to.deep.equal([201]);
    const exported = await exportOf(sysadmin);
    expect(exported.length).to.be.greaterThan(3);

    const dir = mkdtempSync(join(tmpdir(), 'bulk-cli-'));
    try {
      const cli = (args: string[], url: string, stdin?: string) =>
        run('sh', ['-c', `node --import tsx src/bulk-cli.ts ${args.join(' ')}${stdin ? ` < ${stdin}` : ''}`], {
          env: { ...process.env, PLATFORM_URL: url, PLATFORM_USER: 'sysadmin', PLATFORM_PASSWORD: 'sysadmin' },
          maxBuffer: 64 * 1024 * 1024,
        });
      const file = join(dir, 'export.ndjson');
      const out = await cli(['export'], a.url);
      writeFileSync(file, out.stdout);
      expect(
        sortedEssences(
          readFileSync(file, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Line),
        ),
      ).to.deep.equal(sortedEssences(exported));
      const imported = await cli(['import'], b.url, file);
      const answers = imported.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { status: number });
      expect(answers.map((x) => x.status)).to.deep.equal(exported.map(() => 201));
      expect(imported.stderr).to.contain(`${exported.length} lines, 0 failed`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const again = await exportOf(await new Client(b.base).login('sysadmin'));
    expect(sortedEssences(again)).to.deep.equal(sortedEssences(exported));
    // The aliases work on the new platform.
    const read = await new Client(b.base).login('sportseditor').then((c) => c.readContent('news/round-trip'));
    expect(read.status).to.equal(200);
    expect(read.json.aspects!.teaser).to.deep.equal({ _type: 'teaser', text: 't' });
  });

  it('an export whose token is revoked while it is open is cut, never ended as if complete', async () => {
    // About 48 MB of lines: more than the socket's buffers hold while the client does not read.
    const N = 3000;
    const title = 'x'.repeat(16 * 1024);
    const lines = Array.from(
      { length: N },
      (_, i) =>
        `${JSON.stringify({ op: 'create', content: { system: { contentType: 'cutexport' }, aspects: { body: { _type: 'body', title: `${i}${title}` } } } })}\n`,
    );
    const imported = await bulk(a.base, sysadmin.token!, lines);
    expect(imported.answers.filter((l) => l.status === 201)).to.have.length(N);
    const reader = await new Client(a.base).login('reader');
    const url = new URL(`${a.base}/export?types=cutexport`);
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get({ host: url.hostname, port: url.port, path: `${url.pathname}${url.search}`, headers: { 'X-Auth-Token': reader.token! }, agent: false }, resolve)
        .on('error', reject);
    });
    expect(res.statusCode).to.equal(200);
    res.pause();
    expect((await reader.req('DELETE', '/security/token')).status).to.equal(204);
    let got = 0;
    const ended = await new Promise<string>((resolve) => {
      res.on('data', (b: Buffer) => {
        for (const c of b) if (c === 10) got++;
      });
      res.on('end', () => resolve('end'));
      res.on('error', () => resolve('cut'));
      res.on('aborted', () => resolve('cut'));
      res.resume();
    });
    expect(ended, `${got} of ${N} lines`).to.equal('cut');
    expect(got).to.be.lessThan(N);
  });

  it('the HTTP chunks of an export are the same whether or not content the caller may not read exists (property)', async () => {
    // One partition, so content the caller may not read shares the catalog scan with its own.
    const redis = await startRedisServer({ appendonly: false });
    const c = await startTestPlatform({ REDIS_URL: redis.url, PARTITIONS: '1' });
    try {
      const editor = await new Client(c.base).login('editor');
      const own = await new Client(c.base).login('sportseditor');
      const type = 'chunked';
      const lineOf = (owner: string, i: number) =>
        `${JSON.stringify({ op: 'create', content: { system: { contentType: type }, aspects: { body: { _type: 'body', title: `${owner} ${i}` } }, operations: [owners([owner])] } })}\n`;
      const made = await bulk(
        c.base,
        own.token!,
        Array.from({ length: 20 }, (_, i) => lineOf('sports', i)),
      );
      expect(made.answers.filter((l) => l.status === 201)).to.have.length(20);
      const before = await exportChunks(c.base, own.token!, `types=${type}`);
      const hidden = await bulk(
        c.base,
        editor.token!,
        Array.from({ length: 1500 }, (_, i) => lineOf('culture', i)),
      );
      expect(hidden.answers.filter((l) => l.status === 201)).to.have.length(1500);
      const after = await exportChunks(c.base, own.token!, `types=${type}`);
      expect(after.lines).to.equal(20);
      expect(after.sizes).to.deep.equal(before.sizes);
      // Lines span chunks: every chunk but the last is 64 KiB, and every line arrives whole.
      const all = await exportChunks(c.base, editor.token!, `types=${type}`);
      expect(all.sizes.length).to.be.greaterThan(2);
      expect(all.sizes.slice(0, -1).every((n) => n === 65536)).to.equal(true);
      expect(all.lines).to.equal(1520);
    } finally {
      await c.stop();
      await redis.stop();
    }
  });

  it('content whose head does not name its version beside its snapshot, or names an older one (written by a build before it did), is exported the same, in the same order', async () => {
    const redis = await startRedisServer({ appendonly: false });
    const c = await startTestPlatform({ REDIS_URL: redis.url, PARTITIONS: '1' });
    const r = new Redis(redis.url);
    try {
      const editor = await new Client(c.base).login('editor');
      const made = await bulk(
        c.base,
        editor.token!,
        Array.from(
          { length: 60 },
          (_, i) => `${JSON.stringify({ op: 'create', content: { system: { contentType: 'old' }, aspects: { body: { _type: 'body', title: `t${i}` } } } })}\n`,
        ),
      );
      expect(made.answers.filter((l) => l.status === 201)).to.have.length(60);
      const before = await exportChunks(c.base, editor.token!, 'types=old');
      expect(before.lines).to.equal(60);
      // The head's version key, as commit-content-n.lua keeps it beside the snapshot.
      const cids = before.parsed.map((l) => l.id.replace('contentid/', ''));
      expect(await r.hget(`ct:{0}:${cids[0]}`, 'h')).to.equal(before.parsed[0].version.split(':')[2]);
      // Every other content as a platform before that field wrote it.
      for (const cid of cids.filter((_, i) => i % 2)) expect(await r.hdel(`ct:{0}:${cid}`, 'h')).to.equal(1);
      // And one updated by such a platform: its h still names its first version.
      const first = before.parsed[0];
      const read = await editor.readContent(first.id);
      const updated = await editor.update(first.id, { aspects: { body: { _type: 'body', title: 'changed' } } }, read.headers.get('etag'));
      expect(updated.status).to.equal(200);
      await r.hset(`ct:{0}:${cids[0]}`, 'h', first.version.split(':')[2]);
      const after = await exportChunks(c.base, editor.token!, 'types=old');
      // In content-key order still: the editor reads every content, so the versions its head names
      // come with the snapshots, and the others are read after; the lines keep their order.
      expect(after.parsed.map((l) => l.id)).to.deep.equal(before.parsed.map((l) => l.id));
      const sorted = (x: Line[]) => x.map((l) => JSON.stringify(l)).sort();
      expect(sorted(after.parsed.filter((l) => l.id !== first.id))).to.deep.equal(sorted(before.parsed.slice(1)));
      const line = after.parsed.find((l) => l.id === first.id)!;
      expect(line.version).to.equal(updated.json.system!.version);
      expect(line.content).to.deep.equal((await editor.readContent(first.id)).json);
    } finally {
      r.disconnect();
      await c.stop();
      await redis.stop();
    }
  });

  it('lines of 2-, 3- and 4-byte characters arrive whole across the chunks', async () => {
    const redis = await startRedisServer({ appendonly: false });
    const c = await startTestPlatform({ REDIS_URL: redis.url, PARTITIONS: '2' });
    try {
      const editor = await new Client(c.base).login('editor');
      const type = 'utf8';
      // About 1.8 KB of UTF-8 per title, in 1.1 K UTF-16 units: chunks end inside characters.
      const title = (i: number) => `${'é€😀'.repeat(150 + (i % 7))} ${i}`;
      const lineOf = (i: number) =>
        `${JSON.stringify({ op: 'create', content: { system: { contentType: type }, aspects: { body: { _type: 'body', title: title(i) } } } })}\n`;
      const made = await bulk(
        c.base,
        editor.token!,
        Array.from({ length: 200 }, (_, i) => lineOf(i)),
      );
      expect(made.answers.filter((l) => l.status === 201)).to.have.length(200);
      const all = await exportChunks(c.base, editor.token!, `types=${type}`);
      expect(all.sizes.length).to.be.greaterThan(4);
      expect(all.sizes.slice(0, -1).every((n) => n === 65536)).to.equal(true);
      const titles = all.parsed.map((l) => (l.content.aspects.body as { title: string }).title).sort();
      expect(titles).to.deep.equal(Array.from({ length: 200 }, (_, i) => title(i)).sort());
    } finally {
      await c.stop();
      await redis.stop();
    }
  });
});
