/**
 * Spec "File service", "File parameters", "Limits"; CONTRACT §8 (Files).
 * One contract suite for both file stores: the local disk (in a temporary directory) and S3
 * (S3Proxy started by the test harness, or the server S3_ENDPOINT names).
 */
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type * as Minio from 'minio';
import { DiskFileStore } from '../../src/adapters/file-store-disk.js';
import { S3FileStore } from '../../src/adapters/file-store-s3.js';
import { fileKeyOf, fileUriOf, type FileKey, type FileStore, type StoredFile } from '../../src/adapters/file-store.js';
import { AppError } from '../../src/errors.js';
import { ensureTestS3 } from '../support/s3.js';

const MiB = 1024 * 1024;
const TTL_SECONDS = 3600;
const LIMIT = 1024 * MiB;
/** Recorded with every file (CONTRACT §20: a tmp file is its uploader's). */
const UPLOADER = 'editor';

interface Harness {
  store: FileStore;
  /** Everything stored or half-stored under a space and host (files, objects, incomplete uploads, temp files). */
  leftovers(space: string, host: string): Promise<string[]>;
  cleanup(): Promise<void>;
}

async function diskHarness(): Promise<Harness> {
  const dir = mkdtempSync(join(tmpdir(), 'test-files-'));
  const store = new DiskFileStore({ dir, tmpTtlSeconds: TTL_SECONDS });
  await store.ready();
  const ls = (d: string) => {
    try {
      return readdirSync(d);
    } catch {
      return [];
    }
  };
  return {
    store,
    leftovers: async (space, host) => [
      ...ls(join(dir, '.incoming')).map((f) => `.incoming/${f}`),
      ...ls(join(dir, space, host)).map((f) => `${space}/${host}/${f}`),
    ],
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of stream) out.push(x);
  return out;
}

