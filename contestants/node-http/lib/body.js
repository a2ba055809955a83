'use strict';
// Reads small JSON request bodies (control and push endpoints) with the spec's 64 KiB cap.

const { sendError } = require('./respond');

const JSON_BODY_LIMIT = 64 * 1024;
const EMPTY_BODY = Symbol('empty body');

// Answering before the body is read: close afterwards rather than drain a body we refused.
function refuseTooLarge(req, res) {
  sendError(res, 413, 'request body too large', { Connection: 'close' });
  req.resume();
}

// Calls onValue(objectOrEMPTY_BODY) once the whole body is read; answers 400/413 itself.
function readJsonBody(req, res, onValue) {
  const announced = Number(req.headers['content-length']);
  if (announced > JSON_BODY_LIMIT) {
    refuseTooLarge(req, res);
    return;
  }
  const chunks = [];
  let size = 0;
  let refused = false;
  req.on('data', (chunk) => {
    if (refused) return;
    size += chunk.length;
    if (size > JSON_BODY_LIMIT) {
      refused = true;
      refuseTooLarge(req, res);
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (refused) return;
    const text = Buffer.concat(chunks, size).toString('utf8');
    if (text.trim() === '') {
      onValue(EMPTY_BODY);
      return;
    }
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      sendError(res, 400, 'malformed json');
      return;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      sendError(res, 400, 'json body must be an object');
      return;
    }
    onValue(value);
  });
}

module.exports = { readJsonBody, EMPTY_BODY, JSON_BODY_LIMIT };
