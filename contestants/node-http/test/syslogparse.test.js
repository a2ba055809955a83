'use strict';
// The strict syslog parser (spec §7.1) and the TCP framer (§7), against the spec's own test
// vectors (spec/vectors/syslog.json, shared by every contestant's tests): what the parser
// takes apart, what it calls malformed, and the messages the framer hands over.

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { parse, text } = require('../lib/syslogparse');
const { SyslogFramer } = require('../lib/syslog');

const VECTORS = require(path.join(__dirname, '..', '..', '..', 'spec', 'vectors', 'syslog.json'));
// A vector's string stands for bytes, one character a byte.
const bytes = (latin1) => Buffer.from(latin1, 'latin1');

const FIELDS = ['timestamp', 'host', 'app', 'procid', 'msgid', 'msg'];
// The message's fields as the vectors write them, or null when it is malformed.
function fields(message) {
  const buf = bytes(message);
  const m = parse(buf);
  if (m === null) return null;
  const out = Object.fromEntries(FIELDS.map((name) => [name, text(buf, m[name])]));
  return { ...out, pri: m.pri, sd_elements: m.sdElements, rfc3164: m.rfc3164 };
}

for (const vector of VECTORS.parsed) {
  test(vector.name, () => {
    assert.deepStrictEqual(fields(vector.input), vector.fields);
  });
}

test('bad PRIs, truncated headers and broken structured data are malformed', () => {
  for (const vector of VECTORS.malformed) {
    assert.strictEqual(parse(bytes(vector.input)), null, vector.name);
  }
});

for (const vector of VECTORS.framed) {
  test(`the framer: ${vector.name}`, () => {
    const seen = [];
    const framer = new SyslogFramer((message) => seen.push(message.toString('latin1')));
    const stream = bytes(vector.stream);
    for (let at = 0; at < stream.length; at += vector.piece_bytes) {
      framer.push(stream.subarray(at, at + vector.piece_bytes));
    }
    assert.deepStrictEqual(seen, vector.messages);
  });
}
