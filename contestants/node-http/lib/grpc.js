'use strict';
// gRPC (spec §16) with @grpc/grpc-js: its own Server owns whole connections, on --grpc-port
// with prior knowledge and, with TLS, on --grpc-tls-port by ALPN h2, in this process and on
// this event loop. A Subscribe stream is one more subscriber in push.js's lists, so one
// snapshot spans it and the other transports. grpc-js's defaults are the spec's: a 4 MiB
// receive limit (RESOURCE_EXHAUSTED above it), UNIMPLEMENTED for unknown methods, and
// grpc-timeout as the call's deadline (DEADLINE_EXCEEDED).

const fs = require('fs');
const path = require('path');
const { AEAD_CIPHERS } = require('./secure');

// grpc-js takes its TLS suites from this variable, read once when it loads; the same
// suites as every other TLS port (spec §12).
process.env.GRPC_SSL_CIPHER_SUITES ??= AEAD_CIPHERS;

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { counters } = require('./stats');
const { isEventName } = require('./validate');
const { PERF_BODY } = require('./router');
const push = require('./push');

// The committed service definition, loaded at start: the repository's spec/ is beside
// contestants/, as in every run.
const PROTO = path.join(__dirname, '..', '..', '..', 'spec', 'grpc', 'serverlab.proto');
// Fields keep the .proto's names; int64 decodes to a Number (seq and milliseconds fit);
// a field the sender left out stays out, so Echo returns what it was sent.
const LOADER = { keepCase: true, longs: Number, bytes: Buffer, defaults: false, arrays: true };
const lab = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO, LOADER)).serverlab.v1.Lab;

// What a Delivery adds to its name and data: the other fields, tags, the 5-byte prefix and
// an HTTP/2 frame header, near enough to bound a stream's backlog by bytes.
const DELIVERY_OVERHEAD = 64;

class GrpcSubscriber extends push.Subscriber {
  constructor(events, call) {
    super('grpc', { type: 'grpc', events }, null);
    this.call = call;
    // Bytes written to the call whose write has not completed: HTTP/2 flow control holds
    // them while the client reads no faster.
    this.waiting = 0;
  }

  // A reader more than push.BACKLOG_LIMIT behind is too far behind to hold (spec §16):
  // its call ends RESOURCE_EXHAUSTED, after what it has been sent.
  alive() {
    if (this.call.cancelled || this.call.writableEnded) return false;
    if (this.waiting <= push.BACKLOG_LIMIT) return true;
    endCall(this.call, grpc.status.RESOURCE_EXHAUSTED, 'the subscriber fell too far behind');
    return false;
  }

  // grpc-js encodes the message and writes it to its HTTP/2 stream in this call. A timed
  // emit's Delivery leaves `data` out (proto3's empty string).
  deliverCycle(cycle, place, sent) {
    counters.grpc.deliveries++;
    const { name, seq, created, total, dataJson } = cycle;
    const delivery = { name, seq, created, sent, total, place };
    if (dataJson !== undefined) delivery.data = dataJson;
    const size = name.length + (dataJson === undefined ? 0 : dataJson.length) + DELIVERY_OVERHEAD;
    this.waiting += size;
    this.call.write(delivery, () => {
      this.waiting -= size;
    });
  }
}

// Ends a streaming call with a non-zero status and grpc-message (grpc-js sends it as the
// trailers, after what the call has written).
function endCall(call, code, details) {
  call.emit('error', { code, details });
}

// Why a Subscribe's events are not 1 to 16 distinct event names, or null.
function subscribeProblem(events) {
  const valid =
    events.length >= 1 &&
    events.length <= push.MAX_EVENTS_PER_REQUEST &&
    events.every(isEventName) &&
    new Set(events).size === events.length;
  return valid ? null : 'events must be 1 to 16 distinct event names';
}

// A subscriber from the moment grpc-js hands over the request message, until the call's
// deadline or its cancellation (grpc-js reports both, and a closed connection, as cancelled).
function subscribe(call) {
  const problem = subscribeProblem(call.request.events);
  if (problem) return endCall(call, grpc.status.INVALID_ARGUMENT, problem);
  const sub = new GrpcSubscriber(call.request.events, call);
  push.subscribe(sub);
  call.once('cancelled', () => push.unsubscribe(sub));
  return undefined;
}

const PERF_REPLY = { body: PERF_BODY };

const SERVICE = {
  Perf: (call, callback) => callback(null, PERF_REPLY),
  Echo: (call, callback) => callback(null, call.request),
  Subscribe: subscribe,
  // Each message echoed as it is read; the client's end of its side ends the call OK.
  Chat: (call) => {
    call.on('data', (message) => call.write(message));
    call.on('end', () => call.end());
  },
};

// grpc-js's channelz (on by default, so reading it adds nothing to a call's path) counts
// every call started, whatever its method; the `calls` of /stats is that count.
const { GetServer } = grpc.getChannelzHandlers();

function callsStarted(server) {
  let calls = 0;
  GetServer({ request: { server_id: server.getChannelzRef().id } }, (error, reply) => {
    if (!error) calls = Number(reply.server.data.calls_started);
  });
  return calls;
}

function bind(server, host, port, credentials) {
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (error, bound) => {
      if (error) reject(new Error(`gRPC on ${address}: ${error.message}`));
      else resolve(bound);
    });
  });
}

// Binds `port` on every address (the first's port, chosen when 0, shared by the others).
async function bindAll(server, hosts, port, credentials) {
  let bound = port;
  for (const host of hosts) bound = await bind(server, host, bound, credentials);
  return bound;
}

// Starts this process's gRPC server; resolves with its ports (grpcTlsPort null without TLS).
async function startGrpc(options, hosts) {
  const server = new grpc.Server();
  server.addService(lab.service, SERVICE);
  Object.defineProperty(counters.grpc, 'calls', { enumerable: true, get: () => callsStarted(server) });
  const grpcPort = await bindAll(server, hosts, options.grpcPort, grpc.ServerCredentials.createInsecure());
  let grpcTlsPort = null;
  if (options.grpcTlsPort !== null) {
    const keyCertPair = { cert_chain: fs.readFileSync(options.tlsCert), private_key: fs.readFileSync(options.tlsKey) };
    const credentials = grpc.ServerCredentials.createSsl(null, [keyCertPair], false);
    grpcTlsPort = await bindAll(server, hosts, options.grpcTlsPort, credentials);
  }
  return { grpcPort, grpcTlsPort };
}

module.exports = { startGrpc };
