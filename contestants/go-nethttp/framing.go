package main

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// net/http frames requests more leniently than spec §1.1 (RFC 9112 §6-7) allows, in ways
// no setting changes: it serves Content-Length with Transfer-Encoding and keeps the
// connection, ignores Transfer-Encoding in HTTP/1.0 (so a chunked body is read as the next
// request), and skips every byte of a chunk extension. framingReader sits between the
// connection and net/http: it reads ahead, follows where each request's body ends, and
// hands on only what the spec accepts.
//
// A refused head never reaches net/http. In its place net/http gets a head it refuses
// itself with the same status (a bad Content-Length: 400, an unsupported coding: 501),
// so the answer goes out in order after any earlier response, and errorconn.go turns it
// into the spec's JSON error with the reason recorded here. A fault in a body (a chunk
// line) ends the stream instead: net/http sees the body cut short, answers 400 if the
// handler still reads it, and closes.

const (
	// net/http answers a longer header section with 431 itself; past this it gets the
	// bytes unjudged.
	maxJudgedHead = maxHeaderBytes + 4096 + 1
	// net/http's own limit for a chunk line.
	maxChunkLine = 4096
	// A chunk size must fit an int64, as net/http's body lengths do.
	maxChunkSize = 1<<63 - 1
)

type frameState int

const (
	stateHead      frameState = iota
	stateLength               // a Content-Length body: remaining bytes
	stateChunkLine            // a chunk-size line
	stateChunkData            // chunk data: remaining bytes
	stateChunkEnd             // the CRLF after chunk data
	stateTrailer              // a trailer line, or the empty line that ends the body
	stateUnjudged             // a head too large to judge (net/http refuses it), or not HTTP

)

// refusal is a framing the server refuses: net/http answers with status, and the JSON
// error carries reason.
type refusal struct {
	status int
	reason string
}

var (
	// Heads net/http refuses with 400 and 501 on its own.
	refusedHead = map[int]string{
		400: "GET / HTTP/1.1\r\nHost: refused\r\nContent-Length: refused\r\n\r\n",
		501: "GET / HTTP/1.1\r\nHost: refused\r\nTransfer-Encoding: refused\r\n\r\n",
	}
	// Read-ahead buffers are borrowed only while they hold bytes, so that thousands of
	// idle or held connections cost nothing here.
	framingBuffers = sync.Pool{New: func() any { buffer := make([]byte, 0, 4096); return &buffer }}
)

type framingReader struct {
	src io.Reader
	// buf[start:judged] is judged and waits for net/http; buf[judged:] is read ahead.
	buf       *[]byte
	start     int
	judged    int
	state     frameState
	remaining uint64
	refused   atomic.Pointer[refusal]
}

func (f *framingReader) Read(p []byte) (int, error) {
	for {
		if f.start < f.judged {
			n := copy(p, (*f.buf)[f.start:f.judged])
			f.start += n
			f.release()
			return n, nil
		}
		if f.refused.Load() != nil {
			return 0, io.EOF
		}
		if f.buf == nil && f.inBody() {
			return f.readBody(p)
		}
		if f.buf != nil && f.judge() {
			continue
		}
		if err := f.readMore(p); err != nil {
			return 0, err
		}
	}
}

func (f *framingReader) inBody() bool {
	return (f.state == stateLength || f.state == stateChunkData) && f.remaining > 0 ||
		f.state == stateUnjudged
}

// readBody hands body bytes straight from the connection into net/http's buffer.
func (f *framingReader) readBody(p []byte) (int, error) {
	if f.state != stateUnjudged && uint64(len(p)) > f.remaining {
		p = p[:f.remaining]
	}
	n, err := f.src.Read(p)
	f.took(n)
	return n, err
}

// took counts n body bytes handed on.
func (f *framingReader) took(n int) {
	if f.state == stateUnjudged {
		return
	}
	f.remaining -= uint64(n)
	if f.remaining == 0 && f.state == stateLength {
		f.state = stateHead
	} else if f.remaining == 0 {
		f.state = stateChunkEnd
	}
}

// readMore reads into net/http's buffer while nothing is held (a wait for the next request
// borrows no buffer), and after what is held otherwise.
func (f *framingReader) readMore(p []byte) error {
	if f.buf == nil {
		n, err := f.src.Read(p)
		if n > 0 {
			f.buf = framingBuffers.Get().(*[]byte)
			*f.buf = append((*f.buf)[:0], p[:n]...)
			return nil
		}
		return err
	}
	buf := *f.buf
	if len(buf) == cap(buf) && f.start > 0 {
		buf = buf[:copy(buf, buf[f.start:])]
		f.judged -= f.start
		f.start = 0
	}
	if len(buf) == cap(buf) {
		buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
	}
	n, err := f.src.Read(buf[len(buf):cap(buf)])
	*f.buf = buf[:len(buf)+n]
	if n > 0 {
		return nil
	}
	return err
}

