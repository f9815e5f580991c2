import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import sharp from 'sharp';
import { Client, startTestPlatform } from '../support/platform.js';
import { freePort } from '../../src/dev/redis-server.js';

/**
 * A real nginx in front (issue 21, the README's configuration): with PUBLIC_CACHE_MAX_AGE set,
 * nginx's proxy_cache keeps token-less versioned delivery of public content (a second request
 * is a HIT), and never keeps an answer read with a token or an answer marked private.
 * Skipped where no nginx is installed.
 */

const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));

/** The configuration documented for the README: cache only the versioned delivery location, never with a token. */
const config = (dir: string, port: number, upstream: string) => `
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
daemon off;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=delivery:10m max_size=1g inactive=7d use_temp_path=off;
  server {
    listen 127.0.0.1:${port};
    location /file-delivery-service/version/ {
      proxy_pass ${upstream};
      proxy_http_version 1.1;
      proxy_cache delivery;
      # Answers depend on the token and, for fm=auto, on Accept: never share one read with a token.
      proxy_cache_bypass $http_x_auth_token;
      proxy_no_cache $http_x_auth_token;
      proxy_cache_key "$scheme$host$request_uri";
      add_header X-Cache-Status $upstream_cache_status always;
    }
    location / {
      proxy_pass ${upstream};
      proxy_http_version 1.1;
    }
  }
}
`;

describe('public caching behind a real nginx (PUBLIC_CACHE_MAX_AGE)', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let nginx: ChildProcess | undefined;
  let dir: string;
  let front: string;
  let editor: Client;
  let pubVersion: string;
  let privVersion: string;

  before(async function () {
    if (!NGINX) this.skip();
    p = await startTestPlatform({ PUBLIC_CACHE_MAX_AGE: '600' });
    editor = await new Client(p.base).login('editor');
    const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#a36' } })
      .png()
      .toBuffer();
    const make = async (views: string[]) => {
      const up = await editor.upload('content/owner/pic.png', png, 'image/png');
      expect(up.status, up.text).to.equal(201);
      const c = await editor.create({
        system: { contentType: 'article' },
        aspects: { body: { title: 'nginx' }, svcFiles: { files: { 'pic.png': { fileUri: up.json.URI, filePath: 'pic.png' } } } },
        operations: views.length ? [{ _type: 'svcAssignToViews', views }] : [],
      });
      expect(c.status, c.text).to.equal(201);
      return c.json.system.version as string;
    };
    pubVersion = await make(['svcPublic']);
    privVersion = await make([]);
    dir = mkdtempSync(join(tmpdir(), 'nginx-'));
    // nginx's workers drop to an unprivileged user when started as root: they must write the cache here.
    chmodSync(dir, 0o777);
    const port = await freePort();
    writeFileSync(join(dir, 'nginx.conf'), config(dir, port, p.url));
    execFileSync(NGINX!, ['-t', '-c', join(dir, 'nginx.conf'), '-p', dir], { stdio: 'ignore' });
    nginx = spawn(NGINX!, ['-c', join(dir, 'nginx.conf'), '-p', dir], { stdio: 'ignore' });
    front = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 100; i++) {
      const ok = await fetch(`${front}/file-delivery-service/version/none/x`).then(
        () => true,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  after(async () => {
    nginx?.kill('SIGTERM');
    await p?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const get = async (path: string, token?: string) => {
    const r = await fetch(`${front}/file-delivery-service/${path}`, { headers: token ? { 'X-Auth-Token': token } : {} });
    const body = Buffer.from(await r.arrayBuffer());
    return { status: r.status, cache: r.headers.get('x-cache-status'), cc: r.headers.get('cache-control'), body };
  };

  it('a token-less read of public content is kept: MISS, then HIT (files and renditions)', async () => {
    for (const path of [`version/${pubVersion}/pic.png`, `version/${pubVersion}/pic.png?w=20&fm=webp`]) {
      const a = await get(path);
      expect([a.status, a.cache, a.cc], path).to.deep.equal([200, 'MISS', 'public, max-age=600, immutable']);
      const b = await get(path);
      expect([b.status, b.cache], path).to.deep.equal([200, 'HIT']);
      expect(Buffer.compare(a.body, b.body)).to.equal(0);
    }
  });

  it('never kept: reads with a token, and private answers', async () => {
    const path = `version/${privVersion}/pic.png?w=15`;
    for (let i = 0; i < 2; i++) {
      const r = await get(path, editor.token!);
      expect(r.status).to.equal(200);
      expect(r.cache).to.equal('BYPASS');
      expect(r.cc).to.match(/^private/);
    }
    // The private content without a token: refused, and the refusal is not served from a cache.
    expect((await get(path)).status).to.equal(401);
    const withToken = await get(`version/${pubVersion}/pic.png?w=21`, editor.token!);
    expect(withToken.cc).to.match(/^private/);
    const after = await get(`version/${pubVersion}/pic.png?w=21`);
    expect(after.cache, 'the token read was not stored for others').to.equal('MISS');
  });
});
