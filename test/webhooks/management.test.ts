import { expect } from 'chai';
import { forbiddenAddress, checkTarget } from '../../src/webhooks/ssrf.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { Receiver } from './receiver.js';

type Platform = Awaited<ReturnType<typeof startTestPlatform>>;

/** CONTRACT §14 "Manage" and "Targets": sysadmin only, secrets shown once, the SSRF guard. */
describe('webhooks: management and targets (CONTRACT §14)', function () {
  this.timeout(30_000);
  let platform: Platform;
  let admin: Client;
  let receiver: Receiver;

  before(async () => {
    // WEBHOOK_ALLOW_PRIVATE unset: the guard refuses every local address.
    platform = await startTestPlatform({}, ['web']);
    admin = await new Client(platform.base).login('sysadmin');
    receiver = await new Receiver().start();
  });
  after(async () => {
    const list = await admin.req('GET', '/webhooks');
    for (const w of list.json?.webhooks ?? []) await admin.req('DELETE', `/webhooks/${w.id}`);
    await receiver?.stop();
    await platform?.stop();
  });

  it('401 without a token, 403 for anyone but sysadmin, on every endpoint', async () => {
    const editor = await new Client(platform.base).login('editor');
    const reader = await new Client(platform.base).login('reader');
    const anon = new Client(platform.base);
    const calls: [string, string][] = [
      ['POST', '/webhooks'],
      ['GET', '/webhooks'],
      ['GET', '/webhooks/wh_000000000000000000000000'],
      ['PUT', '/webhooks/wh_000000000000000000000000'],
      ['DELETE', '/webhooks/wh_000000000000000000000000'],
      ['GET', '/webhooks/wh_000000000000000000000000/deliveries'],
      ['POST', '/webhooks/wh_000000000000000000000000/deliveries/0_x/redeliver'],
    ];
    for (const [method, path] of calls) {
      const body = method === 'POST' || method === 'PUT' ? { url: 'https://example.com/hook' } : undefined;
      expect((await anon.req(method, path, { body })).status, `${method} ${path} without a token`).to.equal(401);
      expect((await editor.req(method, path, { body })).status, `${method} ${path} as editor`).to.equal(403);
      expect((await reader.req(method, path, { body })).status, `${method} ${path} as reader`).to.equal(403);
    }
  });

  it('create 201 with Location and the secret once; list, get, update, delete; secrets never listed', async () => {
    const c = await admin.req('POST', '/webhooks', {
      body: { url: 'https://93.184.215.14/hook', types: ['article'], kinds: ['create', 'update'], description: 'd' },
    });
    expect(c.status, c.text).to.equal(201);
    expect(c.json.secret).to.match(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(c.json.secret.slice(6), 'base64').length).to.equal(32);
    expect(c.headers.get('location')).to.equal(`${platform.url}/content-service/webhooks/${c.json.id}`);
    const id: string = c.json.id;
    const list = await admin.req('GET', '/webhooks');
    expect(list.status).to.equal(200);
    const mine = list.json.webhooks.find((w: { id: string }) => w.id === id);
    expect(mine).to.include({ url: 'https://93.184.215.14/hook', description: 'd' });
    expect(mine.types).to.deep.equal(['article']);
    expect(list.text).to.not.include(c.json.secret.slice(6, 20));
    expect(list.text).to.not.include('secret');
    const one = await admin.req('GET', `/webhooks/${id}`);
    expect(one.status).to.equal(200);
    expect(one.json).to.not.have.property('secret');
    const u = await admin.req('PUT', `/webhooks/${id}`, { body: { url: 'https://93.184.215.14/other', views: ['svcPublic'] } });
    expect(u.status, u.text).to.equal(200);
    expect(u.json).to.include({ url: 'https://93.184.215.14/other' });
    expect(u.json.views).to.deep.equal(['svcPublic']);
    expect(u.json.types).to.deep.equal([]);
    expect(u.text).to.not.include('secret');
    expect((await admin.req('GET', `/webhooks/${id}/deliveries`)).json).to.deep.equal({ deliveries: [] });
    expect((await admin.req('GET', `/webhooks/${id}/deliveries?status=nope`)).status).to.equal(400);
    for (const limit of ['1e3', '0x10', '%205', '10.0', '0'])
      expect((await admin.req('GET', `/webhooks/${id}/deliveries?limit=${limit}`)).status, limit).to.equal(400);
    expect((await admin.req('GET', `/webhooks/${id}/deliveries?limit=10`)).status).to.equal(200);
    expect((await admin.req('DELETE', `/webhooks/${id}`)).status).to.equal(204);
    expect((await admin.req('GET', `/webhooks/${id}`)).status).to.equal(404);
    expect((await admin.req('DELETE', `/webhooks/${id}`)).status).to.equal(404);
  });

  it('bodies that break the schema: 400', async () => {
    for (const body of [
      {},
      { url: 'https://example.com', kinds: ['nope'] },
      { url: 'https://example.com', extra: 1 },
      { url: 5 },
      { url: 'https://example.com', types: ['a b'] },
    ]) {
      const r = await admin.req('POST', '/webhooks', { body });
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.json.statusCode).to.equal('40000');
    }
  });

  it('refused targets: ftp:, loopback, 10.0.0.0/8, link-local, IPv4-mapped loopback, a name that resolves to 127.0.0.1', async () => {
    for (const url of [
      'ftp://example.com/hook',
      'file:///etc/passwd',
      receiver.url,
      'http://127.0.0.1:1/x',
      'http://10.1.2.3/hook',
      'http://172.16.0.1/hook',
      'http://192.168.1.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[fe80::1]/hook',
      'http://[fd00::1]/hook',
      'http://0.0.0.0/hook',
      `http://localhost:${new URL(receiver.url).port}/hook`,
      'http://user:pw@example.com/hook',
    ]) {
      const r = await admin.req('POST', '/webhooks', { body: { url } });
      expect(r.status, url).to.equal(400);
      expect(r.json.extraInfo).to.deep.equal({ field: 'url' });
    }
  });

  it('the guard judges every address a name resolves to, and IPv4 inside IPv6', async () => {
    expect(forbiddenAddress('8.8.8.8')).to.equal(null);
    expect(forbiddenAddress('2606:4700::1111')).to.equal(null);
    for (const ip of [
      '127.0.0.1',
      '10.0.0.1',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.1.1',
      '0.0.0.0',
      '::',
      '::1',
      '::ffff:10.0.0.1',
      '::ffff:7f00:1',
      'fc00::1',
      'fe80::abcd',
      '64:ff9b::a00:1',
    ]) {
      expect(forbiddenAddress(ip), ip).to.be.a('string');
    }
    expect(forbiddenAddress('172.32.0.1')).to.equal(null);
    const twoFaced = async () => [
      { address: '93.184.215.14', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ];
    let refused = '';
    await checkTarget('https://rebind.example/hook', false, twoFaced).catch((e: Error) => (refused = e.message));
    expect(refused).to.match(/loopback/);
    const ok = await checkTarget('https://rebind.example/hook', true, twoFaced);
    expect(ok.address).to.equal('93.184.215.14');
  });

  it('/metrics counts deliveries by outcome and the oldest pending age', async () => {
    const m = await new Client(platform.base).metrics();
    expect(m.text).to.match(/webhook_deliveries_total\{outcome="delivered"\} \d+/);
    expect(m.text).to.match(/webhook_deliveries_total\{outcome="failed"\} \d+/);
    expect(m.text).to.match(/webhook_oldest_pending_seconds \d/);
  });
});
