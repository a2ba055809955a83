'use strict';
// --workers 2: a node:cluster primary and two workers behind the same ports. Sequential
// connections alternate between the workers (cluster's round-robin), so every test below
// reaches both.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const { startServer, request, postJson, stats, sleep, waitFor, connectWs, readSse, fields, labClient, collect } =
  require('./harness');

let server;
before(async () => {
  server = await startServer(['--workers', '2', '--grpc-port', '0']);
});
after(() => server.stop());

// The open subscribers of each transport, as /stats counts them.
const OPEN = {
  push: (s) => s.requests.open_push,
  sse: (s) => s.sse.open,
  websocket: (s) => s.websocket.subscribers,
  grpc: (s) => s.grpc.open,
};

// Waits until /stats shows `count` more open subscribers of `kind`, on both workers.
async function waitForSubscribers(kind, count, before) {
  const spread = await waitFor(async () => {
    const now = await stats(server.port);
    const all = OPEN[kind](now) >= OPEN[kind](before) + count;
    return all && now.workers.each.every((worker) => worker.subscribers > 0);
  });
  assert.ok(spread, `${count} ${kind} subscribers on both workers`);
}

// Each worker numbers its share of a cycle 1..its total; the shares add up to `count`.
function assertSharesPerWorker(connections, count) {
  const byTotal = new Map();
  for (const { total, place } of connections) {
    if (!byTotal.has(total)) byTotal.set(total, []);
    byTotal.get(total).push(place);
  }
  let shares = 0;
  for (const [total, places] of byTotal) {
    const copies = places.length / total;
    assert.ok(Number.isInteger(copies), `places ${places} of total ${total}`);
    const wanted = [...Array(total).keys()].flatMap((i) => Array(copies).fill(i + 1));
    assert.deepEqual(places.sort((a, b) => a - b), wanted);
    shares += copies;
  }
  assert.equal(shares, 2, 'one share per worker');
  assert.equal(connections.length, count);
}

test('/stats describes the whole server and says places count per worker', async () => {
  const first = await stats(server.port);
  for (let i = 0; i < 10; i++) assert.equal((await request(server.port, 'GET', '/perf')).status, 200);
  const second = await stats(server.port);
  assert.equal(second.requests.total, first.requests.total + 11);
  assert.equal(second.responses.total, first.responses.total + 11);
  assert.equal(second.connections.total, first.connections.total + 11);
  const { count, places, each: workers } = second.workers;
  assert.equal(count, 2);
  assert.equal(places, 'per_worker');
  assert.equal(new Set(workers.map((worker) => worker.pid)).size, 2);
  const served = workers.map((worker) => worker.requests.total);
  assert.ok(served.every((n) => n >= 5), `requests per worker ${served}`);
  assert.equal(served[0] + served[1], second.requests.total);
});

test('POST /logging through one worker switches logging in every worker', async () => {
  assert.equal((await postJson(server.port, '/logging', { enabled: true })).status, 200);
  for (let i = 0; i < 6; i++) await request(server.port, 'GET', `/perf?marker=on${i}`);
  assert.equal((await postJson(server.port, '/logging', { enabled: false })).status, 200);
  for (let i = 0; i < 6; i++) await request(server.port, 'GET', `/perf?marker=off${i}`);
  await sleep(50);
  for (let i = 0; i < 6; i++) assert.match(server.stderr(), new RegExp(`marker=on${i}" 200`));
  assert.doesNotMatch(server.stderr(), /marker=off/);
  assert.equal((await postJson(server.port, '/logging', { enabled: 'no' })).status, 400);
});

test('one emit reaches long polls on both workers with one seq', async () => {
  const before = await stats(server.port);
  const polls = [...Array(6)].map(() =>
    postJson(server.port, '/push', { type: 'longpoll', events: ['cl'], duration_ms: 5000 }));
  await waitForSubscribers('push', 6, before);
  const set = await postJson(server.port, '/event/set', { name: 'cl', interval_ms: 100 });
  assert.deepEqual(set.json(), { name: 'cl', interval_ms: 100, replaced: false });
  const answers = (await Promise.all(polls)).map((res) => res.json().response.event);
  assert.deepEqual((await postJson(server.port, '/event/clear', { name: 'cl' })).json(), { cleared: ['cl'] });
  assert.equal((await postJson(server.port, '/event/clear', { name: 'cl' })).status, 404);
  assert.equal(new Set(answers.map((e) => `${e.seq} ${e.timings.created}`)).size, 1);
  assertSharesPerWorker(answers.map((e) => e.connections), 6);
  const events = (await stats(server.port)).events.cl;
  assert.equal(events.active, false);
  assert.ok(events.deliveries >= 6 && events.emits >= 1, JSON.stringify(events));
});

