/**
 * Bulk export and import over the platform's HTTP API (CONTRACT §16), for moving content
 * between platforms:
 *
 *   node --import tsx src/bulk-cli.ts export [--types t1,t2] [--views v1,v2] > contents.ndjson
 *   node --import tsx src/bulk-cli.ts import < contents.ndjson > answers.ndjson
 *
 * The platform: PLATFORM_URL (default http://127.0.0.1:8080). Who: PLATFORM_TOKEN, or
 * PLATFORM_USER with PLATFORM_PASSWORD (a token is asked for at start). `import` takes export
 * lines (turned into create lines: aspects, aliases, metadata, views) and bulk lines
 * (`{"op": ...}`) alike, streams them to POST /content-service/bulk and writes the answer lines
 * to stdout; it exits 1 when a line failed, `export` when the export did not complete.
 */
import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { exportLineToCreate, type BulkAnswer, type ExportLine } from './client/bulk.js';

const base = `${(process.env.PLATFORM_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, '')}/content-service`;

function request(method: string, path: string, headers: Record<string, string>): http.ClientRequest {
  const url = new URL(`${base}${path}`);
  return (url.protocol === 'https:' ? https : http).request(url, { method, headers });
}

async function token(): Promise<string> {
  if (process.env.PLATFORM_TOKEN) return process.env.PLATFORM_TOKEN;
  const username = process.env.PLATFORM_USER;
  const password = process.env.PLATFORM_PASSWORD;
  if (!username || !password) throw new Error('Set PLATFORM_TOKEN, or PLATFORM_USER and PLATFORM_PASSWORD');
  const res = await fetch(`${base}/security/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  if (res.status !== 200) throw new Error(`Login as ${username} failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

function option(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** GET /export to stdout; rejects unless the whole export arrived. */
async function exportAll(argv: string[]): Promise<void> {
  const q = new URLSearchParams();
  for (const k of ['types', 'views']) {
    const v = option(argv, k);
    if (v) q.set(k, v);
  }
  const auth = await token();
  await new Promise<void>((resolve, reject) => {
    const req = request('GET', `/export${q.size ? `?${q}` : ''}`, { 'X-Auth-Token': auth });
    req.on('error', reject);
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () => reject(new Error(`Export failed: ${res.statusCode} ${text}`)));
        return;
      }
      res.on('aborted', () => reject(new Error('The export was cut off: it is incomplete')));
      res.on('error', reject);
      res.pipe(process.stdout, { end: false });
      res.on('end', () => (res.complete ? resolve() : reject(new Error('The export was cut off: it is incomplete'))));
    });
    req.end();
  });
}

/** The lines of stdin as bulk lines: export lines become creates, bulk lines pass. */
async function* bulkLines(): AsyncGenerator<string> {
  const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
  let batch = '';
  for await (const line of lines) {
    if (!line.trim()) continue;
    let out = line;
    try {
      const v = JSON.parse(line) as Partial<ExportLine> & { op?: string };
      if (v.op === undefined && v.content !== undefined && Array.isArray(v.aliases)) out = JSON.stringify(exportLineToCreate(v as ExportLine));
    } catch {
      // Sent as it is: the platform answers that line 400, and the rest go on.
    }
    batch += `${out}\n`;
    if (batch.length >= 64 * 1024) {
      yield batch;
      batch = '';
    }
  }
  if (batch) yield batch;
}

/** POST /bulk from stdin, the answers to stdout; resolves with the count of failed lines. */
async function importAll(): Promise<number> {
  const auth = await token();
  return new Promise<number>((resolve, reject) => {
    const req = request('POST', '/bulk', { 'X-Auth-Token': auth, 'Content-Type': 'application/x-ndjson', 'Transfer-Encoding': 'chunked' });
    req.on('error', reject);
    req.on('response', (res) => {
      let carry = '';
      let failed = 0;
      let answered = 0;
      res.setEncoding('utf8');
      res.on('data', (s: string) => {
        process.stdout.write(s);
        if (res.statusCode !== 200) return;
        carry += s;
        const parts = carry.split('\n');
        carry = parts.pop() ?? '';
        for (const p of parts) {
          answered++;
          // An answer line that is not JSON (a proxy's page, a cut line) is a failed line, not a crash.
          let status = Number.NaN;
          try {
            status = (JSON.parse(p) as BulkAnswer).status;
          } catch {}
          if (!(status < 300)) failed++;
        }
      });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`Import refused: ${res.statusCode}`));
        if (!res.complete) return reject(new Error(`The answer was cut off after ${answered} lines`));
        process.stderr.write(`${answered} lines, ${failed} failed\n`);
        resolve(failed);
      });
    });
    Readable.from(bulkLines()).pipe(req);
  });
}

async function main(argv: string[]): Promise<void> {
  const [cmd] = argv;
  if (cmd === 'export') return exportAll(argv.slice(1));
  if (cmd === 'import') {
    if ((await importAll()) > 0) process.exitCode = 1;
    return;
  }
  throw new Error('usage: bulk-cli export [--types t1,t2] [--views v1,v2] > file | import < file');
}

main(process.argv.slice(2)).catch((e: unknown) => {
  console.error((e as Error).message);
  process.exitCode = 1;
});
