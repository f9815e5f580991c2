import { expect } from 'chai';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { unpack } from '../../src/adapters/codec.js';
import type { ContentEvent } from '../../src/content/model.js';
import { Client, article, startTestPlatform } from '../support/platform.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;
type Entry = { action: string; id: string; revision: number; via: string; user: string };

const PARTITIONS = 8;
const until = async (what: string, ok: () => Promise<boolean>, ms = 15_000) => {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
};

/**
 * CONTRACT §15 Audit, storage: the newest entries wait in Redis (`auditlog:{p}`), older ones are
 * flushed into segments of the file store (outside every space of the file service), queries read
 * both as one trail, and retention deletes old segments.
 */
describe('revisions: audit trail segments in the file store', function () {
  this.timeout(60_000);
  let redis: Redis;
  const dir = mkdtempSync(join(tmpdir(), 'audit-seg-'));
  before(() => {
    redis = new Redis(process.env.REDIS_URL!);
  });
  after(() => {
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The audit entries of a content still in Redis. */
  async function inRedis(cid: string): Promise<number> {
    let n = 0;
    for (let p = 0; p < PARTITIONS; p++) {
      for (const [, f] of (await redis.xrangeBuffer(`auditlog:{${p}}`, '-', '+')) as [Buffer, Buffer[]][]) {
        if (unpack<ContentEvent>(f[1]).cid === cid) n++;
      }
    }
    return n;
  }

  async function writes(editor: Client, count: number) {
    const c = await editor.req('POST', '/content', { body: article('s0') });
    let etag = c.headers.get('etag')!;
    for (let i = 1; i < count; i++) {
      const u = await editor.req('PUT', `/content/alias/${c.json.system.id}`, { body: article(`s${i}`), headers: { 'If-Match': etag } });
      etag = u.headers.get('etag')!;
    }
    return { id: c.json.system.id as string, cid: (c.json.system.id as string).split('/')[1], etag };
  }

  describe('flush', () => {
    let p: P;
    let editor: Client;
    let sysadmin: Client;
    before(async () => {
      p = await startTestPlatform({ AUDIT_FLUSH_SECONDS: '1', FILES_DIR: dir });
      editor = await new Client(p.base).login('editor');
      sysadmin = await new Client(p.base).login('sysadmin');
    });
    after(async () => p.stop());

    it('moves entries out of Redis into segments and answers them as before, paging across the boundary', async () => {
      const c = await writes(editor, 4);
      await until('the entries to leave Redis', async () => (await inRedis(c.cid)) === 0 && Number(await redis.get('audit:flushed')) > 0);
      const names = readdirSync(join(dir, '.system', 'audit')).filter((n) => n.endsWith('.seg'));
      expect(names.length).to.be.greaterThan(0);
      const all = await sysadmin.req('GET', `/audit?content=${encodeURIComponent(c.id)}`);
      expect(all.json.entries.map((e: Entry) => [e.action, e.revision])).to.deep.equal([
        ['update', 4],
        ['update', 3],
        ['update', 2],
        ['create', 1],
      ]);
      // One more write stays in Redis for a moment: a page that starts there goes on into the segments.
      await editor.req('PUT', `/content/alias/${c.id}`, { body: article('s4'), headers: { 'If-Match': c.etag } });
      const seen: number[] = [];
      let cursor: string | null = null;
      do {
        const r: { json: { entries: Entry[]; next: string | null } } = await sysadmin.req(
          'GET',
          `/audit?content=${encodeURIComponent(c.id)}&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        );
        seen.push(...r.json.entries.map((e) => e.revision));
        cursor = r.json.next;
      } while (cursor);
      expect(seen).to.deep.equal([5, 4, 3, 2, 1]);
      const byUser = await sysadmin.req('GET', '/audit?user=editor&limit=1000');
      expect(byUser.json.entries.filter((e: Entry) => e.id === c.id).map((e: Entry) => e.revision)).to.deep.equal([5, 4, 3, 2, 1]);
    });

    it('no file service path reaches a segment', async () => {
      const name = readdirSync(join(dir, '.system', 'audit')).find((n) => n.endsWith('.seg'))!;
      const files = `${p.url}/file-service/file`;
      for (const path of [
        `.system/audit/${name}`,
        `system/audit/${name}`,
        `info/.system/audit/${name}`,
        `tmp/../.system/audit/${name}`,
        `content/%2e%2e/.system/audit/${name}`,
      ]) {
        const r = await sysadmin.req('GET', `${files}/${path}`);
        expect(r.status, path).to.be.oneOf([400, 404]);
      }
    });
  });

  describe('retention', () => {
    it('deletes segments older than AUDIT_RETENTION_DAYS', async () => {
      const p = await startTestPlatform({ AUDIT_FLUSH_SECONDS: '1', AUDIT_RETENTION_DAYS: String(3 / 86400), FILES_DIR: dir });
      try {
        const editor = await new Client(p.base).login('editor');
        const sysadmin = await new Client(p.base).login('sysadmin');
        const c = await writes(editor, 2);
        await until('the entries to leave Redis', async () => (await inRedis(c.cid)) === 0);
        // Three seconds on, with later flushes after them, the segments holding them are deleted.
        await new Promise((r) => setTimeout(r, 3500));
        await writes(editor, 1);
        await until('the entries to be gone', async () => (await sysadmin.req('GET', `/audit?content=${encodeURIComponent(c.id)}`)).json.entries.length === 0);
      } finally {
        await p.stop();
      }
    });
  });
});
