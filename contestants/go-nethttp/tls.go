package main

import (
	"crypto/tls"
	"net"
	"net/http"
)

// TLS and HTTP/2 (spec §12-§14) with the standard library only: crypto/tls on the TLS
// port, where ALPN picks h2 or http/1.1 and net/http serves both, and net/http's own
// unencrypted HTTP/2 (Go 1.24's Protocols) with prior knowledge on the h2c port.

// h2Streams is SETTINGS_MAX_CONCURRENT_STREAMS, said out loud rather than left to the
// library's default (the spec wants 100 to 1000, §13).
const h2Streams = 250

// aeadSuites are TLS 1.2's ECDHE suites with AEAD; Go's default list still has CBC ones.
// TLS 1.3's suites are all AEAD and not configurable in crypto/tls.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

func tlsConfig(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: aeadSuites,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// serveTLS serves HTTPS and h2 on each listener; the HTTP/1.1 side goes without the
// framing check of the cleartext port (errorconn.go), which must see the bytes before
// net/http and cannot stand under crypto/tls.
func serveTLS(httpServer *http.Server, listeners []net.Listener, config *tls.Config, served chan<- error) {
	for _, ln := range listeners {
		go func() { served <- httpServer.Serve(tls.NewListener(ln, config)) }()
	}
}

// newH2CServer speaks HTTP/2 with prior knowledge only: an HTTP/1.1 request on its port is
// no connection preface, and net/http closes the connection without an answer (spec §14).
func newH2CServer(srv *server) *http.Server {
	h2c := newHTTPServer(srv)
	h2c.Protocols = new(http.Protocols)
	h2c.Protocols.SetUnencryptedHTTP2(true)
	return h2c
}

func withHTTP2Settings(httpServer *http.Server) *http.Server {
	httpServer.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: h2Streams}
	return httpServer
}
