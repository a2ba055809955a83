'use strict';
// The hardening tunables (suites/abuse.toml's "hardened" runs), on the real server.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const net = require('net');
const { startServer } = require('./harness');

test('a header never finished is cut off at --headers-timeout-s', async () => {
  const server = await startServer(['--headers-timeout-s', '1']);
  try {
    const socket = net.connect(server.port, '127.0.0.1');
    socket.write('GET /perf HTTP/1.1\r\nHost: x\r\n'); // and never the blank line
    const answer = await new Promise((resolve, reject) => {
      let received = '';
      socket.on('data', (chunk) => (received += chunk));
      socket.on('close', () => resolve(received));
      socket.on('error', reject);
    });
    // Node answers 408 and closes (its clientError handler may word the body).
    assert.match(answer, /^HTTP\/1\.1 408 /);
  } finally {
    await server.stop();
  }
});

test('a bad --headers-timeout-s stops the start with one line', async () => {
  await assert.rejects(startServer(['--headers-timeout-s', '0']), /--headers-timeout-s must be a positive integer/);
});
