import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import * as Minio from 'minio';
import { freePort } from '../../src/dev/redis-server.js';
import { startS3Server, type S3ServerHandle } from '../../src/dev/s3-server.js';
import { startSolr, type SolrHandle } from '../../src/dev/solr-server.js';
import type { Answer } from '../../src/client/index.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually, until } from '../support/wait.js';
import { report } from './report.js';

/** How long Solr stays down (issue: a minute; FAULT_SOLR_DOWN_S shortens it for a quick run). */
const SOLR_DOWN_S = Number(process.env.FAULT_SOLR_DOWN_S ?? 60);

const bump = (m: Record<string, number>, k: string | number) => (m[k] = (m[k] ?? 0) + 1);

describe(`fault: Solr down for ${SOLR_DOWN_S} s during writes and searches`, function () {
  this.timeout((SOLR_DOWN_S + 180) * 1000);
  let dir: string;
  let solr: SolrHandle;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fault-solr-'));
    const port = await freePort();
    solr = await startSolr({ dataDir: dir, port });
    p = await startTestPlatform({ SOLR_URL: solr.url });
  });
  after(async () => {
    await p?.stop();
    await solr?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes go on, searches answer 503, and every change is indexed once Solr is back', async () => {
    const editor = await new Client(p.base).login('editor');
    const type = `solrdown${Date.now()}`;
    const created: string[] = [];
    const writes: Record<string, number> = {};
    const searches: Record<string, number> = {};
    let running = true;
    const writer = (async () => {
      while (running) {
        const r = await editor.create({ system: { contentType: type }, aspects: { body: { title: 'x' } } });
        bump(writes, r.status);
        if (r.status === 201) created.push(r.json.system.version);
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    const search = () => editor.req('GET', `${p.url}/search-service/content/select?${new URLSearchParams({ q: `svc_type_s:${type}`, rows: '0' })}`);
    await until(async () => created.length > 50, 20_000, 'writes to start');
    const port = Number(new URL(solr.url).port);
    await solr.stop();
    const downAt = Date.now();
    while (Date.now() - downAt < SOLR_DOWN_S * 1000) {
      bump(searches, (await search()).status);
      await new Promise((res) => setTimeout(res, 500));
    }
    solr = await startSolr({ dataDir: dir, port });
    const upAt = Date.now();
    await new Promise((res) => setTimeout(res, 2000));
    running = false;
    await writer;
    await eventually(async () => {
      const r = await search();
      expect(r.status).to.equal(200);
      expect(r.json.response.numFound).to.equal(created.length);
    }, 60_000);
    const caughtUp = Date.now() - upAt;
    report('solr-down', {
      command: 'npm run test:faults',
      fault: `embedded Solr stopped for ${SOLR_DOWN_S} s while one client creates content continuously and searches every 0.5 s`,
      writesSaw: writes,
      searchesDuringOutageSaw: searches,
      created: created.length,
      indexedAfterRestart: created.length,
      msFromSolrRestartToAllSearchable: caughtUp,
    });
    expect(Object.keys(writes)).to.deep.equal(['201']);
    expect(searches['503'] ?? 0, JSON.stringify(searches)).to.be.above(0);
    expect(
      Object.keys(searches).every((s) => s === '503'),
      JSON.stringify(searches),
    ).to.equal(true);
  });
});

describe('fault: the S3 store down during uploads', function () {
  this.timeout(180_000);
  let dir: string;
  let s3: S3ServerHandle;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  const bucket = `fault-${Date.now().toString(36)}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fault-s3-'));
    s3 = await startS3Server({ dataDir: dir });
    p = await startTestPlatform({
      S3_ENDPOINT: s3.endPoint,
      S3_PORT: String(s3.port),
      S3_USE_SSL: 'false',
      S3_ACCESS_KEY: s3.accessKey,
      S3_SECRET_KEY: s3.secretKey,
      S3_BUCKET: bucket,
    });
  });
  after(async () => {
    await p?.stop();
    await s3?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('uploads answer 503 while it is down, every acknowledged file reads back intact, no partial object is left', async () => {
    const editor = await new Client(p.base).login('editor');
    const acked: { location: string; sha: string }[] = [];
    const statuses: Record<string, number> = {};
    const events: { at: number; status: number | string }[] = [];
    /** Answers other than 201 that lack the error body (asserted once the load has stopped). */
    const withoutErrorBody: string[] = [];
    let running = true;
    const uploader = async (n: number) => {
      for (let i = 0; running; i++) {
        const data = randomBytes(64 * 1024 + (i % 7) * 1_000_000);
        let r: Answer;
        try {
          r = await editor.req('POST', `${p.url}/file-service/file/content/fault/u${n}-${i}.bin`, { raw: data });
        } catch {
          bump(statuses, 'connection error');
          events.push({ at: Date.now(), status: 'connection error' });
          continue;
        }
        bump(statuses, r.status);
        events.push({ at: Date.now(), status: r.status });
        if (r.status === 201) acked.push({ location: r.headers.get('location')!, sha: createHash('sha256').update(data).digest('hex') });
        else if (!/^\d{5}$/.test(String(r.json?.statusCode))) withoutErrorBody.push(`${r.status} ${r.text.slice(0, 200)}`);
      }
    };
    const load = Promise.all([0, 1, 2, 3].map(uploader));
    await until(async () => acked.length > 20, 30_000, 'uploads to start');
    const port = s3.port;
    const creds = { accessKey: s3.accessKey, secretKey: s3.secretKey };
    process.kill(s3.pid, 'SIGKILL');
    const downAt = Date.now();
    await new Promise((res) => setTimeout(res, 10_000));
    s3 = await startS3Server({ dataDir: dir, port, ...creds });
    const upAt = Date.now();
    const before = acked.length;
    await until(async () => acked.length > before + 20, 60_000, 'uploads to succeed again');
    running = false;
    await load;
    const firstOk = events.find((e) => e.at > upAt && e.status === 201)!.at;
    const during: Record<string, number> = {};
    for (const e of events) if (e.at > downAt && e.at < firstOk) bump(during, e.status);
    for (const a of acked) {
      const r = await fetch(a.location, { headers: { 'X-Auth-Token': editor.token! } });
      expect(r.status, a.location).to.equal(200);
      expect(
        createHash('sha256')
          .update(Buffer.from(await r.arrayBuffer()))
          .digest('hex'),
      ).to.equal(a.sha);
    }
    const client = new Minio.Client({ endPoint: s3.endPoint, port: s3.port, useSSL: false, ...creds });
    const objects: string[] = [];
    /** Objects nobody was told about: stored by S3 while the answer was lost with the connection. */
    const orphans: { name: string; size: number; whole: boolean }[] = [];
    /** Names that are not keys the platform writes. */
    const foreign: string[] = [];
    const ackedIds = new Set(acked.map((a) => a.location.split('/').at(-2)));
    for await (const o of client.listObjectsV2(bucket, '', true) as AsyncIterable<Minio.BucketItem>) {
      objects.push(o.name!);
      const [, , id, file] = o.name!.split('/');
      const m = /^u\d+-(\d+)\.bin$/.exec(file ?? '');
      // S3Proxy's filesystem backend, killed while writing, may leave files of its own
      if (!m) foreign.push(o.name!);
      else if (!ackedIds.has(id)) orphans.push({ name: o.name!, size: o.size!, whole: o.size === 64 * 1024 + (Number(m[1]) % 7) * 1_000_000 });
    }
    report('s3-down', {
      command: 'npm run test:faults',
      fault: 'S3Proxy killed (kill -9) for 10 s while 4 clients upload files of 64 KB to 6 MB continuously',
      uploadsSawDuringOutage: during,
      uploadsSawOverall: statuses,
      recoveryMsAfterRestart: firstOk - upAt,
      acknowledged: acked.length,
      acknowledgedReadBackIntact: acked.length,
      objectsInBucket: objects.length,
      unacknowledgedObjects: orphans,
      namesNotWrittenByThePlatform: foreign,
    });
    // uploads already sent to S3 when it was killed may still be acknowledged; every other answer is 503
    expect(during['503'] ?? 0, `uploads answered 503 during the outage: ${JSON.stringify(during)}`).to.be.above(0);
    expect(
      Object.keys(during).every((s) => s === '503' || s === '201'),
      JSON.stringify(during),
    ).to.equal(true);
    expect(withoutErrorBody, 'every answer other than 201 has the error body').to.deep.equal([]);
    // An object beyond the acknowledged ones can only be a whole upload whose answer was lost
    // with the connection (the client saw 503 and uploads again); never a partial one.
    for (const o of orphans) expect(o.whole, `${o.name} is a whole upload, not a partial one`).to.equal(true);
  });
});
