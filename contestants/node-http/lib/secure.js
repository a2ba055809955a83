'use strict';
// TLS and HTTP/2 (spec §12-§14): HTTPS and h2 on one TLS port, chosen by ALPN, and h2c
// with prior knowledge on a cleartext port of its own. Node's http2 module serves all three;
// on the TLS port `allowHTTP1` hands HTTP/1.1 connections to the same request handler as
// the cleartext port's, and its HTTP/2 compatibility objects look like http's req and res.

const fs = require('fs');
const http2 = require('http2');
const { trackConnections } = require('./stats');

// TLS 1.3's suites and TLS 1.2's ECDHE suites with AEAD, nothing else (spec §12).
const AEAD_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

// Node announces no stream limit unless told; the spec wants one from 100 to 1000 (§13):
// --h2-max-streams, 250 as shipped; fewer caps what one connection's streams cost.
function h2Settings(options) {
  return { maxConcurrentStreams: options.h2MaxStreams };
}

// A session broken by bad frames ends by itself (GOAWAY); it must not take the server.
function quietSessions(server) {
  server.on('sessionError', () => {});
  server.on('session', deferLibraryErrors);
  return server;
}

// A frame nghttp2 finds invalid (a WINDOW_UPDATE of 0, HEADERS on an even stream, ...)
// reaches Node's on_invalid_frame callback, which destroys the session at once, and
// destroy() with an error and no code sends GOAWAY INTERNAL_ERROR (lib/internal/http2/
// core.js). Right after that callback nghttp2 queues its own GOAWAY with the code RFC 9113
// names (PROTOCOL_ERROR, FLOW_CONTROL_ERROR): destroying one turn later lets that GOAWAY
// go first, and the close still follows (the later GOAWAY is a no-op in nghttp2).
function deferLibraryErrors(session) {
  const destroy = session.destroy;
  session.destroy = function destroyAfterLibraryGoaway(error, code) {
    if (error && error.code === 'ERR_HTTP2_ERROR' && code === undefined) {
      setImmediate(() => destroy.call(session, error));
      return;
    }
    destroy.call(session, error, code);
  };
}

// serveHttp1: listen.js's set-up of an HTTP/1.1 server (client errors, upgrades, counts),
// for the connections that ALPN gives HTTP/1.1.
// The certificate, versions and suites of every TLS port (spec §12, §15).
function tlsOptions(options) {
  return {
    cert: fs.readFileSync(options.tlsCert),
    key: fs.readFileSync(options.tlsKey),
    minVersion: 'TLSv1.2',
    ciphers: AEAD_CIPHERS,
  };
}

function createTlsServer(handlers, options, serveHttp1) {
  const server = http2.createSecureServer(
    {
      ...tlsOptions(options),
      allowHTTP1: true,
      settings: h2Settings(options),
      maxHeaderSize: options.maxHeaderKb * 1024,
    },
    handlers.onRequest,
  );
  // Spec §12: a renegotiation started by the client is refused (Node allows 3 in 10 min).
  server.on('secureConnection', (socket) => socket.disableRenegotiation());
  return quietSessions(serveHttp1(withoutNagle(server), handlers));
}

function createH2cServer(handlers, options) {
  const server = http2.createServer({ settings: h2Settings(options) }, handlers.onRequest);
  trackConnections(server);
  return quietSessions(withoutNagle(server));
}

// Node's HTTP/1.1 server turns Nagle's algorithm off on each connection (its `noDelay`,
// true by default); its HTTP/2 servers, which serve the TLS and h2c ports, leave it on. Then
// an answer written behind the unacknowledged session tickets waited for the client's
// delayed ACK: 40 ms more for a new TLS connection from CPython's client, not from the
// engine's (tests/test_tls_new_connections.py).
function withoutNagle(server) {
  server.on('connection', (socket) => socket.setNoDelay(true));
  return server;
}

module.exports = { AEAD_CIPHERS, createTlsServer, createH2cServer, tlsOptions };
