'use strict';
// Syslog parsing (spec §7.1, part syslog-parse): RFC 5424, and RFC 3164 where the message is
// in that form, strictly, on the message's bytes. npm's syslog parsers accept what the spec
// calls malformed (a PRI over 191, a truncated header), so this is a small strict parser of
// our own, with its unit tests in test/syslogparse.test.js.
//
// parse(buf) returns the fields or null if malformed: {pri, timestamp, host, app, procid,
// msgid, msg, sdElements, rfc3164}, each field a [start, end) pair of offsets into buf (null
// for a nil field), so that a flood allocates no string per field; text(buf, field) reads one.

const SP = 0x20;
const LT = 0x3c;
const GT = 0x3e;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const EQUALS = 0x3d;
const DASH = 0x2d;
const COLON = 0x3a;
const BOM = [0xef, 0xbb, 0xbf];
const FIELD_LIMITS = [255, 48, 128, 32]; // HOSTNAME, APP-NAME, PROCID, MSGID
const TIMESTAMP_SHAPE = 'DDDD-DD-DDTDD:DD:DD';
const TIMESTAMP_3164 = /^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 1-3]\d \d{2}:\d{2}:\d{2} $/;
const TAG = /^([A-Za-z0-9_./-]{1,32})(\[([!-Z^-~]{1,128})\])?:/;
const { isUtf8 } = require('buffer');

const isDigit = (b) => b >= 0x30 && b <= 0x39;
const printable = (b) => b >= 0x21 && b <= 0x7e;
const sdNameByte = (b) => printable(b) && b !== EQUALS && b !== RBRACKET && b !== QUOTE;

// PRI: "<", 1-3 digits without a leading zero (or "0"), ">", at most 191. [value, next].
function parsePri(buf) {
  if (buf.length < 3 || buf[0] !== LT) return null;
  let pos = 1;
  let value = 0;
  while (pos < buf.length && isDigit(buf[pos]) && pos <= 3) {
    value = value * 10 + (buf[pos] - 0x30);
    pos++;
  }
  const digits = pos - 1;
  if (digits === 0 || buf[pos] !== GT || (digits > 1 && buf[1] === 0x30) || value > 191) return null;
  return [value, pos + 1];
}

// A printable field of 1..limit octets followed by SP: [[start, end] or null for "-", next].
function token(buf, pos, limit) {
  let end = pos;
  while (end < buf.length && buf[end] !== SP) {
    if (!printable(buf[end])) return null;
    end++;
  }
  if (end === buf.length || end === pos || end - pos > limit) return null;
  const value = end - pos === 1 && buf[pos] === DASH ? null : [pos, end];
  return [value, end + 1];
}

// full-date "T" full-time with a zone, by bytes: a regexp would need a string per message.
function validTimestamp(buf, [start, end]) {
  const shape = TIMESTAMP_SHAPE.length;
  if (end - start <= shape) return false;
  for (let i = 0; i < shape; i++) {
    const b = buf[start + i];
    const want = TIMESTAMP_SHAPE.charCodeAt(i);
    if (want === 0x44 ? !isDigit(b) : b !== want) return false;
  }
  let pos = start + shape;
  if (buf[pos] === 0x2e) {
    const from = ++pos;
    while (pos < end && isDigit(buf[pos])) pos++;
    if (pos === from || pos - from > 6) return false;
  }
  if (end - pos === 1) return buf[pos] === 0x5a;
  return end - pos === 6 && (buf[pos] === 0x2b || buf[pos] === DASH) && isDigit(buf[pos + 1]) &&
    isDigit(buf[pos + 2]) && buf[pos + 3] === COLON && isDigit(buf[pos + 4]) && isDigit(buf[pos + 5]);
}

// A field's text (latin1), or null for a nil field.
function text(buf, field) {
  return field === null ? null : buf.toString('latin1', field[0], field[1]);
}

