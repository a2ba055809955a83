// Command go-nethttp is the serverlab contestant built on Go's standard net/http
// server: one goroutine per connection, blocking code, the runtime's netpoller underneath.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
)

// Go's server allows MaxHeaderBytes plus 4 KiB of slack before it answers 431, so the
// setting is lowered by that slack to make 64 KiB the real limit the spec asks for.
const maxHeaderBytes = 64<<10 - 4096

func main() {
	port := flag.Int("port", 8080, "HTTP port on 127.0.0.1")
	syslogPort := flag.Int("syslog-port", 0, "syslog port (TCP and UDP) on 127.0.0.1; 0 = no syslog listener")
	docroot := flag.String("docroot", "", "document root for /files; empty = /files answers 404")
	gomaxprocs := flag.Int("gomaxprocs", 0, "GOMAXPROCS; 0 keeps the runtime's choice")
	version := flag.Bool("version", false, "print versions and exit")
	flag.Parse()

	if *version {
		fmt.Printf("%s %s/%s net/http (standard library)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	if *gomaxprocs > 0 {
		runtime.GOMAXPROCS(*gomaxprocs)
	}
	if err := run(*port, *syslogPort, *docroot); err != nil {
		log.Fatal(err)
	}
}

func run(port, syslogPort int, docroot string) error {
	srv, err := newServer(docroot)
	if err != nil {
		return err
	}
	if syslogPort != 0 {
		if err := srv.syslog.listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(syslogPort))); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	httpServer := newHTTPServer(srv)
	go exitOnSignal(httpServer)
	if err := httpServer.Serve(jsonErrorListener{Listener: ln, stats: srv.stats}); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func newHTTPServer(srv *server) *http.Server {
	return &http.Server{
		Handler:        srv,
		MaxHeaderBytes: maxHeaderBytes,
		ConnState:      srv.stats.trackConn,
		ErrorLog:       log.New(os.Stderr, "", log.LstdFlags),
	}
}

// exitOnSignal closes every connection at once: long polls and comet streams would make a
// graceful Shutdown wait for their timeouts, and serverlab wants a prompt exit on SIGTERM.
func exitOnSignal(httpServer *http.Server) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	httpServer.Close()
}
