'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { startServer, request, postJson, rawExchange } = require('./harness');

const PERF = 'serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n';
let server;

before(async () => {
  server = await startServer();
  fs.mkdirSync(path.join(server.docroot, 'sub'));
  fs.writeFileSync(path.join(server.docroot, 'sub', 'data.bin'), crypto.randomBytes(300000));
  fs.symlinkSync('/etc/passwd', path.join(server.docroot, 'escape'));
});
after(() => server.stop());

function assertJsonError(res, status) {
  assert.equal(res.status, status);
  assert.match(res.headers['content-type'], /^application\/json/);
  assert.equal(typeof res.json().error, 'string');
}

test('GET /perf answers the fixed 84-byte body', async () => {
  const res = await request(server.port, 'GET', '/perf');
  assert.equal(res.status, 200);
  assert.equal(res.headers['content-type'], 'text/plain');
  assert.equal(res.headers['content-length'], '84');
  assert.ok(res.headers.date);
  assert.equal(res.text, PERF);
});

test('unknown path is 404 and wrong method is 405 with Allow', async () => {
  assertJsonError(await request(server.port, 'GET', '/nowhere'), 404);
  const res = await request(server.port, 'DELETE', '/perf');
  assertJsonError(res, 405);
  assert.equal(res.headers.allow, 'GET, HEAD');
});

test('GET /files streams a file with its length', async () => {
  const expected = fs.readFileSync(path.join(server.docroot, 'sub', 'data.bin'));
  const res = await new Promise((resolve) => {
    require('http').get({ port: server.port, host: '127.0.0.1', path: '/files/sub/data.bin' }, (r) => {
      const chunks = [];
      r.on('data', (c) => chunks.push(c));
      r.on('end', () => resolve({ r, body: Buffer.concat(chunks) }));
    });
  });
  assert.equal(res.r.statusCode, 200);
  assert.equal(res.r.headers['content-length'], String(expected.length));
  assert.ok(res.body.equals(expected));
});

test('/files refuses traversal and answers 404 for missing files and directories', async () => {
  for (const bad of ['/files/escape', '/files/..%2f..%2fetc/passwd', '/files//etc/passwd',
    '/files/sub/../../x', '/files/a%5cb', '/files/a%00b']) {
    const res = await request(server.port, 'GET', bad);
    assertJsonError(res, 403);
    assert.doesNotMatch(res.text, /root:/);
  }
  assertJsonError(await request(server.port, 'GET', '/files/missing'), 404);
  assertJsonError(await request(server.port, 'GET', '/files/sub'), 404);
  assertJsonError(await request(server.port, 'POST', '/files/sub/data.bin'), 405);
});

test('POST /upload hashes bodies sent with Content-Length or chunked', async () => {
  const body = crypto.randomBytes(1 << 20);
  const digest = crypto.createHash('sha256').update(body).digest('hex');
  const sized = await request(server.port, 'POST', '/upload', { body });
  assert.deepEqual(sized.json(), { bytes: body.length, sha256: digest });
  const chunked = await request(server.port, 'POST', '/upload', {
    body,
    headers: { 'Transfer-Encoding': 'chunked' },
  });
  assert.deepEqual(chunked.json(), { bytes: body.length, sha256: digest });
  const empty = await request(server.port, 'POST', '/upload', { body: '' });
  assert.equal(empty.json().sha256, crypto.createHash('sha256').digest('hex'));
});

test('a header section over 64 KiB gets 431 with a JSON body; 8 KiB is fine', async () => {
  const ok = await request(server.port, 'GET', '/perf', { headers: { 'X-Pad': 'a'.repeat(8192) } });
  assert.equal(ok.status, 200);
  const answer = await rawExchange(
    server.port,
    `GET /perf HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(70 * 1024)}\r\n\r\n`,
  );
  assert.match(answer, /^HTTP\/1\.1 431 /);
  assert.match(answer, /Content-Type: application\/json/);
  assert.match(answer, /\{"error":"request header fields too large"\}$/);
});

test('malformed requests get 400 with a JSON body', async () => {
  for (const bytes of ['NOT HTTP AT ALL\r\n\r\n', 'GET /perf HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n',
    'GET /perf HTTP/1.1\r\n\r\n']) {
    const answer = await rawExchange(server.port, bytes);
    assert.match(answer, /^HTTP\/1\.1 400 /, bytes);
    assert.match(answer, /\{"error":"[a-z ]+"\}$/);
  }
});

test('requests Node would answer bare (Expect, CONNECT) get JSON errors', async () => {
  const expect = await rawExchange(
    server.port,
    'POST /upload HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Length: 3\r\n\r\nabc',
  );
  assert.match(expect, /^HTTP\/1\.1 417 [^]*\{"error":"unsupported expectation"\}$/);
  const connect = await rawExchange(server.port, 'CONNECT a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n');
  assert.match(connect, /^HTTP\/1\.1 405 [^]*Allow: GET, HEAD, POST[^]*\{"error":"method not allowed"\}$/);
});

test('JSON bodies over 64 KiB get 413, announced or chunked', async () => {
  const big = JSON.stringify({ enabled: true, pad: 'x'.repeat(70000) });
  assertJsonError(await postJson(server.port, '/logging', big), 413);
  const chunked = await request(server.port, 'POST', '/push', {
    body: big,
    headers: { 'Transfer-Encoding': 'chunked' },
  });
  assertJsonError(chunked, 413);
  assertJsonError(await postJson(server.port, '/logging', '{oops'), 400);
  assert.equal((await request(server.port, 'GET', '/perf')).status, 200);
});

test('framings llhttp lets through are refused, and nothing after them is answered', async () => {
  const next = 'GET /perf HTTP/1.1\r\nHost: x\r\n\r\n';
  const chunked = '5\r\nhello\r\n0\r\n\r\n';
  for (const [head, status] of [
    ['POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: x-foo, chunked\r\n', 501],
    ['POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n', 501],
    ['POST /nowhere HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n', 400],
    ['POST /upload HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n', 400],
  ]) {
    const answer = await rawExchange(server.port, `${head}\r\n${chunked}${next}`);
    assert.equal(answer.match(/HTTP\/1\.1 \d{3}/g).join(), `HTTP/1.1 ${status}`, head);
    assert.match(answer, /\r\nConnection: close\r\n/);
  }
});

test('a body found malformed after its 404 closes the connection without a second answer', async () => {
  const answer = await rawExchange(server.port,
    'POST /nowhere HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n' +
    'GET /perf HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal(answer.match(/HTTP\/1\.1 \d{3}/g).join(), 'HTTP/1.1 404');
});

test('legal framings are served and the connection stays usable', async () => {
  const answer = await rawExchange(server.port,
    'POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n' +
    '5;name=value;q="a b"\r\nhello\r\n0\r\n\r\nGET /perf HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal(answer.match(/HTTP\/1\.1 \d{3}/g).join(), 'HTTP/1.1 200,HTTP/1.1 200');
  assert.match(answer, /"bytes":5,"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"/);
});
