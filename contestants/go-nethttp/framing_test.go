package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// pieces hands its data on in pieces of step bytes, as TCP may split it anywhere.
type pieces struct {
	data string
	step int
}

func (p *pieces) Read(b []byte) (int, error) {
	if p.data == "" {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), p.step)], p.data)
	p.data = p.data[n:]
	return n, nil
}

// frame runs stream through a framingReader read with buffers of readSize bytes.
func frame(stream string, step, readSize int) (string, *refusal) {
	f := &framingReader{src: &pieces{stream, step}}
	var out strings.Builder
	buffer := make([]byte, readSize)
	for {
		n, err := f.Read(buffer)
		out.Write(buffer[:n])
		if err != nil {
			return out.String(), f.refused.Load()
		}
	}
}

func eachSplit(t *testing.T, stream string, check func(out string, refused *refusal)) {
	t.Helper()
	for _, step := range []int{1, 2, 7, len(stream)} {
		for _, readSize := range []int{1, 5, 4096} {
			out, refused := frame(stream, step, readSize)
			check(out, refused)
		}
	}
}

func TestFramingHandsOnLegalRequestsUnchanged(t *testing.T) {
	stream := "GET /perf HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 005\r\n\r\nhello" +
		"POST /upload HTTP/1.1\r\nContent-Length: 5, 5\r\ncontent-length: 5\r\n\r\nhello" +
		"POST /upload HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n" +
		"5;name=value;flag;q=\"a \\\"b;c\" ; t = v\r\nhello\r\n006\r\n world\r\n0;last\r\nX-T: 1\r\n\r\n" +
		"GET /perf HTTP/1.1\nHost: x\n\n"
	eachSplit(t, stream, func(out string, refused *refusal) {
		if out != stream || refused != nil {
			t.Fatalf("got %q (refused %v), want the stream unchanged", out, refused)
		}
	})
}

func TestFramingRefusesBadHeadsWithAStandIn(t *testing.T) {
	first := "GET /perf HTTP/1.1\r\nHost: x\r\n\r\n"
	for head, want := range map[string]refusal{
		"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n":       {400, "content-length with transfer-encoding"},
		"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n":       {400, "content-length with transfer-encoding"},
		"Content-Length: 5\r\nContent-Length: 6\r\n":                {400, "differing content-length values"},
		"Content-Length: 5, 6\r\n":                                  {400, "differing content-length values"},
		"Content-Length: +5\r\n":                                    {400, "malformed content-length"},
		"Content-Length: 0x5\r\n":                                   {400, "malformed content-length"},
		"Content-Length: \r\n":                                      {400, "malformed content-length"},
		"Content-Length: 18446744073709551621\r\n":                  {400, "malformed content-length"},
		"Transfer-Encoding:\r\n chunked\r\n":                        {400, "obsolete line folding in a framing field"},
		"Transfer-Encoding: x-foo, chunked\r\n":                     {501, "unknown transfer coding"},
		"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n": {501, "unknown transfer coding"},
		"Transfer-Encoding: chunked, gzip\r\n":                      {400, "chunked is not the final transfer coding"},
		"Transfer-Encoding: identity\r\n":                           {400, "chunked is not the final transfer coding"},
		"Transfer-Encoding: chunked, chunked\r\n":                   {400, "chunked applied more than once"},
	} {
		stream := first + "POST /upload HTTP/1.1\r\nHost: x\r\n" + head + "\r\n5\r\nhello\r\n0\r\n\r\n" + first
		eachSplit(t, stream, func(out string, refused *refusal) {
			if out != first+refusedHead[want.status] || refused == nil || *refused != want {
				t.Fatalf("%q: got %q, refused %v; want the stand-in for %v", head, out, refused, want)
			}
		})
	}
	http10 := "POST /upload HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	if out, refused := frame(http10, 3, 4096); out != refusedHead[400] || refused.status != 400 {
		t.Fatalf("HTTP/1.0 with Transfer-Encoding: %q, %v", out, refused)
	}
}

func TestFramingCutsABadBodyShort(t *testing.T) {
	head := "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, body := range []string{
		"zz\r\n", "0x5\r\n", "10000000000000005\r\n", "5\nhello\r\n", "5;a\rb\r\n",
		"5;a\nhello\r\n", "5;name=va\x00lue\r\n", "5;a b\r\n", "5 \r\n", "3\r\nabcXY0\r\n\r\n",
		"0\r\nX-T: a\nb\r\n\r\n",
	} {
		stream := head + body + "hello\r\n0\r\n\r\nGET /perf HTTP/1.1\r\n\r\n"
		eachSplit(t, stream, func(out string, refused *refusal) {
			if !strings.HasPrefix(out, head) || len(out) > len(head)+len("3\r\nabc") || refused == nil {
				t.Fatalf("%q: got %q, refused %v; want the stream cut at the bad line", body, out, refused)
			}
		})
	}
}

func TestAFramingRefusalIsAnsweredAndNothingAfterIt(t *testing.T) {
	ts := startTestServer(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5\r\nhello\r\n0\r\n\r\nGET /perf HTTP/1.1\r\nHost: x\r\n\r\n"))
	reader := bufio.NewReader(conn)
	response, err := http.ReadResponse(reader, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(response.Body)
	expectStatus(t, response, string(body), 400)
	if string(body) != `{"error":"content-length with transfer-encoding"}` {
		t.Fatalf("body %q does not give the reason", body)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if rest, err := reader.ReadString('\n'); rest != "" || err == nil || isTimeout(err) {
		t.Fatalf("after the refusal: %q, %v; want the connection closed", rest, err)
	}
}

func isTimeout(err error) bool {
	netErr, ok := err.(net.Error)
	return ok && netErr.Timeout()
}
