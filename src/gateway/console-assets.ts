import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { AppError } from '../errors.js';
import { repoPath } from '../repo-files.js';
import type { Exchange } from './http.js';

/** The console's URL prefix (CONTRACT §19). */
export const CONSOLE_PREFIX = 'console';

/**
 * What the console's pages may load: its own scripts and styles only (no inline script, no
 * inline style), images from its origin and from `blob:` (renditions fetched with the token
 * header), connections to its origin (the API and the change feed's WebSocket), never framed.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  body: Buffer;
  type: string;
}

/**
 * The web console's static files (console/ in the repository), read once when the gateway
 * starts: every asset under a name with its content hash, cached for a year as immutable;
 * index.html, which names them, revalidated on every load. The files are a fixed map from
 * name to bytes: a request names a key of that map or gets 404, so no path of a request ever
 * reaches the file system (`../`, encoded or not, finds nothing).
 */
export class ConsoleAssets {
  private readonly assets = new Map<string, Asset>();
  private readonly index: Buffer;

  constructor(dir = repoPath('console')) {
    const renamed = new Map<string, string>();
    for (const name of readdirSync(dir)) {
      const type = TYPES[extname(name)];
      if (!type) continue;
      const body = readFileSync(join(dir, name));
      const hash = createHash('sha256').update(body).digest('hex').slice(0, 16);
      const hashed = `${name.slice(0, -extname(name).length)}.${hash}${extname(name)}`;
      renamed.set(name, hashed);
      this.assets.set(hashed, { body, type });
    }
    let html = readFileSync(join(dir, 'index.html'), 'utf8');
    for (const [name, hashed] of renamed) html = html.replaceAll(`"assets/${name}"`, `"assets/${hashed}"`);
    this.index = Buffer.from(html);
  }

  /** Its addresses, for the API document (src/gateway/api-operations.ts). */
  static readonly routes = {
    describe: () => [
      { pattern: '', methods: ['GET'] },
      { pattern: 'assets/:file', methods: ['GET'] },
    ],
  };

  /** GET /console/ and GET /console/assets/<hashed name>; `segs` are the decoded path segments after `console`. */
  handle(x: Exchange, segs: string[], trailingSlash: boolean): void {
    if (x.method !== 'GET' && x.method !== 'HEAD') throw new AppError('METHOD_NOT_ALLOWED', 'Use GET', { allow: ['GET'] });
    const common: [string, string][] = [
      ['Content-Security-Policy', CONSOLE_CSP],
      ['X-Content-Type-Options', 'nosniff'],
      ['Referrer-Policy', 'no-referrer'],
      ['X-Frame-Options', 'DENY'],
    ];
    if (segs.length === 0) {
      // The page's relative asset addresses need the trailing slash.
      if (!trailingSlash) x.send(308, [...common, ['Location', `/${CONSOLE_PREFIX}/`]]);
      else x.send(200, [...common, ['Content-Type', 'text/html; charset=utf-8'], ['Cache-Control', 'no-cache']], this.index);
      return;
    }
    const asset = segs.length === 2 && segs[0] === 'assets' && this.assets.has(segs[1]) ? this.assets.get(segs[1]) : undefined;
    if (!asset) throw new AppError('NOT_FOUND', 'No such resource');
    x.send(200, [...common, ['Content-Type', asset.type], ['Cache-Control', 'public, max-age=31536000, immutable']], asset.body);
  }
}
