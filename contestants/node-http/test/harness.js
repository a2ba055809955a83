'use strict';
// Starts the real server on free loopback ports and talks to it over real sockets.

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');

const HOST = '127.0.0.1';
const SERVER = path.join(__dirname, '..', 'server.js');
const LISTENING = /listening on 127\.0\.0\.1:(\d+), syslog on 127\.0\.0\.1:(\d+)/;

async function startServer() {
  const docroot = fs.mkdtempSync(path.join(os.tmpdir(), 'node-http-test-'));
  const child = spawn(
    process.execPath,
    [SERVER, '--port', '0', '--syslog-port', '0', '--docroot', docroot],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  const ports = await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
      const match = LISTENING.exec(stderr);
      if (match) resolve({ port: Number(match[1]), syslogPort: Number(match[2]) });
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
  });
  return {
    ...ports,
    docroot,
    stderr: () => stderr,
    stop: () => {
      child.kill('SIGTERM');
      fs.rmSync(docroot, { recursive: true, force: true });
      return new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

// One request on its own connection; resolves with status, headers and the whole body.
function request(port, method, urlPath, { body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: HOST, port, method, path: urlPath, headers, agent: false });
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

const postJson = (port, urlPath, value) =>
  request(port, 'POST', urlPath, {
    body: typeof value === 'string' ? value : JSON.stringify(value),
    headers: { 'Content-Type': 'application/json' },
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

const stats = async (port) => (await request(port, 'GET', '/stats')).json();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = { HOST, startServer, request, postJson, rawExchange, stats, sleep };