test('a publish reaches WebSocket subscribers on both workers; replies keep their order', async () => {
  const before = await stats(server.port);
  const subscribers = await Promise.all([...Array(4)].map(() => connectWs(server.port)));
  for (const ws of subscribers) {
    ws.sendJson({ type: 'subscribe', events: ['room'] });
    assert.equal((await ws.next()).type, 'subscribed');
  }
  await waitForSubscribers('websocket', 4, before);
  const publisher = await connectWs(server.port);
  publisher.sendJson({ type: 'publish', event: 'room', data: 1 });
  publisher.sendJson({ type: 'echo', data: 'after' });
  const got = (await Promise.all(subscribers.map((ws) => ws.next()))).map((m) => m.response.event);
  assert.ok(got.every((e) => e.seq === 1 && e.data === 1 && e.timings.created === got[0].timings.created));
  assertSharesPerWorker(got.map((e) => e.connections), 4);
  assert.deepEqual(await publisher.next(), { type: 'published', event: 'room', seq: 1, total: 4 });
  assert.deepEqual(await publisher.next(), { type: 'echo', data: 'after' });
  assert.equal((await stats(server.port)).websocket.publishes, 1);
  const clients = [...subscribers, publisher];
  for (const ws of clients) ws.close();
  await Promise.all(clients.map((ws) => ws.closed));
});

test('SSE streams on both workers get every publish once, in order', async () => {
  const before = await stats(server.port);
  const streams = [...Array(4)].map(() => readSse(server.port, '/sse?events=ps&heartbeat_ms=0&duration_ms=1500'));
  await waitForSubscribers('sse', 4, before);
  const publisher = await connectWs(server.port);
  for (let i = 0; i < 20; i++) publisher.sendJson({ type: 'publish', event: 'ps', data: i });
  const seqs = [];
  for (let i = 0; i < 20; i++) seqs.push((await publisher.next()).seq);
  assert.deepEqual(seqs, [...Array(20).keys()].map((i) => i + 1));
  publisher.close();
  for (const { messages } of await Promise.all(streams)) {
    assert.equal(messages[0], 'id: ps:0');
    const data = messages.slice(1, -1).map((m) => fields(m).data.response.event);
    assert.deepEqual(data.map((e) => e.seq), seqs);
    assert.deepEqual(data.map((e) => e.data), [...Array(20).keys()]);
  }
});

test("gRPC Subscribe streams on both workers get one cycle's seq, each worker its share", async () => {
  const before = await stats(server.port);
  const clients = [...Array(4)].map(() => labClient(server.grpcPort));
  const streams = clients.map((client) =>
    collect(client.Subscribe({ events: ['gw'] }), (messages) => messages.length === 1));
  await waitForSubscribers('grpc', 4, before);
  await postJson(server.port, '/event/set', { name: 'gw', interval_ms: 100 });
  const got = (await Promise.all(streams)).map(({ messages }) => messages[0]);
  await postJson(server.port, '/event/clear', { name: 'gw' });
  for (const client of clients) client.close();
  assert.equal(new Set(got.map((d) => `${d.seq} ${d.created}`)).size, 1);
  assertSharesPerWorker(got, 4);
  const after = await stats(server.port);
  assert.ok(after.grpc.deliveries >= before.grpc.deliveries + 4);
  assert.equal(after.grpc.calls, before.grpc.calls + 4);
});

test('a reconnect to either worker replays from the same buffer; an id ahead gets a gap', async () => {
  await postJson(server.port, '/event/set', { name: 'fr', interval_ms: 10 });
  await waitFor(async () => (await stats(server.port)).events.fr.last_seq >= 20);
  await postJson(server.port, '/event/clear', { name: 'fr' });
  const newest = (await stats(server.port)).events.fr.last_seq;
  for (let i = 0; i < 4; i++) {
    const { messages } = await readSse(server.port, '/sse?events=fr&heartbeat_ms=0&duration_ms=20', {
      'Last-Event-ID': `fr:${newest - 5}`,
    });
    const replayed = messages.slice(0, 5).map((m) => fields(m).data.response.event);
    assert.deepEqual(replayed.map((e) => e.seq), [1, 2, 3, 4, 5].map((n) => newest - 5 + n));
    assert.ok(replayed.every((e) => e.replayed === true));
    assert.equal(messages[5], `id: fr:${newest}`);
  }
  for (let i = 0; i < 2; i++) {
    const { messages } = await readSse(server.port, '/sse?events=fr&heartbeat_ms=0&duration_ms=20', {
      'Last-Event-ID': `fr:${newest + 100}`,
    });
    const gap = fields(messages[0]);
    assert.equal(gap.event, 'gap');
    assert.deepEqual(gap.data, { gap: { name: 'fr', after: newest + 100, next: newest + 1 } });
  }
});

test('a worker that dies ends the server, and its other worker with it', async () => {
  const doomed = await startServer(['--workers', '2']);
  const pids = (await stats(doomed.port)).workers.each.map((worker) => worker.pid);
  process.kill(pids[0], 'SIGKILL');
  assert.deepEqual(await doomed.exited, { code: 1, signal: null });
  assert.match(doomed.stderr(), new RegExp(`worker ${pids[0]} ended \\(signal SIGKILL\\); stopping`));
  assert.ok(await waitFor(() => !isRunning(pids[1])), `worker ${pids[1]} is still running`);
  await doomed.stop();
});

test('SIGTERM to the primary alone stops every worker', async () => {
  const stopped = await startServer(['--workers', '3']);
  const pids = (await stats(stopped.port)).workers.each.map((worker) => worker.pid);
  assert.equal(pids.length, 3);
  assert.deepEqual(await stopped.stop(), { code: 0, signal: null });
  assert.ok(await waitFor(() => pids.every((pid) => !isRunning(pid))), 'a worker outlived the primary');
});

// False once the process has ended, reaped or not: a worker left to a PID 1 that does not
// reap stays a zombie.
function isRunning(pid) {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
