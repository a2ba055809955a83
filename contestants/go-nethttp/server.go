package main

import (
	"bufio"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// server routes requests by hand rather than with http.ServeMux: the mux cleans paths and
// redirects "/files/../x" with a 301, while the spec wants such paths refused with 403.
type server struct {
	stats    *stats
	files    *fileServer
	push     *pushHub
	syslog   *syslogListener
	upgrader *websocket.Upgrader
	grpc     http.Handler
	logging  atomic.Bool
	logger   *log.Logger
}

func newServer(docroot string) (*server, error) {
	files, err := newFileServer(docroot)
	if err != nil {
		return nil, err
	}
	st := newStats()
	hub := newPushHub(st)
	return &server{
		stats:    st,
		files:    files,
		push:     hub,
		grpc:     newGRPCServer(hub),
		syslog:   &syslogListener{counters: &st.syslog},
		upgrader: newUpgrader(st),
		logger:   log.New(os.Stderr, "", 0),
	}, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.stats.requests.Add(1)
	if !s.logging.Load() {
		s.route(w, r)
		return
	}
	started := time.Now()
	lw := &loggingWriter{ResponseWriter: w, status: http.StatusOK}
	s.route(lw, r)
	s.logger.Printf("%s %s %s %d %dms", r.RemoteAddr, r.Method, r.URL.RequestURI(), lw.status,
		time.Since(started).Milliseconds())
}

func (s *server) route(w http.ResponseWriter, r *http.Request) {
	if isGRPC(r) {
		s.stats.grpc.calls.Add(1)
		s.grpc.ServeHTTP(w, r)
		return
	}
	path := r.URL.Path
	switch path {
	case "/perf":
		if allow(w, r, s.stats, methodsRead) {
			s.servePerf(w)
		}
	case "/upload":
		if allow(w, r, s.stats, methodsPost) {
			s.serveUpload(w, r)
		}
	case "/timestamp":
		if allow(w, r, s.stats, methodsRead) {
			s.serveTimestamp(w, r)
		}
	case "/stats":
		if allow(w, r, s.stats, methodsRead) {
			s.serveStats(w)
		}
	case "/logging":
		if allow(w, r, s.stats, methodsPost) && loopbackOnly(w, r, s.stats) {
			s.serveLogging(w, r)
		}
	case "/event/set":
		if allow(w, r, s.stats, methodsPost) && loopbackOnly(w, r, s.stats) {
			s.push.serveSet(w, r)
		}
	case "/event/clear":
		if allow(w, r, s.stats, methodsPost) && loopbackOnly(w, r, s.stats) {
			s.push.serveClear(w, r)
		}
	case "/push":
		if allow(w, r, s.stats, methodsPost) {
			s.push.servePush(w, r)
		}
	case "/sse":
		if allow(w, r, s.stats, methodsGet) {
			s.push.serveSSE(w, r)
		}
	case "/ws":
		if allow(w, r, s.stats, methodsGet) {
			s.serveWebSocket(w, r)
		}
	default:
		if strings.HasPrefix(path, "/files/") {
			if allow(w, r, s.stats, methodsRead) {
				s.files.serve(w, r, s.stats, strings.TrimPrefix(path, "/files/"))
			}
			return
		}
		writeError(w, s.stats, http.StatusNotFound, "not found")
	}
}

// perfBody is the spec's fixed 84-byte document; the header values are shared slices so
// that the hot path assigns them without allocating.
var (
	perfBody          = []byte("serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n")
	perfContentType   = []string{"text/plain"}
	perfContentLength = []string{"84"}
)

func (s *server) servePerf(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = perfContentType
	h["Content-Length"] = perfContentLength
	sendHeader(w, s.stats, http.StatusOK)
	w.Write(perfBody)
}

// loggingWriter records the status for the request log; it is only put in place while
// logging is on, so the usual path allocates nothing for it.
type loggingWriter struct {
	http.ResponseWriter
	status int
}

func (lw *loggingWriter) WriteHeader(status int) {
	lw.status = status
	lw.ResponseWriter.WriteHeader(status)
}

func (lw *loggingWriter) Flush() {
	if f, ok := lw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (lw *loggingWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }

// Hijack passes a WebSocket upgrade through, so that the log shows its 101.
func (lw *loggingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	lw.status = http.StatusSwitchingProtocols
	return http.NewResponseController(lw.ResponseWriter).Hijack()
}
