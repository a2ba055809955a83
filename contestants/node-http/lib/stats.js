'use strict';
// Counters behind GET /stats (spec §5). Plain numeric fields: the hot path only does `++`.

const SPEC_VERSION = '2.0';

const counters = {
  startedAt: Date.now(),
  connectionsOpen: 0,
  connectionsTotal: 0,
  requestsTotal: 0,
  openPush: 0,
  responsesTotal: 0,
  responsesPush: 0,
  responsesTimeouts: 0,
  syslogReceived: 0,
  syslogBytes: 0,
  syslogTcpConnections: 0,
};

function trackConnections(server) {
  server.on('connection', (socket) => {
    counters.connectionsOpen++;
    counters.connectionsTotal++;
    socket.once('close', () => counters.connectionsOpen--);
  });
}

function snapshot(serverName, events) {
  return {
    spec_version: SPEC_VERSION,
    server: serverName,
    uptime_ms: Date.now() - counters.startedAt,
    connections: { open: counters.connectionsOpen, total: counters.connectionsTotal },
    requests: { total: counters.requestsTotal, open_push: counters.openPush },
    responses: {
      total: counters.responsesTotal,
      push: counters.responsesPush,
      timeouts: counters.responsesTimeouts,
    },
    events,
    syslog: {
      received: counters.syslogReceived,
      bytes: counters.syslogBytes,
      tcp_connections: counters.syslogTcpConnections,
    },
  };
}

module.exports = { counters, trackConnections, snapshot };
