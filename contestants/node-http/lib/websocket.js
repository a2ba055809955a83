'use strict';
// GET /ws (spec §11) with the `ws` package: the handshake is checked here first (so that a
// refusal gets the spec's JSON error and 426 for a wrong version), then `ws` does the framing,
// 1002, 1007 and 1009 included; subscribe, echo and publish messages, 1003 and 1008 are ours.

const http = require('http');
const { WebSocketServer, WebSocket } = require('ws');
const { counters } = require('./stats');
const { sendError } = require('./respond');
const { isEventName } = require('./validate');
const push = require('./push');
const { hub } = require('./hub');
const { isPromise, settle } = require('./settle');

const MAX_MESSAGE = 64 * 1024;
const KEY = /^[A-Za-z0-9+/]{22}==$/;

const wss = new WebSocketServer({
  noServer: true,
  clientTracking: false,
  maxPayload: MAX_MESSAGE,
  perMessageDeflate: false, // the spec declines every extension
  handleProtocols: () => false, // and selects no subprotocol
  closeTimeout: 2000, // after a close frame, the client has 2 s to answer it
});

class WebSocketSubscriber extends push.Subscriber {
  constructor(body, ws) {
    super('websocket', body, null);
    this.ws = ws;
  }

  alive() {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    if (this.ws.bufferedAmount <= push.BACKLOG_LIMIT) return true;
    this.ws.terminate();
    return false;
  }

  deliver(json) {
    counters.ws.deliveries++;
    this.ws.send(json);
  }
}

// Why a request to /ws is not a valid upgrade: [status, reason, headers], or null.
function handshakeProblem(req) {
  const upgrade = (req.headers.upgrade || '').toLowerCase();
  const connection = (req.headers.connection || '').toLowerCase().split(',');
  if (upgrade !== 'websocket') return [400, 'a websocket upgrade is required'];
  if (!connection.some((token) => token.trim() === 'upgrade')) {
    return [400, 'connection: upgrade is required'];
  }
  const version = req.headers['sec-websocket-version'];
  if (version === undefined) return [400, 'sec-websocket-version is required'];
  if (version !== '13') {
    return [426, 'sec-websocket-version 13 only', { 'Sec-WebSocket-Version': '13' }];
  }
  const key = req.headers['sec-websocket-key'];
  if (!KEY.test(key || '')) return [400, 'sec-websocket-key is not 16 bytes in base64'];
  return null;
}

// GET /ws that reached the router: not an upgrade, or one handshakeProblem refused.
function refuseWs(req, res) {
  const [status, reason, headers] = handshakeProblem(req) || [400, 'a websocket upgrade is required'];
  sendError(res, status, reason, headers);
}

function send(ws, value) {
  ws.send(JSON.stringify(value));
}

function subscribeMessage(session, message) {
  const events = message.events;
  if (session.sub) return 'subscribed already';
  const valid =
    Array.isArray(events) &&
    events.length >= 1 &&
    events.length <= push.MAX_EVENTS_PER_REQUEST &&
    events.every(isEventName) &&
    new Set(events).size === events.length;
  if (!valid) return 'events must be 1 to 16 distinct event names';
  send(session.ws, { type: 'subscribed', events });
  session.sub = new WebSocketSubscriber(message, session.ws);
  push.subscribe(session.sub);
  return null;
}

function echoMessage(session, message) {
  counters.ws.echoes++;
  send(session.ws, { type: 'echo', data: message.data === undefined ? null : message.data });
  return null;
}

// The reply comes when the cycle's last delivery is handed over: at once in one process, or
// (a Promise) when every worker has delivered it.
function publishMessage(session, message) {
  if (!isEventName(message.event)) return 'publish needs an event name';
  counters.ws.publishes++;
  const dataJson = JSON.stringify(message.data === undefined ? null : message.data);
  return settle(hub.publish(message.event, dataJson), ([seq, total]) => {
    if (session.ws.readyState === WebSocket.OPEN) {
      send(session.ws, { type: 'published', event: message.event, seq, total });
    }
    return null;
  });
}

const HANDLERS = { subscribe: subscribeMessage, echo: echoMessage, publish: publishMessage };

// Replies go out in the order of the messages: while a publish waits for the cluster's
// workers, the messages after it wait too.
function onMessage(session, data, isBinary) {
  if (session.waiting) {
    session.waiting.push([data, isBinary]);
    return;
  }
  const handled = handleMessage(session, data, isBinary);
  if (!isPromise(handled)) return;
  session.waiting = [];
  handled.then(
    () => resumeMessages(session),
    () => session.ws.close(1011, 'server state unavailable'),
  );
}

function resumeMessages(session) {
  const waiting = session.waiting;
  session.waiting = null;
  while (waiting.length > 0) {
    onMessage(session, ...waiting.shift());
    if (session.waiting) {
      session.waiting.push(...waiting);
      return;
    }
  }
}

// `ws` has checked framing, size and UTF-8 by now. Returns a Promise while a publish waits.
function handleMessage(session, data, isBinary) {
  if (isBinary) return session.ws.close(1003, 'binary messages are not accepted');
  let message;
  try {
    message = JSON.parse(data.toString('utf8'));
  } catch {
    return session.ws.close(1008, 'a message is one json object');
  }
  const isObject = message !== null && typeof message === 'object' && !Array.isArray(message);
  const handler = isObject && Object.hasOwn(HANDLERS, message.type) && HANDLERS[message.type];
  return settle(handler ? handler(session, message) : 'unknown message type', (problem) => {
    if (problem) session.ws.close(1008, problem);
  });
}

function onConnection(ws) {
  counters.ws.open++;
  counters.ws.total++;
  const session = { ws, sub: null, waiting: null };
  ws.on('message', (data, isBinary) => onMessage(session, data, isBinary));
  // `ws` has already sent the close code of a protocol error (1002, 1007, 1009).
  ws.on('error', () => {});
  ws.on('close', () => {
    counters.ws.open--;
    if (session.sub) push.unsubscribe(session.sub);
  });
}

// Node hands every request with an Upgrade to 'upgrade'. A valid one to /ws becomes a
// WebSocket; any other is answered as an ordinary request (then the connection closes).
// Node takes its own error listener off an upgraded socket: without one of ours, a client
// that resets the connection before its answer is written (ECONNRESET) ended the process.
function createUpgradeHandler(onRequest) {
  return function onUpgrade(req, socket, head) {
    socket.on('error', () => socket.destroy());
    const path = req.url.split('?')[0];
    if (path === '/ws' && req.method === 'GET' && !handshakeProblem(req)) {
      counters.requestsTotal++;
      counters.responsesTotal++;
      wss.handleUpgrade(req, socket, head, onConnection);
      return;
    }
    const res = new http.ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket);
    res.on('finish', () => socket.end());
    onRequest(req, res);
  };
}

module.exports = { createUpgradeHandler, refuseWs, handshakeProblem };
