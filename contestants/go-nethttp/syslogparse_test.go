package main

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestASyslog5424MessageIsTakenApartFieldByField(t *testing.T) {
	var m syslogMessage
	text := `<165>1 2026-11-25T20:00:00.001+01:00 host app 42 ID47 [a@1 b="c\"d"][e] hi there`
	if !parseSyslog([]byte(text), &m) {
		t.Fatal("malformed")
	}
	got := []string{string(m.timestamp), string(m.host), string(m.app), string(m.procid), string(m.msgid), string(m.msg)}
	want := []string{"2026-11-25T20:00:00.001+01:00", "host", "app", "42", "ID47", "hi there"}
	if strings.Join(got, "|") != strings.Join(want, "|") || m.pri != 165 || m.sdElements != 2 {
		t.Fatalf("got %q pri %d sd %d", got, m.pri, m.sdElements)
	}
	if !parseSyslog([]byte("<0>1 - - - - - -"), &m) || m.host != nil || len(m.msg) != 0 {
		t.Fatalf("nil fields: %+v", m)
	}
}

func TestABOMIsNotPartOfMSGAndWhatFollowsMustBeUTF8(t *testing.T) {
	var m syslogMessage
	if !parseSyslog([]byte("<14>1 - h a - - - \xef\xbb\xbfh\xc3\xa9"), &m) || len(m.msg) != 3 {
		t.Fatalf("BOM message: %+v", m)
	}
	if parseSyslog([]byte("<14>1 - h a - - - \xef\xbb\xbf\xff"), &m) {
		t.Fatal("invalid UTF-8 after a BOM parsed")
	}
}

func TestASyslog3164MessageIsParsedWithItsTagAndPID(t *testing.T) {
	var m syslogMessage
	if !parseSyslog([]byte("<86>Nov  5 01:02:03 host sshd[123]: Accepted"), &m) || !m.rfc3164 {
		t.Fatal("malformed")
	}
	if string(m.timestamp) != "Nov  5 01:02:03" || string(m.app) != "sshd" || string(m.procid) != "123" || string(m.msg) != "Accepted" {
		t.Fatalf("%+v", m)
	}
	if !parseSyslog([]byte("<13>Dec 31 23:59:59 host just text"), &m) || string(m.msg) != "just text" || m.app != nil {
		t.Fatalf("%+v", m)
	}
}

func TestBadPRIsTruncatedHeadersAndBrokenStructuredDataAreMalformed(t *testing.T) {
	var m syslogMessage
	for _, text := range []string{
		"14>1 - h a - - - m", "<1a>1 - h a - - - m", "<192>1 - h a - - - m", "<014>1 - h a - - - m",
		"<1000>1 - h a - - - m", "<>1 - h a - - - m", "<14>1", "<14>1 - host", "<14>2 - h a - - - m",
		"<14>1 2026-11-25T20:00:00 h a - - - m", "<14>1 -  h a - - - m", "<14>1 - h a - - [x@1]m",
		`<14>1 - h a - - [x@1 a="b]c"] m`, `<14>1 - h a - - [x@1 a="open`, "<34>Oct 11 22:14 h su: m",
		"<34>just text",
	} {
		if parseSyslog([]byte(text), &m) {
			t.Errorf("parsed: %q", text)
		}
	}
}

func TestReadMessageHandsOverWholeMessagesOfEitherFraming(t *testing.T) {
	stream := "13 <14>1 - h a - - -\n<14>1 - h b - - - x\n12x <0>1 - - -\n"
	reader := bufio.NewReaderSize(&slowReader{data: []byte(stream)}, 16)
	var long []byte
	var seen []string
	for {
		message, err := readMessage(reader, &long)
		if err != nil {
			break
		}
		seen = append(seen, string(message))
	}
	want := []string{"<14>1 - h a -", " - -", "<14>1 - h b - - - x", "12x <0>1 - - -"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q", seen)
	}
}

// slowReader hands out 5 bytes at a time, as a network might.
type slowReader struct{ data []byte }

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 5)], r.data)
	r.data = r.data[n:]
	return n, nil
}
