package main

import (
	"flag"
	"net/http"
	"time"
)

// The standard mitigations against hostile clients that net/http offers, as flags whose
// defaults are the server as shipped (suites/abuse.toml runs both): how long a client may
// take to send a request's header (ReadHeaderTimeout; none by default, so a slowloris
// client or a connection opened and left holds its goroutine for ever), and how many
// streams one HTTP/2 connection may have open (Go's bundled http2 refuses the rest).
var hardening struct {
	readHeaderTimeout time.Duration
	h2Streams         uint
}

func init() {
	flag.DurationVar(&hardening.readHeaderTimeout, "read-header-timeout", 0, "http.Server ReadHeaderTimeout (0 = none, as shipped)")
	flag.UintVar(&hardening.h2Streams, "h2-max-streams", h2Streams, "HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS")
}

// hardened applies the flags to a server made by newHTTPServer and withHTTP2Settings.
func hardened(httpServer *http.Server) *http.Server {
	httpServer.ReadHeaderTimeout = hardening.readHeaderTimeout
	if httpServer.HTTP2 != nil {
		httpServer.HTTP2.MaxConcurrentStreams = int(hardening.h2Streams)
	}
	return httpServer
}
