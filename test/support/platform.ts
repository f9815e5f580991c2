import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings, type Settings } from '../../config/settings.js';
import { createLogger } from '../../src/adapters/log.js';
import { startPlatform, type Platform, type Role } from '../../src/main.js';

/**
 * Starts the platform in this process on a free port against the private test Redis
 * (REDIS_URL, set by test/support/global-setup.ts), with files in a temporary directory.
 * Logs are silent unless TEST_LOG is set.
 */
export async function startTestPlatform(overrides: Partial<Record<keyof Settings, string>> = {}, roles?: Role[], clock?: () => number): Promise<Platform & { url: string; base: string }> {
  // Files go to a fresh directory of the run (unless a test names S3 or a directory).
  const filesDir = mkdtempSync(join(tmpdir(), 'test-files-'));
  const settings = loadSettings({ ...process.env, PORT: '0', PARTITIONS: '8', LEASE_MS: '2000', FILES_DIR: filesDir, ...overrides });
  const log = createLogger(process.env.TEST_LOG ?? 'silent');
  const p = await startPlatform({ settings, roles, log, clock });
  const stop = p.stop;
  p.stop = async () => {
    await stop();
    rmSync(filesDir, { recursive: true, force: true });
  };
  return Object.assign(p, { url: p.url ?? '', base: `${p.url}/content-service` });
}

/** A small HTTP client for the tests: JSON in and out, redirects not followed. */
export class Client {
  constructor(
    readonly base: string,
    public token?: string,
  ) {}

  async req(method: string, path: string, opts: { body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; token?: string | null } = {}) {
    const headers: Record<string, string> = { ...opts.headers };
    const token = opts.token === null ? undefined : (opts.token ?? this.token);
    if (token) headers['X-Auth-Token'] = token;
    let body: string | Buffer | undefined = opts.raw;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] ??= 'application/json';
    }
    const url = path.startsWith('http') ? path : `${this.base}${path}`;
    const res = await fetch(url, { method, headers, body: body as BodyInit | undefined, redirect: "manual" });
    const text = await res.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  /** Logs in and keeps the token. */
  async login(username: string, password = username): Promise<this> {
    const r = await this.req('POST', '/security/token', { body: { username, password }, token: null });
    if (r.status !== 200) throw new Error(`login ${username} failed: ${r.status} ${r.text}`);
    this.token = r.json.token;
    return this;
  }

  /** GET that follows one 303 redirect, as clients do. */
  async read(path: string, headers: Record<string, string> = {}) {
    const first = await this.req('GET', path, { headers });
    if (first.status !== 303) return first;
    return this.req('GET', first.headers.get('location')!, { headers });
  }

  async create(envelope: unknown, headers: Record<string, string> = {}) {
    return this.req('POST', '/content', { body: envelope, headers });
  }
}

export const article = (title: string, extra: Record<string, unknown> = {}) => ({
  system: { contentType: 'article' },
  aspects: { body: { _type: 'body', title, ...extra } },
});
