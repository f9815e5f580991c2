import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { ensureTestS3 } from '../support/s3.js';
import { until } from '../support/wait.js';

/**
 * Files in time, on the running platform: delivery honours the public view's `offTime`
 * (spec svcTimeState, through the platform's injectable clock), and `tmp` files expire after
 * TMP_TTL_SECONDS by the sweeper of a web process (README "Files"), on disk and on S3.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

describe('file delivery and offTime (spec svcTimeState, CONTRACT §8)', function () {
  this.timeout(60_000);
  let p: P;
  let editor: Client;
  let now = Date.now();

  before(async () => {
    p = await startTestPlatform({}, undefined, () => now);
    editor = await new Client(p.base).login('editor');
  });
  after(async () => p?.stop());

  /** A content on svcPublic whose offTime there is `offTime`, with one delivered file. */
  async function published(offTime: number, tag: string) {
    const up = await editor.req('POST', `${p.url}/file-service/file/content/owner/page.css`, {
      raw: Buffer.from(`/* ${tag} */`),
      headers: { 'Content-Type': 'text/plain' },
    });
    expect(up.status, up.text).to.equal(201);
    const c = await editor.create({
      system: { contentType: 'article' },
      aspects: { body: { title: tag }, svcFiles: { files: { 'page.css': { fileUri: up.json.URI, filePath: 'page.css' } } } },
      operations: [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        { _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { offTime: new Date(offTime).toISOString() } } } } },
      ],
    });
    expect(c.status, c.text).to.equal(201);
    const [ns, alias] = (c.json.system.id as string).split('/');
    const delivery = `${p.url}/file-delivery-service`;
    return { byVersion: `${delivery}/version/${c.json.system.version}/page.css`, byAlias: `${delivery}/alias/${ns}/${alias}/page.css` };
  }

  const get = async (url: string, token?: string) => {
    const res = await fetch(url, { headers: token ? { 'X-Auth-Token': token } : {} });
    return { status: res.status, body: await res.text() };
  };

  it('a content whose offTime has passed is refused to anonymous delivery (401), by version and by alias; an editor still gets it', async () => {
    const ended = await published(now - 3600_000, 'ended');
    const ending = await published(now + 3600_000, 'ending');
    for (const url of [ending.byVersion, ending.byAlias])
      expect(await get(url), `before the offTime: ${url}`).to.deep.equal({ status: 200, body: '/* ending */' });
    for (const url of [ended.byVersion, ended.byAlias]) expect((await get(url)).status, `offTime passed: ${url}`).to.equal(401);
    now += 2 * 3600_000;
    try {
      for (const url of [ending.byVersion, ending.byAlias]) {
        const r = await get(url);
        expect(r.status, `after the offTime: ${url}`).to.equal(401);
        expect(r.body).to.not.contain('ending');
        expect(await get(url, editor.token), `an editor reads it: ${url}`).to.deep.equal({ status: 200, body: '/* ending */' });
      }
    } finally {
      now -= 2 * 3600_000;
    }
  });
});

const TTL_S = 60; // the least TMP_TTL_SECONDS takes (config/settings.ts)

/**
 * Uploads a tmp and a content file through one web process, then starts a second one on the
 * same store: its first sweep (one minute after its start, the least interval) finds the tmp
 * file past its TTL. Waits for the file to be gone with a deadline; the content file stays.
 */
async function expires(store: Record<string, string>): Promise<void> {
  const env = { ...store, TMP_TTL_SECONDS: String(TTL_S) };
  const first = await startTestPlatform(env, ['web']);
  let second: P | undefined;
  try {
    const editor = await new Client(first.base).login('editor');
    const upload = async (where: string) => {
      const r = await editor.req('POST', `${first.url}/file-service/file/${where}`, { raw: Buffer.from(where), headers: { 'Content-Type': 'text/plain' } });
      expect(r.status, r.text).to.equal(201);
      return r.headers.get('location')!.slice(first.url.length);
    };
    const tmp = await upload('tmp/editor/draft.txt');
    const kept = await upload(`content/expiry${Date.now()}/kept.txt`);
    second = await startTestPlatform(env, ['web']);
    const status = async (path: string) => (await editor.req('GET', `${second!.url}${path}`)).status;
    expect(await status(tmp), 'the tmp file, through the second process').to.equal(200);
    await until(async () => (await status(tmp)) === 404, 200_000, 'the tmp file to expire');
    expect((await editor.req('GET', `${first.url}${tmp}`)).status, 'gone from the store, for the first process too').to.equal(404);
    expect(await status(kept), 'a content file does not expire').to.equal(200);
  } finally {
    await second?.stop();
    await first.stop();
  }
}

/**
 * Both stores at once: a tmp file on disk and one on S3, each through its own processes, on a
 * Redis of their own: they run beside other files, and some of those flush the run's Redis
 * (test/actors/runtime.test.ts), which took the editor's token away (CI of 2026-11-25).
 */
async function bothStores(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'test-tmp-expiry-'));
  const redis = await startRedisServer({ appendonly: false });
  try {
    const s3 = await ensureTestS3();
    const own = { REDIS_URL: redis.url };
    await Promise.all([expires({ ...own, FILES_DIR: dir }), expires({ ...own, ...s3.env, S3_BUCKET: `expiry-${Date.now().toString(36)}` })]);
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

// A root hook (outside any describe): the expiry starts when the run does, so its minute of
// waiting passes while the other files run instead of adding a minute to every run of the suite.
// The test below reports the outcome; its platforms have their own Redis, file stores and bucket.
let expiry: Promise<void> | undefined;
before(() => {
  expiry = bothStores();
  expiry.catch(() => undefined); // reported by the test, not as an unhandled rejection
});

describe(`tmp files expire on the running platform (TMP_TTL_SECONDS=${TTL_S})`, function () {
  this.timeout(240_000);

  it('a tmp file disappears by itself after the TTL, on disk and on S3; content files stay', async () => {
    // Started with the run (the root hook above): by now most of its minute has passed.
    await expiry;
  });
});
