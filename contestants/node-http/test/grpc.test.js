'use strict';
// gRPC (spec §16) on the server's own gRPC port, called by grpc-js's own client with the
// committed serverlab.proto.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('http');
const http2 = require('http2');
const net = require('net');
const grpc = require('@grpc/grpc-js');
const { HOST, startServer, postJson, stats, waitFor, connectWs, labClient, collect } = require('./harness');

const PERF_BODY = 'serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n';
// An EchoMessage's encoding is its data behind a one-byte tag and a four-byte length here.
const LIMIT_DATA = 4 * 1024 * 1024 - 5;

let server;
let client;
before(async () => {
  server = await startServer(['--grpc-port', '0']);
  client = labClient(server.grpcPort);
});
after(() => {
  client.close();
  return server.stop();
});

const unary = (method, request, options = {}) =>
  new Promise((resolve) => {
    client[method](request, options, (error, reply) => resolve({ error, reply }));
  });

const grpcStats = async () => (await stats(server.port)).grpc;

// A comet stream (spec §6) whose lines arrive parsed in `lines`.
function openComet(events) {
  return new Promise((resolve, reject) => {
    const lines = [];
    const req = http.request({
      host: HOST, port: server.port, method: 'POST', path: '/push', agent: false,
      headers: { 'Content-Type': 'application/json' },
    });
    req.on('response', (res) => {
      let partial = '';
      res.setEncoding('utf8');
      res.on('data', (text) => {
        const parts = (partial + text).split('\n');
        partial = parts.pop();
        for (const line of parts) lines.push(JSON.parse(line));
      });
      resolve({ lines, close: () => req.destroy() });
    });
    req.on('error', reject);
    req.end(JSON.stringify({ type: 'comet', events }));
  });
}

test('Perf answers OK with the 84 bytes of GET /perf', async () => {
  const { error, reply } = await unary('Perf', {});
  assert.equal(error, null);
  assert.equal(reply.body.toString('latin1'), PERF_BODY);
});

test('Echo returns 4 MiB unchanged, and a message one byte over gets RESOURCE_EXHAUSTED while the connection serves on', async () => {
  const data = Buffer.alloc(LIMIT_DATA, 7);
  const served = await unary('Echo', { data });
  assert.equal(served.error, null);
  assert.ok(served.reply.data.equals(data));
  const refused = await unary('Echo', { data: Buffer.alloc(LIMIT_DATA + 1) });
  assert.equal(refused.error.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.equal((await unary('Perf', {})).error, null);
  assert.deepEqual((await unary('Echo', {})).reply, {});
});

test('a method or a service the server lacks gets UNIMPLEMENTED, and counts as a call', async () => {
  const before = await grpcStats();
  for (const method of ['/serverlab.v1.Lab/Nope', '/other.v1.Service/Perf']) {
    const error = await new Promise((resolve) => {
      client.makeUnaryRequest(method, (x) => x, (x) => x, Buffer.alloc(0), (e) => resolve(e));
    });
    assert.equal(error.code, grpc.status.UNIMPLEMENTED, method);
  }
  assert.equal((await grpcStats()).calls, before.calls + 2);
});

test('Subscribe to no event, a bad name or a name twice gets INVALID_ARGUMENT', async () => {
  for (const events of [[], ['bad name'], ['a', 'a'], Array.from({ length: 17 }, (_, i) => `e${i}`)]) {
    const ended = await collect(client.Subscribe({ events }));
    assert.equal(ended.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(events));
    assert.ok(ended.details);
  }
});

test("a Subscribe stream is in each emit cycle's snapshot beside a comet stream, and counted in /stats grpc", async () => {
  const before = await grpcStats();
  const stream = collect(client.Subscribe({ events: ['gs'] }), (messages) => messages.length === 3);
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open + 1));
  const comet = await openComet(['gs']);
  await postJson(server.port, '/event/set', { name: 'gs', interval_ms: 50 });
  const { messages } = await stream;
  await postJson(server.port, '/event/clear', { name: 'gs' });
  comet.close();
  for (const [i, delivery] of messages.entries()) {
    assert.equal(delivery.name, 'gs');
    assert.equal(delivery.seq, messages[0].seq + i);
    assert.ok(delivery.created <= delivery.sent && delivery.sent <= Date.now());
    assert.deepEqual([delivery.total, delivery.place], [2, 1]);
    assert.equal(delivery.data, undefined);
  }
  const cometSeen = comet.lines.find((line) => line.response.event.seq === messages[0].seq);
  assert.deepEqual(cometSeen.response.event.connections, { total: 2, place: 2 });
  const after = await grpcStats();
  assert.ok(after.deliveries >= before.deliveries + 3);
  assert.equal(after.calls, before.calls + 1);
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open));
});

