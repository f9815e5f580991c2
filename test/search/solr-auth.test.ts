import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings } from '../../config/settings.js';
import { createLogger } from '../../src/adapters/log.js';
import { startSolr, type SolrHandle } from '../../src/dev/solr-server.js';
import { startPlatform } from '../../src/main.js';
import { Client, article } from '../support/platform.js';

/** Solr's basic-auth example: user `solr`, password `SolrRocks` (salted SHA-256, as Solr stores it). */
const SECURITY = JSON.stringify({
  authentication: {
    blockUnknown: true,
    class: 'solr.BasicAuthPlugin',
    credentials: { solr: 'IV0EHq1OnNrj6gvRCwvFwTrZ1+z1oBbnQdiVC3otuq0= Ndd7LKvVBAaZIF0QAVi1ekCfAJXr1GGfLtRUXhgrF8c=' },
    forwardCredentials: false,
  },
  authorization: { class: 'solr.RuleBasedAuthorizationPlugin', permissions: [{ name: 'all', role: 'admin' }], 'user-role': { solr: 'admin' } },
});

describe('search engine basic authentication (spec Authentication 9: solr.authentication.enabled)', function () {
  this.timeout(180000);
  let solr: SolrHandle;
  let p: Awaited<ReturnType<typeof startPlatform>> | undefined;

  before(async () => {
    solr = await startSolr({ dataDir: mkdtempSync(join(tmpdir(), 'auth-solr-')), securityJson: SECURITY });
  });
  after(async () => {
    await p?.stop();
    await solr?.stop();
  });

  it('Solr refuses anonymous requests; with the switch on and the credentials the indexer and the proxy get through', async () => {
    expect((await fetch(`${solr.url}/content/select?q=*:*`)).status).to.equal(401);
    p = await startPlatform({
      settings: loadSettings({
        ...process.env,
        PORT: '0',
        PARTITIONS: '8',
        LEASE_MS: '2000',
        SOLR_URL: solr.url,
        SOLR_AUTHENTICATION_ENABLED: 'true',
        SOLR_USERNAME: 'solr',
        SOLR_PASSWORD: 'SolrRocks',
      }),
      log: createLogger('silent'),
    });
    const editor = await new Client(`${p.url}/content-service`).login('editor');
    const type = `auth${Date.now()}`;
    const c = await editor.create({ ...article('secured'), system: { contentType: type } });
    const end = Date.now() + 5000;
    for (;;) {
      const r = await editor.req('GET', `${p.url}/search-service/content/select?q=svc_type_s:${type}`);
      expect(r.status, r.text).to.equal(200);
      if (r.json.response.numFound === 1) {
        expect(r.json.response.docs[0].id).to.equal(c.json.system.version);
        break;
      }
      if (Date.now() > end) throw new Error('not indexed through basic authentication');
      await new Promise((res) => setTimeout(res, 100));
    }
    const health = await editor.req('GET', `${p.url}/health`);
    expect(health.json.search).to.equal('ok');
  });

  it('the switch without credentials stops the start with a message naming the variables', async () => {
    let err: Error | undefined;
    try {
      await startPlatform({
        settings: loadSettings({ ...process.env, PORT: '0', SOLR_URL: solr.url, SOLR_AUTHENTICATION_ENABLED: 'true' }),
        log: createLogger('silent'),
        roles: ['indexer'],
      });
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).to.match(/SOLR_USERNAME and SOLR_PASSWORD/);
  });
});
