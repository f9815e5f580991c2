import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com, CONTRACT §14 "Delivery"): the
 * secret is `whsec_` + base64 of random bytes; the signature is `v1,` + base64 HMAC-SHA256,
 * keyed with those bytes, over `<webhook-id>.<webhook-timestamp>.<body>`.
 */

const PREFIX = 'whsec_';

/** A new secret: 32 random bytes. */
export const newSecret = (): string => `${PREFIX}${randomBytes(32).toString('base64')}`;

/** The key bytes of a secret (the base64 after `whsec_`). */
export const secretKey = (secret: string): Buffer => Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');

/** The `webhook-signature` header value of one message. */
export function sign(key: Buffer, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/** The three headers of a delivery (with Content-Type). */
export function deliveryHeaders(key: Buffer, id: string, body: string, nowMs: number): Record<string, string> {
  const ts = Math.floor(nowMs / 1000);
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': sign(key, id, ts, body),
  };
}
