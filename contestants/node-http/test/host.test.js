'use strict';
// --host (the manifest's {host}): a second address for HTTP and syslog, on the same ports.
// 127.0.0.2 stands in for a lab host's address: it is loopback, so no traffic leaves.
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const dgram = require('dgram');
const net = require('net');
const { startServer, request, postJson, stats, sleep } = require('./harness');

const SECOND = '127.0.0.2';
const servers = [];
after(() => Promise.all(servers.map((server) => server.stop())));

async function start(args) {
  const server = await startServer(args);
  servers.push(server);
  return server;
}

// Resolves true if a TCP connection to host:port is accepted, false if refused.
function accepts(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

async function sendSyslog(host, port) {
  const socket = net.connect(port, host);
  await new Promise((resolve) => socket.on('connect', resolve));
  await new Promise((resolve) => socket.end('<14>1 over tcp\n', resolve));
  const udp = dgram.createSocket('udp4');
  await new Promise((resolve) => udp.send('<14>1 over udp', port, host, resolve));
  udp.close();
}

for (const workers of ['1', '2']) {
  test(`workers=${workers}: HTTP and syslog answer on the second address too, same ports`, async () => {
    const server = await start(['--host', SECOND, '--workers', workers]);
    assert.match(server.stderr(), new RegExp(`\\(also on ${SECOND.replace(/\./g, '\\.')}\\)`));
    for (const host of ['127.0.0.1', SECOND]) {
      const perf = await request(server.port, 'GET', '/perf', { host });
      assert.equal(perf.status, 200, host);
      assert.equal(perf.text.length, 84);
    }
    // Control calls from a loopback client answer on either address.
    const set = await postJson(server.port, '/event/set', { name: 'h', interval_ms: 60000 }, SECOND);
    assert.equal(set.status, 200);
    assert.equal((await stats(server.port)).events.h.interval_ms, 60000);
    await sendSyslog(SECOND, server.syslogPort);
    await sendSyslog('127.0.0.1', server.syslogPort);
    let counted;
    for (let tries = 0; tries < 50; tries++) {
      counted = (await stats(server.port, SECOND)).syslog;
      if (counted.received === 4) break;
      await sleep(20);
    }
    const { received, bytes, tcp_connections: tcp } = counted;
    assert.deepEqual({ received, bytes, tcp }, { received: 4, bytes: 2 * (14 + 14), tcp: 2 });
  });
}

test('without --host nothing but 127.0.0.1 is bound', async () => {
  const server = await start([]);
  assert.equal(await accepts('127.0.0.1', server.port), true);
  assert.equal(await accepts(SECOND, server.port), false);
  assert.equal(await accepts(SECOND, server.syslogPort), false);
  assert.doesNotMatch(server.stderr(), /also on/);
});

test('--host 127.0.0.1 binds nothing more, and a name is refused', async () => {
  const server = await start(['--host', '127.0.0.1']);
  assert.equal(await accepts(SECOND, server.port), false);
  const refused = startServer(['--host', 'localhost']);
  await assert.rejects(refused, /--host must be an IP address/);
});
