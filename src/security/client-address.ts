import net, { BlockList } from 'node:net';
import { parseAddressOrRange } from '../../config/settings.js';

/**
 * The client address of a request, for the per-address login limit (CONTRACT §20 "Tokens"):
 * the socket's peer, and X-Forwarded-For only from proxies named in TRUSTED_PROXIES.
 */

/**
 * An address in one spelling: IPv4 as it is; IPv6 as eight lower-case groups without leading
 * zeros (`0000:...:0001` and `::1` alike as `0:0:0:0:0:0:0:1`); an IPv4-mapped IPv6 address
 * (`::ffff:127.0.0.1`, or `0:0:0:0:0:ffff:7f00:1` as uWS spells it) as its IPv4 address.
 * Anything else as it is.
 */
export function canonicalAddress(text: string): string {
  const a = text.trim().toLowerCase();
  if (net.isIPv4(a) || !net.isIPv6(a)) return a;
  // A dotted IPv4 tail as its two groups, then the `::` filled with zero groups.
  const hex = a.replace(
    /(\d+)\.(\d+)\.(\d+)\.(\d+)$/,
    (_, b0: string, b1: string, b2: string, b3: string) => `${((+b0 << 8) | +b1).toString(16)}:${((+b2 << 8) | +b3).toString(16)}`,
  );
  const [head, back] = hex.split('::');
  const left = head ? head.split(':') : [];
  const right = back ? back.split(':') : [];
  const fill = back === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  const groups = [...left, ...fill, ...right].map((g) => g.replace(/^0+(?=.)/, ''));
  if (groups.slice(0, 5).every((g) => g === '0') && groups[5] === 'ffff') {
    const n = (parseInt(groups[6], 16) << 16) | parseInt(groups[7], 16);
    return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
  }
  return groups.join(':');
}

/**
 * What the per-address limit counts an address as: IPv4 as it is, IPv6 by its /64 (one host
 * commonly holds a whole /64).
 */
export function limitedAddress(address: string): string {
  const a = canonicalAddress(address);
  return net.isIPv6(a) ? `${a.split(':').slice(0, 4).join(':')}::/64` : a;
}

const lists = new Map<string, BlockList>();

/** The TRUSTED_PROXIES setting as a BlockList (parsed once per value); null when unset. */
export function trustedProxies(setting: string | undefined): BlockList | null {
  if (!setting) return null;
  let list = lists.get(setting);
  if (!list) {
    list = new BlockList();
    for (const entry of setting.split(',')) {
      const r = parseAddressOrRange(entry.trim());
      if (!r) throw new Error(`TRUSTED_PROXIES: not an address or CIDR range: ${entry}`);
      list.addSubnet(r.address, r.prefix, r.family);
    }
    lists.set(setting, list);
  }
  return list;
}

const isTrusted = (list: BlockList, address: string): boolean => {
  const v = net.isIP(address);
  return v !== 0 && list.check(address, v === 4 ? 'ipv4' : 'ipv6');
};

/**
 * The client address: `peer` (the socket's), or, while that is a trusted proxy, the next
 * address from the right of X-Forwarded-For (each proxy appends the peer it saw; what a client
 * wrote itself sits further left and is never reached past an address that is not trusted).
 */
export function clientAddressOf(peer: string, forwardedFor: string | undefined, trusted: BlockList | null): string {
  let address = canonicalAddress(peer);
  if (!trusted || !forwardedFor) return address;
  const hops = forwardedFor.split(',');
  while (isTrusted(trusted, address)) {
    const next = hops.pop();
    if (next === undefined || net.isIP(next.trim()) === 0) break;
    address = canonicalAddress(next);
  }
  return address;
}
