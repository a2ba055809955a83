'use strict';
// The strict syslog parser (spec §7.1): what it takes apart, and what it calls malformed.

const test = require('node:test');
const assert = require('node:assert');
const { parse } = require('../lib/syslogparse');
const { SyslogFramer } = require('../lib/syslog');

const bytes = (text) => Buffer.from(text, 'latin1');

test('an RFC 5424 message is taken apart field by field', () => {
  const m = parse(bytes('<165>1 2026-11-25T20:00:00.001+01:00 host app 42 ID47 [a@1 b="c\\"d"][e] hi there'));
  assert.deepStrictEqual(
    [m.pri, m.timestamp, m.host, m.app, m.procid, m.msgid, m.sdElements, m.msg.toString()],
    [165, '2026-11-25T20:00:00.001+01:00', 'host', 'app', '42', 'ID47', 2, 'hi there'],
  );
  const nil = parse(bytes('<0>1 - - - - - -'));
  assert.deepStrictEqual([nil.timestamp, nil.host, nil.sdElements, nil.msg.length], [null, null, 0, 0]);
});

test('a BOM is not part of MSG, and what follows it must be UTF-8', () => {
  assert.strictEqual(parse(bytes('<14>1 - h a - - - \u00ef\u00bb\u00bfh\u00c3\u00a9')).msg.length, 3);
  assert.strictEqual(parse(bytes('<14>1 - h a - - - \u00ef\u00bb\u00bf\u00ff')), null);
});

test('an RFC 3164 message is parsed with its TAG and PID', () => {
  const m = parse(bytes('<86>Nov  5 01:02:03 host sshd[123]: Accepted'));
  assert.deepStrictEqual(
    [m.rfc3164, m.timestamp, m.host, m.app, m.procid, m.msg.toString()],
    [true, 'Nov  5 01:02:03', 'host', 'sshd', '123', 'Accepted'],
  );
  assert.strictEqual(parse(bytes('<13>Dec 31 23:59:59 host just text')).msg.toString(), 'just text');
});

test('bad PRIs, truncated headers and broken structured data are malformed', () => {
  for (const text of [
    '14>1 - h a - - - m', '<1a>1 - h a - - - m', '<192>1 - h a - - - m', '<014>1 - h a - - - m',
    '<1000>1 - h a - - - m', '<>1 - h a - - - m', '<14>1', '<14>1 - host', '<14>2 - h a - - - m',
    '<14>1 2026-11-25T20:00:00 h a - - - m', '<14>1 -  h a - - - m', '<14>1 - h a - - [x@1]m',
    '<14>1 - h a - - [x@1 a="b]c"] m', '<14>1 - h a - - [x@1 a="open', '<34>Oct 11 22:14 h su: m',
    '<34>just text',
  ]) {
    assert.strictEqual(parse(bytes(text)), null, text);
  }
});

test('the framer hands over whole messages, however the stream is cut', () => {
  const seen = [];
  const framer = new SyslogFramer((message) => seen.push(message.toString('latin1')));
  const stream = bytes('13 <14>1 - h a - - -\n<14>1 - h b - - - x\n12x <0>1 - - -\n');
  for (let at = 0; at < stream.length; at += 5) framer.push(stream.subarray(at, at + 5));
  assert.deepStrictEqual(seen, ['<14>1 - h a -', ' - -', '<14>1 - h b - - - x', '12x <0>1 - - -']);
});
