'use strict';
// Every response leaves through these helpers so that responses.total counts each header
// section exactly once, and every error carries the spec's JSON body.

const { counters } = require('./stats');
const { isPromise } = require('./settle');

const JSON_TYPE = 'application/json';

function sendHead(res, status, headers) {
  counters.responsesTotal++;
  res.writeHead(status, headers);
}

function sendBody(res, status, contentType, body, extraHeaders) {
  const headers = {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
    ...extraHeaders,
  };
  sendHead(res, status, headers);
  res.end(body);
}

// Writes a chunk of a held response and hands it to the kernel now. Node's http corks the
// socket on a response's first write of a tick and uncorks it on the next: a whole emit
// cycle's writes would wait for the loop to finish, after every `sent` was stamped (spec §6:
// `sent` is taken immediately before the write that hands the delivery to the kernel).
function writeNow(res, chunk) {
  res.write(chunk);
  const socket = res.socket;
  if (socket && socket.writableCorked) socket.uncork();
}

function sendJson(res, status, value, extraHeaders) {
  sendBody(res, status, JSON_TYPE, JSON.stringify(value), extraHeaders);
}

function sendError(res, status, reason, extraHeaders) {
  sendJson(res, status, { error: reason }, extraHeaders);
}

// Sends what a server-wide call (hub.js) answers: now, or when the cluster's primary
// replies. A failed call means the primary has gone, and the server with it.
function whenAnswered(res, result, send) {
  if (!isPromise(result)) send(result);
  else result.then(send, (err) => sendError(res, 500, `server state unavailable: ${err.message}`));
}

function methodNotAllowed(res, allowed) {
  sendError(res, 405, 'method not allowed', { Allow: allowed.join(', ') });
}

// A raw HTTP/1.1 error for sockets whose request never became a ServerResponse
// (parse errors, oversized headers).
function rawErrorResponse(status, statusText, reason, extraHeaders = {}) {
  const body = JSON.stringify({ error: reason });
  const extraLines = Object.entries(extraHeaders).map(([name, value]) => `${name}: ${value}\r\n`);
  return (
    `HTTP/1.1 ${status} ${statusText}\r\n` +
    `Date: ${new Date().toUTCString()}\r\n` +
    extraLines.join('') +
    `Content-Type: ${JSON_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

module.exports = {
  writeNow,
  JSON_TYPE,
  sendHead,
  sendBody,
  sendJson,
  sendError,
  whenAnswered,
  methodNotAllowed,
  rawErrorResponse,
};
