'use strict';
// node-http: the serverlab spec on Node's http module. One process, one event loop; with
// --workers N > 1, a node:cluster primary and N worker processes (lib/primary.js).

const cluster = require('cluster');
const { parseArgs } = require('util');
const { LOOPBACK, listenAll, listeningLine, isAddress } = require('./lib/listen');

const SERVER_NAME = 'node-http';

const USAGE =
  'usage: node server.js --port N [--syslog-port N] [--docroot DIR] [--host ADDRESS] ' +
  '[--max-header-kb N] [--backlog N] [--workers N] [--signals-file PATH] ' +
  '[--headers-timeout-s N] [--h2-max-streams N] ' +
  '[--syslog-mode count|parse] [--tls-port N --tls-cert FILE --tls-key FILE] [--h2c-port N] ' +
  '[--syslog-tls-port N --tls-cert FILE --tls-key FILE]';

function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string' },
      'syslog-port': { type: 'string' },
      docroot: { type: 'string' },
      host: { type: 'string', default: LOOPBACK },
      'max-header-kb': { type: 'string', default: '64' },
      backlog: { type: 'string', default: '4096' },
      workers: { type: 'string', default: '1' },
      'signals-file': { type: 'string' },
      'syslog-mode': { type: 'string', default: 'count' },
      'tls-port': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'h2c-port': { type: 'string' },
      'syslog-tls-port': { type: 'string' },
      'grpc-port': { type: 'string' },
      'grpc-tls-port': { type: 'string' },
      'headers-timeout-s': { type: 'string', default: '60' },
      'h2-max-streams': { type: 'string', default: '250' },
    },
  });
  const port = Number(values.port);
  const maxHeaderKb = Number(values['max-header-kb']);
  const backlog = Number(values.backlog);
  const workers = Number(values.workers);
  const headersTimeoutS = Number(values['headers-timeout-s']);
  const h2MaxStreams = Number(values['h2-max-streams']);
  const optionalPort = (name) => (values[name] === undefined ? null : Number(values[name]));
  const syslogPort = optionalPort('syslog-port');
  const tlsPort = optionalPort('tls-port');
  const h2cPort = optionalPort('h2c-port');
  const syslogTlsPort = optionalPort('syslog-tls-port');
  const grpcPort = optionalPort('grpc-port');
  const grpcTlsPort = optionalPort('grpc-tls-port');
  const ports = [port, syslogPort, tlsPort, h2cPort, syslogTlsPort, grpcPort, grpcTlsPort];
  const validPort = (p) => p === null || (Number.isInteger(p) && p >= 0 && p <= 65535);
  if (!Number.isInteger(port) || !ports.every(validPort)) {
    throw new Error('ports must be integers from 0 to 65535');
  }
  const tlsCert = values['tls-cert'];
  const tlsKey = values['tls-key'];
  const anyTls = tlsPort !== null || syslogTlsPort !== null || grpcTlsPort !== null;
  if (anyTls !== (tlsCert !== undefined && tlsKey !== undefined)) {
    throw new Error(
      '--tls-port, --syslog-tls-port and --grpc-tls-port need --tls-cert and --tls-key, and they need one',
    );
  }
  if (grpcTlsPort !== null && grpcPort === null) throw new Error('--grpc-tls-port needs --grpc-port');
  if (!(Number.isInteger(maxHeaderKb) && maxHeaderKb > 0)) {
    throw new Error('--max-header-kb must be a positive integer');
  }
  if (!(Number.isInteger(backlog) && backlog > 0)) throw new Error('--backlog must be positive');
  if (!(Number.isInteger(workers) && workers > 0)) throw new Error('--workers must be positive');
  if (!(Number.isInteger(headersTimeoutS) && headersTimeoutS > 0)) {
    throw new Error('--headers-timeout-s must be a positive integer');
  }
  if (!(Number.isInteger(h2MaxStreams) && h2MaxStreams > 0)) {
    throw new Error('--h2-max-streams must be a positive integer');
  }
  if (!isAddress(values.host)) throw new Error('--host must be an IP address');
  const syslogMode = values['syslog-mode'];
  if (syslogMode !== 'count' && syslogMode !== 'parse') {
    throw new Error('--syslog-mode must be count or parse');
  }
  const { docroot, host } = values;
  const signalsFile = values['signals-file'];
  return {
    port,
    syslogPort,
    tlsPort,
    h2cPort,
    syslogTlsPort,
    grpcPort,
    grpcTlsPort,
    tlsCert,
    tlsKey,
    docroot,
    host,
    maxHeaderKb,
    backlog,
    workers,
    signalsFile,
    syslogMode,
    headersTimeoutS,
    h2MaxStreams,
  };
}

// workers = 1 is the plain one-process server: no cluster, nothing relayed.
async function runAlone(options) {
  const ports = await listenAll(options, SERVER_NAME);
  process.stderr.write(listeningLine(SERVER_NAME, options, ports));
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
  require('./lib/stats').settings.syslogMode = options.syslogMode;
  // Every process (a cluster's primary and workers alike) writes its own lines, with its pid.
  if (options.signalsFile) require('./lib/signals').startSignals(options.signalsFile);
  if (options.workers === 1) await runAlone(options);
  else if (cluster.isPrimary) require('./lib/primary').runPrimary(options, SERVER_NAME);
  else await require('./lib/worker').runWorker(options, SERVER_NAME);
}

main().catch((err) => {
  process.stderr.write(`node-http: ${err.message}\n`);
  process.exit(1);
});
