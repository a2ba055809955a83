'use strict';
// node-http: the serverlab spec on Node's http module, one process, one event loop.

const http = require('http');
const { parseArgs } = require('util');
const { createRequestHandler } = require('./lib/router');
const { onClientError, onConnectRequest } = require('./lib/clienterror');
const { trackConnections } = require('./lib/stats');
const { startSyslog } = require('./lib/syslog');
const { createUpgradeHandler } = require('./lib/websocket');

const HOST = '127.0.0.1';
const SERVER_NAME = 'node-http';

const USAGE =
  'usage: node server.js --port N [--syslog-port N] [--docroot DIR] ' +
  '[--max-header-kb N] [--backlog N]';

function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string' },
      'syslog-port': { type: 'string' },
      docroot: { type: 'string' },
      'max-header-kb': { type: 'string', default: '64' },
      backlog: { type: 'string', default: '4096' },
    },
  });
  const port = Number(values.port);
  const maxHeaderKb = Number(values['max-header-kb']);
  const backlog = Number(values.backlog);
  const syslogPort = values['syslog-port'] === undefined ? null : Number(values['syslog-port']);
  const validPort = (p) => Number.isInteger(p) && p >= 0 && p <= 65535;
  if (!validPort(port) || (syslogPort !== null && !validPort(syslogPort))) {
    throw new Error('ports must be integers from 0 to 65535');
  }
  if (!(Number.isInteger(maxHeaderKb) && maxHeaderKb > 0)) {
    throw new Error('--max-header-kb must be a positive integer');
  }
  if (!(Number.isInteger(backlog) && backlog > 0)) throw new Error('--backlog must be positive');
  return { port, syslogPort, docroot: values.docroot, maxHeaderKb, backlog };
}

function createHttpServer(options) {
  const { onRequest, onUnsupportedExpectation } = createRequestHandler({
    serverName: SERVER_NAME,
    docroot: options.docroot,
  });
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

function listen(server, port, backlog) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host: HOST, backlog }, () => {
      server.removeListener('error', reject);
      // After start-up an error is an accept failure (e.g. EMFILE): report it, keep serving.
      server.on('error', (err) => process.stderr.write(`node-http: ${err.message}\n`));
      resolve(server.address().port);
    });
  });
}

async function main() {
  let options;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`node-http: ${err.message}\n${USAGE}\n`);
    process.exit(2);
  }
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
  const server = createHttpServer(options);
  const port = await listen(server, options.port, options.backlog);
  let syslogNote = '';
  if (options.syslogPort !== null) {
    const { tcp } = await startSyslog(options.syslogPort, HOST);
    syslogNote = `, syslog on ${HOST}:${tcp.address().port}`;
  }
  process.stderr.write(`node-http listening on ${HOST}:${port}${syslogNote}\n`);
}

main().catch((err) => {
  process.stderr.write(`node-http: ${err.message}\n`);
  process.exit(1);
});
