'use strict';
// Starts the real server on free loopback ports and talks to it over real sockets.

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');
const { WebSocket } = require('ws');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const HOST = '127.0.0.1';
const SERVER = path.join(__dirname, '..', 'server.js');
const LISTENING = /listening on 127\.0\.0\.1:(\d+), syslog on 127\.0\.0\.1:(\d+).*\n/;
const GRPC_LISTENING = /, grpc on 127\.0\.0\.1:(\d+)/;

// args: more options, such as ['--workers', '2'] or ['--host', '127.0.0.2'].
async function startServer(args = []) {
  const docroot = fs.mkdtempSync(path.join(os.tmpdir(), 'node-http-test-'));
  const child = spawn(
    process.execPath,
    [SERVER, '--port', '0', '--syslog-port', '0', '--docroot', docroot, ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let stderr = '';
  const ports = await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
      const match = LISTENING.exec(stderr);
      if (!match) return;
      const grpc = GRPC_LISTENING.exec(match[0]);
      resolve({ port: Number(match[1]), syslogPort: Number(match[2]), grpcPort: grpc && Number(grpc[1]) });
    });
    child.once('exit', (code) => {
      fs.rmSync(docroot, { recursive: true, force: true });
      reject(new Error(`server exited ${code}: ${stderr}`));
    });
  });
  return {
    ...ports,
    docroot,
    exited,
    stderr: () => stderr,
    stop: () => {
      child.kill('SIGTERM');
      fs.rmSync(docroot, { recursive: true, force: true });
      return exited;
    },
  };
}

// One request on its own connection; resolves with status, headers and the whole body.
function request(port, method, urlPath, { body, headers = {}, host = HOST } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port, method, path: urlPath, headers, agent: false });
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const postJson = (port, urlPath, value, host = HOST) =>
  request(port, 'POST', urlPath, {
    body: typeof value === 'string' ? value : JSON.stringify(value),
    headers: { 'Content-Type': 'application/json' },
    host,
  });

// Sends raw bytes and collects everything the server answers until it closes or goes quiet.
function rawExchange(port, bytes, quietMs = 500) {
  return new Promise((resolve) => {
    const socket = net.connect(port, HOST);
    const chunks = [];
    let timer;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    const rearm = () => {
      clearTimeout(timer);
      timer = setTimeout(finish, quietMs);
    };
    socket.on('connect', () => {
      socket.write(bytes);
      rearm();
    });
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      rearm();
    });
    socket.on('error', finish);
    socket.on('close', finish);
  });
}

// An open WebSocket client whose next() resolves with the next message, parsed.
function connectWs(port, options = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${HOST}:${port}/ws`, options);
    const queue = [];
    const waiting = [];
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString());
      if (waiting.length) waiting.shift()(message);
      else queue.push(message);
    });
    ws.next = () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiting.push(r)));
    ws.sendJson = (value) => ws.send(JSON.stringify(value));
    ws.closed = new Promise((r) => ws.on('close', (code) => r(code)));
    ws.on('open', () => resolve(ws));
    ws.on('error', reject);
  });
}

// Reads a whole (timed) SSE stream; resolves with the head and the raw messages.
function readSse(port, urlPath, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: HOST, port, path: urlPath, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ res, messages: text.split('\n\n').filter(Boolean) }));
    });
    req.on('error', reject);
  });
}

// An SSE message as { event, id, data }, the way an SSE client reads its fields.
function fields(message) {
  const out = {};
  for (const line of message.split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) out[line.slice(0, colon)] = line.slice(colon + 2);
  }
  if (out.data) out.data = JSON.parse(out.data);
  return out;
}

// A grpc-js client of serverlab.v1.Lab (the committed .proto) on its own connection: grpc-js
// shares one connection among clients of the same address unless told not to.
const PROTO = path.join(__dirname, '..', '..', '..', 'spec', 'grpc', 'serverlab.proto');
const LOADER = { keepCase: true, longs: Number, bytes: Buffer, defaults: false, arrays: true };
const { Lab } = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO, LOADER)).serverlab.v1;

function labClient(port) {
  return new Lab(`${HOST}:${port}`, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
  });
}

// Reads a server stream until it ends, or until(messages) says enough and cancels it;
// resolves with its messages and the status it ended with.
function collect(call, until = () => false) {
  const messages = [];
  return new Promise((resolve) => {
    call.on('data', (message) => {
      messages.push(message);
      if (until(messages)) call.cancel();
    });
    call.on('error', (error) => resolve({ messages, code: error.code, details: error.details }));
    call.on('end', () => resolve({ messages, code: grpc.status.OK }));
  });
}

const stats = async (port, host = HOST) => (await request(port, 'GET', '/stats', { host })).json();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Polls check() until it returns something truthy; that value, or the last one after timeoutMs.
async function waitFor(check, timeoutMs = 3000) {
  const deadline = Date.now() + timeoutMs;
  let value = await check();
  while (!value && Date.now() < deadline) {
    await sleep(20);
    value = await check();
  }
  return value;
}

module.exports = {
  HOST,
  startServer,
  request,
  postJson,
  rawExchange,
  stats,
  sleep,
  waitFor,
  connectWs,
  readSse,
  fields,
  labClient,
  collect,
};
