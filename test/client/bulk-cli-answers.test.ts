import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { expect } from 'chai';

const run = promisify(execFile);

/**
 * `bulk-cli import` counts the answer lines it gets; a line that is not JSON (a proxy's page in a
 * 200, a cut line) is a failed line, and the command exits 1 with its count, not with an uncaught
 * exception (review s23d).
 */
describe('bulk-cli import: answer lines that are not JSON', function () {
  this.timeout(60_000);
  let server: http.Server;
  let url: string;
  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
        res.end('{"line":1,"status":201}\n<html>not json</html>\n{"line":3,"status":201}\n');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it('counts such a line as failed and exits 1', async () => {
    const r = await run('sh', ['-c', `printf '{"op":"delete","id":"contentid/x"}\\n' | node --import tsx src/bulk-cli.ts import`], {
      env: { ...process.env, PLATFORM_URL: url, PLATFORM_TOKEN: 't' },
    }).then(
      (ok) => ({ code: 0, ...ok }),
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    expect(r.stderr).to.contain('3 lines, 1 failed');
    expect(r.stderr).to.not.contain('SyntaxError');
    expect(r.code).to.equal(1);
  });
});
