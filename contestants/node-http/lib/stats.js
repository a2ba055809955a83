'use strict';
// Counters behind GET /stats (spec §5). Plain numeric fields: the hot path only does `++`.

const SPEC_VERSION = '3.4';
// How syslog messages are taken (spec §7.1): 'count' or 'parse', fixed at start.
const settings = { syslogMode: 'count' };

const counters = {
  startedAt: Date.now(),
  connectionsOpen: 0,
  connectionsTotal: 0,
  requestsTotal: 0,
  openSubscribers: 0, // every transport: connections.start/finish of deliveries
  open: { longpoll: 0, comet: 0, sse: 0, websocket: 0, grpc: 0 },
  responsesTotal: 0,
  responsesPush: 0,
  responsesTimeouts: 0,
  syslogReceived: 0,
  syslogBytes: 0,
  syslogTcpConnections: 0,
  syslogParsed: 0,
  syslogMalformed: 0,
  syslogRfc3164: 0,
  syslogSdElements: 0,
  syslogMsgBytes: 0,
  sse: { total: 0, deliveries: 0, replayed: 0, gaps: 0, heartbeats: 0, timeouts: 0 },
  ws: { open: 0, total: 0, deliveries: 0, echoes: 0, publishes: 0 },
  // `calls` is grpc-js's own count, read when asked (grpc.js); `deliveries` counted here.
  grpc: { calls: 0, deliveries: 0 },
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
      // A gRPC call is an HTTP/2 request (spec §5).
      total: counts.requestsTotal + counts.grpc.calls,
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
      mode: settings.syslogMode,
      parsed: counts.syslogParsed,
      malformed: counts.syslogMalformed,
      rfc3164: counts.syslogRfc3164,
      sd_elements: counts.syslogSdElements,
      msg_bytes: counts.syslogMsgBytes,
    },
    sse: { open: counts.open.sse, ...counts.sse },
    websocket: { ...counts.ws, subscribers: counts.open.websocket },
    grpc: { calls: counts.grpc.calls, open: counts.open.grpc, deliveries: counts.grpc.deliveries },
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

module.exports = { counters, settings, trackConnections, snapshot, addCounts };
