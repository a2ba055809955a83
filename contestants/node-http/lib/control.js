'use strict';
// Control endpoints (spec §5): /timestamp, /logging, /stats, and the JSON plumbing of the
// push endpoints (/event/set, /event/clear, /push).

const { sendJson, sendError, whenAnswered } = require('./respond');
const { readJsonBody, EMPTY_BODY } = require('./body');
const { hub } = require('./hub');
const push = require('./push');

const NON_NEGATIVE_INTEGER = /^\d+$/;

function isLoopback(address) {
  return (
    typeof address === 'string' &&
    (address.startsWith('127.') || address === '::1' || address.startsWith('::ffff:127.'))
  );
}

function loopbackOnly(handler) {
  return (req, res, url) => {
    if (!isLoopback(req.socket.remoteAddress)) {
      sendError(res, 403, 'control endpoints answer loopback clients only');
      return;
    }
    handler(req, res, url);
  };
}

// Handlers that take a JSON object body; allowEmpty passes an empty body on as null.
function withJsonBody(handler, { allowEmpty = false } = {}) {
  return (req, res) => {
    readJsonBody(req, res, (value) => {
      if (value !== EMPTY_BODY) handler(res, value);
      else if (allowEmpty) handler(res, null);
      else sendError(res, 400, 'empty body, expected a json object');
    });
  };
}

function timestamp(req, res, url) {
  const query = new URLSearchParams(url.query);
  const client = query.get('client');
  if (client !== null && !(NON_NEGATIVE_INTEGER.test(client) && Number.isSafeInteger(+client))) {
    sendError(res, 400, 'client must be a non-negative integer');
    return;
  }
  const server = Date.now();
  const clientMs = client === null ? null : Number(client);
  sendJson(res, 200, {
    server,
    client: clientMs,
    offset_ms: clientMs === null ? null : server - clientMs,
  });
}

function controlCall(operation) {
  return (res, body) =>
    whenAnswered(res, hub.control(operation, body), ([status, answer]) => sendJson(res, status, answer));
}

function createControlRoutes(serverName) {
  const sendStats = (req, res) =>
    whenAnswered(res, hub.stats(serverName), (stats) => sendJson(res, 200, stats));
  return {
    '/timestamp': { GET: timestamp, HEAD: timestamp },
    '/stats': { GET: sendStats, HEAD: sendStats },
    '/logging': { POST: loopbackOnly(withJsonBody(controlCall('logging'))) },
    '/event/set': { POST: loopbackOnly(withJsonBody(controlCall('set'))) },
    '/event/clear': { POST: loopbackOnly(withJsonBody(controlCall('clear'), { allowEmpty: true })) },
    '/push': { POST: withJsonBody(push.registerPush) },
  };
}

module.exports = { createControlRoutes };
