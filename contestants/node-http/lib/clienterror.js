'use strict';
// Requests that never reach a request handler (bad syntax, oversized headers, CONNECT) are
// answered here on the raw socket with the spec's JSON error body.

const { rawErrorResponse } = require('./respond');
const { counters } = require('./stats');
const { wasRefused, inAnsweredBody } = require('./framing');

// Closing with unread input makes the kernel send RST, which can destroy the answer before
// the client reads it; so half-close, discard input for a moment, then close.
const LINGER_MS = 2000;
const ANSWERED = Symbol('client error answered');

const ANSWERS = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'request header fields too large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large', 'chunk extensions too large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'request timeout'],
};
const BAD_REQUEST = [400, 'Bad Request', 'malformed request'];

function responseInFlight(socket) {
  // The same check Node's default handler makes: never splice an error into a response.
  const inFlight = socket._httpMessage;
  return Boolean(inFlight && inFlight.headersSent);
}

function onClientError(err, socket) {
  // The parser reports again for every chunk a lingering socket receives.
  if (socket[ANSWERED]) return;
  socket[ANSWERED] = true;
  // A framing refusal is answered already, and its Connection: close ends the socket.
  if (wasRefused(socket)) return;
  if (!socket.writable || responseInFlight(socket)) {
    socket.destroy();
    return;
  }
  if (inAnsweredBody(socket)) {
    lingerAndClose(socket);
    return;
  }
  const [status, statusText, reason] = ANSWERS[err.code] || BAD_REQUEST;
  answerAndClose(socket, rawErrorResponse(status, statusText, reason));
}

function answerAndClose(socket, response) {
  counters.responsesTotal++;
  lingerAndClose(socket, response);
}

function lingerAndClose(socket, lastWrite) {
  socket.end(lastWrite);
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  socket.once('close', () => clearTimeout(linger));
}

// Node hands CONNECT over as a bare socket and drops it unanswered when nobody listens.
function onConnectRequest(req, socket) {
  counters.requestsTotal++;
  socket.on('error', () => socket.destroy());
  const allow = { Allow: 'GET, HEAD, POST' };
  answerAndClose(socket, rawErrorResponse(405, 'Method Not Allowed', 'method not allowed', allow));
}

module.exports = { onClientError, onConnectRequest };
