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
	host := flag.String("host", loopback, "another address to listen on besides 127.0.0.1 (HTTP and syslog ports)")
	syslogPort := flag.Int("syslog-port", 0, "syslog port (TCP and UDP) on 127.0.0.1; 0 = no syslog listener")
	docroot := flag.String("docroot", "", "document root for /files; empty = /files answers 404")
	gomaxprocs := flag.Int("gomaxprocs", 0, "GOMAXPROCS; 0 keeps the runtime's choice")
	version := flag.Bool("version", false, "print versions and exit")
	signalsFile := flag.String("signals-file", "", "append runtime signals (GC pauses, heap, scheduling latency) to this file as JSON lines; empty = none")
	syslogMode := flag.String("syslog-mode", "count", "count syslog messages, or parse each one too (spec §7.1): count or parse")
	var ports extraPorts
	flag.IntVar(&ports.tls, "tls-port", 0, "HTTPS and h2 (ALPN) port on 127.0.0.1; 0 = no TLS listener")
	flag.StringVar(&ports.cert, "tls-cert", "", "the TLS certificate, PEM")
	flag.StringVar(&ports.key, "tls-key", "", "the TLS private key, PEM")
	flag.IntVar(&ports.h2c, "h2c-port", 0, "HTTP/2 with prior knowledge (h2c) port on 127.0.0.1; 0 = none")
	flag.IntVar(&ports.syslogTLS, "syslog-tls-port", 0, "RFC 5425 syslog over TLS port on 127.0.0.1, with -tls-cert and -tls-key; 0 = none")
	flag.Parse()

	if *version {
		fmt.Printf("%s %s/%s net/http (standard library)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	if *syslogMode != "count" && *syslogMode != "parse" {
		fmt.Fprintln(os.Stderr, "go-nethttp: -syslog-mode must be count or parse")
		os.Exit(2)
	}
	if *gomaxprocs > 0 {
		runtime.GOMAXPROCS(*gomaxprocs)
	}
	if err := startSignals(*signalsFile); err != nil {
		log.Fatal(err)
	}
	if err := run(addresses(*host), *port, *syslogPort, *docroot, *syslogMode, ports); err != nil {
		log.Fatal(err)
	}
}

const loopback = "127.0.0.1"

// addresses are where the server listens: loopback, and host if it is another address.
func addresses(host string) []string {
	if host == "" || host == loopback {
		return []string{loopback}
	}
	return []string{loopback, host}
}

// extraPorts are the listeners of the spec's transport parts (tls, h2, h2c) and of
// syslog over TLS (syslog-tls).
type extraPorts struct {
	tls, h2c, syslogTLS int
	cert, key           string
}

func run(hosts []string, port, syslogPort int, docroot, syslogMode string, extra extraPorts) error {
	srv, err := newServer(docroot)
	if err != nil {
		return err
	}
	srv.stats.syslog.mode = syslogMode
	srv.syslog.parse = syslogMode == "parse"
	if syslogPort != 0 {
		for _, host := range hosts {
			if err := srv.syslog.listen(net.JoinHostPort(host, strconv.Itoa(syslogPort))); err != nil {
				return err
			}
		}
	}
	if extra.syslogTLS != 0 {
		if err := srv.syslog.listenTLS(hosts, extra.syslogTLS, extra.cert, extra.key); err != nil {
			return err
		}
	}
	listeners, err := listenHTTP(hosts, port)
	if err != nil {
		return err
	}
	httpServer := hardened(withHTTP2Settings(newHTTPServer(srv)))
	h2cServer := hardened(withHTTP2Settings(newH2CServer(srv)))
	go exitOnSignal(httpServer, h2cServer)
	served := make(chan error, 3*len(listeners))
	for _, ln := range listeners {
		go func() { served <- httpServer.Serve(jsonErrorListener{Listener: ln, stats: srv.stats}) }()
	}
	if err := serveExtra(httpServer, h2cServer, hosts, extra, served); err != nil {
		return err
	}
	if err := <-served; err != http.ErrServerClosed {
		return err
	}
	return nil
}

func serveExtra(httpServer, h2cServer *http.Server, hosts []string, extra extraPorts, served chan<- error) error {
	if extra.tls != 0 {
		config, err := tlsConfig(extra.cert, extra.key)
		if err != nil {
			return err
		}
		listeners, err := listenHTTP(hosts, extra.tls)
		if err != nil {
			return err
		}
		serveTLS(httpServer, listeners, config, served)
	}
	if extra.h2c != 0 {
		listeners, err := listenHTTP(hosts, extra.h2c)
		if err != nil {
			return err
		}
		for _, ln := range listeners {
			go func() { served <- h2cServer.Serve(ln) }()
		}
	}
	return nil
}

// listenHTTP listens on port at every host; port 0 takes the port the OS gives the first.
func listenHTTP(hosts []string, port int) ([]net.Listener, error) {
	var listeners []net.Listener
	for _, host := range hosts {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			for _, open := range listeners {
				open.Close()
			}
			return nil, err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		listeners = append(listeners, ln)
	}
	return listeners, nil
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
func exitOnSignal(servers ...*http.Server) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	for _, httpServer := range servers {
		httpServer.Close()
	}
}
