'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('http');
const { HOST, startServer, postJson, stats, sleep } = require('./harness');

let server;
before(async () => {
  server = await startServer();
});
after(() => server.stop());

// Opens a comet stream; lines() returns the parsed lines received so far.
function openComet(body) {
  return new Promise((resolve, reject) => {
    const lines = [];
    let partial = '';
    const req = http.request({
      host: HOST, port: server.port, method: 'POST', path: '/push', agent: false,
      headers: { 'Content-Type': 'application/json' },
    });
    req.on('response', (res) => {
      res.setEncoding('utf8');
      const ended = new Promise((done) => res.on('end', done));
      res.on('data', (text) => {
        partial += text;
        const parts = partial.split('\n');
        partial = parts.pop();
        for (const line of parts) lines.push(JSON.parse(line));
      });
      resolve({ res, lines, ended, close: () => req.destroy() });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test('event set validates, replaces and clears', async () => {
  for (const bad of [{ name: 'bad name', interval_ms: 100 }, { name: 'x', interval_ms: 9 },
    { name: 'x', interval_ms: '100' }, { name: 'x' }]) {
    assert.equal((await postJson(server.port, '/event/set', bad)).status, 400);
  }
  const first = (await postJson(server.port, '/event/set', { name: 'v1', interval_ms: 60000 })).json();
  assert.deepEqual(first, { name: 'v1', interval_ms: 60000, replaced: false });
  const again = (await postJson(server.port, '/event/set', { name: 'v1', interval_ms: 50000 })).json();
  assert.equal(again.replaced, true);
  await postJson(server.port, '/event/set', { name: 'v0', interval_ms: 60000 });
  assert.equal((await postJson(server.port, '/event/clear', { name: 'nope' })).status, 404);
  assert.deepEqual((await postJson(server.port, '/event/clear', { name: 'v1' })).json(), {
    cleared: ['v1'],
  });
  assert.deepEqual((await postJson(server.port, '/event/clear', '')).json(), { cleared: ['v0'] });
  assert.deepEqual((await postJson(server.port, '/event/clear', {})).json(), { cleared: [] });
  const events = (await stats(server.port)).events;
  assert.equal(events.v1.active, false);
  assert.equal(events.v1.interval_ms, 50000);
});

test('a long poll gets the next emit with seq, place and timings', async () => {
  await postJson(server.port, '/event/set', { name: 'lp', interval_ms: 100 });
  const polls = [0, 1, 2].map(() =>
    postJson(server.port, '/push', { type: 'longpoll', events: ['lp'], duration_ms: 5000 }));
  const answers = (await Promise.all(polls)).map((r) => r.json());
  await postJson(server.port, '/event/clear', { name: 'lp' });
  const events = answers.map((a) => a.response.event);
  assert.ok(events.every((e) => e.name === 'lp' && e.seq === events[0].seq));
  assert.ok(events.every((e) => e.connections.total === 3));
  assert.deepEqual(events.map((e) => e.connections.place).sort(), [1, 2, 3]);
  for (const a of answers) {
    assert.equal(a.response.event.timings.duration, a.response.event.timings.sent - a.response.event.timings.created);
    assert.equal(a.timings.duration, a.timings.sent - a.timings.created);
    assert.deepEqual(a.request, { type: 'longpoll', events: ['lp'], duration_ms: 5000 });
    assert.ok(!JSON.stringify(a).includes('timeout'));
  }
});

test('a long poll with no event times out with a timeout answer', async () => {
  const started = Date.now();
  const res = await postJson(server.port, '/push', { type: 'longpoll', events: ['none'], duration_ms: 150 });
  assert.equal(res.status, 200);
  const body = res.json();
  assert.deepEqual(body.response, { timeout: true });
  assert.ok(Date.now() - started >= 150);
  assert.equal(body.connections.start, 1);
});

test('comet streams one line per emit, seq rises by one across replace, then times out', async () => {
  await postJson(server.port, '/event/set', { name: 'cm', interval_ms: 40 });
  const stream = await openComet({ type: 'comet', events: ['cm'], duration_ms: 700 });
  assert.equal(stream.res.headers['content-type'], 'application/x-ndjson');
  assert.equal(stream.res.headers['transfer-encoding'], 'chunked');
  await sleep(200);
  await postJson(server.port, '/event/set', { name: 'cm', interval_ms: 60 });
  // Cleared while the stream is still open (subscribers stay after a clear), so no emit can
  // fall between its end and the stats read below.
  await sleep(300);
  await postJson(server.port, '/event/clear', { name: 'cm' });
  await stream.ended;
  const deliveries = stream.lines.slice(0, -1);
  assert.deepEqual(stream.lines.at(-1).response, { timeout: true });
  assert.ok(deliveries.length >= 6, `only ${deliveries.length} deliveries`);
  deliveries.forEach((line, i) => assert.equal(line.response.event.seq, deliveries[0].response.event.seq + i));
  const after = await stats(server.port);
  assert.equal(after.events.cm.last_seq, deliveries.at(-1).response.event.seq);
  assert.equal(after.requests.open_push, 0);
});

test('a comet client that leaves is removed from every list', async () => {
  await postJson(server.port, '/event/set', { name: 'gone', interval_ms: 30 });
  const streams = await Promise.all([1, 2, 3].map(() => openComet({ type: 'comet', events: ['gone', 'other'] })));
  await sleep(100);
  assert.equal((await stats(server.port)).requests.open_push, 3);
  streams.forEach((s) => s.close());
  await sleep(150);
  const after = await stats(server.port);
  assert.equal(after.requests.open_push, 0);
  const emitsBefore = after.events.gone.deliveries;
  await sleep(100);
  assert.equal((await stats(server.port)).events.gone.deliveries, emitsBefore);
  await postJson(server.port, '/event/clear', { name: 'gone' });
});

test('push requests are validated', async () => {
  for (const bad of [
    { type: 'stream', events: [], duration_ms: 10 },
    { type: 'longpoll', events: [] },
    { type: 'longpoll', events: ['ok', 'not ok'], duration_ms: 10 },
    { type: 'comet', events: Array.from({ length: 17 }, (_, i) => `e${i}`) },
    { type: 'comet', events: [], duration_ms: 0 },
    { type: 'comet', events: 'e1' },
  ]) {
    assert.equal((await postJson(server.port, '/push', bad)).status, 400, JSON.stringify(bad));
  }
});
