/**
 * Bulk import and export load (issue 20, ARCHITECTURE "Bulk import"), run by bench/bench.ts
 * against its platform, or alone against any:
 *
 *   node --import tsx bench/bulk.ts <root> import <lines> [type]   one POST /bulk of <lines> creates
 *   node --import tsx bench/bulk.ts <root> export [type]           one GET /export?types=<type>
 *
 * Prints one `RESULT {json}` line: lines (or contents) per second from the request's start to
 * the last answer line, the statuses, and the peak RSS of this process. The body is made before
 * the clock starts up to 200,000 lines (about 40 MB), while it is sent past that; the answers are
 * counted on their bytes as they come.
 */
import http from 'node:http';
import { Readable } from 'node:stream';
import { login, result, round2 } from './lib.js';

const [root, mode, a1, a2] = process.argv.slice(2);
const TYPE_DEFAULT = 'bulkbench';

/** The creates of the import: the content of the single-request create benchmark (bench/bench.ts), numbered. */
function* creates(n: number, type: string): Generator<Buffer> {
  const perChunk = 500;
  for (let i = 0; i < n; i += perChunk) {
    let s = '';
    for (let j = i; j < Math.min(n, i + perChunk); j++) {
      s += `{"op":"create","content":{"system":{"contentType":"${type}"},"aspects":{"body":{"_type":"body","title":"Benchmark article ${j}","lead":"A short lead for the benchmark.","text":"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.","tags":["bench","bulk","article"]},"byline":{"_type":"byline","author":"Bench Writer"}}}}\n`;
    }
    yield Buffer.from(s);
  }
}

/**
 * The import's body: made before the clock starts when it fits in memory (up to PREMADE_LINES,
 * about 200 bytes a line), so that the load generator, on the same cores, spends its time
 * sending rather than making lines; made while sent past that (memory stays flat).
 */
const PREMADE_LINES = 200_000;
const bodyOf = (n: number, type: string): Readable => (n <= PREMADE_LINES ? Readable.from([...creates(n, type)]) : Readable.from(creates(n, type)));

const STATUS = Buffer.from('"status":');
const CREATED = Buffer.from('"status":201');
const NL = 0x0a;

/** Occurrences of `needle` in `buf` that begin at or after `from`. */
function count(buf: Buffer, needle: Buffer | number, from = 0): number {
  let n = 0;
  const step = typeof needle === 'number' ? 1 : needle.length;
  for (let at = buf.indexOf(needle, from); at >= 0; at = buf.indexOf(needle, at + step)) n++;
  return n;
}

/** Streams a request (body optional) and counts the answer's lines by their `status`. */
function stream(
  method: string,
  path: string,
  token: string,
  body?: Readable,
): Promise<{ status: number; lines: number; statuses: Record<string, number>; ms: number }> {
  const url = new URL(`${root}/content-service${path}`);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'X-Auth-Token': token };
    if (body) Object.assign(headers, { 'Content-Type': 'application/x-ndjson', 'Transfer-Encoding': 'chunked' });
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, agent: false }, (res) => {
      // Counted on the bytes: lines, and answers `"status":201` against all `"status":` (the
      // others as '?'); the last bytes of a chunk are kept for a needle cut by its end.
      let lines = 0;
      let created = 0;
      let answers = 0;
      let tail = Buffer.alloc(0);
      res.on('data', (chunk: Buffer) => {
        lines += count(chunk, NL);
        if (mode !== 'import') return;
        // The tail is shorter than `"status":201`, so none lies in it alone; a `"status":` may,
        // and was counted with the chunk before: those that end past the tail are counted here.
        const b = tail.length ? Buffer.concat([tail, chunk]) : chunk;
        created += count(b, CREATED);
        answers += count(b, STATUS, Math.max(0, tail.length - STATUS.length + 1));
        tail = Buffer.from(b.subarray(Math.max(0, b.length - CREATED.length + 1)));
      });
      res.on('end', () => {
        const statuses: Record<string, number> = mode === 'import' ? { 201: created, ...(answers > created ? { '?': answers - created } : {}) } : {};
        resolve({ status: res.statusCode ?? 0, lines, statuses, ms: performance.now() - t0 });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body) body.pipe(req);
    else req.end();
  });
}

async function main(): Promise<void> {
  const token = await login(root, 'editor');
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 100);
  try {
    if (mode === 'import') {
      const n = Number(a1);
      const type = a2 ?? TYPE_DEFAULT;
      const r = await stream('POST', '/bulk', token, bodyOf(n, type));
      const ok = r.statuses['201'] ?? 0;
      result({
        name: 'bulk import',
        lines: r.lines,
        seconds: round2(r.ms / 1000),
        linesPerSecond: Math.round(r.lines / (r.ms / 1000)),
        errors: n - ok,
        statuses: r.statuses,
        httpStatus: r.status,
        loadgenRssMiB: Math.round(peak / 2 ** 20),
      });
    } else if (mode === 'export') {
      const type = a1 ?? TYPE_DEFAULT;
      const r = await stream('GET', `/export?types=${encodeURIComponent(type)}`, token);
      result({
        name: 'export',
        contents: r.lines,
        seconds: round2(r.ms / 1000),
        contentsPerSecond: Math.round(r.lines / (r.ms / 1000)),
        httpStatus: r.status,
        loadgenRssMiB: Math.round(peak / 2 ** 20),
      });
    } else {
      throw new Error('usage: bulk.ts <root> import <lines> [type] | export [type]');
    }
  } finally {
    clearInterval(sampler);
  }
}

main().catch((e: unknown) => {
  console.error((e as Error).stack ?? e);
  process.exitCode = 1;
});