test('a Subscribe held past its deadline ends DEADLINE_EXCEEDED and leaves the open count', async () => {
  const before = await grpcStats();
  const started = Date.now();
  const ended = await collect(client.Subscribe({ events: ['quiet'] }, { deadline: Date.now() + 300 }));
  assert.equal(ended.code, grpc.status.DEADLINE_EXCEEDED);
  assert.ok(Date.now() - started < 1300);
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open));
});

test('a cancelled Subscribe is noticed gone: it leaves the open count and takes no delivery', async () => {
  const before = await grpcStats();
  const call = client.Subscribe({ events: ['gone'] });
  const ended = collect(call);
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open + 1));
  call.cancel();
  assert.equal((await ended).code, grpc.status.CANCELLED);
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open, 2000));
  await postJson(server.port, '/event/set', { name: 'gone', interval_ms: 20 });
  await waitFor(async () => (await stats(server.port)).events.gone.emits >= 2);
  await postJson(server.port, '/event/clear', { name: 'gone' });
  assert.equal((await stats(server.port)).events.gone.deliveries, 0);
});

// A Subscribe on Node's own HTTP/2 client, which reads only while its stream flows: paused,
// it holds at most its 64 KiB stream window (grpc-js's client reads ahead into buffers of its
// own, which are not the test's to bound).
function rawSubscribe(events) {
  const socket = net.connect(server.grpcPort, HOST);
  const session = http2.connect(`http://${HOST}:${server.grpcPort}`, { createConnection: () => socket });
  session.on('error', () => {});
  const stream = session.request({
    ':method': 'POST', ':path': '/serverlab.v1.Lab/Subscribe', 'content-type': 'application/grpc', te: 'trailers',
  });
  stream.on('error', () => {});
  const request = Buffer.concat(events.map((name) => Buffer.from([0x0a, name.length, ...Buffer.from(name)])));
  const prefix = Buffer.from([0, 0, 0, 0, request.length]);
  stream.end(Buffer.concat([prefix, request]));
  return { socket, session, stream };
}

test('a Subscribe whose client closes its connection is noticed gone', async () => {
  const before = await grpcStats();
  const { socket } = rawSubscribe(['shut']);
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open + 1));
  socket.destroy(); // a FIN, no GOAWAY and no RST_STREAM first
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open, 2000));
});

test('Chat echoes every message in order, and ends OK after the client ends its side', async () => {
  const call = client.Chat();
  const ended = collect(call);
  const sent = Array.from({ length: 20 }, (_, i) => Buffer.from(`message ${i} `.repeat(i + 1)));
  for (const data of sent) call.write({ data });
  call.end();
  const { messages, code } = await ended;
  assert.equal(code, grpc.status.OK);
  assert.deepEqual(messages.map((message) => message.data.toString()), sent.map(String));
});

test("a WebSocket publish reaches a Subscribe stream with the publish's data as JSON text", async () => {
  const before = await grpcStats();
  const stream = collect(client.Subscribe({ events: ['room'] }), (messages) => messages.length === 1);
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open + 1));
  const publisher = await connectWs(server.port);
  publisher.sendJson({ type: 'publish', event: 'room', data: { n: 1 } });
  const published = await publisher.next();
  const [delivery] = (await stream).messages;
  publisher.close();
  assert.deepEqual([delivery.seq, delivery.total, delivery.place], [published.seq, 1, 1]);
  assert.deepEqual(JSON.parse(delivery.data), { n: 1 });
});

test('a Subscribe reader more than 1 MiB behind is dropped from the lists and ends RESOURCE_EXHAUSTED', async () => {
  const before = await grpcStats();
  const { session, stream } = rawSubscribe(['slow']);
  stream.pause(); // reads nothing until the end: HTTP/2 flow control stops the server's writes
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open + 1));
  const publisher = await connectWs(server.port);
  const publishes = 60; // 3.6 MB, of which the paused client holds 64 KiB at most
  for (let i = 0; i < publishes; i++) {
    publisher.sendJson({ type: 'publish', event: 'slow', data: 'x'.repeat(60000) });
    await publisher.next();
  }
  publisher.close();
  assert.ok(await waitFor(async () => (await grpcStats()).open === before.open));
  const delivered = (await stats(server.port)).events.slow.deliveries;
  assert.ok(delivered > 0 && delivered < publishes, `${delivered} deliveries counted`);
  // The status comes as trailers, after what the call was sent: read it all.
  const trailers = new Promise((resolve) => stream.once('trailers', resolve));
  stream.resume();
  assert.equal(Number((await trailers)['grpc-status']), grpc.status.RESOURCE_EXHAUSTED);
  session.close();
});
