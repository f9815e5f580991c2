import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type BrowserContext, type Page } from 'puppeteer-core';
import sharp from 'sharp';
import { CONSOLE_CSP } from '../../src/gateway/console-assets.js';
import { Client, startTestPlatform } from '../support/platform.js';
import { rawRequest } from '../support/raw-http.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually } from '../support/wait.js';

/**
 * The web console (CONTRACT §19) in a real browser: Debian's chromium driven by puppeteer-core,
 * one platform and one browser for every case. Each page is screenshot under
 * test/console/screenshots/ and scanned with axe-core (no serious or critical violation), and
 * no page may trip its own Content-Security-Policy. Skipped, saying why, without a chromium.
 */
const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => p && existsSync(p));
const SHOTS = join(import.meta.dirname, 'screenshots');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

describe('web console in a real browser (CONTRACT §19)', function () {
  this.timeout(240000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let browser: Browser;
  let editor: Client;
  let sysadmin: Client;
  let solrUrl: string;
  let reindexer: Awaited<ReturnType<typeof startTestPlatform>> | undefined;
  const contexts: BrowserContext[] = [];
  const cspViolations: string[] = [];
  const W = `w${Date.now().toString(36)}`; // a word no other test writes
  const tmp = mkdtempSync(join(tmpdir(), 'console-test-'));

  before(async function () {
    if (!CHROMIUM) {
      console.log('    (skipped: no chromium; `apt-get install chromium` or set CHROMIUM_PATH)');
      this.skip();
    }
    const solr = await ensureTestSolr();
    solrUrl = solr;
    // No re-indexer in this platform: the operations case starts one once it has seen a session waiting.
    p = await startTestPlatform({ SOLR_URL: solr }, ['web', 'actors', 'indexer', 'webhooks']);
    editor = await new Client(p.base).login('editor');
    sysadmin = await new Client(p.base).login('sysadmin');
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
    mkdirSync(SHOTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
    await reindexer?.stop();
    await p?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });
  afterEach(() => {
    expect(cspViolations, 'the console trips its own Content-Security-Policy').to.deep.equal([]);
  });

  /** A fresh browser profile signed in as `user` through the sign-in page. */
  async function signIn(user: string): Promise<Page> {
    const ctx = await browser.createBrowserContext();
    contexts.push(ctx);
    const page = await ctx.newPage();
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    await page.goto(`${p.url}/console/`);
    await page.waitForSelector('#username');
    await page.type('#username', user);
    await page.type('#password', user);
    await page.click('#signin');
    await page.waitForFunction((u) => document.getElementById('who')?.textContent?.includes(`Signed in as ${u}`), {}, user);
    // The token is in sessionStorage, never in the address.
    const token = await page.evaluate(() => JSON.parse(sessionStorage.getItem('console.session') ?? '{}').token as string);
    expect(token).to.be.a('string');
    expect(page.url()).to.not.include(token);
    return page;
  }

  /** A screenshot of the page, and axe-core's scan of it: no serious or critical violation. */
  async function check(page: Page, name: string): Promise<void> {
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
    // Evaluated over the DevTools protocol, which the page's CSP does not govern (an inline <script> would be refused).
    await page.evaluate(AXE);
    const found = (await page.evaluate(async () => {
      const r = await (
        window as unknown as { axe: { run(): Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }
      ).axe.run();
      return r.violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    })) as string[];
    expect(found, `accessibility of ${name}`).to.deep.equal([]);
  }

  const text = (page: Page, sel: string) => page.$eval(sel, (e) => e.textContent ?? '');
  const waitText = (page: Page, sel: string, needle: string, timeout = 30000) =>
    page.waitForFunction((s, n) => document.querySelector(s)?.textContent?.includes(n), { timeout }, sel, needle);

  async function create(title: string, as = editor, ops: unknown[] = [], extra: Record<string, unknown> = {}) {
    const r = await as.create({ system: { contentType: 'article' }, aspects: { body: { title, ...extra } }, operations: ops });
    expect(r.status, r.text).to.equal(201);
    return {
      id: r.json.system.id as string,
      key: (r.json.system.id as string).split('/')[1],
      version: r.json.system.version as string,
      etag: r.headers.get('etag') as string,
    };
  }

  describe('the static route', () => {
    it('serves index.html uncached and hashed assets for a year, each with the CSP and nosniff', async () => {
      const idx = await fetch(`${p.url}/console/`);
      expect(idx.status).to.equal(200);
      expect(idx.headers.get('cache-control')).to.equal('no-cache');
      expect(idx.headers.get('content-security-policy')).to.equal(CONSOLE_CSP);
      expect(idx.headers.get('x-content-type-options')).to.equal('nosniff');
      const html = await idx.text();
      expect(html).to.not.match(/<script(?![^>]*\ssrc=)/); // no inline script
      expect(html).to.not.match(/\sstyle=/);
      const assets = [...html.matchAll(/"assets\/([^"]+)"/g)].map((m) => m[1]);
      expect(assets).to.have.length(2);
      for (const a of assets) {
        expect(a).to.match(/^app\.[0-9a-f]{16}\.(js|css)$/);
        const r = await fetch(`${p.url}/console/assets/${a}`);
        expect(r.status).to.equal(200);
        expect(r.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable');
        expect(r.headers.get('content-security-policy')).to.equal(CONSOLE_CSP);
        expect(r.headers.get('x-content-type-options')).to.equal('nosniff');
      }
      expect(CONSOLE_CSP).to.include("script-src 'self'").and.include("frame-ancestors 'none'").and.not.include('unsafe');
      expect((await fetch(`${p.url}/console`, { redirect: 'manual' })).status).to.equal(308);
    });

    it('serves nothing outside its assets: ../ and its encoded forms answer 404', async () => {
      const port = Number(new URL(p.url).port);
      for (const path of [
        '/console/../package.json',
        '/console/assets/../../package.json',
        '/console/assets/..%2f..%2fpackage.json',
        '/console/assets/%2e%2e/%2e%2e/package.json',
        '/console/assets/%2e%2e%2f%2e%2e%2fpackage.json',
        '/console/assets/..%5c..%5cpackage.json',
        '/console/%2e%2e/src/main.ts',
        '/console/assets/app.js',
        '/console/index.html',
        '/console/app.js',
        '/console/assets/',
        '/console/assets/__proto__',
      ]) {
        const r = await rawRequest(port, { method: 'GET', path });
        expect(r.status, path).to.be.oneOf([400, 404]);
        expect(r.body, path).to.not.include('content-platform').and.not.include('import ');
      }
    });

    it('the operations snapshot is sysadmin only: 401 without a token, 403 for every other user', async () => {
      expect((await new Client(p.base).operations()).status).to.equal(401);
      for (const u of ['editor', 'reader', 'sportseditor']) {
        const r = await (await new Client(p.base).login(u)).operations();
        expect(r.status, u).to.equal(403);
        expect(r.text).to.not.include('partitions');
      }
      // The refusal is the same whether or not there is anything to see: after new content,
      // and a re-index session, the editor gets the very same answer.
      const editorClient = await new Client(p.base).login('editor');
      const before = await editorClient.operations();
      await create('operations invariance');
      expect((await sysadmin.req('POST', '/index/reindex/contentType/none-such')).status).to.equal(200);
      const after = await editorClient.operations();
      expect([after.status, after.text]).to.deep.equal([before.status, before.text]);
      const ok = await sysadmin.operations();
      expect(ok.json.reindexSessions.length).to.be.at.least(1);
      expect(ok.status).to.equal(200);
      expect(ok.json.partitions).to.have.length(8);
      expect(ok.json.partitions[0]).to.have.keys('partition', 'owner', 'mailbox', 'indexer', 'deadLetters', 'indexerDeadLetters', 'webhooksPending');
    });
  });

  describe('the session', () => {
    it('renews only past the renew time, once; signing out revokes every token the tab held', async () => {
      const page = await signIn('editor');
      const issued: string[] = [];
      page.on('request', (r) => {
        if (r.method() === 'POST' && r.url().endsWith('/security/token')) issued.push(r.url());
      });
      const tokenNow = () => page.evaluate(() => JSON.parse(sessionStorage.getItem('console.session') ?? '{}').token as string);
      const valid = async (token: string) => (await new Client(p.base, token).req('GET', '/changes?since=now')).status === 200;
      for (const hash of ['#/search', '#/workspaces', '#/search', '#/audit']) {
        await page.evaluate((h) => {
          location.hash = h;
        }, hash);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(issued, 'no token issued before the renew time (it was one a page)').to.deep.equal([]);
      const first = await tokenNow();
      // Past the renew time (milliseconds since the epoch, CONTRACT §4): the next page renews once.
      await page.evaluate(() => {
        const s = JSON.parse(sessionStorage.getItem('console.session') ?? '{}');
        sessionStorage.setItem('console.session', JSON.stringify({ ...s, renewTime: String(Date.now() - 1000) }));
      });
      await page.reload();
      await page.waitForFunction((t) => JSON.parse(sessionStorage.getItem('console.session') ?? '{}').token !== t, {}, first);
      const second = await tokenNow();
      // The old token stays valid until it expires (a live feed or another tab may still use it).
      expect(await valid(first)).to.equal(true);
      expect(await valid(second)).to.equal(true);
      expect(issued).to.have.length(1);
      await page.click('#signout');
      await page.waitForSelector('#username');
      expect(await valid(second), 'signed out: the current token').to.equal(false);
      expect(await valid(first), 'signed out: the token it renewed').to.equal(false);
    });
  });

  describe('as editor', () => {
    let page: Page;
    before(async () => {
      page = await signIn('editor');
    });

    it('signs in and finds a content by search', async () => {
      await check(page, 'search');
      const c = await create(`Searchable ${W} story`);
      // The indexer catches up in the background: search again until the result is there.
      await eventually(async () => {
        await page.evaluate(() => {
          location.hash = '#/search';
        });
        await page.waitForSelector('#q');
        await page.$eval('#q', (e) => {
          (e as HTMLInputElement).value = '';
        });
        await page.type('#q', W);
        await page.click('#search');
        await page.waitForFunction(() => /found/.test(document.getElementById('search-status')?.textContent ?? ''), { timeout: 5000 });
        expect(await text(page, '#results')).to.include(`contentid/${c.key}`);
      }, 60000);
      await check(page, 'search-results');
      await page.click('a.result');
      await waitText(page, '#version', c.version);
      expect(await page.$eval('#aspects-editor', (e) => (e as HTMLTextAreaElement).value)).to.include(`Searchable ${W} story`);
      expect(await text(page, '#aliases')).to.include(`contentid/${c.key}`);
      await check(page, 'content');
    });

    it('compares two versions side by side, shows a stale restore as a 409, and restores one', async () => {
      const c = await create('first title');
      const u = await editor.req('PUT', `/content/alias/${c.id}`, { body: { aspects: { body: { title: 'second title' } } }, headers: { 'If-Match': c.etag } });
      expect(u.status, u.text).to.equal(200);
      await page.evaluate((k) => {
        location.hash = `#/content/contentid/${k}`;
      }, c.key);
      await page.waitForSelector('#compare');
      await page.select('#from', c.version);
      await page.select('#to', u.json.system.version);
      await page.click('#compare');
      await waitText(page, '#history-status', 'change(s)');
      expect(await text(page, '#left')).to.include('first title');
      expect(await text(page, '#right')).to.include('second title');
      expect(await text(page, '#patch')).to.include('replace /body/title');
      await check(page, 'history-compare');

      // Another client changes the content after the page loaded: the restore is refused, plainly.
      const other = await editor.req('PUT', `/content/alias/${c.id}`, {
        body: { aspects: { body: { title: 'third title' } } },
        headers: { 'If-Match': u.headers.get('etag')! },
      });
      expect(other.status).to.equal(200);
      await page.click('#restore');
      await waitText(page, '#history-status', 'Conflict (409)');
      await check(page, 'history-conflict');
      expect((await editor.read(`/content/alias/${c.id}`)).json.aspects.body.title).to.equal('third title');

      await page.reload();
      await page.waitForSelector('#from');
      await page.select('#from', c.version);
      await page.click('#restore');
      await eventually(async () => expect((await editor.read(`/content/alias/${c.id}`)).json.aspects.body.title).to.equal('first title'), 10000);
      await waitText(page, '#history', `restored from ${c.version}`);
    });

    it('uploads an image and shows its rendition', async () => {
      const c = await create('with a picture');
      const png = join(tmp, 'photo.png');
      writeFileSync(
        png,
        await sharp({ create: { width: 800, height: 600, channels: 3, background: { r: 200, g: 40, b: 40 } } })
          .png()
          .toBuffer(),
      );
      await page.evaluate((k) => {
        location.hash = `#/content/contentid/${k}`;
      }, c.key);
      const input = await page.waitForSelector('#file');
      await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(png);
      await page.click('#upload');
      const img = await page.waitForSelector('img.rendition', { timeout: 30000 });
      await page.waitForFunction((e) => (e as HTMLImageElement).complete && (e as HTMLImageElement).naturalWidth > 0, {}, img);
      expect(await page.evaluate((e) => (e as HTMLImageElement).naturalWidth, img)).to.equal(240);
      expect(await page.evaluate((e) => (e as HTMLImageElement).src, img)).to.match(/^blob:/);
      expect((await editor.read(`/content/alias/${c.id}`)).json.aspects.svcFiles.files['photo.png'].filePath).to.equal('photo.png');
      await check(page, 'content-files');
    });

    it('fetches a file of a content only from the delivery service, whatever its path (`..` segments)', async () => {
      // Any writer may name files of its content as it likes; the console fetched each one's
      // rendition with the viewer's token at a URL built from the name, and URL parsing resolved
      // `..`: a sportseditor's file `../../../content-service/webhooks` made a sysadmin's browser
      // GET /content-service/webhooks with the sysadmin's token (security review).
      const sports = await new Client(p.base).login('sportseditor');
      const names = ['../../../content-service/webhooks', '%2e%2e/%2e%2e/%2e%2e/content-service/webhooks', './x/../../../../console/', 'a//b'];
      const r = await sports.create({
        system: { contentType: 'article' },
        aspects: {
          body: { _type: 'body', title: 'odd file names' },
          svcFiles: { _type: 'svcFiles', files: Object.fromEntries(names.map((n) => [n, { filePath: 'x' }])) },
        },
        operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: ['sports'] } } }],
      });
      expect(r.status, r.text).to.equal(201);
      const admin = await signIn('sysadmin');
      const seen: string[] = [];
      admin.on('request', (q) => seen.push(new URL(q.url()).pathname));
      await admin.evaluate(
        (k) => {
          location.hash = `#/content/contentid/${k}`;
        },
        (r.json.system.id as string).split('/')[1],
      );
      await waitText(admin, '#files', names[0]);
      await new Promise((res) => setTimeout(res, 500));
      const away = seen.filter(
        (s) => !s.startsWith('/content-service/content/') && !s.startsWith('/file-delivery-service/') && !s.startsWith('/content-service/changes'),
      );
      expect(away, 'requests of the content page outside the content and delivery services').to.deep.equal([]);
      expect(seen.filter((s) => s.startsWith('/file-delivery-service/')).every((s) => !s.includes('/../'))).to.equal(true);
      await admin.close();
    });

    it('shows a commit made by another client live', async () => {
      const live = () => p.gateway!.changes.stats().subscribers;
      const before = live();
      await page.evaluate(() => {
        location.hash = '#/feed';
      });
      await waitText(page, '#feed-status', 'Connected');
      // The page says Connected once its socket opens; its `since=now` is taken when the gateway
      // reads the first message. A commit before that is not the page's to show (a suite under
      // load once committed first): wait for the gateway to hold the subscriber.
      await eventually(async () => expect(live()).to.be.greaterThan(before), 10000);
      const c = await create(`live ${W}`, sysadmin);
      await waitText(page, '#feed', `contentid/${c.key}`);
      expect(await text(page, '#feed'))
        .to.include('create')
        .and.include('sysadmin');
      await check(page, 'feed');
    });

    it('lists a draft in its workspace and promotes it', async () => {
      const c = await create('before the draft');
      const ws = `desk${Date.now()}`;
      const d = await editor.req('PUT', `/content/workspace/${ws}/alias/${c.id}`, {
        body: { system: { contentType: 'article' }, aspects: { body: { title: 'drafted title' } } },
      });
      expect(d.status, d.text).to.be.oneOf([200, 201]);
      await page.evaluate((w) => {
        location.hash = `#/workspaces/${w}`;
      }, ws);
      await waitText(page, '#drafts', 'drafted title');
      await check(page, 'workspaces');
      await page.click('button.promote');
      await waitText(page, '#drafts', 'Promoted');
      expect((await editor.read(`/content/alias/${c.id}`)).json.aspects.body.title).to.equal('drafted title');
    });
  });

  it('as sportseditor: no culture content anywhere (search, content page, feed)', async () => {
    const owners = (ctx: string) => [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: [ctx] } } }];
    const culture = await create(`culture ${W} opera`, editor, owners('culture'));
    const sports = await create(`sports ${W} match`, editor, owners('sports'));
    const page = await signIn('sportseditor');
    await eventually(async () => {
      await page.evaluate((w) => {
        location.hash = `#/search?q=${w}&n=${Date.now()}`;
      }, W);
      await page.waitForFunction(() => /found/.test(document.getElementById('search-status')?.textContent ?? ''), { timeout: 5000 });
      expect(await text(page, '#results')).to.include(sports.key);
    }, 60000);
    const body = () => page.$eval('body', (b) => b.textContent ?? '');
    expect(await body())
      .to.not.include(culture.key)
      .and.not.include('opera');
    await check(page, 'sportseditor-search');

    await page.evaluate((k) => {
      location.hash = `#/content/contentid/${k}`;
    }, culture.key);
    await page.waitForFunction(() => /\(40[34]\)/.test(document.getElementById('content-status')?.textContent ?? ''));
    expect(await body()).to.not.include('opera');

    await page.evaluate(() => {
      location.hash = '#/feed';
    });
    await waitText(page, '#feed-status', 'Connected');
    const u1 = await editor.req('PUT', `/content/alias/${culture.id}`, {
      body: { aspects: { body: { title: 'culture again' } } },
      headers: { 'If-Match': culture.etag },
    });
    const u2 = await editor.req('PUT', `/content/alias/${sports.id}`, {
      body: { aspects: { body: { title: 'sports again' } } },
      headers: { 'If-Match': sports.etag },
    });
    expect([u1.status, u2.status]).to.deep.equal([200, 200]);
    await waitText(page, '#feed', sports.key);
    expect(await text(page, '#feed')).to.not.include(culture.key);
    await check(page, 'sportseditor-feed');

    await page.evaluate(() => {
      location.hash = '#/operations';
    });
    await waitText(page, '#ops-status', 'Not allowed (403)');
  });

  it('as sysadmin: the operations page shows a re-index session with its progress', async () => {
    const page = await signIn('sysadmin');
    await page.evaluate(() => {
      location.hash = '#/operations';
    });
    await waitText(page, '#ops-status', 'Updated');
    const r = await sysadmin.req('POST', '/index/reindex/full');
    expect(r.status, r.text).to.equal(200);
    const session = /session (\S+) started/.exec(r.text)?.[1];
    expect(session).to.be.a('string');
    const bar = `li.session[data-session="${session}"] progress`;
    // Queued, no re-indexer running yet: the page shows the session waiting at 0 of its total.
    await page.waitForFunction(
      (s) => {
        const e = document.querySelector(s) as HTMLProgressElement | null;
        return e !== null && e.value === 0 && e.max > 1;
      },
      { timeout: 30000 },
      bar,
    );
    expect(await text(page, `li.session[data-session="${session}"] label`)).to.match(/: 0 of [1-9][0-9]* \(0%\)$/);
    await check(page, 'operations-reindex-waiting');
    // A re-indexer starts: the bar follows the session until every queued content is indexed.
    reindexer = await startTestPlatform({ SOLR_URL: solrUrl }, ['reindexer']);
    await page.waitForFunction(
      (s) => {
        const e = document.querySelector(s) as HTMLProgressElement | null;
        return e !== null && e.value === e.max;
      },
      { timeout: 60000 },
      bar,
    );
    await waitText(page, `li.session[data-session="${session}"] label`, 'complete');
    expect(await text(page, '#partitions')).to.include('Actor processes');
    await page.waitForSelector('#charts svg polyline');
    await check(page, 'operations');
  });
});
