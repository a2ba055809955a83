'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const dgram = require('dgram');
const net = require('net');
const { HOST, startServer, stats, sleep } = require('./harness');
const { SyslogFramer } = require('../lib/syslog');
const { counters } = require('../lib/stats');

let server;
before(async () => {
  server = await startServer();
});
after(() => server.stop());

function frameAll(pieces) {
  const before = { received: counters.syslogReceived, bytes: counters.syslogBytes };
  const framer = new SyslogFramer();
  for (const piece of pieces) framer.push(Buffer.from(piece));
  return { received: counters.syslogReceived - before.received, bytes: counters.syslogBytes - before.bytes };
}

test('framer: octet counting and newline framing mixed, split anywhere', () => {
  const stream = '11 <14>1 hello<14>1 line one\n\n\n5 abcde<14>x\n';
  const expected = { received: 4, bytes: 11 + 14 + 5 + 5 };
  assert.deepEqual(frameAll([stream]), expected);
  for (let cut = 1; cut < stream.length; cut++) {
    assert.deepEqual(frameAll([stream.slice(0, cut), stream.slice(cut)]), expected, `cut at ${cut}`);
  }
  assert.deepEqual(frameAll([...stream]), expected);
});

test('framer: incomplete messages are not counted; digits without a space are a line', () => {
  assert.deepEqual(frameAll(['20 too short']), { received: 0, bytes: 0 });
  assert.deepEqual(frameAll(['<14>no newline yet']), { received: 0, bytes: 0 });
  assert.deepEqual(frameAll(['42abc\n']), { received: 1, bytes: 5 });
});

test('framer over TLS (RFC 5425): octet counting only, a bad MSG-LEN loses the framing', () => {
  for (const bad of ['0 <14>x', '05 <14>1 x', '18446744073709551617 <14>x', '<14>1 x\n', '5x<14>1 x']) {
    const before = counters.syslogReceived;
    let lost = 0;
    const framer = new SyslogFramer(null, () => lost++);
    framer.push(Buffer.from(`5 <14>a${bad}5 <14>b`));
    assert.equal(counters.syslogReceived - before, 1, bad);
    assert.equal(lost, 1, bad);
  }
});

test('TCP and UDP messages are counted in /stats', async () => {
  const socket = net.connect(server.syslogPort, HOST);
  await new Promise((resolve) => socket.on('connect', resolve));
  socket.write('15 <14>1 seq=1 x');
  await sleep(20);
  socket.write('yz<14>1 seq=2\n');
  await new Promise((resolve) => socket.end(resolve));
  const udp = dgram.createSocket('udp4');
  await new Promise((resolve) => udp.send('<14>1 seq=3\n', server.syslogPort, HOST, resolve));
  udp.close();
  await sleep(100);
  assert.deepEqual((await stats(server.port)).syslog, {
    received: 3,
    bytes: 15 + 11 + 11,
    tcp_connections: 1,
    // Spec §7.1: a server started counting parses nothing.
    mode: 'count',
    parsed: 0,
    malformed: 0,
    rfc3164: 0,
    sd_elements: 0,
    msg_bytes: 0,
  });
});
