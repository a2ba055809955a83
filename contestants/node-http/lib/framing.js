'use strict';
// Request framing (spec §1.1) that Node's parser, llhttp, lets through: it frames any
// Transfer-Encoding list that ends in chunked, unknown codings included, and HTTP/1.0
// requests with Transfer-Encoding. Such a request is refused before routing, and since
// llhttp has already parsed what followed it, nothing later on that connection is served.

const REFUSED = Symbol('framing refused');
const ANSWERING = Symbol('response of the request being read');

// [status, reason] if the request's framing is refused, else null.
function framingRefusal(req) {
  const values = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i].toLowerCase() === 'transfer-encoding') values.push(req.rawHeaders[i + 1]);
  }
  if (values.length === 0) return null;
  if (req.httpVersion === '1.0') return [400, 'transfer-encoding in an http/1.0 request'];
  const codings = values.join(',').split(',').map((coding) => coding.trim().toLowerCase());
  if (codings.pop() !== 'chunked') return [400, 'chunked is not the final transfer coding'];
  if (codings.includes('chunked')) return [400, 'chunked applied more than once'];
  if (codings.length > 0) return [501, 'unknown transfer coding'];
  return null;
}

// False if the request comes after a refused one on its connection: it is dropped unserved.
function admit(req, res) {
  if (req.socket[REFUSED]) {
    req.resume();
    return false;
  }
  req.socket[ANSWERING] = res;
  return true;
}

function markRefused(req) {
  req.socket[REFUSED] = true;
}

function wasRefused(socket) {
  return Boolean(socket[REFUSED]);
}

// True if a parse error lies in the body of a request that was already answered (a 404
// sent before the body was read): the connection must close without a second answer.
function inAnsweredBody(socket) {
  const res = socket[ANSWERING];
  return Boolean(res && res.writableEnded && !res.req.complete);
}

module.exports = { framingRefusal, admit, markRefused, wasRefused, inAnsweredBody };
