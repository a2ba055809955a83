'use strict';
// The listening sockets of one process: HTTP and syslog on 127.0.0.1, and on the manifest's
// {host} as well when it is another address (spec §1). In a cluster worker these listens go
// through node:cluster, so every worker shares the primary's sockets.

const http = require('http');
const net = require('net');
const { createRequestHandler } = require('./router');
const { onClientError, onConnectRequest } = require('./clienterror');
const { trackConnections } = require('./stats');
const { startSyslog } = require('./syslog');
const { createUpgradeHandler } = require('./websocket');

const LOOPBACK = '127.0.0.1';

function createHttpServer(handlers, options) {
  const { onRequest, onUnsupportedExpectation } = handlers;
  const server = http.createServer(
    { maxHeaderSize: options.maxHeaderKb * 1024, requireHostHeader: false },
    onRequest,
  );
  server.on('checkExpectation', onUnsupportedExpectation);
  server.on('upgrade', createUpgradeHandler(onRequest));
  server.on('connect', onConnectRequest);
  // Uploads may trickle in for longer than Node's default five minutes.
  server.requestTimeout = 0;
  server.on('clientError', onClientError);
  trackConnections(server);
  return server;
}

function listenHttp(server, port, host, backlog) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, backlog }, () => {
      server.removeListener('error', reject);
      // After start-up an error is an accept failure (e.g. EMFILE): report it, keep serving.
      server.on('error', (err) => process.stderr.write(`node-http: ${err.message}\n`));
      resolve(server.address().port);
    });
  });
}

// Every address to listen on: loopback first, whose port (chosen when 0) the others share.
function addresses(host) {
  return host === LOOPBACK ? [LOOPBACK] : [LOOPBACK, host];
}

// Listens on every address; resolves with the ports, as listeningLine takes them.
async function listenAll(options, serverName) {
  const handlers = createRequestHandler({ serverName, docroot: options.docroot });
  let port = options.port;
  for (const host of addresses(options.host)) {
    port = await listenHttp(createHttpServer(handlers, options), port, host, options.backlog);
  }
  let syslogPort = options.syslogPort;
  if (syslogPort !== null) {
    for (const host of addresses(options.host)) {
      syslogPort = (await startSyslog(syslogPort, host)).tcp.address().port;
    }
  }
  return { port, syslogPort };
}

function listeningLine(serverName, options, { port, syslogPort }) {
  const syslog = syslogPort === null ? '' : `, syslog on ${LOOPBACK}:${syslogPort}`;
  const also = options.host === LOOPBACK ? '' : ` (also on ${options.host})`;
  const workers = options.workers === 1 ? '' : `, ${options.workers} workers`;
  return `${serverName} listening on ${LOOPBACK}:${port}${syslog}${also}${workers}\n`;
}

// --host takes an address, not a name: what a server binds must be exactly what it was given.
function isAddress(host) {
  return net.isIP(host) !== 0;
}

module.exports = { LOOPBACK, listenAll, listeningLine, isAddress };
