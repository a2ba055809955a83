'use strict';
// Counters behind GET /stats (spec §5). Plain numeric fields: the hot path only does `++`.

const SPEC_VERSION = '3.1';

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

// The GET /stats document of these counts: this process's own, or (in a cluster's primary)
// the sum of every worker's (addCounts), over the uptime since startedAt.
function snapshot(serverName, events, counts = counters, startedAt = counters.startedAt) {
  return {
    spec_version: SPEC_VERSION,
    server: serverName,
    uptime_ms: Date.now() - startedAt,
    connections: { open: counts.connectionsOpen, total: counts.connectionsTotal },
    requests: {
      total: counts.requestsTotal,
      open_push: counts.open.longpoll + counts.open.comet,
    },
    responses: {
      total: counts.responsesTotal,
      push: counts.responsesPush,
      timeouts: counts.responsesTimeouts,
    },
    events,
    syslog: {
      received: counts.syslogReceived,
      bytes: counts.syslogBytes,
      tcp_connections: counts.syslogTcpConnections,
    },
    sse: { open: counts.open.sse, ...counts.sse },
    websocket: { ...counts.ws, subscribers: counts.open.websocket },
  };
}

// Adds the numbers of `part` into `sum`, which has the same shape or lacks some keys (the
// event names one worker knows and another does not).
function addCounts(sum, part) {
  for (const [key, value] of Object.entries(part)) {
    if (typeof value === 'number') sum[key] = (sum[key] || 0) + value;
    else sum[key] = addCounts(sum[key] || Object.create(null), value);
  }
  return sum;
}

module.exports = { counters, trackConnections, snapshot, addCounts };
