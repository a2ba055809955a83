'use strict';
// Syslog listener (spec §7): TCP with per-message octet-counting or newline framing, and
// UDP one message per datagram. In count mode messages are counted, never buffered; in parse
// mode (spec §7.1, --syslog-mode parse) each one is also gathered and parsed. RFC 5425 over
// TLS (spec §15, --syslog-tls-port) takes octet-counted frames only, on Node's tls module.

const net = require('net');
const tls = require('tls');
const dgram = require('dgram');
const { counters, settings } = require('./stats');
const { parse } = require('./syslogparse');

const NEWLINE = 0x0a;
const SPACE = 0x20;
const DIGIT_0 = 0x30;
const DIGIT_1 = 0x31;
const DIGIT_9 = 0x39;
// MSG-LEN longer than this is not a length but the start of a newline-framed message.
const MAX_LENGTH_DIGITS = 10;
const UDP_RECEIVE_BUFFER = 8 * 1024 * 1024;

const FRAME_START = 0;
const OCTET_LENGTH = 1;
const OCTET_BODY = 2;
const LINE = 3;

function countMessage(length) {
  counters.syslogReceived++;
  counters.syslogBytes += length;
}

function parseMessage(message) {
  const fields = parse(message);
  if (fields === null) {
    counters.syslogMalformed++;
    return;
  }
  counters.syslogParsed++;
  if (fields.rfc3164) counters.syslogRfc3164++;
  counters.syslogSdElements += fields.sdElements;
  counters.syslogMsgBytes += fields.msg[1] - fields.msg[0];
}

// Frames one TCP stream. Counting tracks only lengths, so a message split across segments
// costs nothing to reassemble; parsing (onMessage) gathers the message's pieces. With
// onLost (RFC 5425, spec §15) frames are octet-counted only: a bad MSG-LEN (not 1-9 first,
// a non-digit before SP, too many digits) calls onLost once, and nothing more is framed.
class SyslogFramer {
  constructor(onMessage = null, onLost = null) {
    this.onMessage = onMessage;
    this.onLost = onLost;
    this.lost = false;
    this.pieces = [];
    this.state = FRAME_START;
    this.octetLength = 0;
    this.remaining = 0;
    this.digits = 0;
    this.lineLength = 0;
  }

  push(chunk) {
    let pos = 0;
    while (pos < chunk.length && !this.lost) {
      if (this.state === FRAME_START) this.beginFrame(chunk[pos]);
      if (this.lost) break;
      if (this.state === OCTET_LENGTH) pos = this.readLength(chunk, pos);
      else if (this.state === OCTET_BODY) pos = this.readBody(chunk, pos);
      else pos = this.readLine(chunk, pos);
    }
  }

  beginFrame(firstByte) {
    this.octetLength = 0;
    this.digits = 0;
    this.lineLength = 0;
    this.state = firstByte >= DIGIT_1 && firstByte <= DIGIT_9 ? OCTET_LENGTH : LINE;
    if (this.state === LINE && this.onLost) this.lose();
  }

  lose() {
    this.lost = true;
    this.onLost();
  }

  readLength(chunk, pos) {
    const byte = chunk[pos];
    if (byte === SPACE) {
      this.remaining = this.octetLength;
      this.state = OCTET_BODY;
      return pos + 1;
    }
    if (byte >= DIGIT_0 && byte <= DIGIT_9 && this.digits < MAX_LENGTH_DIGITS) {
      this.octetLength = this.octetLength * 10 + (byte - DIGIT_0);
      this.digits++;
      return pos + 1;
    }
    if (this.onLost) {
      this.lose();
      return pos;
    }
    // Not "MSG-LEN SP": the digits read so far were the start of a newline-framed message.
    this.state = LINE;
    this.lineLength = this.digits;
    // The digits, without a leading zero, are exactly the number they made.
    if (this.onMessage) this.pieces.push(Buffer.from(String(this.octetLength)));
    return pos;
  }

  readBody(chunk, pos) {
    const take = Math.min(this.remaining, chunk.length - pos);
    this.remaining -= take;
    if (this.onMessage) this.pieces.push(chunk.subarray(pos, pos + take));
    if (this.remaining === 0) {
      this.complete(this.octetLength);
      this.state = FRAME_START;
    }
    return pos + take;
  }

  complete(length) {
    countMessage(length);
    if (!this.onMessage) return;
    const pieces = this.pieces;
    this.pieces = [];
    this.onMessage(pieces.length === 1 ? pieces[0] : Buffer.concat(pieces, length));
  }

  readLine(chunk, pos) {
    const end = chunk.indexOf(NEWLINE, pos);
    const stop = end === -1 ? chunk.length : end;
    this.lineLength += stop - pos;
    if (this.onMessage && stop > pos) this.pieces.push(chunk.subarray(pos, stop));
    if (end === -1) return chunk.length;
    if (this.lineLength > 0) this.complete(this.lineLength);
    this.state = FRAME_START;
    return end + 1;
  }
}

function onTcpConnection(socket) {
  counters.syslogTcpConnections++;
  const framer = new SyslogFramer(settings.syslogMode === 'parse' ? parseMessage : null);
  socket.on('data', (chunk) => framer.push(chunk));
  // A peer resetting the connection only loses its incomplete message.
  socket.on('error', () => socket.destroy());
}

// RFC 5425: the same counters as TCP; a bad MSG-LEN ends the connection (with close_notify,
// which end() sends), since nothing tells where the next frame would start.
function onTlsConnection(socket) {
  counters.syslogTcpConnections++;
  const onMessage = settings.syslogMode === 'parse' ? parseMessage : null;
  const framer = new SyslogFramer(onMessage, () => socket.end());
  socket.on('data', (chunk) => framer.push(chunk));
  socket.on('error', () => socket.destroy());
}

function onDatagram(message) {
  const length = message.length > 0 && message[message.length - 1] === NEWLINE
    ? message.length - 1
    : message.length;
  if (length === 0) return;
  countMessage(length);
  if (settings.syslogMode === 'parse') parseMessage(message.subarray(0, length));
}

function listen(target, port, host) {
  return new Promise((resolve, reject) => {
    target.once('error', reject);
    const done = () => {
      target.removeListener('error', reject);
      resolve(target);
    };
    if (target instanceof net.Server) target.listen({ port, host }, done);
    else target.bind({ port, address: host }, done);
  });
}

async function startSyslog(port, host) {
  const tcp = net.createServer(onTcpConnection);
  const type = net.isIPv6(host) ? 'udp6' : 'udp4';
  const udp = dgram.createSocket({ type, recvBufferSize: UDP_RECEIVE_BUFFER });
  udp.on('message', onDatagram);
  await listen(tcp, port, host);
  // Port 0 (tests) lets TCP pick; UDP then shares the number, as the spec's one port implies.
  await listen(udp, tcp.address().port, host);
  const report = (err) => process.stderr.write(`node-http syslog: ${err.message}\n`);
  tcp.on('error', report);
  udp.on('error', report);
  return { tcp, udp };
}

// tlsOptions: the TLS port's certificate, key, versions and suites (secure.js).
async function startSyslogTls(port, host, tlsOptions) {
  const server = tls.createServer(tlsOptions, onTlsConnection);
  // A failed handshake (plaintext, an old version, a cut hello) is that client's alone.
  server.on('tlsClientError', () => {});
  await listen(server, port, host);
  server.on('error', (err) => process.stderr.write(`node-http syslog tls: ${err.message}\n`));
  return server;
}

module.exports = { startSyslog, startSyslogTls, SyslogFramer };
