'use strict';
// Maps a request to its handler: exact paths from a table, /files/ by prefix, 404 and 405
// (with Allow) for everything else.

const { sendBody, sendError, methodNotAllowed } = require('./respond');
const { createControlRoutes } = require('./control');
const { createFileHandler, FILES_PREFIX } = require('./files');
const { handleUpload } = require('./upload');
const { handleSse } = require('./sse');
const { refuseWs } = require('./websocket');
const { counters } = require('./stats');
const { requestLog, logWhenClosed } = require('./requestlog');
const { framingRefusal, admit, markRefused } = require('./framing');

const PERF_BODY = Buffer.from(
  'serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n',
);

function sendPerf(req, res) {
  sendBody(res, 200, 'text/plain', PERF_BODY);
}

function splitUrl(rawUrl) {
  const q = rawUrl.indexOf('?');
  return q === -1
    ? { path: rawUrl, query: '' }
    : { path: rawUrl.slice(0, q), query: rawUrl.slice(q + 1) };
}

function dispatch(req, res, methods, url) {
  const handler = methods[req.method];
  if (handler) handler(req, res, url);
  else methodNotAllowed(res, Object.keys(methods));
}

function createRequestHandler({ serverName, docroot }) {
  const routes = new Map(
    Object.entries({
      '/perf': { GET: sendPerf, HEAD: sendPerf },
      '/upload': { POST: handleUpload },
      '/sse': { GET: handleSse },
      '/ws': { GET: refuseWs },
      ...createControlRoutes(serverName),
    }),
  );
  const serveFile = docroot ? createFileHandler(docroot) : null;
  const fileRoute = serveFile && {
    GET: (req, res, url) => serveFile(req, res, url.path),
    HEAD: (req, res, url) => serveFile(req, res, url.path),
  };

  function onRequest(req, res) {
    if (!admit(req, res)) return;
    counters.requestsTotal++;
    if (requestLog.enabled) logWhenClosed(req, res);
    // HTTP/1.1 requires Host; Node's own check answers without the spec's JSON error body.
    if (req.headers.host === undefined && req.httpVersionMinor >= 1) {
      sendError(res, 400, 'missing host header', { Connection: 'close' });
      return;
    }
    const refusal = framingRefusal(req);
    if (refusal) {
      markRefused(req);
      sendError(res, refusal[0], refusal[1], { Connection: 'close' });
      return;
    }
    const url = splitUrl(req.url);
    const methods = routes.get(url.path);
    if (methods) dispatch(req, res, methods, url);
    else if (fileRoute && url.path.startsWith(FILES_PREFIX)) dispatch(req, res, fileRoute, url);
    else sendError(res, 404, 'not found');
  }

  // An Expect other than 100-continue: Node's own 417 would have no JSON body.
  function onUnsupportedExpectation(req, res) {
    counters.requestsTotal++;
    if (requestLog.enabled) logWhenClosed(req, res);
    sendError(res, 417, 'unsupported expectation', { Connection: 'close' });
  }

  return { onRequest, onUnsupportedExpectation };
}

module.exports = { createRequestHandler, PERF_BODY };
