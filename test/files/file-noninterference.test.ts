import { expect } from 'chai';
import fc from 'fast-check';
import { newObjectId } from '../../src/adapters/file-store.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { rawRequest, type RawResponse } from '../support/raw-http.js';
import { ensureTestS3 } from '../support/s3.js';

/**
 * Non-interference of the file service and file delivery (CONTRACT §20: an answer to a caller
 * is the same whether or not things that caller may not reach exist), on the disk store and on
 * S3. Generated requests (file addresses, info, HEAD, DELETE and uploads; delivery by version
 * and by alias; ranges, If-None-Match with other users' object ids, paths in content) from an
 * anonymous caller, an invalid token, the reader and the sportseditor are sent twice: in state
 * A, then again after the editor has added what none of them may reach: tmp files (also under
 * `tmp/reader/` and `tmp/sportseditor/`), files under a content host that does not exist, and,
 * for the anonymous caller and the sportseditor, culture files and a culture content version
 * mapping them. Status, body and the headers that matter must not change.
 *
 * Requests name the forbidden objects by their real ids in state B, and by ids of the same
 * shape that were never issued in state A (a caller who guesses); answers are compared with
 * the real ids written back to the guessed ones. Contents themselves exist in both states: a
 * content's existence is not hidden (its direct read answers 403 rather than 404, CONTRACT §12),
 * only what lies behind its permission is. No DELETE names a file the caller may delete, so
 * the first run leaves the second one the same state to answer from.
 *
 * NONINTERFERENCE_SEED reproduces a run; NONINTERFERENCE_RUNS sets the number of requests.
 */

const SEED = Number(process.env.NONINTERFERENCE_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.NONINTERFERENCE_RUNS ?? 600);
const TYPE = 'niMemo';

type Caller = 'anonymous' | 'badtoken' | 'reader' | 'sportseditor';
interface Req {
  caller: Caller;
  method: 'GET' | 'HEAD' | 'DELETE' | 'POST';
  /** A path template: `{name}` is replaced by the value of the current state. */
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** Headers whose value an answer must not change (X-Request-Id and Date differ anyway). */
const COMPARED = [
  'content-type',
  'content-length',
  'content-range',
  'content-disposition',
  'etag',
  'cache-control',
  'location',
  'allow',
  'accept-ranges',
  'x-content-type-options',
  'content-security-policy',
  'retry-after',
  'x-original-path',
];

/** Names only the culture state stands behind: the reader (Read everywhere) may reach it, so its requests never name it. */
const CULTURE_NAMES = ['{cul}', '{culFileId}', '{culHtmlId}', '{culV2}', '{T}/culture'];

function requestArb(caller: Caller): fc.Arbitrary<Req> {
  const own = caller === 'reader' || caller === 'sportseditor' ? [`tmp/${caller}/{ownId}/own.txt`] : [];
  // Files nobody calling may reach once they exist, and twins of them that never exist.
  const forbidden = [
    'tmp/editor/{secretId}/secret.txt',
    'tmp/reader/{plantedReaderId}/planted.txt',
    'tmp/sportseditor/{plantedSportsId}/planted.txt',
    'content/{future}/{futureFileId}/x.txt',
    'content/{cul}/{culFileId}/c.txt',
    'content/{cul}/{culHtmlId}/c.html',
  ];
  const missing = [
    'tmp/editor/{missingId}/secret.txt',
    'tmp/{caller}/{missingId}/own.txt',
    'content/{cul}/{missingId}/c.txt',
    'content/{future}/{missingId}/x.txt',
    'content/{pub}/{missingId}/pub.txt',
  ];
  const readable = ['content/{pub}/{pubFileId}/pub.txt', 'content/{spo}/{spoFileId}/s.txt'];
  const segment = fc.oneof(
    fc.constantFrom('tmp', 'content', 'editor', 'reader', '{cul}', '{future}', '{secretId}', '{missingId}', 'secret.txt', '..', '%2e%2e', '%2F', 'info'),
    fc.string({ minLength: 1, maxLength: 8 }).map(encodeURIComponent),
  );
  const junk = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => s.join('/'));
  const address = fc.oneof(fc.constantFrom(...forbidden, ...missing, ...readable, ...own), junk);
  // DELETE never names a file the caller may delete (its own, or sports files for the sportseditor).
  const deletable = fc.oneof(fc.constantFrom(...forbidden, ...missing, 'content/{pub}/{pubFileId}/pub.txt'), junk);
  const uploadTo = fc.oneof(
    fc.constantFrom(
      'tmp',
      'tmp/{caller}/up.txt',
      'tmp/editor/up.txt',
      'content/{cul}/up.txt',
      'content/{spo}/up.txt',
      'content/{pub}/up.txt',
      'content/{future}/up.html',
      'content/{future}',
    ),
    junk,
  );
  const inPath = fc.oneof(
    fc.constantFrom('pub.txt', 'page.html', 's.txt', 'c.txt', 'c.html', 'missing.txt'),
    fc.string({ minLength: 1, maxLength: 6 }).map(encodeURIComponent),
  );
  const deliveryTarget = fc.oneof(
    fc.constantFrom(
      'version/{pubVersion}',
      'alias/{T}/pub',
      'alias/contentid/{pub}',
      'version/{spoVersion}',
      'alias/{T}/sports',
      'version/{culV1}',
      'version/c:{cul}:{culV2}',
      'alias/{T}/culture',
      'alias/contentid/{cul}',
      'version/c:{cul}:{missingId}',
      'alias/{T}/nothing',
    ),
    junk,
  );
  const range = fc.oneof(fc.constant(undefined), fc.constantFrom('bytes=0-3', 'bytes=-2', 'bytes=2-', 'bytes=100-', 'bytes=0-0,2-3', 'bytes=5-1'));
  const inm = fc.oneof(fc.constant(undefined), fc.constantFrom('"{secretId}"', '"{culFileId}"', '"{futureFileId}"', '"{pubFileId}"', '"{missingId}"', '*'));
  const headers = fc.record({ range, inm }).map(({ range: r, inm: i }) => ({ ...(r ? { Range: r } : {}), ...(i ? { 'If-None-Match': i } : {}) }));

