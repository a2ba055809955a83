package main

import (
	"io"
	"net"
	"testing"
	"time"
)

// A client that never finishes its header (slowloris) is cut off at -read-header-timeout.
func TestAHeaderNeverFinishedIsCutOffAtTheReadHeaderTimeout(t *testing.T) {
	srv, err := newServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	saved := hardening.readHeaderTimeout
	hardening.readHeaderTimeout = time.Second
	t.Cleanup(func() { hardening.readHeaderTimeout = saved })
	listeners, err := listenHTTP([]string{loopback}, 0)
	if err != nil {
		t.Fatal(err)
	}
	httpServer := hardened(withHTTP2Settings(newHTTPServer(srv)))
	go httpServer.Serve(listeners[0])
	t.Cleanup(func() { httpServer.Close() })

	conn, err := net.Dial("tcp", listeners[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET /perf HTTP/1.1\r\nHost: x\r\n")) // and never the blank line
	// A generous bound: the server's close, not the test's own deadline, ends the read.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the connection was not closed by the server: %v", err)
	}
}
