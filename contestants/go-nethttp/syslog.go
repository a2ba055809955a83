package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"runtime"
)

// syslogListener counts syslog messages (spec §7) on TCP, a goroutine per connection like
// the HTTP side, and on UDP with one reader goroutine per processor.
type syslogListener struct {
	counters *syslogCounters
}

const (
	syslogReadBuffer = 64 << 10
	udpSocketBuffer  = 8 << 20
	maxFrameDigits   = 10 // MSG-LEN up to 9,999,999,999: anything longer is not a length
)

func (sl *syslogListener) listen(address string) error {
	tcp, err := net.Listen("tcp", address)
	if err != nil {
		return err
	}
	udp, err := net.ListenPacket("udp", address)
	if err != nil {
		tcp.Close()
		return err
	}
	if conn, ok := udp.(*net.UDPConn); ok {
		conn.SetReadBuffer(udpSocketBuffer) // best effort: the kernel caps it at rmem_max
	}
	go sl.acceptTCP(tcp)
	for range runtime.GOMAXPROCS(0) {
		go sl.readUDP(udp)
	}
	return nil
}

func (sl *syslogListener) acceptTCP(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				continue
			}
			log.Printf("syslog: accept: %v", err)
			return
		}
		sl.counters.tcpConnections.Add(1)
		go sl.serveTCP(conn)
	}
}

func (sl *syslogListener) readUDP(conn net.PacketConn) {
	buffer := make([]byte, 64<<10)
	for {
		n, _, err := conn.ReadFrom(buffer)
		if err != nil {
			log.Printf("syslog: udp: %v", err)
			return
		}
		size := len(bytes.TrimSuffix(buffer[:n], []byte{'\n'}))
		if size > 0 {
			sl.counters.received.Add(1)
			sl.counters.bytes.Add(int64(size))
		}
	}
}

func (sl *syslogListener) serveTCP(conn net.Conn) {
	defer conn.Close()
	source := &publishingReader{conn: conn, counters: sl.counters}
	defer source.publish()
	reader := bufio.NewReaderSize(source, syslogReadBuffer)
	for {
		size, err := readFrame(reader)
		if err != nil {
			return // EOF or a broken connection: a partial frame is not counted
		}
		if size > 0 {
			source.messages++
			source.bytes += size
		}
	}
}

// publishingReader keeps a connection's counts locally and publishes them each time the
// buffered reader must read the socket again: the counters are exact whenever a sender
// pauses, yet a flood costs no atomic operation per message.
type publishingReader struct {
	conn            net.Conn
	counters        *syslogCounters
	messages, bytes int64
}

func (p *publishingReader) Read(buffer []byte) (int, error) {
	p.publish()
	return p.conn.Read(buffer)
}

func (p *publishingReader) publish() {
	if p.messages > 0 {
		p.counters.received.Add(p.messages)
		p.counters.bytes.Add(p.bytes)
		p.messages, p.bytes = 0, 0
	}
}

// readFrame consumes one message and returns its size without framing. A frame starting
// with 1-9 is octet-counted (RFC 6587 §3.4.1); anything else ends at the next newline.
func readFrame(reader *bufio.Reader) (int64, error) {
	first, err := reader.Peek(1)
	if err != nil {
		return 0, err
	}
	if first[0] < '1' || first[0] > '9' {
		return skipLine(reader, 0)
	}
	length, digits, err := readFrameLength(reader)
	switch {
	case err != nil:
		return 0, err
	case length < 0: // not "MSG-LEN SP": read it as newline-framed text
		return skipLine(reader, digits)
	}
	if _, err := reader.Discard(int(length)); err != nil {
		return 0, io.ErrUnexpectedEOF
	}
	return length, nil
}

// readFrameLength parses "MSG-LEN SP" byte by byte, so that a short frame at the end of
// what the sender wrote is complete without waiting for more. It returns length -1 and
// the bytes consumed when the frame turns out not to be octet-counted; a newline that
// ends such text is put back for skipLine.
func readFrameLength(reader *bufio.Reader) (length int64, consumed int64, err error) {
	for consumed <= maxFrameDigits {
		c, err := reader.ReadByte()
		if err != nil {
			return 0, 0, err
		}
		switch {
		case c >= '0' && c <= '9':
			length = length*10 + int64(c-'0')
			consumed++
		case c == ' ':
			return length, consumed, nil
		default:
			reader.UnreadByte()
			return -1, consumed, nil
		}
	}
	return -1, consumed, nil
}

// skipLine consumes up to and including the next newline; already counts bytes of the
// message consumed before.
func skipLine(reader *bufio.Reader, already int64) (int64, error) {
	size := already
	for {
		chunk, err := reader.ReadSlice('\n')
		size += int64(len(chunk))
		switch {
		case err == nil:
			return size - 1, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return 0, err
		}
	}
}
