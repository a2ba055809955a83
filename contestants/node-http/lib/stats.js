'use strict';
// Counters behind GET /stats (spec §5). Plain numeric fields: the hot path only does `++`.

const SPEC_VERSION = '2.1';

const counters = {
  startedAt: Date.now(),
  connectionsOpen: 0,
  connectionsTotal: 0,
  requestsTotal: 0,
  openSubscribers: 0, // every transport: connections.start/finish of deliveries
  open: { longpoll: 0, comet: 0, sse: 0, websocket: 0 },
  responsesTotal: 0,
  responsesPush: 0,
  responsesTimeouts: 0,
  syslogReceived: 0,
  syslogBytes: 0,
  syslogTcpConnections: 0,
  sse: { total: 0, deliveries: 0, replayed: 0, gaps: 0, heartbeats: 0, timeouts: 0 },
  ws: { open: 0, total: 0, deliveries: 0, echoes: 0, publishes: 0 },
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
    requests: {
      total: counters.requestsTotal,
      open_push: counters.open.longpoll + counters.open.comet,
    },
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
    sse: { open: counters.open.sse, ...counters.sse },
    websocket: { ...counters.ws, subscribers: counters.open.websocket },
  };
}

module.exports = { counters, trackConnections, snapshot };
