import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { AppError } from '../errors.js';

/**
 * The SSRF guard of the webhooks (CONTRACT §14 "Targets"): a webhook may only point at `http` or
 * `https`, at a host that resolves to public addresses. It runs when a webhook is created or
 * changed (400) and again before every delivery attempt (DNS can change between the two); the
 * attempt then connects to the address that was checked, so a second lookup by the HTTP client
 * cannot lead it elsewhere (DNS rebinding).
 */

/** A target that passed the guard: the URL, and the address to connect to. */
export interface CheckedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/** How names are resolved (tests give their own). */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/** IPv4 ranges no webhook may reach: [first address as a number, prefix length, what it is]. */
const V4_RANGES: [string, number, string][] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared (carrier-grade NAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, 'reserved (6to4 relay)'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

const v4Number = (ip: string): number => ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);

function v4Reason(ip: string): string | null {
  const n = v4Number(ip);
  for (const [base, prefix, what] of V4_RANGES) {
    const size = 2 ** (32 - prefix);
    const start = v4Number(base);
    if (n >= start && n < start + size) return what;
  }
  return null;
}

/** The eight 16-bit groups of an IPv6 address (an embedded dotted IPv4 tail included). */
export function ipv6Groups(ip: string): number[] {
  let text = ip.toLowerCase().replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4Number(dotted[1]);
    text = `${text.slice(0, -dotted[1].length)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array(8 - h.length - t.length).fill('0');
  return [...h, ...fill, ...t].map((g) => Number.parseInt(g, 16));
}

function v6Reason(ip: string): string | null {
  const g = ipv6Groups(ip);
  if (g.every((x) => x === 0)) return 'unspecified';
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return 'loopback';
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), IPv4-translated
  // (::ffff:0:a.b.c.d, RFC 6145), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::) carry an
  // IPv4 address: judge that one.
  const embedded =
    (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) ||
    (g.slice(0, 4).every((x) => x === 0) && g[4] === 0xffff && g[5] === 0) ||
    (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0));
  const sixToFour = g[0] === 0x2002;
  if (embedded || sixToFour) {
    const [hi, lo] = sixToFour ? [g[1], g[2]] : [g[6], g[7]];
    const v4 = `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
    const r = v4Reason(v4);
    return r ? `${r} (IPv4 ${v4} inside IPv6)` : null;
  }
  // Local-use NAT64 (64:ff9b:1::/48) translates to whatever the site chose; Teredo (2001::/32)
  // tunnels to an IPv4 host; neither says where it ends up.
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'local-use NAT64';
  if (g[0] === 0x2001 && g[1] === 0) return 'Teredo tunnel';
  if (g[0] === 0x2001 && g[1] === 0xdb8) return 'documentation';
  if (g[0] === 0x100 && g.slice(1, 4).every((x) => x === 0)) return 'discard-only';
  if ((g[0] & 0xfe00) === 0xfc00) return 'private (unique local)';
  if ((g[0] & 0xffc0) === 0xfe80) return 'link-local';
  if ((g[0] & 0xffc0) === 0xfec0) return 'site-local';
  if ((g[0] & 0xff00) === 0xff00) return 'multicast';
  if (g[0] === 0x3fff && g[1] < 0x1000) return 'documentation';
  if (g[0] === 0x2001 && g[1] === 2 && g[2] === 0) return 'benchmarking';
  // Only global unicast (2000::/3) is routed on the internet; the rest is reserved or special.
  if ((g[0] & 0xe000) !== 0x2000) return 'reserved';
  return null;
}

/** Why a webhook may not reach this address (loopback, private, link-local, ...); null when it may. */
export function forbiddenAddress(ip: string): string | null {
  const family = isIP(ip);
  if (family === 4) return v4Reason(ip);
  if (family === 6) return v6Reason(ip);
  return 'not an IP address';
}

/** The reason a target URL is refused, as an error of its own (the delivery log shows the message). */
export class TargetRefused extends Error {
  override name = 'TargetRefused';
}

/**
 * Checks a webhook URL and resolves its host: http or https only, no credentials in it, and every
 * address the host resolves to must be public unless `allowPrivate`. Answers the first address
 * (the one to connect to). Throws TargetRefused, also when the lookup takes longer than
 * `lookupMs`: an attempt must end within its claim, or another process delivers the same event
 * meanwhile (the system resolver may take 10 s and more on a name server that does not answer).
 */
export async function checkTarget(raw: string, allowPrivate: boolean, resolve: Resolver = systemResolver, lookupMs = 10_000): Promise<CheckedTarget> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TargetRefused('url must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TargetRefused(`url scheme ${url.protocol.slice(0, -1)} is not allowed: use http or https`);
  if (url.username || url.password) throw new TargetRefused('url must not carry credentials');
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    let timer: NodeJS.Timeout | undefined;
    const slow = new Promise<'slow'>((r) => {
      timer = setTimeout(() => r('slow'), lookupMs);
    });
    try {
      const got = await Promise.race([resolve(host), slow]);
      if (got === 'slow') throw new TargetRefused(`host ${host} was not resolved within ${lookupMs} ms`);
      addresses = got;
    } catch (e) {
      throw e instanceof TargetRefused ? e : new TargetRefused(`host ${host} does not resolve`);
    } finally {
      clearTimeout(timer);
    }
    if (!addresses.length) throw new TargetRefused(`host ${host} does not resolve`);
  }
  if (!allowPrivate) {
    for (const a of addresses) {
      const why = forbiddenAddress(a.address);
      // The address only when the caller wrote it: an internal name's address is a host inside (CONTRACT §20).
      if (why)
        throw new TargetRefused(
          isIP(host)
            ? `host ${host} is a ${why} address; set WEBHOOK_ALLOW_PRIVATE=true to allow it`
            : `host ${host} resolves to a ${why} address; set WEBHOOK_ALLOW_PRIVATE=true to allow it`,
        );
    }
  }
  const first = addresses[0];
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}

/** checkTarget for the management API: a refusal is a 400 naming the field. */
export async function checkTargetForRequest(raw: string, allowPrivate: boolean, resolve?: Resolver): Promise<CheckedTarget> {
  try {
    return await checkTarget(raw, allowPrivate, resolve);
  } catch (e) {
    if (e instanceof TargetRefused) throw new AppError('BAD_REQUEST', e.message, { field: 'url' });
    throw e;
  }
}
