import { expect } from 'chai';
import { canonicalAddress, clientAddressOf, limitedAddress, trustedProxies } from './client-address.js';

describe('client address of the login limit (CONTRACT §20 "Tokens")', () => {
  it('one spelling per address; IPv4-mapped IPv6 as IPv4 (uWS spells it 0000:...:ffff:7f00:0001)', () => {
    expect(canonicalAddress('127.0.0.1')).to.equal('127.0.0.1');
    expect(canonicalAddress('0000:0000:0000:0000:0000:ffff:7f00:0001')).to.equal('127.0.0.1');
    expect(canonicalAddress('::ffff:10.1.2.3')).to.equal('10.1.2.3');
    expect(canonicalAddress('::1')).to.equal(canonicalAddress('0000:0000:0000:0000:0000:0000:0000:0001'));
    expect(canonicalAddress('2001:DB8::1')).to.equal('2001:db8:0:0:0:0:0:1');
  });

  it('IPv6 counts by its /64, IPv4 by the address', () => {
    expect(limitedAddress('2001:db8:1:2:aaaa::1')).to.equal(limitedAddress('2001:db8:1:2:bbbb::2'));
    expect(limitedAddress('2001:db8:1:3::1')).not.to.equal(limitedAddress('2001:db8:1:2::1'));
    expect(limitedAddress('10.0.0.1')).not.to.equal(limitedAddress('10.0.0.2'));
    // All IPv4 clients of a dual-stack listener must not share one /64.
    expect(limitedAddress('0000:0000:0000:0000:0000:ffff:7f00:0001')).to.equal('127.0.0.1');
  });

  it('X-Forwarded-For counts only from trusted proxies, from the right', () => {
    const trusted = trustedProxies('127.0.0.1,10.0.0.0/8,::1');
    expect(clientAddressOf('127.0.0.1', '1.1.1.1', null)).to.equal('127.0.0.1');
    expect(clientAddressOf('8.8.8.8', '1.1.1.1', trusted)).to.equal('8.8.8.8');
    expect(clientAddressOf('127.0.0.1', '1.1.1.1', trusted)).to.equal('1.1.1.1');
    expect(clientAddressOf('127.0.0.1', 'spoofed, 2.2.2.2, 10.9.9.9', trusted)).to.equal('2.2.2.2');
    expect(clientAddressOf('0000:0000:0000:0000:0000:0000:0000:0001', '3.3.3.3', trusted)).to.equal('3.3.3.3');
    expect(clientAddressOf('127.0.0.1', 'not-an-address', trusted)).to.equal('127.0.0.1');
    expect(clientAddressOf('127.0.0.1', undefined, trusted)).to.equal('127.0.0.1');
  });
});
