'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const { startServer, request, stats, sleep, connectWs } = require('./harness');

let server;
before(async () => {
  server = await startServer();
});
after(() => server.stop());

const connect = (options) => connectWs(server.port, options);

test('echo, and no extension even when deflate is offered', async () => {
  const ws = await connect({ perMessageDeflate: true });
  assert.equal(ws.extensions, '');
  ws.sendJson({ type: 'echo', data: { n: [1, 'two'] } });
  assert.deepEqual(await ws.next(), { type: 'echo', data: { n: [1, 'two'] } });
  ws.close(1000);
  assert.equal(await ws.closed, 1000);
});

test('a publish reaches every subscriber in one cycle; the publisher hears published', async () => {
  const [a, b, publisher] = await Promise.all([connect(), connect(), connect()]);
  for (const ws of [a, b]) {
    ws.sendJson({ type: 'subscribe', events: ['room'] });
    assert.deepEqual(await ws.next(), { type: 'subscribed', events: ['room'] });
  }
  assert.equal((await stats(server.port)).websocket.subscribers, 2);
  publisher.sendJson({ type: 'publish', event: 'room', data: 'hi' });
  const got = await Promise.all([a.next(), b.next()]);
  assert.deepEqual(got.map((m) => m.response.event.connections.place).sort(), [1, 2]);
  assert.ok(got.every((m) => m.response.event.data === 'hi' && m.response.event.seq === 1));
  assert.deepEqual(await publisher.next(), { type: 'published', event: 'room', seq: 1, total: 2 });
  a.terminate();
  await sleep(100);
  const counted = (await stats(server.port)).websocket;
  assert.equal(counted.subscribers, 1);
  assert.equal(counted.publishes, 1);
  b.close();
  publisher.close();
});

test('refused messages close with the spec codes, and the server goes on', async () => {
  const cases = [
    [(ws) => ws.send(Buffer.from('bin'), { binary: true }), 1003],
    [(ws) => ws.sendJson({ type: 'dance' }), 1008],
    [(ws) => ws.send('not json'), 1008],
    [(ws) => ws.sendJson({ type: 'echo', data: 'x'.repeat(65536) }), 1009],
  ];
  for (const [misbehave, code] of cases) {
    const ws = await connect();
    misbehave(ws);
    assert.equal(await ws.closed, code);
  }
  assert.equal((await request(server.port, 'GET', '/perf')).status, 200);
});

test('bad handshakes: 400, and 426 with the version for a wrong one', async () => {
  const upgrade = { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==' };
  const wrong = await request(server.port, 'GET', '/ws', { headers: { ...upgrade, 'Sec-WebSocket-Version': '8' } });
  assert.equal(wrong.status, 426);
  assert.equal(wrong.headers['sec-websocket-version'], '13');
  assert.equal((await request(server.port, 'GET', '/ws')).status, 400);
  const noKey = { ...upgrade, 'Sec-WebSocket-Key': 'short', 'Sec-WebSocket-Version': '13' };
  assert.equal((await request(server.port, 'GET', '/ws', { headers: noKey })).status, 400);
});

test('clients that reset right after an upgrade request, to /ws or any path, leave the server up', async () => {
  const upgrade = [
    'Host: x', 'Upgrade: websocket', 'Connection: Upgrade',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13',
  ].join('\r\n');
  for (const path of ['/perf', '/ws', '/nowhere']) {
    await Promise.all(Array.from({ length: 100 }, () => resetAfter(`GET ${path} HTTP/1.1\r\n${upgrade}\r\n\r\n`)));
  }
  await sleep(200);
  assert.equal((await request(server.port, 'GET', '/perf')).status, 200);
});

function resetAfter(text) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(server.port, '127.0.0.1', () => {
      socket.write(text, () => {
        socket.resetAndDestroy();
        resolve();
      });
    });
    socket.on('error', reject);
  });
}
