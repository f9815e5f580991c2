import { expect } from 'chai';
import sharp from 'sharp';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Opt-in public caching (issue 21): with PUBLIC_CACHE_MAX_AGE set, delivery by version of
 * content on a public view, read without a token, answers `public, max-age=<n>, immutable`
 * (raw files and renditions alike); anything read with a token, any alias read, and any
 * content not on a public view stay private.
 */
describe('public caching of delivery, opt-in (PUBLIC_CACHE_MAX_AGE)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  let pubVersion: string;
  let privVersion: string;
  let make: (views: string[], offTime?: number) => Promise<string>;

  before(async () => {
    p = await startTestPlatform({ PUBLIC_CACHE_MAX_AGE: '600' });
    editor = await new Client(p.base).login('editor');
    const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#3a6' } })
      .png()
      .toBuffer();
    make = async (views: string[], offTime?: number) => {
      const up = await editor.upload('content/owner/pic.png', png, 'image/png');
      expect(up.status, up.text).to.equal(201);
      const c = await editor.create({
        system: { contentType: 'article' },
        aspects: { body: { title: 'cached' }, svcFiles: { files: { 'pic.png': { fileUri: up.json.URI, filePath: 'pic.png' } } } },
        operations: [
          { _type: 'svcSetAlias', namespace: 'pubcache', alias: offTime ? 'timed' : views.length ? 'pub' : 'priv' },
          ...(views.length ? [{ _type: 'svcAssignToViews', views }] : []),
          ...(offTime
            ? [{ _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { offTime: new Date(offTime).toISOString() } } } } }]
            : []),
        ],
      });
      expect(c.status, c.text).to.equal(201);
      return c.json.system.version as string;
    };
    pubVersion = await make(['svcPublic']);
    privVersion = await make([]);
  });

  it('no longer than the time state keeps it public: max-age ends at the offTime, not immutable (files and renditions)', async () => {
    // A shared cache kept such an answer for PUBLIC_CACHE_MAX_AGE whatever the offTime, and
    // served the bytes after the platform itself answered 401 (found in a security review).
    const offTime = Date.now() + 60_000;
    const timed = await make(['svcPublic'], offTime);
    for (const path of [`version/${timed}/pic.png`, `version/${timed}/pic.png?w=20&fm=webp`]) {
      const asked = Date.now();
      const [status, ...rest] = (await cc(path)).split(' ');
      const answered = Date.now();
      const header = rest.join(' ');
      expect(status, path).to.equal('200');
      // The seconds left to the offTime when the answer was made (bounds taken around the request, not a guess of its speed).
      const maxAge = Number(/^public, max-age=(\d+)$/.exec(header)?.[1]);
      expect(maxAge, header).to.be.within(Math.floor((offTime - answered) / 1000), Math.ceil((offTime - asked) / 1000));
    }
  });
  after(async () => p?.stop());

  const cc = async (path: string, token?: string) => {
    const r = await fetch(`${p.url}/file-delivery-service/${path}`, { headers: token ? { 'X-Auth-Token': token } : {} });
    await r.arrayBuffer();
    return `${r.status} ${r.headers.get('cache-control')}`;
  };

  it('token-less versioned reads of public content: public, max-age, immutable (files and renditions)', async () => {
    expect(await cc(`version/${pubVersion}/pic.png`)).to.equal('200 public, max-age=600, immutable');
    expect(await cc(`version/${pubVersion}/pic.png?w=20&fm=webp`)).to.equal('200 public, max-age=600, immutable');
  });

  it('never for a read with a token, an alias, or content not on a public view', async () => {
    expect(await cc(`version/${pubVersion}/pic.png`, editor.token!)).to.equal('200 private, no-transform, max-age=31536000');
    expect(await cc(`version/${pubVersion}/pic.png?w=20`, editor.token!)).to.equal('200 private, no-transform, max-age=31536000');
    expect(await cc('alias/pubcache/pub/pic.png')).to.equal('200 private, no-transform, no-cache');
    expect(await cc(`version/${privVersion}/pic.png`, editor.token!)).to.equal('200 private, no-transform, max-age=31536000');
    expect((await cc(`version/${privVersion}/pic.png`)).split(' ')[0]).to.equal('401');
    // kept privately for the token it was decided for only (a browser two users share)
    const r = await fetch(`${p.url}/file-delivery-service/version/${privVersion}/pic.png`, { headers: { 'X-Auth-Token': editor.token! } });
    await r.arrayBuffer();
    expect(r.headers.get('vary')).to.equal('X-Auth-Token');
  });
});