function parse(buf) {
  const pri = parsePri(buf);
  if (pri === null) return null;
  const [value, pos] = pri;
  if (pos < buf.length && buf[pos] >= 0x31 && buf[pos] <= 0x39) return parse5424(buf, value, pos);
  return parse3164(buf, value, pos);
}

function parse5424(buf, pri, start) {
  if (buf[start] !== 0x31 || buf[start + 1] !== SP) return null;
  const fields = [];
  let pos = start + 2;
  for (const limit of [64, ...FIELD_LIMITS]) {
    const field = token(buf, pos, limit);
    if (field === null) return null;
    fields.push(field[0]);
    pos = field[1];
  }
  if (fields[0] !== null && !validTimestamp(buf, fields[0])) return null;
  const sd = structuredData(buf, pos);
  if (sd === null) return null;
  const [sdElements, after] = sd;
  let msg = after;
  if (msg < buf.length) {
    if (buf[msg] !== SP) return null;
    msg++;
  }
  if (buf[msg] === BOM[0] && buf[msg + 1] === BOM[1] && buf[msg + 2] === BOM[2]) {
    msg += 3;
    if (!isUtf8(buf.subarray(msg))) return null;
  }
  msg = [Math.min(msg, buf.length), buf.length];
  const [timestamp, host, app, procid, msgid] = fields;
  return { pri, timestamp, host, app, procid, msgid, sdElements, msg, rfc3164: false };
}

// STRUCTURED-DATA at pos: [elements, next] or null.
function structuredData(buf, pos) {
  if (buf[pos] === DASH) return [0, pos + 1];
  let elements = 0;
  while (buf[pos] === LBRACKET) {
    pos = sdElement(buf, pos + 1);
    if (pos < 0) return null;
    elements++;
  }
  return elements > 0 ? [elements, pos] : null;
}

function sdName(buf, pos) {
  const start = pos;
  while (pos < buf.length && sdNameByte(buf[pos]) && pos - start < 32) pos++;
  return pos > start ? pos : -1;
}

// One element after its "[": the position after its "]", or -1.
function sdElement(buf, pos) {
  pos = sdName(buf, pos);
  if (pos < 0) return -1;
  while (buf[pos] === SP) {
    pos = sdName(buf, pos + 1);
    if (pos < 0 || buf[pos] !== EQUALS || buf[pos + 1] !== QUOTE) return -1;
    pos = sdValue(buf, pos + 2);
    if (pos < 0) return -1;
  }
  return buf[pos] === RBRACKET ? pos + 1 : -1;
}

// A PARAM-VALUE after its opening quote: the position after the closing one, or -1.
function sdValue(buf, pos) {
  while (pos < buf.length) {
    const b = buf[pos];
    if (b === BACKSLASH) {
      const next = buf[pos + 1];
      if (next !== QUOTE && next !== BACKSLASH && next !== RBRACKET) return -1;
      pos += 2;
    } else if (b === QUOTE) {
      return pos + 1;
    } else if (b === RBRACKET) {
      return -1;
    } else {
      pos++;
    }
  }
  return -1;
}

// RFC 3164 is rare in a flood: regexps on its text are fine here.
function parse3164(buf, pri, pos) {
  // "Mmm dd hh:mm:ss " is 16 octets.
  if (!TIMESTAMP_3164.test(buf.toString('latin1', pos, pos + 16))) return null;
  const host = token(buf, pos + 16, 255);
  if (host === null) return null;
  let rest = host[1];
  const tag = TAG.exec(buf.toString('latin1', rest, rest + 200));
  let app = null;
  let procid = null;
  if (tag) {
    app = [rest, rest + tag[1].length];
    if (tag[3] !== undefined) procid = [rest + tag[1].length + 1, rest + tag[1].length + 1 + tag[3].length];
    rest += tag[0].length;
    if (buf[rest] === SP) rest++;
  }
  return {
    pri,
    timestamp: [pos, pos + 15],
    host: host[0],
    app,
    procid,
    msgid: null,
    sdElements: 0,
    msg: [Math.min(rest, buf.length), buf.length],
    rfc3164: true,
  };
}

module.exports = { parse, text };