// release gives the buffer back once everything in it was handed on.
func (f *framingReader) release() {
	if f.buf == nil || f.start < len(*f.buf) {
		return
	}
	if cap(*f.buf) <= 64<<10 {
		framingBuffers.Put(f.buf)
	}
	f.buf, f.start, f.judged = nil, 0, 0
}

// judge moves what it can of the read-ahead to the judged part; false if it needs more.
func (f *framingReader) judge() bool {
	ahead := (*f.buf)[f.judged:]
	if len(ahead) == 0 {
		return false
	}
	switch f.state {
	case stateLength, stateChunkData, stateUnjudged:
		n := len(ahead)
		if f.state != stateUnjudged && uint64(n) > f.remaining {
			n = int(f.remaining)
		}
		f.judged += n
		f.took(n)
		return true
	case stateHead:
		return f.judgeHead(ahead)
	case stateChunkEnd:
		if len(ahead) < 2 {
			return false
		}
		if ahead[0] != '\r' || ahead[1] != '\n' {
			return f.cutBody()
		}
		f.judged += 2
		f.state = stateChunkLine
		return true
	default:
		return f.judgeLine(ahead)
	}
}

func (f *framingReader) judgeHead(ahead []byte) bool {
	end := headEnd(ahead)
	if end < 0 {
		if len(ahead) >= maxJudgedHead {
			f.state = stateUnjudged
			return true
		}
		return false
	}
	framing, refused := requestFraming(ahead[:end])
	if refused != nil {
		f.refuse(refused)
		return true
	}
	f.judged += end
	switch {
	case framing.chunked:
		f.state = stateChunkLine
	case framing.length > 0:
		f.state, f.remaining = stateLength, framing.length
	}
	return true
}

// passThrough hands on everything from now on unjudged: the connection left HTTP (a
// WebSocket upgrade), and what it already read ahead is the new protocol's.
func (f *framingReader) passThrough() {
	f.state = stateUnjudged
}

// refuse puts net/http's stand-in for a refused head where the head was.
func (f *framingReader) refuse(r *refusal) {
	*f.buf = append((*f.buf)[:f.judged], refusedHead[r.status]...)
	f.judged = len(*f.buf)
	f.refused.Store(r)
}

// cutBody ends the stream where a body turned out malformed.
func (f *framingReader) cutBody() bool {
	*f.buf = (*f.buf)[:f.judged]
	f.refused.Store(&refusal{400, "malformed chunked body"})
	return true
}

func (f *framingReader) judgeLine(ahead []byte) bool {
	lf := bytes.IndexByte(ahead, '\n')
	if lf < 0 {
		cr := bytes.IndexByte(ahead, '\r')
		if len(ahead) > maxChunkLine || cr >= 0 && cr != len(ahead)-1 {
			return f.cutBody()
		}
		return false
	}
	if lf == 0 || bytes.IndexByte(ahead[:lf], '\r') != lf-1 {
		return f.cutBody() // a bare LF, or a CR inside the line
	}
	line := ahead[:lf-1]
	if f.state == stateTrailer {
		if len(line) == 0 {
			f.state = stateHead
		}
		f.judged += lf + 1
		return true
	}
	size, ok := chunkSize(line)
	if !ok {
		return f.cutBody()
	}
	f.judged += lf + 1
	if size == 0 {
		f.state = stateTrailer
	} else {
		f.state, f.remaining = stateChunkData, size
	}
	return true
}

// headEnd is the length of the header section at the start of b, or -1 if incomplete.
func headEnd(b []byte) int {
	for at := 0; ; {
		lf := bytes.IndexByte(b[at:], '\n')
		if lf < 0 {
			return -1
		}
		next := at + lf + 1
		if rest := b[next:]; len(rest) > 0 && rest[0] == '\n' {
			return next + 1
		} else if len(rest) > 1 && rest[0] == '\r' && rest[1] == '\n' {
			return next + 2
		}
		at = next
	}
}

type framing struct {
	length  uint64
	chunked bool
}

