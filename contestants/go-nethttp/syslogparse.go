package main

// Syslog parsing (spec §7.1, part syslog-parse): RFC 5424, and RFC 3164 where the message is
// in that form, strictly, on the message's bytes and without allocating. The spec's rules
// of what is malformed are exact (VERSION 1 only, a PRI of at most 191, a BOM followed by
// UTF-8), so that every contestant counts the same messages malformed; this is a small
// parser of its own rather than a library whose own reading of the RFCs would differ.

import (
	"bytes"
	"regexp"
	"unicode/utf8"
)

// syslogMessage is one parsed message; nil fields are nil slices.
type syslogMessage struct {
	pri                                      int
	timestamp, host, app, procid, msgid, msg []byte
	sdElements                               int
	rfc3164                                  bool
}

var (
	timestamp3164 = regexp.MustCompile(`^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 1-3]\d \d{2}:\d{2}:\d{2} `)
	syslogTag     = regexp.MustCompile(`^([A-Za-z0-9_./-]{1,32})(\[([!-Z^-~]{1,128})\])?:`)
	syslogBOM     = []byte{0xef, 0xbb, 0xbf}
	// HOSTNAME, APP-NAME, PROCID, MSGID after TIMESTAMP (spec §7.1's longest values).
	headerLimits = [...]int{64, 255, 48, 128, 32}
)

func printableASCII(b byte) bool { return b >= 0x21 && b <= 0x7e }

// parseSyslog parses one message into m; false if the spec calls it malformed.
func parseSyslog(buf []byte, m *syslogMessage) bool {
	pri, pos, ok := parsePRI(buf)
	if !ok {
		return false
	}
	*m = syslogMessage{pri: pri}
	if pos < len(buf) && buf[pos] >= '1' && buf[pos] <= '9' {
		return parse5424(buf[pos:], m)
	}
	return parse3164(buf[pos:], m)
}

func parsePRI(buf []byte) (value, next int, ok bool) {
	if len(buf) < 3 || buf[0] != '<' {
		return 0, 0, false
	}
	pos := 1
	for pos < len(buf) && pos <= 3 && buf[pos] >= '0' && buf[pos] <= '9' {
		value = value*10 + int(buf[pos]-'0')
		pos++
	}
	digits := pos - 1
	if digits == 0 || pos >= len(buf) || buf[pos] != '>' || (digits > 1 && buf[1] == '0') || value > 191 {
		return 0, 0, false
	}
	return value, pos + 1, true
}

// syslogToken is a printable field of 1..limit octets followed by SP; "-" is nil.
func syslogToken(buf []byte, limit int) (value, rest []byte, ok bool) {
	end := bytes.IndexByte(buf, ' ')
	if end < 1 || end > limit {
		return nil, nil, false
	}
	for _, b := range buf[:end] {
		if !printableASCII(b) {
			return nil, nil, false
		}
	}
	if end == 1 && buf[0] == '-' {
		return nil, buf[2:], true
	}
	return buf[:end], buf[end+1:], true
}

func parse5424(buf []byte, m *syslogMessage) bool {
	if len(buf) < 2 || buf[0] != '1' || buf[1] != ' ' {
		return false
	}
	rest := buf[2:]
	var fields [5][]byte
	for i, limit := range headerLimits {
		value, after, ok := syslogToken(rest, limit)
		if !ok {
			return false
		}
		fields[i], rest = value, after
	}
	if fields[0] != nil && !validTimestamp5424(fields[0]) {
		return false
	}
	m.timestamp, m.host, m.app, m.procid, m.msgid = fields[0], fields[1], fields[2], fields[3], fields[4]
	elements, rest, ok := structuredData(rest)
	if !ok {
		return false
	}
	m.sdElements = elements
	if len(rest) > 0 {
		if rest[0] != ' ' {
			return false
		}
		rest = rest[1:]
	}
	if bytes.HasPrefix(rest, syslogBOM) {
		rest = rest[len(syslogBOM):]
		if !utf8.Valid(rest) {
			return false
		}
	}
	m.msg = rest
	return true
}

func structuredData(buf []byte) (elements int, rest []byte, ok bool) {
	if len(buf) > 0 && buf[0] == '-' {
		return 0, buf[1:], true
	}
	for len(buf) > 0 && buf[0] == '[' {
		if buf, ok = sdElement(buf[1:]); !ok {
			return 0, nil, false
		}
		elements++
	}
	return elements, buf, elements > 0
}

// sdName is 1-32 printable octets but '=', ']', '"'; it returns what follows.
func sdName(buf []byte) ([]byte, bool) {
	n := 0
	for n < len(buf) && n < 32 && printableASCII(buf[n]) && buf[n] != '=' && buf[n] != ']' && buf[n] != '"' {
		n++
	}
	return buf[n:], n > 0
}

// sdElement reads one element whose '[' is taken and returns what follows its ']'.
func sdElement(buf []byte) ([]byte, bool) {
	buf, ok := sdName(buf)
	for ok && len(buf) > 0 && buf[0] == ' ' {
		if buf, ok = sdName(buf[1:]); !ok || len(buf) < 2 || buf[0] != '=' || buf[1] != '"' {
			return nil, false
		}
		buf, ok = sdValue(buf[2:])
	}
	if !ok || len(buf) == 0 || buf[0] != ']' {
		return nil, false
	}
	return buf[1:], true
}

// sdValue reads a PARAM-VALUE whose opening quote is taken, up to its closing one.
func sdValue(buf []byte) ([]byte, bool) {
	for i := 0; i < len(buf); i++ {
		switch buf[i] {
		case '\\':
			if i+1 >= len(buf) || (buf[i+1] != '"' && buf[i+1] != '\\' && buf[i+1] != ']') {
				return nil, false
			}
			i++
		case '"':
			return buf[i+1:], true
		case ']':
			return nil, false
		}
	}
	return nil, false
}

func parse3164(buf []byte, m *syslogMessage) bool {
	if !timestamp3164.Match(buf) {
		return false
	}
	m.rfc3164, m.timestamp = true, buf[:15]
	host, rest, ok := syslogToken(buf[16:], 255)
	if !ok {
		return false
	}
	m.host = host
	if tag := syslogTag.FindSubmatchIndex(rest); tag != nil {
		m.app = rest[tag[2]:tag[3]]
		if tag[6] >= 0 {
			m.procid = rest[tag[6]:tag[7]]
		}
		rest = bytes.TrimPrefix(rest[tag[1]:], []byte{' '})
	}
	m.msg = rest
	return true
}

// validTimestamp5424 is full-date "T" full-time: DDDD-DD-DDTDD:DD:DD, an optional fraction
// of 1-6 digits, then Z or +hh:mm / -hh:mm. By hand: a regexp per message costs a flood.
func validTimestamp5424(t []byte) bool {
	const shape = "DDDD-DD-DDTDD:DD:DD"
	if len(t) < len(shape)+1 {
		return false
	}
	for i := 0; i < len(shape); i++ {
		if (shape[i] == 'D') != (t[i] >= '0' && t[i] <= '9') || (shape[i] != 'D' && t[i] != shape[i]) {
			return false
		}
	}
	rest := t[len(shape):]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 7 {
			return false
		}
		rest = rest[n:]
	}
	if len(rest) == 1 {
		return rest[0] == 'Z'
	}
	return len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && isDigits(rest[1:3]) && rest[3] == ':' && isDigits(rest[4:6])
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