async function s3Harness(): Promise<Harness> {
  const s3 = await ensureTestS3();
  const bucket = `file-store-test-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const store = new S3FileStore({ ...s3, bucket, tmpTtlSeconds: TTL_SECONDS, log: (m) => console.log(`      (s3 store) ${m}`) });
  await store.ready();
  const client: Minio.Client = store.client;
  return {
    store,
    leftovers: async (space, host) => {
      const prefix = `${space}/${host}/`;
      const objects = await collect<Minio.BucketItem>(client.listObjectsV2(bucket, prefix, true));
      const { uploads } = await client.listIncompleteUploadsQuery(bucket, prefix, '', '', '');
      return [...objects.map((o) => `object ${o.name}`), ...uploads.map((u) => `incomplete upload ${u.key}`)];
    },
    cleanup: async () => {
      const objects = await collect<Minio.BucketItem>(client.listObjectsV2(bucket, '', true));
      for (const o of objects) if (o.name) await client.removeObject(bucket, o.name);
      const { uploads } = await client.listIncompleteUploadsQuery(bucket, '', '', '', '');
      for (const u of uploads) await client.abortMultipartUpload(bucket, u.key, u.uploadId);
      await client.removeBucket(bucket);
    },
  };
}

/** A stream of `size` bytes in `chunk`-sized pieces, without a known length; never held whole. */
function generated(size: number, opts: { chunk?: number; failAt?: number } = {}): { stream: Readable; sha256: () => string } {
  const chunkSize = opts.chunk ?? 64 * 1024;
  const base = randomBytes(chunkSize);
  const hash = createHash('sha256');
  let sent = 0;
  let index = 0;
  const stream = new Readable({
    read() {
      if (opts.failAt !== undefined && sent >= opts.failAt) return this.destroy(new Error('client went away'));
      if (sent >= size) return this.push(null);
      const n = Math.min(chunkSize, size - sent);
      const chunk = Buffer.allocUnsafe(n);
      base.copy(chunk, 0, 0, n);
      // Every chunk differs, so a part stored out of order or twice changes the hash.
      if (n >= 8) chunk.writeDoubleLE(index++, 0);
      hash.update(chunk);
      sent += n;
      this.push(chunk);
    },
  });
  return { stream, sha256: () => hash.digest('hex') };
}

const sha256Of = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function readAll(stream: Readable): Promise<Buffer> {
  return Buffer.concat(await collect<Buffer>(stream));
}

async function hashStream(stream: Readable): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

function expectAppError(e: unknown, code: string): void {
  expect(e, String(e)).to.be.instanceOf(AppError);
  expect((e as AppError).code).to.equal(code);
}

/** Peak RSS growth over a baseline while `work` runs (sampled every 10 ms). */
async function peakRssGrowth<T>(work: () => Promise<T>): Promise<{ result: T; growth: number; ms: number }> {
  const baseline = process.memoryUsage.rss();
  let peak = baseline;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
  const t0 = performance.now();
  try {
    const result = await work();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { result, growth: peak - baseline, ms: performance.now() - t0 };
  } finally {
    clearInterval(timer);
  }
}

/** A whole 1x1 PNG (signature, IHDR, IDAT, IEND): file-type walks the chunks, so a bare header is not enough. */
const TINY_PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000b49444154789c6360000200000500017a5eab3f0000000049454e44ae426082',
  'hex',
);

const TRAVERSALS: [string, string, string][] = [
  ['tmp', 'u', '..'],
  ['tmp', 'u', '../x'],
  ['tmp', 'u', 'a/../../b'],
  ['tmp', 'u', '.'],
  ['tmp', 'u', './a'],
  ['tmp', 'u', 'a/./b'],
  ['tmp', 'u', '%2e%2e/x'],
  ['tmp', 'u', '%2E%2E/x'],
  ['tmp', 'u', '.%2e/x'],
  ['tmp', 'u', '%2e/x'],
  ['tmp', 'u', '%252e%252e/x'],
  ['tmp', 'u', 'a%2f..%2fb'],
  ['tmp', 'u', 'a%2Fb'],
  ['tmp', 'u', '..%2f..%2fetc%2fpasswd'],
  ['tmp', 'u', '/etc/passwd'],
  ['tmp', 'u', '\\etc\\passwd'],
  ['tmp', 'u', 'C:/Windows'],
  ['tmp', 'u', ''],
  ['tmp', 'u', 'a//b'],
  ['tmp', 'u', 'a/'],
  ['tmp', 'u', 'a\\..\\b'],
  ['tmp', 'u', 'a%5cb'],
  ['tmp', 'u', 'a\0b'],
  ['tmp', 'u', 'a%00b'],
  ['tmp', 'u', 'a\nb'],
  ['tmp', 'u', 'a\u007fb'],
  ['tmp', 'u', 'x'.repeat(256)],
  ['tmp', 'u', `${'a/'.repeat(600)}b`],
  ['tmp', '..', 'x'],
  ['tmp', '.', 'x'],
  ['tmp', '%2e%2e', 'x'],
  ['tmp', 'a/b', 'x'],
  ['tmp', 'a%2fb', 'x'],
  ['tmp', 'a\\b', 'x'],
  ['tmp', '', 'x'],
  ['tmp', 'a\0', 'x'],
  ['../tmp', 'u', 'x'],
  ['etc', 'u', 'x'],
  ['TMP', 'u', 'x'],
];

for (const kind of ['disk', 's3'] as const) {
  describe(`File store contract: ${kind} (spec "File service", "File parameters", CONTRACT §8)`, function () {
    this.timeout(180000);
    let h: Harness;
    let store: FileStore;
    const host = `user-${randomBytes(4).toString('hex')}`;

    before(async () => {
      const t0 = performance.now();
      h = kind === 'disk' ? await diskHarness() : await s3Harness();
      store = h.store;
      if (kind === 's3') console.log(`      S3 store ready in ${Math.round(performance.now() - t0)} ms (S3Proxy start included on first use)`);
    });

    after(async () => {
      await h?.cleanup();
    });

    async function put(key: FileKey, data: Buffer, opts: { contentType?: string; maxBytes?: number; uploader?: string } = {}): Promise<StoredFile> {
      // Several chunks and no length, as a chunked upload arrives.
      const chunks: Buffer[] = [];
      for (let i = 0; i < data.length; i += 100_000) chunks.push(data.subarray(i, i + 100_000));
      return store.put(key, Readable.from(chunks), { maxBytes: opts.maxBytes ?? LIMIT, contentType: opts.contentType, uploader: opts.uploader ?? UPLOADER });
    }

    for (const [label, size] of [
      ['0 B', 0],
      ['1 B', 1],
      ['1 MB', MiB],
      ['8 MiB (one whole S3 part)', 8 * MiB],
      ['8 MiB + 1 (two parts)', 8 * MiB + 1],
    ] as const) {
      it(`round-trips a ${label} file with its info`, async () => {
        // Random bytes may begin like a known format (an MP3 frame header, 1 in a few thousand)
        // and the sniffed type wins over the declared one: a plain text start is no format.
        const data = Buffer.concat([Buffer.from('round-trip data '), randomBytes(size)]).subarray(0, size);
        const before = Date.now();
        const info = await put(fileKeyOf('tmp', host, `round/${size}.bin`), data, { contentType: 'application/x-test' });
        expect(info.length).to.equal(size);
        expect(info.originalPath).to.equal(`round/${size}.bin`);
        expect(info.key.path).to.equal(`${info.objectId}/round/${size}.bin`);
        expect(info.storageKey).to.equal(`tmp/${host}/${info.objectId}/round/${size}.bin`);
        expect(fileUriOf(info.key)).to.equal(`tmp://${host}/${info.objectId}/round/${size}.bin`);
        expect(info.creationTime).to.be.within(before - 1, Date.now());
        expect(info.modifiedTime).to.equal(info.creationTime);
        expect(info.accessTime).to.equal(-1);
        expect(info.mimeType).to.equal('application/x-test');
        expect(info.uploader).to.equal(UPLOADER);
        expect(await store.stat(info.key)).to.deep.equal(info);
        const got = await store.get(info.key);
        expect(got.info).to.deep.equal(info);
        expect(got.range).to.equal(undefined);
        const back = await readAll(got.stream);
        expect(back.length).to.equal(size);
        expect(sha256Of(back)).to.equal(sha256Of(data));
      });
    }

    it('streams a 100 MB upload and download without holding it in memory (sha256 checked, RSS growth < 60 MB)', async () => {
      const size = 100 * MiB;
      const src = generated(size);
      const up = await peakRssGrowth(() => store.put(fileKeyOf('content', host, 'big/100mb.bin'), src.stream, { uploader: UPLOADER, maxBytes: LIMIT }));
      const info = up.result;
      expect(info.length).to.equal(size);
      const down = await peakRssGrowth(async () => hashStream((await store.get(info.key)).stream));
      expect(down.result.bytes).to.equal(size);
      expect(down.result.sha256).to.equal(src.sha256());
      const mbs = (ms: number) => (size / MiB / (ms / 1000)).toFixed(1);
      console.log(
        `      ${kind}: 100 MiB up ${mbs(up.ms)} MiB/s (RSS +${(up.growth / MiB).toFixed(1)} MiB), down ${mbs(down.ms)} MiB/s (RSS +${(down.growth / MiB).toFixed(1)} MiB)`,
      );
      expect(up.growth, 'RSS growth during the upload').to.be.below(60 * MiB);
      expect(down.growth, 'RSS growth during the download').to.be.below(60 * MiB);
      expect(await store.delete(info.key)).to.equal(true);
    });

    it('reads byte ranges (inclusive, clamped at the end) and refuses unsatisfiable ones', async () => {
      const data = randomBytes(1000);
      const info = await put(fileKeyOf('tmp', host, 'ranges.bin'), data);
      const read = async (start: number, end?: number) => {
        const r = await store.get(info.key, { start, end });
        expect(r.info.length).to.equal(1000);
        return { bytes: await readAll(r.stream), range: r.range };
      };
      expect(await read(10, 19)).to.deep.equal({ bytes: data.subarray(10, 20), range: { start: 10, end: 19 } });
      expect(await read(0, 0)).to.deep.equal({ bytes: data.subarray(0, 1), range: { start: 0, end: 0 } });
      expect(await read(990)).to.deep.equal({ bytes: data.subarray(990), range: { start: 990, end: 999 } });
      expect(await read(995, 5000)).to.deep.equal({ bytes: data.subarray(995), range: { start: 995, end: 999 } });
      expectAppError(await rejection(store.get(info.key, { start: 1000 })), 'BAD_REQUEST');
      expectAppError(await rejection(store.get(info.key, { start: 20, end: 10 })), 'BAD_REQUEST');
      expectAppError(await rejection(store.get(info.key, { start: -1 })), 'BAD_REQUEST');
    });

    it('never overwrites: two uploads to one requested path get different keys and both stay readable', async () => {
      const key = fileKeyOf('content', host, 'same/path.txt');
      const a = await put(key, Buffer.from('first'), { contentType: 'text/plain' });
      const b = await put(key, Buffer.from('second'), { contentType: 'text/plain' });
      expect(a.objectId).to.not.equal(b.objectId);
      expect(a.key.path).to.not.equal(b.key.path);
      expect(a.originalPath).to.equal(b.originalPath);
      expect((await readAll((await store.get(a.key)).stream)).toString()).to.equal('first');
      expect((await readAll((await store.get(b.key)).stream)).toString()).to.equal('second');
    });

    it('deletes: later reads answer NOT_FOUND, stat null, a second delete false', async () => {
      const info = await put(fileKeyOf('tmp', host, 'doomed.txt'), Buffer.from('bye'));
      expect(await store.delete(info.key)).to.equal(true);
      expectAppError(await rejection(store.get(info.key)), 'NOT_FOUND');
      expect(await store.stat(info.key)).to.equal(null);
      expect(await store.delete(info.key)).to.equal(false);
    });

    it('answers NOT_FOUND for keys that name no stored file', async () => {
      const info = await put(fileKeyOf('tmp', host, 'real.txt'), Buffer.from('x'));
      for (const key of [
        fileKeyOf('tmp', host, 'real.txt'), // the requested path, not the stored one
        fileKeyOf('tmp', host, `${info.objectId}/other.txt`), // right object id, wrong path
        fileKeyOf('content', host, info.key.path), // other space
        fileKeyOf('tmp', `${host}x`, info.key.path), // other host
        fileKeyOf('tmp', host, '01ARZ3NDEKTSV4RRFFQ69G5FAV/real.txt'), // an id never given
      ]) {
        expectAppError(await rejection(store.get(key)), 'NOT_FOUND');
        expect(await store.stat(key)).to.equal(null);
        expect(await store.delete(key)).to.equal(false);
      }
      expect(await store.stat(info.key)).to.not.equal(null);
    });

    it('records the uploader with the file, any user id included (CONTRACT §20 "Files in tmp/")', async () => {
      for (const uploader of ['sportseditor', 'Zoë Müller/ext:42', 'x'.repeat(200)]) {
        const info = await put(fileKeyOf('tmp', host, 'who.txt'), Buffer.from('who'), { uploader });
        expect(info.uploader).to.equal(uploader);
        expect((await store.stat(info.key))?.uploader).to.equal(uploader);
        expect((await store.get(info.key)).info.uploader).to.equal(uploader);
      }
      expect(
        await rejection(store.put(fileKeyOf('tmp', host, 'anon.txt'), Readable.from([Buffer.from('x')]), { maxBytes: LIMIT, uploader: '' })),
      ).to.be.instanceOf(TypeError);
    });

    it('keeps odd but legal characters of hosts and paths', async () => {
      const path = "dir/ü ber%20x+y&z=1;,$!'()*~@:.txt";
      const oddHost = 'editor@example.com:8080';
      const info = await put(fileKeyOf('content', oddHost, path), Buffer.from('odd'));
      expect(info.originalPath).to.equal(path);
      expect(await store.stat(info.key)).to.deep.equal(info);
      expect((await readAll((await store.get(info.key)).stream)).toString()).to.equal('odd');
      expect(await store.delete(info.key)).to.equal(true);
    });

    it('answers 413 at maxBytes while streaming an upload of unknown length, and leaves nothing behind', async () => {
      const tooBigHost = `${host}-413`;
      // A limit above one S3 part, so S3 has started a multipart upload when the limit hits.
      const maxBytes = 20 * MiB;
      const src = generated(30 * MiB);
      const e = await rejection(store.put(fileKeyOf('tmp', tooBigHost, 'big.bin'), src.stream, { uploader: UPLOADER, maxBytes }));
      expectAppError(e, 'PAYLOAD_TOO_LARGE');
      expect((e as AppError).http).to.equal(413);
      // The body is left to the caller (to drain or close), not destroyed.
      expect(src.stream.destroyed).to.equal(false);
      src.stream.destroy();
      expect(await h.leftovers('tmp', tooBigHost)).to.deep.equal([]);

      // Exactly maxBytes is refused too ("must be smaller than it"); one byte less is taken.
      const small = fileKeyOf('tmp', tooBigHost, 'edge.bin');
      expectAppError(await rejection(store.put(small, generated(1000).stream, { uploader: UPLOADER, maxBytes: 1000 })), 'PAYLOAD_TOO_LARGE');
      expect(await h.leftovers('tmp', tooBigHost)).to.deep.equal([]);
      const ok = await store.put(small, generated(999).stream, { uploader: UPLOADER, maxBytes: 1000 });
      expect(ok.length).to.equal(999);
      await store.delete(ok.key);

      // A declared length at the limit is refused before a byte is read.
      const unread = generated(5000);
      expectAppError(await rejection(store.put(small, unread.stream, { uploader: UPLOADER, maxBytes: 1000, declaredLength: 5000 })), 'PAYLOAD_TOO_LARGE');
      expect(unread.stream.readableLength).to.equal(0);
      expect(await h.leftovers('tmp', tooBigHost)).to.deep.equal([]);
    });

    it('stores nothing when the body fails part-way (a client that went away)', async () => {
      const failHost = `${host}-fail`;
      const src = generated(30 * MiB, { failAt: 18 * MiB });
      const e = await rejection(store.put(fileKeyOf('tmp', failHost, 'cut.bin'), src.stream, { uploader: UPLOADER, maxBytes: LIMIT }));
      expect((e as Error).message).to.equal('client went away');
      expect(await h.leftovers('tmp', failHost)).to.deep.equal([]);
    });

    it('refuses every traversal form, in fileKeyOf and in the store (BAD_REQUEST)', async () => {
      for (const [space, badHost, path] of TRAVERSALS) {
        const label = JSON.stringify([space, badHost, path.length > 40 ? `${path.slice(0, 40)}...` : path]);
        let err: unknown;
        try {
          fileKeyOf(space, badHost, path);
        } catch (e) {
          err = e;
        }
        expect(err, label).to.be.instanceOf(AppError);
        expect((err as AppError).code, label).to.equal('BAD_REQUEST');
        // A key object made by hand does not get past the store either.
        const forged = { space, host: badHost, path } as unknown as FileKey;
        expectAppError(await rejection(store.put(forged, Readable.from([Buffer.from('x')]), { uploader: UPLOADER, maxBytes: LIMIT })), 'BAD_REQUEST');
        expectAppError(await rejection(store.get(forged)), 'BAD_REQUEST');
        expectAppError(await rejection(store.delete(forged)), 'BAD_REQUEST');
      }
    });

    it('sniffs the type from the data (a PNG header is image/png), else keeps the declared type', async () => {
      const png = await put(fileKeyOf('tmp', host, 'pic.bin'), Buffer.concat([TINY_PNG, randomBytes(2000)]), { contentType: 'application/octet-stream' });
      expect(png.mimeType).to.equal('image/png');
      expect((await store.stat(png.key))!.mimeType).to.equal('image/png');
      const text = await put(fileKeyOf('tmp', host, 'a.txt'), Buffer.from('plain words'), { contentType: 'text/plain; charset=utf-8' });
      expect(text.mimeType).to.equal('text/plain; charset=utf-8');
      const none = await put(fileKeyOf('tmp', host, 'b'), Buffer.from('plain words'));
      expect(none.mimeType).to.equal('application/octet-stream');
    });

    it('sweeps expired tmp files and keeps content files and fresh tmp files', async () => {
      const sweepHost = `${host}-sweep`;
      const tmp = await put(fileKeyOf('tmp', sweepHost, 'old.txt'), Buffer.from('old'));
      const content = await put(fileKeyOf('content', sweepHost, 'kept.txt'), Buffer.from('kept'));
      expect(await store.sweepExpired(Date.now())).to.equal(0);
      expect(await store.stat(tmp.key)).to.not.equal(null);
      const deleted = await store.sweepExpired(Date.now() + TTL_SECONDS * 1000 + 2000);
      expect(deleted).to.be.at.least(1);
      expect(await store.stat(tmp.key)).to.equal(null);
      expectAppError(await rejection(store.get(tmp.key)), 'NOT_FOUND');
      expect((await readAll((await store.get(content.key)).stream)).toString()).to.equal('kept');
      expect(await h.leftovers('tmp', sweepHost)).to.deep.equal([]);
    });

    if (kind === 's3') {
      it('records what the S3 server answered to the lifecycle rule on tmp/ (S3Proxy: NotImplemented, so unsupported)', async () => {
        const s3 = store as S3FileStore;
        const rule = s3.lifecycleRule;
        console.log(`      lifecycle rule on tmp/: ${rule}`);
        // S3Proxy 4.1, which the harness starts, answers NotImplemented (measured; README "S3 for tests").
        if ((await ensureTestS3()).own) expect(rule).to.equal('unsupported');
        if (rule === 'set') {
          // the server holds the rule the store asked for
          const config = await s3.client.getBucketLifecycle(s3.bucket);
          expect(JSON.stringify(config)).to.contain('expire-tmp').and.to.contain('tmp/');
        } else {
          expect(rule).to.equal('unsupported');
          // asked again, the server still refuses a lifecycle rule
          const e = await rejection(
            s3.client.setBucketLifecycle(s3.bucket, { Rule: [{ ID: 'probe', Status: 'Enabled', Filter: { Prefix: 'tmp/' }, Expiration: { Days: 1 } }] }),
          );
          expect((e as { code?: string }).code, String(e)).to.be.oneOf(['NotImplemented', 'AccessDenied']);
        }
      });
    }
  });
}
