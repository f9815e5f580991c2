import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for Solr's HTTP API, for tests about the gateway rather than about search: it
 * answers `admin/ping`, `select` (with the documents a test hands it) and `update`, records
 * every select's parameters, and can require basic authentication or fail updates.
 */
export interface FakeSolr {
  /** The SOLR_URL to configure (`http://127.0.0.1:<port>/solr`). */
  url: string;
  /** Parameters of every select received. */
  selects: URLSearchParams[];
  /** Authorization headers received (for the credential tests). */
  authorizations: string[];
  /** The docs a select answers with. */
  docs: Record<string, unknown>[];
  /** How an update is answered: 'ok', a status code, or 'hang-up' (the socket is destroyed). */
  updates: 'ok' | number | 'hang-up';
  /** When set, a select is answered with this body (status 200) instead of the documents. */
  selectRaw?: string;
  close(): Promise<void>;
}

export async function startFakeSolr(opts: { basicAuth?: { username: string; password: string } } = {}): Promise<FakeSolr> {
  const expected = opts.basicAuth ? `Basic ${Buffer.from(`${opts.basicAuth.username}:${opts.basicAuth.password}`).toString('base64')}` : undefined;
  const fake: FakeSolr = {
    url: '',
    selects: [],
    authorizations: [],
    docs: [],
    updates: 'ok',
    close: async () => undefined,
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'Content-Type': 'application/json;charset=utf-8' });
        res.end(JSON.stringify(body));
      };
      if (req.headers.authorization) fake.authorizations.push(req.headers.authorization);
      if (expected && req.headers.authorization !== expected) return json(401, { error: { msg: 'require authentication', code: 401 } });
      if (url.pathname.endsWith('/admin/ping')) return json(200, { status: 'OK' });
      if (url.pathname.endsWith('/select')) {
        const params = new URLSearchParams(url.search);
        for (const [k, v] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) params.append(k, v);
        fake.selects.push(params);
        if (fake.selectRaw !== undefined) {
          res.writeHead(200, { 'Content-Type': 'application/json' });
          return void res.end(fake.selectRaw);
        }
        if (params.get('rows') === '0' && params.get('facet') === 'true') {
          return json(200, {
            responseHeader: { status: 0 },
            response: { numFound: 0, docs: [] },
            facet_counts: { facet_fields: { [params.get('facet.field') ?? '']: [] } },
          });
        }
        return json(200, { responseHeader: { status: 0, QTime: 0 }, response: { numFound: fake.docs.length, start: 0, docs: fake.docs } });
      }
      if (url.pathname.endsWith('/update')) {
        if (fake.updates === 'hang-up') return void req.socket.destroy();
        if (typeof fake.updates === 'number') return json(fake.updates, { error: { msg: 'update refused', code: fake.updates } });
        return json(200, { responseHeader: { status: 0 } });
      }
      json(404, { error: { msg: 'not found', code: 404 } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/solr`;
  fake.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return fake;
}
