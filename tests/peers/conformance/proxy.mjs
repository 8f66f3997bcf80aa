// A loopback proxy for the MCP conformance suite, which cannot send headers: every request is
// forwarded to loadout unchanged (method, path, query, headers, Host and Origin included, so the
// DNS-rebinding scenario tests loadout's own checks) plus `Authorization: Bearer <key>`, and every
// response, SSE streams included, is piped back as it arrives.
//   node proxy.mjs LISTEN_PORT UPSTREAM_PORT   (the key in LOADOUT_PEER_KEY)
import http from 'node:http';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const key = process.env.LOADOUT_PEER_KEY;
if (!listenPort || !upstreamPort || !key) {
  console.error('usage: LOADOUT_PEER_KEY=... node proxy.mjs LISTEN_PORT UPSTREAM_PORT');
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true });

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${key}` };
  const upstream = http.request(
    { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers, agent },
    (up) => {
      res.writeHead(up.statusCode, up.rawHeaders);
      res.flushHeaders();
      up.pipe(res);
    },
  );
  upstream.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`proxy: ${e.message}`);
  });
  // A client that goes away (an SSE stream it is done with) closes the upstream stream too.
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});
server.listen(listenPort, '127.0.0.1', () => console.log(`proxy listening on 127.0.0.1:${listenPort}`));
