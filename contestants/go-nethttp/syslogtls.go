package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
)

// Syslog over TLS (spec §15, RFC 5425) with crypto/tls: the certificate, versions and AEAD
// suites of the HTTPS port (tls.go), octet-counted frames only, counted and parsed as the
// TCP listener counts and parses them (syslog.go).

// maxTLSMessage is the longest SYSLOG-MSG taken; RFC 5425 asks for 2048 octets, or 8192.
const maxTLSMessage = 1 << 20

// errBadLength is a bad MSG-LEN: RFC 5425 gives no way to find the frame after it.
var errBadLength = errors.New("bad MSG-LEN")

func (sl *syslogListener) listenTLS(hosts []string, port int, certFile, keyFile string) error {
	config, err := tlsConfig(certFile, keyFile)
	if err != nil {
		return err
	}
	config.NextProtos = nil // RFC 5425 has no ALPN name
	listeners, err := listenHTTP(hosts, port)
	if err != nil {
		return err
	}
	for _, ln := range listeners {
		go sl.accept(tls.NewListener(ln, config), sl.serveTLS)
	}
	return nil
}

// serveTLS reads frames until the client ends (its close_notify is io.EOF) or sends a bad
// MSG-LEN; either way Close answers with close_notify. A cut frame is not counted.
func (sl *syslogListener) serveTLS(conn net.Conn) {
	defer conn.Close()
	source := &publishingReader{conn: conn, counters: sl.counters}
	defer source.publish()
	reader := bufio.NewReaderSize(source, syslogReadBuffer)
	var long []byte
	for {
		length, err := readOctetLength(reader)
		if err != nil {
			return
		}
		if sl.parse {
			message, err := readCounted(reader, length, &long)
			if err != nil {
				return
			}
			source.tally.add(message)
		} else if _, err := reader.Discard(length); err != nil {
			return
		}
		source.messages++
		source.bytes += int64(length)
	}
}

// readOctetLength reads RFC 5425's "MSG-LEN SP": a digit 1-9, more digits, then SP, for a
// length up to maxTLSMessage (so it cannot overflow); anything else is errBadLength.
func readOctetLength(reader *bufio.Reader) (int, error) {
	length, digits := 0, 0
	for {
		c, err := reader.ReadByte()
		switch {
		case err != nil:
			return 0, err
		case c == ' ' && digits > 0:
			return length, nil
		case c < '0' || c > '9' || (c == '0' && digits == 0):
			return 0, errBadLength
		}
		length = length*10 + int(c-'0')
		digits++
		if length > maxTLSMessage {
			return 0, errBadLength
		}
	}
}
