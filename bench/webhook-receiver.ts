/**
 * The receiver of bench/webhooks.ts, in its own process (so that the load generator's work does
 * not delay its answers): answers 204, counts, and keeps each arrival's latency from the event's
 * commit time. Driven over IPC: {cmd: 'count'}, {cmd: 'measure'}, {cmd: 'report'}.
 */
import http from 'node:http';

let received = 0;
let lat: number[] | null = null;
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    received++;
    if (lat) {
      const s = Buffer.concat(chunks).toString();
      const at = s.indexOf('"time":"');
      lat.push(Date.now() - Date.parse(s.slice(at + 8, at + 32)));
    }
    res.writeHead(204).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as { port: number }).port }));
process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'count') process.send!({ received });
  else if (m.cmd === 'measure') {
    lat = [];
    process.send!({ ok: true });
  } else if (m.cmd === 'report') process.send!({ received, lat });
});
