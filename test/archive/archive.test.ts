import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { partitionOf } from '../../src/adapters/ids.js';
import { keys } from '../../src/adapters/redis.js';
import { parseIndex } from '../../src/adapters/version-archive.js';
import { startS3Server, type S3ServerHandle } from '../../src/dev/s3-server.js';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

/**
 * The version archive (issue 25) on S3: contents with several versions, views, metadata, files
 * and a restore are read every way a past revision can be read; the archiver moves their old
 * history out of Redis; a web process with empty caches then reads it all again and must answer
 * exactly the same bytes, a caller without Read the same refusals. A cold read while S3 is down
 * answers 503 with Retry-After, and an archiving pass while S3 is down removes nothing.
 */
describe('version archive: archived history reads as before (issue 25)', function () {
  this.timeout(120_000);
  let s3: S3ServerHandle;
  // A Redis of its own: no other test's platform (whose archiver role takes leases) shares it.
  let redis: RedisServerHandle;
  let s3dir: string;
  let env: Record<string, string>;
  let a: P;
  let editor: Client;
  const ns = 'arch';
  const tag = `a${Date.now().toString(36)}`;
  const PNG = Buffer.from(
    '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a1e0b1b40000000049454e44ae426082',
    'hex',
  );

  type Made = { alias: string; id: string; versions: string[]; etag: string; revs: number; lastVersionRev: number; files?: string[] };
  const made: Made[] = [];

  before(async () => {
    s3dir = mkdtempSync(join(tmpdir(), 'test-archive-s3-'));
    s3 = await startS3Server({ dataDir: s3dir });
    redis = await startRedisServer({});
    env = {
      REDIS_URL: redis.url,
      S3_ENDPOINT: s3.endPoint,
      S3_PORT: String(s3.port),
      S3_USE_SSL: 'false',
      S3_ACCESS_KEY: s3.accessKey,
      S3_SECRET_KEY: s3.secretKey,
      S3_BUCKET: `archive-${tag}`,
      ARCHIVE_KEEP_REVISIONS: '1',
      ARCHIVE_AFTER_DAYS: '3650',
      ARCHIVE_INTERVAL_SECONDS: '86400',
    };
    a = await startTestPlatform(env, ['web', 'actors', 'archiver']);
    editor = await new Client(a.base).login('editor');
  });
  after(async () => {
    await a?.stop();
    await s3?.stop();
    await redis?.stop();
    if (s3dir) rmSync(s3dir, { recursive: true, force: true });
  });

  const alias = (n: string) => `${tag}-${n}`;
  /** The version key of a version id `c:<content key>:<version key>`. */
  const vkey = (id: string) => id.slice(id.lastIndexOf(':') + 1);

  async function create(name: string, body: Record<string, unknown>, operations: unknown[] = []): Promise<Made> {
    const c = await editor.req('POST', '/content', {
      body: { system: { contentType: 'article' }, aspects: body, operations: [{ _type: 'svcSetAlias', namespace: ns, alias: alias(name) }, ...operations] },
    });
    expect(c.status, c.text).to.equal(201);
    const m: Made = { alias: alias(name), id: c.json.system.id, versions: [c.json.system.version], etag: c.headers.get('etag')!, revs: 1, lastVersionRev: 1 };
    made.push(m);
    return m;
  }

  async function update(m: Made, aspects: Record<string, unknown>, operations: unknown[] = []): Promise<void> {
    const u = await editor.req('PUT', `/content/alias/${ns}/${m.alias}`, {
      body: { system: { contentType: 'article' }, aspects, operations },
      headers: { 'If-Match': m.etag },
    });
    expect(u.status, u.text).to.equal(200);
    m.versions.push(u.json.system.version);
    m.etag = u.headers.get('etag')!;
    m.revs++;
    m.lastVersionRev = m.revs;
  }

  async function upload(name: string, body: Buffer): Promise<string> {
    const r = await editor.req('POST', `${a.url}/file-service/file/content/owner/${name}`, {
      raw: body,
      headers: { 'Content-Type': 'application/octet-stream' },
    });
    expect(r.status, r.text).to.equal(201);
    return r.json.URI as string;
  }

  /** Every read of every revision and version of the contents, as [what, status, selected headers, body]. */
  async function readAll(c: Client): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const record = (what: string, status: number, headers: Headers, body: string) => {
      const h = ['etag', 'content-type', 'cache-control', 'retry-after'].map((n) => `${n}=${headers.get(n)}`).join(';');
      out.set(what, `${status} ${h}\n${body}`);
    };
    for (const m of made) {
      for (let rev = 1; rev <= m.revs + 1; rev++) {
        for (const kind of ['', '/metadata', '/history']) {
          const path = `/content/alias/${ns}/${m.alias}/${rev}${kind}`;
          const r = await c.req('GET', path);
          record(path, r.status, r.headers, r.text);
        }
        const view = `/content/view/svcPublic/alias/${ns}/${m.alias}/${rev}`;
        const v = await c.req('GET', view);
        record(view, v.status, v.headers, v.text);
      }
      for (const from of m.versions) {
        for (const to of [...m.versions, `c:${m.id.split('/')[1]}:01ARZ3NDEKTSV4RRFFQ69G5FAV`]) {
          const path = `/content/alias/${ns}/${m.alias}/compare?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
          const r = await c.req('GET', path);
          record(path, r.status, r.headers, r.text);
        }
        for (const f of m.files ?? []) {
          const d = await c.deliver({ version: from }, f);
          record(`deliver ${from} ${f}`, d.status, d.headers, d.body.toString('base64'));
        }
      }
    }
    return out;
  }

  let readBefore: Map<string, string>;
  let beforeForbidden: Map<string, string>;

  it('moves every past revision and version off Redis except the head and versions on a view', async () => {
    // Four versions and metadata; the second version on svcPublic (it must stay in Redis).
    const c1 = await create('one', { body: { _type: 'body', title: 'one', list: [1, 2, 3] } });
    await update(c1, { body: { _type: 'body', title: 'two', ünï: 'ç' } }, [{ _type: 'svcAssignToViews', views: ['svcPublic'] }]);
    await update(c1, { body: { _type: 'body', title: 'three' } }, [
      { _type: 'svcContentMetadata', aspects: { svcContentState: { hidden: false }, svcTimeState: { views: { svcPublic: { onTime: 0 } } } } },
    ]);
    await update(c1, { body: { _type: 'body', title: 'four', nested: { a: { b: [null, true, 1.5] } } } });
    // A view change without a version: a revision of its own.
    const pv = await editor.putView('svcPublic', { version: c1.versions[1] }, c1.etag);
    expect(pv.status, pv.text).to.equal(200);
    c1.etag = pv.headers.get('etag')!;
    c1.revs++;
    // Files: version one maps a file, version two another (delivery by version id).
    const f1 = await upload('one.png', PNG);
    const f2 = await upload('two.bin', Buffer.from('second version file'));
    const c2 = await create('files', {
      body: { _type: 'body', title: 'files' },
      svcFiles: { _type: 'svcFiles', files: { 'a.png': { fileUri: f1, filePath: 'a.png' } } },
    });
    await update(c2, { body: { _type: 'body', title: 'files 2' }, svcFiles: { _type: 'svcFiles', files: { 'a.png': { fileUri: f2, filePath: 'a.png' } } } });
    c2.files = ['a.png'];
    // A restore (restoredFrom in the history), then one more version.
    const c3 = await create('restored', { body: { _type: 'body', title: 'r1' } });
    await update(c3, { body: { _type: 'body', title: 'r2' } });
    const r = await editor.restore(`${ns}/${c3.alias}`, c3.versions[0], c3.etag);
    expect(r.status, r.text).to.equal(200);
    c3.versions.push(r.json.system!.version as string);
    c3.etag = r.headers.get('etag')!;
    c3.revs++;
    c3.lastVersionRev = c3.revs;
    await update(c3, { body: { _type: 'body', title: 'r4' } });
    // Many versions: the index's cost per version.
    const c4 = await create('many', { body: { _type: 'body', title: 'm0' } });
    for (let i = 1; i < 16; i++) await update(c4, { body: { _type: 'body', title: `m${i}`, text: 'x'.repeat(500) } });

    readBefore = await readAll(editor);
    beforeForbidden = await readAll(await new Client(a.base).login('sportseditor'));

    const stats = await a.archiver!.runOnce();
    expect(stats.failed).to.equal(0);
    expect(stats.moved).to.equal(made.length);
    for (const m of made) {
      const p = partition(m);
      const cid = m.id.split('/')[1];
      const revs = await a.redis.hkeys(keys.revisions(p, cid));
      // ARCHIVE_KEEP_REVISIONS=1: the newest version stays, with every revision since it was made.
      const kept = Array.from({ length: m.revs - m.lastVersionRev + 1 }, (_, i) => String(m.lastVersionRev + i));
      expect(revs.sort()).to.deep.equal(kept.sort());
      const hot = await a.redis.hkeys(keys.versions(p, cid));
      const last = vkey(m.versions[m.versions.length - 1]);
      if (m === c1) expect(hot.sort()).to.deep.equal([last, vkey(c1.versions[1])].sort());
      else expect(hot).to.deep.equal([last]);
      expect(parseIndex(await a.redis.getBuffer(keys.archiveIndex(p, cid)))).to.have.length(1);
    }
    // ≤ 100 bytes of Redis per archived version (issue 25): the index of a content with 15 archived versions.
    const cid4 = c4.id.split('/')[1];
    const bytes = Number(await a.redis.call('MEMORY', 'USAGE', keys.archiveIndex(partition(c4), cid4)));
    expect(bytes / 15).to.be.at.most(100);
    const m = await editor.metrics();
    expect(m.text).to.match(/^archive_versions_total [1-9]/m);
    expect(m.text).to.match(/^archive_bytes_total [1-9]/m);
    expect(m.text).to.match(/^archive_backlog_versions 0$/m);
  });

  const partition = (m: Made) => partitionOf(m.id.split('/')[1], a.settings.PARTITIONS);

  it('a web process with cold caches answers every read of archived history with the same bytes, cold and cached', async () => {
    const b = await startTestPlatform(env, ['web']);
    try {
      const ed = await new Client(b.base).login('editor');
      const cold = await readAll(ed);
      expect([...cold.entries()]).to.deep.equal([...readBefore.entries()]);
      const cached = await readAll(ed);
      expect([...cached.entries()]).to.deep.equal([...readBefore.entries()]);
      // Permissions are those of the content: the same refusals as before archiving.
      const forbidden = await readAll(await new Client(b.base).login('sportseditor'));
      expect([...forbidden.entries()]).to.deep.equal([...beforeForbidden.entries()]);
    } finally {
      await b.stop();
    }
  });

  it('restores an archived version', async () => {
    const c3 = made.find((m) => m.alias === alias('restored'))!;
    const old = await editor.req('GET', `/content/alias/${ns}/${c3.alias}/2`);
    const r = await editor.restore(`${ns}/${c3.alias}`, c3.versions[1], c3.etag);
    expect(r.status, r.text).to.equal(200);
    expect(r.json.aspects).to.deep.equal(old.json.aspects);
    c3.versions.push(r.json.system!.version as string);
    c3.etag = r.headers.get('etag')!;
    c3.revs++;
  });

  it('with S3 down: a cold read of archived history answers 503 with Retry-After, a hot read 200; archiving removes nothing', async () => {
    const c4 = made.find((m) => m.alias === alias('many'))!;
    // New history to archive while S3 is down.
    await update(c4, { body: { _type: 'body', title: 'm16' } });
    await update(c4, { body: { _type: 'body', title: 'm17' } });
    const b = await startTestPlatform(env, ['web']);
    const port = s3.port;
    const creds = { accessKey: s3.accessKey, secretKey: s3.secretKey };
    try {
      const ed = await new Client(b.base).login('editor');
      process.kill(s3.pid, 'SIGKILL');
      const cold = await ed.req('GET', `/content/alias/${ns}/${c4.alias}/2`);
      expect(cold.status, cold.text).to.equal(503);
      expect(Number(cold.headers.get('retry-after'))).to.be.greaterThan(0);
      const compare = await ed.req('GET', `/content/alias/${ns}/${c4.alias}/compare?from=${encodeURIComponent(c4.versions[0])}`);
      expect(compare.status).to.equal(503);
      const hist = await ed.history(`${ns}/${c4.alias}`);
      expect(hist.status).to.equal(503);
      const hot = await ed.req('GET', `/content/alias/${ns}/${c4.alias}/${c4.revs}`);
      expect(hot.status).to.equal(200);

      const cid = c4.id.split('/')[1];
      const p = partition(c4);
      const dump = async () =>
        JSON.stringify([
          ...(await Promise.all([keys.revisions, keys.versions].map((k) => a.redis.hgetall(k(p, cid))))),
          await a.redis.get(keys.archiveIndex(p, cid)),
        ]);
      const held = await dump();
      const stats = await a.archiver!.runOnce();
      expect(stats.moved).to.equal(0);
      expect(await dump()).to.equal(held);
      // What could not move shows as backlog.
      expect(Number(/^archive_backlog_versions (\d+)$/m.exec((await editor.metrics()).text)?.[1])).to.be.greaterThan(0);

      s3 = await startS3Server({ dataDir: s3dir, port, ...creds });
      await eventually(async () => {
        const again = await ed.req('GET', `/content/alias/${ns}/${c4.alias}/2`);
        expect(again.status).to.equal(200);
        expect(again.text).to.equal(readBefore.get(`/content/alias/${ns}/${c4.alias}/2`)!.split('\n').slice(1).join('\n'));
      }, 30_000);
      const after = await a.archiver!.runOnce();
      expect(after.moved).to.be.at.least(1);
      expect(parseIndex(await a.redis.getBuffer(keys.archiveIndex(p, cid)))).to.have.length(2);
      const h = await ed.history(`${ns}/${c4.alias}`);
      expect(h.status).to.equal(200);
      expect(h.json.versions).to.have.length(c4.versions.length);
    } finally {
      await b.stop();
    }
  });
});
