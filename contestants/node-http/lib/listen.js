'use strict';
// The listening sockets of one process: HTTP and syslog on 127.0.0.1, and on the manifest's
// {host} as well when it is another address (spec §1). In a cluster worker these listens go
// through node:cluster, so every worker shares the primary's sockets.

const http = require('http');
const net = require('net');
const { createRequestHandler } = require('./router');
const { onClientError, onConnectRequest } = require('./clienterror');
const { trackConnections } = require('./stats');
const { startSyslog, startSyslogTls } = require('./syslog');
const { createUpgradeHandler } = require('./websocket');
const { createTlsServer, createH2cServer, tlsOptions } = require('./secure');

const LOOPBACK = '127.0.0.1';

function createHttpServer(handlers, options) {
  const server = http.createServer(
    { maxHeaderSize: options.maxHeaderKb * 1024, requireHostHeader: false, ...headersTimeout(options) },
    handlers.onRequest,
  );
  return serveHttp1(server, handlers);
}

// --headers-timeout-s: how long a client may take to send a request's header, and a
// connection its first byte (Node's headersTimeout, 60 s as shipped). Node checks it every
// connectionsCheckingInterval (30 s as shipped), so a shorter one is checked twice in it:
// the standard answer to slowloris and idle connections (suites/abuse.toml runs both).
function headersTimeout({ headersTimeoutS }) {
  const ms = headersTimeoutS * 1000;
  return { headersTimeout: ms, connectionsCheckingInterval: Math.min(30000, ms / 2) };
}

// What an HTTP/1.1 server needs beyond its request handler; the TLS port's HTTP/1.1 side too.
function serveHttp1(server, { onRequest, onUnsupportedExpectation }) {
  server.on('checkExpectation', onUnsupportedExpectation);
  server.on('upgrade', createUpgradeHandler(onRequest));
  server.on('connect', onConnectRequest);
  // Uploads may trickle in for longer than Node's default five minutes.
  server.requestTimeout = 0;
  server.on('clientError', onClientError);
  trackConnections(server);
  return server;
}

function listenOn(server, port, host, backlog) {
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
    port = await listenOn(createHttpServer(handlers, options), port, host, options.backlog);
  }
  let tlsPort = options.tlsPort;
  if (tlsPort !== null) {
    for (const host of addresses(options.host)) {
      tlsPort = await listenOn(createTlsServer(handlers, options, serveHttp1), tlsPort, host, options.backlog);
    }
  }
  let h2cPort = options.h2cPort;
  if (h2cPort !== null) {
    for (const host of addresses(options.host)) {
      h2cPort = await listenOn(createH2cServer(handlers, options), h2cPort, host, options.backlog);
    }
  }
  let syslogPort = options.syslogPort;
  if (syslogPort !== null) {
    for (const host of addresses(options.host)) {
      syslogPort = (await startSyslog(syslogPort, host)).tcp.address().port;
    }
  }
  let syslogTlsPort = options.syslogTlsPort;
  if (syslogTlsPort !== null) {
    for (const host of addresses(options.host)) {
      syslogTlsPort = (await startSyslogTls(syslogTlsPort, host, tlsOptions(options))).address().port;
    }
  }
  // Loaded only where gRPC is served: a cluster's primary, which requires this module too,
  // serves none.
  const grpc = options.grpcPort === null ? {} : await require('./grpc').startGrpc(options, addresses(options.host));
  return { port, syslogPort, tlsPort, h2cPort, syslogTlsPort, ...grpc };
}

function listeningLine(serverName, options, ports) {
  const { port, syslogPort } = ports;
  let others = syslogPort === null ? '' : `, syslog on ${LOOPBACK}:${syslogPort}`;
  for (const [key, what] of [
    ['tlsPort', 'tls'],
    ['h2cPort', 'h2c'],
    ['syslogTlsPort', 'syslog tls'],
    ['grpcPort', 'grpc'],
    ['grpcTlsPort', 'grpc tls'],
  ]) {
    if (ports[key] !== null && ports[key] !== undefined) others += `, ${what} on ${LOOPBACK}:${ports[key]}`;
  }
  const also = options.host === LOOPBACK ? '' : ` (also on ${options.host})`;
  const workers = options.workers === 1 ? '' : `, ${options.workers} workers`;
  return `${serverName} listening on ${LOOPBACK}:${port}${others}${also}${workers}\n`;
}

// --host takes an address, not a name: what a server binds must be exactly what it was given.
function isAddress(host) {
  return net.isIP(host) !== 0;
}

module.exports = { LOOPBACK, listenAll, listeningLine, isAddress };
