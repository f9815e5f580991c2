import type { Settings } from '../../config/settings.js';
import type { Principal } from '../content/permissions.js';
import { limitedAddress, trustedProxies } from '../security/client-address.js';
import type { Exchange } from './http.js';

/**
 * How many of something each key holds (a user's streams, pages or exports, an address's
 * WebSockets waiting for their first message), and all keys together, for the per-key and
 * process-wide bounds of the gateway. A key at zero is forgotten, so the map holds only keys that
 * hold something.
 */
export class KeyedCounts {
  private readonly counts = new Map<string, number>();
  private sum = 0;

  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  /** What all keys hold. */
  get total(): number {
    return this.sum;
  }

  add(key: string): void {
    this.counts.set(key, this.get(key) + 1);
    this.sum++;
  }

  remove(key: string): void {
    const had = this.get(key);
    if (had === 0) return;
    if (had > 1) this.counts.set(key, had - 1);
    else this.counts.delete(key);
    this.sum--;
  }
}

/**
 * The key a caller is counted by in the per-caller bounds (searches, renders): `user:<id>` when
 * signed in, else `address:` and the client address as `limitedAddress` counts it (behind
 * TRUSTED_PROXIES the forwarded one). Asked while the client is still there (not `x.aborted`):
 * the socket's address is gone with it.
 */
export function callerKey(user: Principal | null, x: Exchange, settings: Settings): string {
  return user ? `user:${user.userId}` : `address:${limitedAddress(x.clientAddress(trustedProxies(settings.TRUSTED_PROXIES)))}`;
}
