'use strict';
// POST /upload: hashes the body as it streams in (spec §4); nothing is kept in memory.

const crypto = require('crypto');
const { sendJson } = require('./respond');

function handleUpload(req, res) {
  const hash = crypto.createHash('sha256');
  let bytes = 0;
  req.on('data', (chunk) => {
    bytes += chunk.length;
    hash.update(chunk);
  });
  req.on('end', () => {
    sendJson(res, 200, { bytes, sha256: hash.digest('hex') });
  });
}

module.exports = { handleUpload };
