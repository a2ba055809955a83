'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startServer, request, postJson, stats, sleep, readSse, fields } = require('./harness');

let server;
before(async () => {
  server = await startServer();
});
after(() => server.stop());

const readStream = (path, headers) => readSse(server.port, path, headers);

test('a stream of two events: opening id, id + data per emit, then the timeout message', async () => {
  const reading = readStream('/sse?events=sa,sb&heartbeat_ms=0&duration_ms=500');
  await sleep(50);
  await postJson(server.port, '/event/set', { name: 'sa', interval_ms: 60 });
  await postJson(server.port, '/event/set', { name: 'sb', interval_ms: 90 });
  const { res, messages } = await reading;
  await postJson(server.port, '/event/clear', {});
  assert.equal(res.headers['content-type'], 'text/event-stream');
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.equal(messages[0], 'id: sa:0,sb:0');
  const events = messages.slice(1, -1).map(fields);
  const seen = { sa: 0, sb: 0 };
  for (const { id, data } of events) {
    const { name, seq } = data.response.event;
    assert.equal(seq, seen[name] + 1);
    seen[name] = seq;
    assert.equal(id, `sa:${seen.sa},sb:${seen.sb}`);
    assert.deepEqual(data.request, { type: 'sse', events: ['sa', 'sb'], heartbeat_ms: 0, duration_ms: 500 });
  }
  assert.ok(seen.sa >= 3 && seen.sb >= 2, JSON.stringify(seen));
  const last = fields(messages.at(-1));
  assert.equal(last.event, 'timeout');
  assert.deepEqual(last.data.response, { timeout: true });
  const counted = (await stats(server.port)).sse;
  assert.equal(counted.open, 0);
  assert.equal(counted.deliveries, events.length);
});

test('heartbeats come every heartbeat_ms on a quiet stream', async () => {
  const { messages } = await readStream('/sse?events=quiet&heartbeat_ms=50&duration_ms=320');
  const beats = messages.filter((m) => m.startsWith(':'));
  assert.ok(beats.length >= 4 && beats.length <= 7, `${beats.length} heartbeats`);
});

test('Last-Event-ID: a gap past the 64-event buffer, then the newest 64 replayed', async () => {
  await postJson(server.port, '/event/set', { name: 'fast', interval_ms: 10 });
  while ((await stats(server.port)).events.fast.last_seq < 80) await sleep(20);
  await postJson(server.port, '/event/clear', { name: 'fast' });
  const newest = (await stats(server.port)).events.fast.last_seq;
  const { messages } = await readStream('/sse?events=fast&heartbeat_ms=0&duration_ms=50', {
    'Last-Event-ID': 'fast:5',
  });
  const gap = fields(messages[0]);
  assert.equal(gap.event, 'gap');
  assert.deepEqual(gap.data, { gap: { name: 'fast', after: 5, next: newest - 63 } });
  assert.equal(gap.id, `fast:${newest - 64}`);
  const replayed = messages.slice(1, 65).map(fields);
  assert.deepEqual(replayed.map((m) => m.data.response.event.seq), [...Array(64).keys()].map((i) => newest - 63 + i));
  assert.ok(replayed.every((m) => m.data.response.event.replayed === true));
  assert.equal(messages[65], `id: fast:${newest}`);
  const resumed = await readStream('/sse?events=fast&heartbeat_ms=0&duration_ms=50', {
    'Last-Event-ID': `fast:${newest - 2}`,
  });
  assert.deepEqual(resumed.messages.slice(0, 2).map((m) => fields(m).data.response.event.seq), [newest - 1, newest]);
});

test('bad parameters and ids are refused with 400', async () => {
  for (const path of ['/sse', '/sse?events=', '/sse?events=a,a', '/sse?events=a&heartbeat_ms=5',
    '/sse?events=a&duration_ms=0', '/sse?events=a&events=b', '/sse?events=a%20b']) {
    assert.equal((await request(server.port, 'GET', path)).status, 400, path);
  }
  for (const id of ['17', 'a:01', 'a:1,a:2', 'a:-1']) {
    const res = await request(server.port, 'GET', '/sse?events=a', { headers: { 'Last-Event-ID': id } });
    assert.equal(res.status, 400, id);
  }
});
