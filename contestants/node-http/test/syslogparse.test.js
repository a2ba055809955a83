'use strict';
// The strict syslog parser (spec §7.1): what it takes apart, and what it calls malformed.

const test = require('node:test');
const assert = require('node:assert');
const { parse, text } = require('../lib/syslogparse');
const { SyslogFramer } = require('../lib/syslog');

const bytes = (text) => Buffer.from(text, 'latin1');

const FIELDS = ['timestamp', 'host', 'app', 'procid', 'msgid', 'msg'];
// The message's fields as text, and its PRI, SD element count and form.
function fields(message) {
  const buf = bytes(message);
  const m = parse(buf);
  if (m === null) return null;
  const out = Object.fromEntries(FIELDS.map((name) => [name, text(buf, m[name])]));
  return { ...out, pri: m.pri, sdElements: m.sdElements, rfc3164: m.rfc3164 };
}

test('an RFC 5424 message is taken apart field by field', () => {
  assert.deepStrictEqual(
    fields('<165>1 2026-11-25T20:00:00.001+01:00 host app 42 ID47 [a@1 b="c\\"d"][e] hi there'),
    {
      timestamp: '2026-11-25T20:00:00.001+01:00', host: 'host', app: 'app', procid: '42',
      msgid: 'ID47', msg: 'hi there', pri: 165, sdElements: 2, rfc3164: false,
    },
  );
  const nil = fields('<0>1 - - - - - -');
  assert.deepStrictEqual([nil.timestamp, nil.host, nil.sdElements, nil.msg], [null, null, 0, '']);
});

test('a BOM is not part of MSG, and what follows it must be UTF-8', () => {
  assert.strictEqual(fields('<14>1 - h a - - - \u00ef\u00bb\u00bfh\u00c3\u00a9').msg.length, 3);
  assert.strictEqual(parse(bytes('<14>1 - h a - - - \u00ef\u00bb\u00bf\u00ff')), null);
});

test('an RFC 3164 message is parsed with its TAG and PID', () => {
  const m = fields('<86>Nov  5 01:02:03 host sshd[123]: Accepted');
  assert.deepStrictEqual(
    [m.rfc3164, m.timestamp, m.host, m.app, m.procid, m.msg],
    [true, 'Nov  5 01:02:03', 'host', 'sshd', '123', 'Accepted'],
  );
  const untagged = fields('<13>Dec 31 23:59:59 host just text');
  assert.deepStrictEqual([untagged.app, untagged.msg], [null, 'just text']);
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
