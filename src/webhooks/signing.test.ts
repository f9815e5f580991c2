import { expect } from 'chai';
import { deliveryHeaders, newSecret, secretKey, sign } from './signing.js';

describe('webhooks: Standard Webhooks signatures (CONTRACT §14 "Delivery")', () => {
  it('matches the example of the Standard Webhooks specification', () => {
    const key = secretKey('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    expect(sign(key, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')).to.equal('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('a new secret is whsec_ and 32 random bytes in base64; headers carry id, Unix seconds and the signature', () => {
    const s = newSecret();
    expect(s).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(secretKey(s)).to.have.length(32);
    expect(newSecret()).to.not.equal(s);
    const h = deliveryHeaders(secretKey(s), 'evt_1', '{}', 1_700_000_000_999);
    expect(h).to.deep.equal({
      'content-type': 'application/json',
      'webhook-id': 'evt_1',
      'webhook-timestamp': '1700000000',
      'webhook-signature': sign(secretKey(s), 'evt_1', 1_700_000_000, '{}'),
    });
  });
});
