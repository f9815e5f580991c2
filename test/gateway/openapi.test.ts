import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import openapiTS from 'openapi-typescript';
import { Client, startTestPlatform } from '../support/platform.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const bin = (name: string) => join(ROOT, 'node_modules/.bin', name);

/**
 * The served OpenAPI document (CONTRACT §18) as outside tools take it: Redocly's recommended
 * ruleset finds no error in it, and a client generated from it with openapi-typescript (types)
 * and openapi-fetch compiles with tsc and creates and reads content on a real platform. (That
 * every answer fits the document is checked for the whole suite: test/support/openapi-check.ts.)
 */
describe('OpenAPI document: lint and a generated client (CONTRACT §18)', function () {
  this.timeout(120_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let doc: Record<string, unknown>;
  let text: string;
  const dir = join(ROOT, '.cache', `openapi-client-${process.pid}`);

  before(async () => {
    p = await startTestPlatform();
    const r = await new Client(p.base).openApi();
    expect(r.status).to.equal(200);
    text = r.text;
    doc = r.json;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'openapi.json'), text);
  });
  after(async () => {
    await p?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('Redocly lint with the recommended ruleset: no errors (offline: telemetry and update checks off)', async () => {
    const out = await run(bin('redocly'), ['lint', '--config', join(ROOT, 'redocly.yaml'), '--format=json', join(dir, 'openapi.json')], {
      cwd: ROOT,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      maxBuffer: 64 * 1024 * 1024,
    }).catch((e: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`redocly lint failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`.slice(0, 4000));
    });
    const report = JSON.parse(out.stdout) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; severity: string; message: string }[];
    };
    const errors = report.problems.filter((x) => x.severity === 'error');
    expect(errors, JSON.stringify(errors.slice(0, 5))).to.deep.equal([]);
    expect(report.totals.errors).to.equal(0);
  });

  it('the document declares the token scheme, and operations that need it say so', () => {
    const components = doc.components as { securitySchemes: Record<string, unknown> };
    expect(components.securitySchemes.XAuthToken).to.deep.include({ type: 'apiKey', in: 'header', name: 'X-Auth-Token' });
    const paths = doc.paths as Record<string, Record<string, { security: unknown[]; responses: Record<string, unknown> }>>;
    expect(paths['/content-service/content'].post.security).to.deep.equal([{ XAuthToken: [] }]);
    expect(paths['/health'].get.security).to.deep.equal([]);
    expect(paths['/search-service/{collection}/select'].get.security).to.deep.equal([{}, { XAuthToken: [] }]);
    expect(Object.keys(paths['/content-service/content/alias/{ns}/{alias}'].get.responses)).to.include.members(['303', '304', '401', '403', '404']);
    for (const path of ['/health', '/metrics', '/openapi.json', '/content-service/changes']) expect(paths, path).to.have.property(path);
  });

  it('a client generated with openapi-typescript and openapi-fetch compiles (tsc) and creates and reads content', async () => {
    writeFileSync(join(dir, 'api.d.ts'), await openapiTS(doc as never));
    writeFileSync(
      join(dir, 'client.ts'),
      `import createClient from 'openapi-fetch';
import type { paths } from './api.js';

/** One create and one read with the generated client. */
export async function createAndRead(baseUrl: string, token: string): Promise<{ created: number; title: unknown; etag: string | null }> {
  const api = createClient<paths>({ baseUrl, headers: { 'X-Auth-Token': token } });
  const created = await api.POST('/content-service/content', {
    body: { system: { contentType: 'article' }, aspects: { body: { title: 'Generated' } } },
  });
  if (!created.data) throw new Error('create failed: ' + created.response.status);
  const [ns, alias] = created.data.system.id.split('/');
  const rev = Number(/\\/(\\d+)"$/.exec(created.response.headers.get('ETag') ?? '')?.[1]);
  const read = await api.GET('/content-service/content/alias/{ns}/{alias}/{rev}', { params: { path: { ns, alias, rev } } });
  if (!read.data) throw new Error('read failed: ' + read.response.status);
  const body = read.data.aspects.body as { title?: unknown } | undefined;
  return { created: created.response.status, title: body?.title, etag: read.response.headers.get('ETag') };
}
`,
    );
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', noEmit: true, types: [], lib: ['ES2022', 'DOM'] },
        files: ['client.ts'],
      }),
    );
    await run(bin('tsc'), ['-p', join(dir, 'tsconfig.json')], { cwd: dir }).catch((e: { stdout?: string; message: string }) => {
      throw new Error(`the generated client does not compile: ${e.message}\n${e.stdout ?? ''}`.slice(0, 4000));
    });
    const editor = await new Client(p.base).login('editor');
    const mod = (await import(pathToFileURL(join(dir, 'client.ts')).href)) as {
      createAndRead(baseUrl: string, token: string): Promise<{ created: number; title: unknown; etag: string | null }>;
    };
    const got = await mod.createAndRead(p.url, editor.token!);
    expect(got.created).to.equal(201);
    expect(got.title).to.equal('Generated');
    expect(got.etag).to.match(/^W\/".+\/1"$/);
  });
});