// requestFraming reads the framing fields of one header section (RFC 9112 §6).
func requestFraming(head []byte) (framing, *refusal) {
	requestLine, fields, _ := bytes.Cut(bytes.TrimRight(head, "\r\n"), []byte("\n"))
	http10 := bytes.HasSuffix(bytes.TrimSuffix(requestLine, []byte("\r")), []byte(" HTTP/1.0"))
	var lengths, codings [][]byte
	inFraming := false
	for len(fields) > 0 {
		var line []byte
		line, fields, _ = bytes.Cut(fields, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			if inFraming {
				return framing{}, &refusal{400, "obsolete line folding in a framing field"}
			}
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		switch {
		case asciiEqualFold(name, "content-length"):
			lengths = appendElements(lengths, value)
		case asciiEqualFold(name, "transfer-encoding"):
			codings = appendElements(codings, value)
		default:
			inFraming = false
			continue
		}
		inFraming = true
	}
	if len(codings) > 0 {
		return framing{chunked: true}, checkCodings(codings, http10, len(lengths) > 0)
	}
	if len(lengths) == 0 {
		return framing{}, nil
	}
	length, refused := contentLength(lengths)
	return framing{length: length}, refused
}

func appendElements(list [][]byte, value []byte) [][]byte {
	for _, item := range bytes.Split(value, []byte(",")) {
		list = append(list, bytes.Trim(item, " \t"))
	}
	return list
}

func checkCodings(codings [][]byte, http10, withLength bool) *refusal {
	last, before := codings[len(codings)-1], codings[:len(codings)-1]
	switch {
	case http10:
		return &refusal{400, "transfer-encoding in an http/1.0 request"}
	case withLength:
		return &refusal{400, "content-length with transfer-encoding"}
	case !asciiEqualFold(last, "chunked"):
		return &refusal{400, "chunked is not the final transfer coding"}
	}
	for _, coding := range before {
		if asciiEqualFold(coding, "chunked") {
			return &refusal{400, "chunked applied more than once"}
		}
	}
	if len(before) > 0 {
		return &refusal{501, "unknown transfer coding"}
	}
	return nil
}

func contentLength(values [][]byte) (uint64, *refusal) {
	var length uint64
	for i, value := range values {
		n, ok := parseDigits(value)
		if !ok {
			return 0, &refusal{400, "malformed content-length"}
		}
		if i > 0 && n != length {
			return 0, &refusal{400, "differing content-length values"}
		}
		length = n
	}
	return length, nil
}

// parseDigits reads 1*DIGIT that fits an int64, net/http's body length.
func parseDigits(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' || n > (maxChunkSize-uint64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// chunkSize reads a chunk-size line without its CRLF:
// chunk-size *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ).
func chunkSize(line []byte) (uint64, bool) {
	var size uint64
	at := 0
	for ; at < len(line) && isHex(line[at]); at++ {
		if size > maxChunkSize>>4 {
			return 0, false
		}
		size = size<<4 | uint64(hexValue(line[at]))
	}
	return size, at > 0 && chunkExtensions(line[at:])
}

func chunkExtensions(rest []byte) bool {
	for at := 0; at < len(rest); {
		at = skipBWS(rest, at)
		if at == len(rest) || rest[at] != ';' {
			return false
		}
		at = token(rest, skipBWS(rest, at+1))
		if at < 0 {
			return false
		}
		if value := skipBWS(rest, at); value < len(rest) && rest[value] == '=' {
			value = skipBWS(rest, value+1)
			if at = token(rest, value); at < 0 {
				at = quotedString(rest, value)
			}
			if at < 0 {
				return false
			}
		}
	}
	return true
}

func skipBWS(b []byte, at int) int {
	for at < len(b) && (b[at] == ' ' || b[at] == '\t') {
		at++
	}
	return at
}

// token returns the index after a token starting at at, or -1.
func token(b []byte, at int) int {
	start := at
	for at < len(b) && isTchar(b[at]) {
		at++
	}
	if at == start {
		return -1
	}
	return at
}

func quotedString(b []byte, at int) int {
	if at >= len(b) || b[at] != '"' {
		return -1
	}
	for at++; at < len(b); at++ {
		switch c := b[at]; {
		case c == '"':
			return at + 1
		case c == '\\':
			if at++; at >= len(b) || !isQuotedPairByte(b[at]) {
				return -1
			}
		case c == '\t' || c == ' ' || c == '!' || c >= '#' && c <= '[' || c >= ']' && c <= '~' || c >= 0x80:
		default:
			return -1
		}
	}
	return -1
}

func isQuotedPairByte(c byte) bool { return c == '\t' || c >= ' ' && c != 0x7f }

func isTchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

func hexValue(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c | 0x20 - 'a' + 10
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
