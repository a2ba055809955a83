'use strict';
// --signals-file (the manifest's {signals_file}): GC pauses, event-loop delay and the heap,
// as JSON lines written while the server works and complete once it has stopped.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { startServer, request, sleep } = require('./harness');

function readLines(file) {
  return fs.readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
}

test('the side file records gc pauses, loop delay and the heap of a working server', async () => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'node-http-signals-'));
  const file = path.join(folder, 'signals.jsonl');
  const server = await startServer(['--signals-file', file]);
  try {
    // Enough requests that the young generation fills and V8 scavenges at least once.
    for (let i = 0; i < 1500; i += 1) await request(server.port, 'GET', '/perf');
    await sleep(250);
  } finally {
    await server.stop();
  }
  const lines = readLines(file);
  fs.rmSync(folder, { recursive: true, force: true });
  const of = (kind) => lines.filter((line) => line.kind === kind);
  assert.ok(of('gc_pause').length > 0, 'no gc pause recorded');
  assert.ok(of('gc_pause').every((line) => line.value >= 0 && line.value < 10000));
  assert.ok(of('loop_delay').length > 0, 'no loop delay recorded');
  assert.ok(of('loop_delay').every((line) => line.value >= 0 && line.p99 <= line.value + 1));
  assert.ok(of('heap_used').every((line) => line.value > 1e6));
  const now = Date.now() / 1000;
  assert.ok(lines.every((line) => Math.abs(line.t - now) < 120), 'times are not Unix seconds');
});

test('without --signals-file the server writes no side file and serves as before', async () => {
  const server = await startServer();
  try {
    assert.equal((await request(server.port, 'GET', '/perf')).status, 200);
  } finally {
    await server.stop();
  }
});
