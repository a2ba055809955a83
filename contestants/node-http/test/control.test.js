'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startServer, request, postJson, stats, sleep } = require('./harness');

let server;
before(async () => {
  server = await startServer();
});
after(() => server.stop());

test('GET /timestamp reports server time and the offset from the client', async () => {
  const before = Date.now();
  const res = (await request(server.port, 'GET', `/timestamp?client=${before - 50}`)).json();
  assert.ok(res.server >= before && res.server <= Date.now());
  assert.equal(res.client, before - 50);
  assert.equal(res.offset_ms, res.server - res.client);
  const bare = (await request(server.port, 'GET', '/timestamp')).json();
  assert.equal(bare.client, null);
  assert.equal(bare.offset_ms, null);
  for (const bad of ['-1', '1.5', 'abc', '']) {
    assert.equal((await request(server.port, 'GET', `/timestamp?client=${bad}`)).status, 400);
  }
});

test('POST /logging toggles one stderr line per request', async () => {
  assert.deepEqual((await postJson(server.port, '/logging', { enabled: true })).json(), {
    enabled: true,
  });
  await request(server.port, 'GET', '/perf?marker=logged');
  assert.deepEqual((await postJson(server.port, '/logging', { enabled: false })).json(), {
    enabled: false,
  });
  await request(server.port, 'GET', '/perf?marker=silent');
  await sleep(50);
  assert.match(server.stderr(), /GET \/perf\?marker=logged" 200/);
  assert.doesNotMatch(server.stderr(), /marker=silent/);
  for (const bad of [{}, { enabled: 'yes' }, { enabled: 1 }]) {
    assert.equal((await postJson(server.port, '/logging', bad)).status, 400);
  }
});

test('GET /stats counts connections, requests and responses', async () => {
  const first = await stats(server.port);
  assert.equal(first.spec_version, '3.4');
  assert.equal(first.server, 'node-http');
  await request(server.port, 'GET', '/perf');
  const second = await stats(server.port);
  assert.equal(second.requests.total, first.requests.total + 2);
  assert.equal(second.responses.total, first.responses.total + 2);
  assert.equal(second.connections.total, first.connections.total + 2);
  assert.ok(second.connections.open >= 1, 'this /stats connection is open');
  assert.deepEqual(Object.keys(second.syslog).sort(), [
    'bytes', 'malformed', 'mode', 'msg_bytes', 'parsed', 'received', 'rfc3164', 'sd_elements',
    'tcp_connections',
  ]);
});
