'use strict';
// POST /logging: one stderr line per request while enabled, nothing at all while disabled.

const state = { enabled: false };

function logWhenClosed(req, res) {
  const started = Date.now();
  res.once('close', () => {
    const status = res.headersSent ? res.statusCode : 0;
    process.stderr.write(
      `${new Date(started).toISOString()} ${req.socket.remoteAddress} ` +
        `"${req.method} ${req.url}" ${status} ${Date.now() - started}ms\n`,
    );
  });
}

// The body of POST /logging: [status, answer].
function setLogging(body) {
  if (typeof body.enabled !== 'boolean') return [400, { error: 'enabled must be true or false' }];
  state.enabled = body.enabled;
  return [200, { enabled: state.enabled }];
}

module.exports = { requestLog: state, logWhenClosed, setLogging };