  const fileRead = fc
    .record({ method: fc.constantFrom('GET' as const, 'HEAD' as const), info: fc.boolean(), address, headers })
    .map((r): Req => ({ caller, method: r.method, path: `/file-service/file/${r.info ? 'info/' : ''}${r.address}`, headers: r.headers }));
  const fileDelete = deletable.map((a): Req => ({ caller, method: 'DELETE', path: `/file-service/file/${a}`, headers: {} }));
  const upload = fc
    .record({ to: uploadTo, type: fc.constantFrom('text/plain', 'text/html', 'image/svg+xml') })
    .map((r): Req => ({ caller, method: 'POST', path: `/file-service/file/${r.to}`, headers: { 'Content-Type': r.type }, body: 'uploaded' }));
  const deliver = fc
    .record({ method: fc.constantFrom('GET' as const, 'HEAD' as const), target: deliveryTarget, path: inPath, headers })
    .map((r): Req => ({ caller, method: r.method, path: `/file-delivery-service/${r.target}/${r.path}`, headers: r.headers }));
  return fc
    .oneof({ weight: 4, arbitrary: fileRead }, { weight: 2, arbitrary: fileDelete }, { weight: 1, arbitrary: upload }, { weight: 4, arbitrary: deliver })
    .filter((r) => caller !== 'reader' || !CULTURE_NAMES.some((n) => r.path.includes(n)));
}

/** Callers with a token get most requests: without one, nearly every file answer is 401. */
const arb = fc
  .oneof(
    { weight: 1, arbitrary: fc.constantFrom<Caller>('anonymous', 'badtoken') },
    { weight: 4, arbitrary: fc.constantFrom<Caller>('reader', 'sportseditor') },
  )
  .chain(requestArb);

