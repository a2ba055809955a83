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

module.exports = { requestLog: state, logWhenClosed };
