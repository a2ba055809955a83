'use strict';
// GET /files/<path>: streams a file below the document root (spec §3).

const fs = require('fs');
const path = require('path');
const { pipeline } = require('stream');
const { sendHead, sendError } = require('./respond');

const FILES_PREFIX = '/files/';

// Percent-decodes once and rejects every shape the spec forbids before touching the disk.
function relativeFilePath(rawPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(rawPath.slice(FILES_PREFIX.length));
  } catch {
    return { status: 400, reason: 'malformed percent-encoding' };
  }
  if (decoded.startsWith('/') || decoded.includes('\\') || decoded.includes('\0')) {
    return { status: 403, reason: 'path outside the document root' };
  }
  if (decoded.split('/').includes('..')) {
    return { status: 403, reason: 'path outside the document root' };
  }
  return { relative: decoded };
}

function createFileHandler(docroot) {
  // Resolved once so that a symlinked docroot still contains its own files.
  const root = fs.realpathSync(docroot);
  const rootPrefix = root.endsWith(path.sep) ? root : root + path.sep;

  function notFound(res) {
    sendError(res, 404, 'file not found');
  }

  function streamFile(req, res, fd, size) {
    sendHead(res, 200, { 'Content-Type': 'application/octet-stream', 'Content-Length': size });
    if (req.method === 'HEAD') {
      fs.close(fd, () => {});
      res.end();
      return;
    }
    // pipeline closes the fd and tears down the response if either side fails mid-stream.
    pipeline(fs.createReadStream(null, { fd }), res, () => {});
  }

  function openResolved(req, res, resolved) {
    fs.open(resolved, 'r', (openErr, fd) => {
      if (openErr) {
        notFound(res);
        return;
      }
      fs.fstat(fd, (statErr, stat) => {
        if (statErr || !stat.isFile()) {
          fs.close(fd, () => {});
          notFound(res);
          return;
        }
        streamFile(req, res, fd, stat.size);
      });
    });
  }

  return function serveFile(req, res, rawPath) {
    const checked = relativeFilePath(rawPath);
    if (checked.status) {
      sendError(res, checked.status, checked.reason);
      return;
    }
    fs.realpath(path.join(root, checked.relative), (err, resolved) => {
      if (err) {
        notFound(res);
      } else if (resolved !== root && !resolved.startsWith(rootPrefix)) {
        sendError(res, 403, 'path outside the document root');
      } else {
        openResolved(req, res, resolved);
      }
    });
  };
}

module.exports = { createFileHandler, FILES_PREFIX };
