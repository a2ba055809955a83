package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// net/http answers requests it cannot parse (malformed request line or header, header
// section over MaxHeaderBytes) itself, before any handler runs, with a plain-text reply
// that has neither Date nor Content-Length nor the spec's JSON error body. It writes that
// reply in one Write straight to the connection, marked by these exact header lines,
// which no handler here produces. jsonErrorListener rewrites those replies only.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

type jsonErrorListener struct {
	net.Listener
	stats *stats
}

func (l jsonErrorListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if tcp, ok := conn.(*net.TCPConn); ok {
		c := &jsonErrorConn{TCPConn: tcp, stats: l.stats}
		c.framing.src = tcp
		return c, nil
	}
	return conn, err
}

// jsonErrorConn embeds *net.TCPConn so that ReadFrom, and with it sendfile for /files,
// still reaches the socket. Reads go through the framing check (framing.go).
type jsonErrorConn struct {
	*net.TCPConn
	stats   *stats
	framing framingReader
}

func (c *jsonErrorConn) Read(p []byte) (int, error) { return c.framing.Read(p) }

// WriteTo is *net.TCPConn's splice path; it must not read around the framing check.
func (c *jsonErrorConn) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, &c.framing)
}

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	const statusLineStart = "HTTP/1.1 "
	// Normal responses are mostly 2xx: one byte tells them apart before any search.
	if len(p) > len(statusLineStart) && (p[len(statusLineStart)] == '4' || p[len(statusLineStart)] == '5') &&
		bytes.HasPrefix(p, []byte(statusLineStart)) && bytes.Contains(p, []byte(netHTTPErrorHeaders)) {
		reason := ""
		if refused := c.framing.refused.Load(); refused != nil {
			reason = refused.reason // net/http refused the stand-in for a refused head
		}
		if _, err := c.TCPConn.Write(jsonErrorReply(p, reason)); err != nil {
			return 0, err
		}
		c.stats.responses.Add(1)
		return len(p), nil
	}
	return c.TCPConn.Write(p)
}

// jsonErrorReply turns "HTTP/1.1 <code> <text>" + netHTTPErrorHeaders + body into the
// same status with a JSON body, Date and Content-Length. The reason is net/http's text
// unless one is given.
func jsonErrorReply(original []byte, reason string) []byte {
	statusLine, _, _ := strings.Cut(string(original), netHTTPErrorHeaders)
	statusLine = strings.TrimPrefix(statusLine, "HTTP/1.1 ")
	code, text, _ := strings.Cut(statusLine, " ")
	status, _ := strconv.Atoi(code)
	if reason == "" {
		reason = text
	}
	// Keep net/http's detail ("Bad Request: missing required Host header") in lower case.
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{strings.ToLower(reason)})
	reply := make([]byte, 0, 256)
	reply = append(reply, "HTTP/1.1 "...)
	reply = strconv.AppendInt(reply, int64(status), 10)
	reply = append(reply, ' ')
	reply = append(reply, http.StatusText(status)...)
	reply = append(reply, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	reply = strconv.AppendInt(reply, int64(len(body)), 10)
	reply = append(reply, "\r\nDate: "...)
	reply = time.Now().UTC().AppendFormat(reply, http.TimeFormat)
	reply = append(reply, "\r\nConnection: close\r\n\r\n"...)
	return append(reply, body...)
}
