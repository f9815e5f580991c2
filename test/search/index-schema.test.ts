import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { parseSchemaXml } from '../../src/content/search-document.js';
import { learnIndexSchema } from '../../src/adapters/index-schema.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { eventually } from '../support/wait.js';

/**
 * CONTRACT §20 "Search documents": the write-time check uses the collection's schema as the
 * engine's Schema API gives it, not only the bundled one. An engine stand-in answers a schema
 * unlike the bundled one (float and text fields, no *_s).
 */
describe("search documents: the write-time check learns the collection's schema from the engine (CONTRACT §20)", function () {
  this.timeout(60_000);
  let server: http.Server;
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let editor: Client;
  const schema = {
    fields: [
      { name: 'id', type: 'string', multiValued: false, required: true },
      { name: 'root', type: 'string', multiValued: false },
      { name: 'version', type: 'plong', multiValued: false },
    ],
    dynamicFields: [
      { name: '*_f', type: 'pfloat' },
      { name: '*_t', type: 'text', multiValued: true },
    ],
    fieldTypes: [
      { name: 'string', class: 'solr.StrField' },
      { name: 'plong', class: 'solr.LongPointField' },
      { name: 'pfloat', class: 'solr.FloatPointField' },
      { name: 'text', class: 'solr.TextField' },
    ],
  };

  before(async () => {
    server = http.createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      res.writeHead(path.endsWith('/schema') || path.endsWith('/admin/ping') ? 200 : 404, { 'Content-Type': 'application/json' });
      res.end(
        JSON.stringify(
          path.endsWith('/schema') ? { responseHeader: { status: 0 }, schema: { name: 'custom', version: 1.7, uniqueKey: 'id', ...schema } } : { status: 'OK' },
        ),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    p = await startTestPlatform({ SOLR_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/solr` }, ['web', 'actors']);
    editor = await new Client(p.base).login('editor');
  });
  const made: { id: string; etag: string }[] = [];
  after(async () => {
    // Deleted, so that no later suite's indexer sends them to a Solr with the bundled schema.
    for (const c of made) await editor.remove(c.id, c.etag);
    await p?.stop();
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
    // Later suites in this process check against the bundled schema again.
    const bundled = readFileSync(new URL('../../tools/solr/configsets/content/conf/schema.xml', import.meta.url), 'utf8');
    await learnIndexSchema({ schema: async () => parseSchemaXml(bundled) }, pino({ level: 'silent' })).firstAttempt;
  });

  it("accepts the engine's own fields and refuses what the bundled schema would take", async () => {
    const create = (doc: Record<string, unknown>) => editor.create({ system: { contentType: 'article' }, aspects: { svcSolrDocument: doc } });
    const ok = await eventually(async () => {
      const r = await create({ price_f: 1.5, body_t: ['words', 'more words'] });
      expect(r.status, r.text).to.equal(201);
      return r;
    });
    made.push({ id: ok.json.system.id, etag: ok.headers.get('etag')! });
    expect(ok.status).to.equal(201);
    const wrongType = await create({ price_f: 'cheap' });
    expect(wrongType.status).to.equal(400);
    expect(wrongType.json.extraInfo.field).to.equal('price_f');
    const notInEngine = await create({ headline_s: 'a field of the bundled schema only' });
    expect(notInEngine.status).to.equal(400);
    expect(notInEngine.json.extraInfo.field).to.equal('headline_s');
  });
});
