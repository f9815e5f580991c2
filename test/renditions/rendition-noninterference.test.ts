import { createHash } from 'node:crypto';
import { expect } from 'chai';
import sharp from 'sharp';
import { newObjectId } from '../../src/adapters/file-store.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Renditions decide permissions exactly as raw delivery does (CONTRACT §17, §20): the same
 * requests from an anonymous caller and the sportseditor are answered the same (status, body,
 * the headers that matter) before and after the editor adds what neither may read: an image
 * on a culture content (mapped as a file and as its main image) and renditions of it already
 * made and kept. Requests name the culture version by a guessed id before it exists and by
 * its real id after. Next to them, the same requests without rendition parameters show that
 * a rendition answers 401/403/404 exactly where the raw file does.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;
const TYPE = 'niMemo';
const T = 'rendni';
const COMPARED = ['content-type', 'content-length', 'content-range', 'etag', 'cache-control', 'vary', 'retry-after', 'x-content-type-options'];

const image = (r: number, g: number, b: number) =>
  sharp({ create: { width: 64, height: 48, channels: 3, background: { r, g, b } } })
    .png()
    .toBuffer();

describe('rendition permissions are those of raw delivery (CONTRACT §17, §20)', function () {
  this.timeout(60_000);
  let p: P;
  let editor: Client;
  const tokens: Record<string, string | null> = { anonymous: null };
  const fixed: Record<string, string> = {};
  const real: Record<string, string> = {};
  const guessed: Record<string, string> = { culV2: newObjectId() };

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
    const sports = await new Client(p.base).login('sportseditor');
    tokens.sportseditor = sports.token ?? null;
    const create = async (c: Client, owners: string[] | null, alias: string, views: string[] = []) => {
      const r = await c.create({
        system: { contentType: TYPE },
        aspects: { body: { title: alias } },
        operations: [
          { _type: 'svcSetAlias', namespace: T, alias },
          ...(owners ? [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners } } }] : []),
          ...(views.length ? [{ _type: 'svcAssignToViews', views }] : []),
        ],
      });
      expect(r.status, r.text).to.equal(201);
      return { key: r.json.system.id.split('/')[1] as string, etag: r.headers.get('etag')! };
    };
    const pub = await create(editor, null, 'pub', ['svcPublic']);
    const spo = await create(sports, ['sports'], 'sports');
    const cul = await create(editor, ['culture'], 'culture');
    Object.assign(fixed, { pub: pub.key, spo: spo.key, cul: cul.key, culEtag: cul.etag });
    const files = (m: Record<string, string>) => ({ files: Object.fromEntries(Object.entries(m).map(([k, v]) => [k, { fileUri: v, filePath: k }])) });
    const pubPic = await editor.upload(`content/${pub.key}/pub.png`, await image(10, 200, 10), 'image/png');
    const pubMain = await editor.upload(`content/${pub.key}/main.png`, await image(10, 10, 200), 'image/png');
    const up = await editor.update(
      `contentid/${pub.key}`,
      {
        aspects: { body: { title: 'pub' }, svcFiles: files({ 'pub.png': pubPic.json.URI, 'main.png': pubMain.json.URI }), svcImage: { filePath: 'main.png' } },
        operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
      },
      pub.etag,
    );
    expect(up.status, up.text).to.equal(200);
    fixed.pubVersion = up.json.system!.version!;
    const spoPic = await sports.upload(`content/${spo.key}/s.png`, await image(200, 200, 0), 'image/png');
    const sp = await sports.update(`contentid/${spo.key}`, { aspects: { svcFiles: files({ 's.png': spoPic.json.URI }) } }, spo.etag);
    expect(sp.status, sp.text).to.equal(200);
    fixed.spoVersion = sp.json.system!.version!;
    fixed.culV1 = (await editor.readContent(`contentid/${cul.key}`)).json.system!.version!;
  });
  after(async () => p?.stop());

  /** The forbidden state: a culture image, its main image, and renditions of both already kept. */
  async function addForbidden(): Promise<void> {
    const pic = await editor.upload(`content/${fixed.cul}/c.png`, await image(200, 0, 0), 'image/png');
    expect(pic.status, pic.text).to.equal(201);
    const u = await editor.update(
      `contentid/${fixed.cul}`,
      {
        aspects: {
          svcFiles: { files: { 'c.png': { fileUri: pic.json.URI, filePath: 'c.png' } } },
          svcImage: { filePath: 'c.png', focalPoint: { x: 0.1, y: 0.1 } },
        },
      },
      fixed.culEtag,
    );
    expect(u.status, u.text).to.equal(200);
    real.culV2 = u.json.system!.version!.split(':')[2];
    for (const q of ['w=30', 'rendition=thumbnail', 'w=20&fm=webp']) {
      const r = await fetch(`${p.url}/file-delivery-service/version/c:${fixed.cul}:${real.culV2}/c.png?${q}`, { headers: { 'X-Auth-Token': editor.token! } });
      expect(r.status, q).to.equal(200);
    }
  }

  const targets = [
    'version/{pubVersion}/pub.png',
    'version/{pubVersion}/main.png',
    `alias/${T}/pub/pub.png`,
    `alias/${T}/pub/main.png`,
    'alias/contentid/{pub}/main.png',
    'version/{spoVersion}/s.png',
    `alias/${T}/sports/s.png`,
    'version/{culV1}/c.png',
    'version/c:{cul}:{culV2}/c.png',
    `alias/${T}/culture/c.png`,
    'alias/contentid/{cul}/c.png',
    'version/c:{cul}:{culV2}/missing.png',
  ];
  const queries = ['', '?w=30', '?rendition=thumbnail', '?w=20&fm=webp', '?fm=auto&w=25', '?fit=cover&w=10&h=10', '?w=0', '?fm=gif', '?rendition=nope'];

  async function sendAll(state: Record<string, string>): Promise<{ raw: Record<string, number>; answers: string[] }> {
    const answers: string[] = [];
    const raw: Record<string, number> = {};
    for (const caller of ['anonymous', 'sportseditor']) {
      for (const target of targets) {
        for (const q of queries) {
          const path = target.replace(/\{(\w+)\}/g, (_, n: string) => state[n] ?? fixed[n]);
          const headers: Record<string, string> = { Accept: 'image/webp,*/*' };
          if (tokens[caller]) headers['X-Auth-Token'] = tokens[caller]!;
          const res = await fetch(`${p.url}/file-delivery-service/${path}${q}`, { headers });
          const body = Buffer.from(await res.arrayBuffer());
          const h = COMPARED.map((k) => `${k}=${res.headers.get(k)}`).join(' ');
          // The guessed and the real culture version are the same request to the caller.
          const text = body.toString('latin1').replaceAll(state.culV2, '{culV2}');
          answers.push(`${caller} ${target}${q} → ${res.status} ${h} ${createHash('sha256').update(text).digest('hex')}`);
          if (q === '' || q === '?w=30') raw[`${caller} ${target}${q}`] = res.status;
        }
      }
    }
    return { raw, answers };
  }

  it('same answers with and without the forbidden culture image and its renditions', async () => {
    const a = await sendAll(guessed);
    await addForbidden();
    const b = await sendAll(real);
    expect(b.answers).to.deep.equal(a.answers);
    // A rendition is refused wherever the raw file is (the main image aside: raw 404, rendition 200).
    for (const caller of ['anonymous', 'sportseditor']) {
      for (const target of targets) {
        const rawStatus = b.raw[`${caller} ${target}`];
        const rendition = b.raw[`${caller} ${target}?w=30`];
        if (rawStatus === 401 || rawStatus === 403) expect(rendition, `${caller} ${target}`).to.equal(rawStatus);
        if (rendition === 200) expect([200, 404], `${caller} ${target}`).to.include(rawStatus);
      }
    }
    // Sanity: the public picture and the public main image are delivered to anonymous as renditions.
    expect(b.answers.find((l) => l.startsWith('anonymous version/{pubVersion}/main.png?w=30 → 200'))).to.not.equal(undefined);
    expect(b.answers.find((l) => l.startsWith('anonymous version/{culV1}/c.png?w=30 → 401'))).to.not.equal(undefined);
    expect(b.answers.find((l) => l.startsWith('sportseditor version/{spoVersion}/s.png?w=30 → 200'))).to.not.equal(undefined);
  });
});
