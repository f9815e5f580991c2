import { expect } from 'chai';
import { checkTarget, forbiddenAddress, ipv6Groups, TargetRefused } from './ssrf.js';

describe('webhooks: the SSRF guard (CONTRACT §14 "Targets")', () => {
  it('reads IPv6 addresses, embedded IPv4 included', () => {
    expect(ipv6Groups('::1')).to.deep.equal([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(ipv6Groups('::ffff:127.0.0.1')).to.deep.equal([0, 0, 0, 0, 0, 0xffff, 0x7f00, 1]);
    expect(ipv6Groups('fe80::1%eth0')).to.deep.equal([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    expect(ipv6Groups('2001:db8:0:0:1:0:0:1')).to.deep.equal([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1]);
  });

  it('refuses loopback, private, link-local, unspecified, and those inside IPv6; allows public addresses', () => {
    const refused = [
      '127.0.0.1',
      '127.255.255.254',
      '10.0.0.0',
      '10.255.255.255',
      '172.16.0.0',
      '172.31.255.255',
      '192.168.255.255',
      '169.254.169.254',
      '0.0.0.0',
      '100.64.0.1',
    ];
    const refused6 = [
      '::',
      '::1',
      'fc00::',
      'fdff:ffff::1',
      'fe80::',
      'febf::1',
      '::ffff:10.0.0.1',
      '::ffff:a9fe:a9fe',
      '::127.0.0.1',
      '64:ff9b::7f00:1',
      'ff02::1',
      // found in a security review: local-use NAT64, 6to4 of a private address, Teredo, documentation, discard
      '64:ff9b:1::a00:1',
      '2002:c0a8:101::1',
      '2002:7f00:1::',
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
      '2001:db8::1',
      '100::1',
      // found in a review of 2026-11-27: IPv4-translated
      '::ffff:0:127.0.0.1',
      '::ffff:0:a00:1',
      // hardening of the thirteenth session's review: only global unicast (2000::/3), less its documentation and benchmarking ranges
      '::1:0:0:1',
      '::ffff:ffff:7f00:1',
      '1::1',
      '5f00::1',
      '3fff::1',
      '3fff:fff::1',
      '2001:2::1',
      'e000::1',
    ];
    refused.push('192.0.2.1', '198.51.100.7', '203.0.113.255', '192.88.99.1');
    for (const ip of [...refused, ...refused6]) expect(forbiddenAddress(ip), ip).to.be.a('string');
    for (const ip of [
      '8.8.8.8',
      '172.15.255.255',
      '172.32.0.0',
      '192.169.0.1',
      '11.0.0.1',
      '2606:4700::1111',
      '::ffff:8.8.8.8',
      '::ffff:0:8.8.8.8',
      '64:ff9b::808:808',
      '2002:808:808::1',
      '2001:4860::8888',
      '203.0.114.1',
    ])
      expect(forbiddenAddress(ip), ip).to.equal(null);
  });

  it('checks the scheme, credentials and every resolved address; answers the address to connect to', async () => {
    const resolve = async (host: string) => (host === 'public.test' ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }]);
    const refusal = (url: string, allow = false) =>
      checkTarget(url, allow, resolve).then(
        () => '',
        (e: Error) => (e instanceof TargetRefused ? e.message : `other: ${e}`),
      );
    expect(await refusal('ftp://public.test/x')).to.match(/scheme ftp/);
    expect(await refusal('gopher://public.test/x')).to.match(/scheme gopher/);
    expect(await refusal('not a url')).to.match(/absolute http or https/);
    expect(await refusal('https://a:b@public.test/x')).to.match(/credentials/);
    expect(await refusal('https://localhost.test/x')).to.match(/loopback/);
    // the address a name resolves to is not told (a host inside, CONTRACT §20)
    expect(await refusal('https://localhost.test/x')).to.not.include('127.0.0.1');
    expect(await refusal('https://localhost.test/x', true)).to.equal('');
    const ok = await checkTarget('https://public.test:8443/x?y=1', false, resolve);
    expect(ok).to.deep.include({ address: '93.184.215.14', family: 4 });
    expect(ok.url.href).to.equal('https://public.test:8443/x?y=1');
    expect((await checkTarget('http://[2606:4700::1111]/', false, resolve)).address).to.equal('2606:4700::1111');
  });

  it('a lookup that takes longer than its bound is refused at the bound, not when the name server gives up', async () => {
    const never = () => new Promise<{ address: string; family: number }[]>(() => undefined);
    const t0 = Date.now();
    const why = await checkTarget('https://slow.test/x', false, never, 100).then(
      () => '',
      (e: Error) => (e instanceof TargetRefused ? e.message : `other: ${e}`),
    );
    expect(why).to.equal('host slow.test was not resolved within 100 ms');
    expect(Date.now() - t0).to.be.below(1000);
  });
});