for (const kind of ['disk', 's3'] as const) {
  describe(`file service and delivery: answers do not depend on what the caller may not reach, ${kind} store (CONTRACT §20)`, function () {
    this.timeout(180_000);
    let p: Awaited<ReturnType<typeof startTestPlatform>>;
    let port = 0;
    const tokens: Partial<Record<Caller, string>> = { badtoken: 'not-a-token' };
    const T = `ni${kind}${Date.now().toString(36)}`;
    /** Values both states share. */
    const fixed: Record<string, string> = { T, future: newObjectId(), missingId: newObjectId() };
    /** Forbidden objects: guessed (never issued) ids in state A, the real ones in state B. */
    const guessed: Record<string, string> = {};
    const real: Record<string, string> = {};
    let editor: Client;

    before(async () => {
      const overrides: Record<string, string> = {};
      if (kind === 's3') Object.assign(overrides, (await ensureTestS3()).env, { S3_BUCKET: `noninterference-${Date.now().toString(36)}` });
      p = await startTestPlatform(overrides);
      port = Number(new URL(p.url).port);
      editor = await new Client(p.base).login('editor');
      const reader = await new Client(p.base).login('reader');
      const sports = await new Client(p.base).login('sportseditor');
      tokens.reader = reader.token;
      tokens.sportseditor = sports.token;

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
      Object.assign(fixed, { pub: pub.key, spo: spo.key, cul: cul.key });

      const objectId = (r: { status: number; text: string; json: { URI: string } }) => {
        expect(r.status, r.text).to.equal(201);
        return r.json.URI.split('/')[3];
      };
      const pubFile = await editor.upload(`content/${pub.key}/pub.txt`, 'public bytes', 'text/plain');
      const pubPage = await editor.upload(`content/${pub.key}/page.html`, '<p>public page</p>', 'text/html');
      const spoFile = await sports.upload(`content/${spo.key}/s.txt`, 'sports bytes', 'text/plain');
      fixed.pubFileId = objectId(pubFile);
      fixed.spoFileId = objectId(spoFile);
      for (const [c, who] of [
        [reader, 'reader'],
        [sports, 'sportseditor'],
      ] as const) {
        fixed[`ownId:${who}`] = objectId(await c.upload(`tmp/${who}/own.txt`, `${who} own`, 'text/plain'));
      }
      const files = (m: Record<string, string>) => ({ files: Object.fromEntries(Object.entries(m).map(([k, v]) => [k, { fileUri: v, filePath: k }])) });
      const up = await editor.update(
        `contentid/${pub.key}`,
        {
          aspects: { body: { title: 'pub' }, svcFiles: files({ 'pub.txt': pubFile.json.URI, 'page.html': pubPage.json.URI }) },
          operations: [{ _type: 'svcAssignToViews', views: ['svcPublic'] }],
        },
        pub.etag,
      );
      expect(up.status, up.text).to.equal(200);
      fixed.pubVersion = up.json.system!.version!;
      const sp = await sports.update(`contentid/${spo.key}`, { aspects: { svcFiles: files({ 's.txt': spoFile.json.URI }) } }, spo.etag);
      expect(sp.status, sp.text).to.equal(200);
      fixed.spoVersion = sp.json.system!.version!;
      fixed.culV1 = (await editor.readContent(`contentid/${cul.key}`)).json.system!.version!;
      fixed.culEtag = cul.etag;
      for (const name of ['secretId', 'plantedReaderId', 'plantedSportsId', 'futureFileId', 'culFileId', 'culHtmlId', 'culV2']) guessed[name] = newObjectId();
    });
    after(async () => p?.stop());

    /** The forbidden state: the editor's files where none of the callers may reach them. */
    async function addForbidden(): Promise<void> {
      const id = async (where: string, body: string, type = 'text/plain') => {
        const r = await editor.upload(where, body, type);
        expect(r.status, r.text).to.equal(201);
        return r.json.URI.split('/')[3];
      };
      real.secretId = await id('tmp/editor/secret.txt', 'editor secret');
      real.plantedReaderId = await id('tmp/reader/planted.txt', 'planted for the reader');
      real.plantedSportsId = await id('tmp/sportseditor/planted.txt', 'planted for the sportseditor');
      real.futureFileId = await id(`content/${fixed.future}/x.txt`, 'early file');
      real.culFileId = await id(`content/${fixed.cul}/c.txt`, 'culture bytes');
      real.culHtmlId = await id(`content/${fixed.cul}/c.html`, '<p>culture</p>', 'text/html');
      const u = await editor.update(
        `contentid/${fixed.cul}`,
        {
          aspects: {
            svcFiles: {
              files: {
                'c.txt': { fileUri: `content://${fixed.cul}/${real.culFileId}/c.txt`, filePath: 'c.txt' },
                'c.html': { fileUri: `content://${fixed.cul}/${real.culHtmlId}/c.html`, filePath: 'c.html' },
              },
            },
          },
        },
        fixed.culEtag,
      );
      expect(u.status, u.text).to.equal(200);
      real.culV2 = u.json.system!.version!.split(':')[2];
    }

    function resolve(r: Req, state: Record<string, string>): { path: string; headers: Record<string, string> } {
      const values: Record<string, string> = { ...fixed, ...state, caller: r.caller, ownId: fixed[`ownId:${r.caller}`] ?? fixed.missingId };
      const fill = (s: string) => s.replace(/\{(\w+)\}/g, (m, name: string) => values[name] ?? m);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(r.headers)) headers[k] = fill(v);
      const token = tokens[r.caller];
      if (token) headers['X-Auth-Token'] = token;
      return { path: fill(r.path), headers };
    }

    /** What an answer shows, real ids written back to the guessed ones; an upload's new id and times masked. */
    function observed(r: Req, res: RawResponse): string {
      let text = JSON.stringify({ status: res.status, headers: Object.fromEntries(COMPARED.map((h) => [h, res.headers[h] ?? null])), body: res.body });
      for (const [name, id] of Object.entries(real)) text = text.split(id).join(guessed[name]);
      if (r.method === 'POST') text = text.replace(/[0-9A-HJKMNP-TV-Z]{26}/g, '<new id>').replace(/(Time\\":)\d+/g, '$1<t>');
      return text;
    }

    async function sendAll(reqs: Req[], state: Record<string, string>): Promise<string[]> {
      const out: string[] = new Array(reqs.length);
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < reqs.length) {
            const i = next++;
            const { path, headers } = resolve(reqs[i], state);
            out[i] = observed(reqs[i], await rawRequest(port, { method: reqs[i].method, path, headers, body: reqs[i].body }));
          }
        }),
      );
      return out;
    }

    it('every generated request answers the same before and after the forbidden files and versions exist', async () => {
      console.log(`    ${kind}: non-interference seed ${SEED} (NONINTERFERENCE_SEED=${SEED} reproduces it), ${RUNS} requests`);
      const requests = fc.sample(arb, { seed: SEED, numRuns: RUNS });
      const before = await sendAll(requests, guessed);
      await addForbidden();
      const after = await sendAll(requests, real);
      const problems: string[] = [];
      requests.forEach((r, i) => {
        if (before[i] !== after[i])
          problems.push(
            `${r.caller} ${r.method} ${r.path} ${JSON.stringify(r.headers)}\n    before: ${before[i].slice(0, 300)}\n    after:  ${after[i].slice(0, 300)}`,
          );
      });
      const statuses = new Map<string, number>();
      for (const o of before) {
        const s = o.slice(10, 13);
        statuses.set(s, (statuses.get(s) ?? 0) + 1);
      }
      console.log(
        `    answers by status: ${[...statuses]
          .sort()
          .map(([s, n]) => `${s}×${n}`)
          .join(' ')}`,
      );
      if (problems.length)
        throw new Error(
          `${problems.length} answer(s) changed when files the caller may not reach were added (seed ${SEED}):\n  ${problems.slice(0, 8).join('\n  ')}`,
        );
      // The run reached each kind of answer: files served, refused, hidden and uploaded.
      for (const s of ['200', '201', '401', '403', '404']) expect(statuses.get(s) ?? 0, `answers with ${s}`).to.be.greaterThan(0);
    });
  });
}
