package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The spec's own test vectors (spec/vectors/syslog.json, shared by every contestant's
// tests). Every string of theirs stands for bytes, one character a byte.
type syslogVectors struct {
	Parsed []struct {
		Name   string
		Input  string
		Fields map[string]any
	}
	Malformed []struct{ Name, Input string }
	Framed    []struct {
		Name       string
		Stream     string
		PieceBytes int `json:"piece_bytes"`
		Messages   []string
	}
}

func readSyslogVectors(t *testing.T) syslogVectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "spec", "vectors", "syslog.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors syslogVectors
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	return vectors
}

// latin1 is the bytes a vector's string stands for.
func latin1(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		out = append(out, byte(r))
	}
	return out
}

// vectorText is a field as the vectors write it: nil for a nil field.
func vectorText(field []byte) any {
	if field == nil {
		return nil
	}
	return string(bytesToRunes(field))
}

// bytesToRunes is the inverse of latin1: a rune a byte.
func bytesToRunes(b []byte) []rune {
	runes := make([]rune, len(b))
	for i, c := range b {
		runes[i] = rune(c)
	}
	return runes
}

func TestTheSpecsParsedVectorsAreTakenApartFieldByField(t *testing.T) {
	for _, vector := range readSyslogVectors(t).Parsed {
		var m syslogMessage
		if !parseSyslog(latin1(vector.Input), &m) {
			t.Errorf("%s: malformed", vector.Name)
			continue
		}
		msg := vectorText(m.msg)
		if msg == nil {
			msg = ""
		}
		got := map[string]any{
			"pri": float64(m.pri), "timestamp": vectorText(m.timestamp), "host": vectorText(m.host),
			"app": vectorText(m.app), "procid": vectorText(m.procid), "msgid": vectorText(m.msgid),
			"sd_elements": float64(m.sdElements), "msg": msg, "rfc3164": m.rfc3164,
		}
		if !reflect.DeepEqual(got, vector.Fields) {
			t.Errorf("%s: got %v, want %v", vector.Name, got, vector.Fields)
		}
	}
}

func TestTheSpecsMalformedVectorsAreMalformed(t *testing.T) {
	for _, vector := range readSyslogVectors(t).Malformed {
		var m syslogMessage
		if parseSyslog(latin1(vector.Input), &m) {
			t.Errorf("%s: parsed %q", vector.Name, vector.Input)
		}
	}
}

func TestReadMessageHandsOverTheSpecsFramedVectorsWhole(t *testing.T) {
	for _, vector := range readSyslogVectors(t).Framed {
		source := &slowReader{data: latin1(vector.Stream), piece: vector.PieceBytes}
		reader := bufio.NewReaderSize(source, 16)
		var long []byte
		seen := []string{}
		for {
			message, err := readMessage(reader, &long)
			if err != nil {
				break
			}
			seen = append(seen, string(bytesToRunes(message)))
		}
		if strings.Join(seen, "|") != strings.Join(vector.Messages, "|") {
			t.Errorf("%s: got %q", vector.Name, seen)
		}
	}
}

// slowReader hands out `piece` bytes at a time, as a network might.
type slowReader struct {
	data  []byte
	piece int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.piece)], r.data)
	r.data = r.data[n:]
	return n, nil
}
