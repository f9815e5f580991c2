import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings } from '../../config/settings.js';
import { createLogger } from '../../src/adapters/log.js';
import { javaAndMavenAvailable, startSolr, type SolrHandle } from '../../src/dev/solr-server.js';
import { startPlatform } from '../../src/main.js';
import { Client, article } from '../support/platform.js';
import { checked } from '../support/openapi-check.js';

describe('indexer: the search engine down during writes (issue 6)', function () {
  this.timeout(240000);
  let solr: SolrHandle;
  let port: number;
  const dir = mkdtempSync(join(tmpdir(), 'outage-solr-'));
  let p: Awaited<ReturnType<typeof startPlatform>>;
  let editor: Client;
  /** The platform's log lines that tell of the indexer taking events over as abandoned. */
  const takeovers: string[] = [];

  before(async () => {
    if (!javaAndMavenAvailable()) throw new Error('needs Java and Maven for the embedded Solr');
    solr = await startSolr({ dataDir: dir });
    port = Number(new URL(solr.url).port);
    p = checked(
      await startPlatform({
        settings: loadSettings({ ...process.env, PORT: '0', PARTITIONS: '8', LEASE_MS: '2000', SOLR_URL: solr.url }),
        log: createLogger('info', {
          write: (line: string) => {
            if (line.includes('indexer took over abandoned events')) takeovers.push(line);
          },
        }),
      }),
    );
    editor = await new Client(`${p.url}/content-service`).login('editor');
  });
  after(async () => {
    await p?.stop();
    await solr?.stop();
  });

  const count = async (type: string) => {
    const r = await fetch(`${solr.url}/content/select?q=svc_type_s:${type}&rows=0`);
    return ((await r.json()) as { response: { numFound: number } }).response.numFound;
  };

  it('writes go on while Solr is stopped for 15 s; after its restart every change is indexed, nothing lost', async () => {
    const type = `outage${Date.now()}`;
    const first = await editor.create({ ...article('before'), system: { contentType: type } });
    for (let i = 0; (await count(type)) < 1; i++) {
      if (i > 40) throw new Error('not indexed before the outage');
      await new Promise((r) => setTimeout(r, 100));
    }
    await solr.stop();
    const during: string[] = [];
    const until = Date.now() + 15000;
    let n = 0;
    while (Date.now() < until) {
      const r = await editor.create({ ...article(`during ${n++}`), system: { contentType: type } });
      expect(r.status, 'writes do not depend on the engine').to.equal(201);
      during.push(r.json.system.version);
      await new Promise((r) => setTimeout(r, 500));
    }
    const u = await editor.req('PUT', `/content/alias/${first.json.system.id}`, {
      body: article('updated during'),
      headers: { 'If-Match': first.headers.get('etag')! },
    });
    expect(u.status).to.equal(200);
    solr = await startSolr({ dataDir: dir, port });
    const expected = during.length + 1;
    const end = Date.now() + 30000;
    while ((await count(type)) !== expected) {
      if (Date.now() > end) throw new Error(`after the restart ${await count(type)} of ${expected} documents are indexed`);
      await new Promise((r) => setTimeout(r, 250));
    }
    // the update replaced the first version's document
    const ids = (
      (await (await fetch(`${solr.url}/content/select?q=svc_type_s:${type}&fl=id&rows=1000`)).json()) as { response: { docs: { id: string }[] } }
    ).response.docs.map((d) => d.id);
    expect(ids).to.include(u.json.system.version);
    expect(ids).to.not.include(first.json.system.version);
    for (const v of during) expect(ids).to.include(v);
    // The one indexer retried its own events through the outage: none was taken over as
    // abandoned (each takeover was one more retry loop of the same events, every few seconds).
    expect(takeovers).to.deep.equal([]);
  });
});
