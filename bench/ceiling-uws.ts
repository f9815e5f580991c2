/**
 * The HTTP ceiling of this machine for `npm run bench`: a raw uWebSockets.js handler (the same
 * package as the gateway) answering a fixed JSON body, with no routing, auth or Redis. A GET is
 * answered at once; a request with a body (POST, PUT) is answered once the body has been read.
 * bench/bench.ts runs it in its own process and loads it with the same wrk settings as the
 * platform's workloads.
 *   node --import tsx bench/ceiling-uws.ts <port>     prints `LISTENING <port>`
 */
import uWS from 'uWebSockets.js';

const port = Number(process.argv[2] ?? 0);
const body = JSON.stringify({
  system: { id: 'contentid/01JBENCH', version: 'c:01JBENCH:01JBENCHV', contentType: 'article' },
  aspects: { body: { _type: 'body', title: 'Fixed body' } },
});

const app = uWS.App();
app.any('/*', (res, req) => {
  const method = req.getMethod();
  if (method === 'get' || method === 'head') {
    res.writeStatus('200 OK').writeHeader('Content-Type', 'application/json').end(body);
    return;
  }
  let aborted = false;
  res.onAborted(() => (aborted = true));
  res.onData((_chunk, last) => {
    if (!last || aborted) return;
    res.cork(() => res.writeStatus('200 OK').writeHeader('Content-Type', 'application/json').end(body));
  });
});
app.listen('127.0.0.1', port, (sock) => {
  if (!sock) {
    console.error(`cannot listen on 127.0.0.1:${port}`);
    process.exit(1);
  }
  console.log(`LISTENING ${uWS.us_socket_local_port(sock)}`);
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
