package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"runtime"
	"strconv"
)

// syslogListener counts syslog messages (spec §7) on TCP, a goroutine per connection like
// the HTTP side, and on UDP with one reader goroutine per processor; in parse mode (spec
// §7.1, -syslog-mode parse) it parses each one too (syslogparse.go).
type syslogListener struct {
	counters *syslogCounters
	parse    bool
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
	sl.accept(ln, sl.serveTCP)
}

// accept runs serve on each connection in a goroutine of its own; for a TLS listener the
// handshake happens there too, so a client that stalls in it holds up no one else.
func (sl *syslogListener) accept(ln net.Listener, serve func(net.Conn)) {
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
		go serve(conn)
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
		message := bytes.TrimSuffix(buffer[:n], []byte{'\n'})
		if len(message) > 0 {
			var tally parseTally
			if sl.parse {
				tally.add(message)
			}
			sl.counters.received.Add(1)
			sl.counters.bytes.Add(int64(len(message)))
			tally.publish(sl.counters)
		}
	}
}

func (sl *syslogListener) serveTCP(conn net.Conn) {
	defer conn.Close()
	source := &publishingReader{conn: conn, counters: sl.counters}
	defer source.publish()
	reader := bufio.NewReaderSize(source, syslogReadBuffer)
	if sl.parse {
		sl.parseTCP(reader, source)
		return
	}
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
	tally           parseTally
}

func (p *publishingReader) Read(buffer []byte) (int, error) {
	p.publish()
	return p.conn.Read(buffer)
}

func (p *publishingReader) publish() {
	if p.messages > 0 {
		p.tally.publish(p.counters)
		p.counters.received.Add(p.messages)
		p.counters.bytes.Add(p.bytes)
		p.messages, p.bytes = 0, 0
	}
}

// parseTCP is serveTCP in parse mode: each whole message is read and parsed.
func (sl *syslogListener) parseTCP(reader *bufio.Reader, source *publishingReader) {
	var long []byte
	for {
		message, err := readMessage(reader, &long)
		if err != nil {
			return
		}
		if len(message) > 0 {
			source.tally.add(message)
			source.messages++
			source.bytes += int64(len(message))
		}
	}
}

// parseTally is a connection's parse counts (spec §7.1), published with its messages.
type parseTally struct {
	parsed, malformed, rfc3164, sdElements, msgBytes int64
	message                                          syslogMessage
}

func (t *parseTally) add(message []byte) {
	if !parseSyslog(message, &t.message) {
		t.malformed++
		return
	}
	t.parsed++
	if t.message.rfc3164 {
		t.rfc3164++
	}
	t.sdElements += int64(t.message.sdElements)
	t.msgBytes += int64(len(t.message.msg))
}

func (t *parseTally) publish(c *syslogCounters) {
	if t.parsed+t.malformed == 0 {
		return
	}
	c.parsed.Add(t.parsed)
	c.malformed.Add(t.malformed)
	c.rfc3164.Add(t.rfc3164)
	c.sdElements.Add(t.sdElements)
	c.msgBytes.Add(t.msgBytes)
	t.parsed, t.malformed, t.rfc3164, t.sdElements, t.msgBytes = 0, 0, 0, 0, 0
}

// readMessage is readFrame that keeps the message: a slice of the reader's buffer when it
// fits (valid until the next read), else gathered in *long.
func readMessage(reader *bufio.Reader, long *[]byte) ([]byte, error) {
	first, err := reader.Peek(1)
	if err != nil {
		return nil, err
	}
	*long = (*long)[:0]
	if first[0] >= '1' && first[0] <= '9' {
		// "MSG-LEN SP", its digits kept: if no SP follows, they began a newline-framed message.
		for len(*long) <= maxFrameDigits {
			c, err := reader.ReadByte()
			if err != nil {
				return nil, err
			}
			if c == ' ' {
				length, _ := strconv.Atoi(string(*long))
				return readCounted(reader, length, long)
			}
			if c < '0' || c > '9' {
				reader.UnreadByte()
				break
			}
			*long = append(*long, c)
		}
		return readLine(reader, long, true)
	}
	*long = (*long)[:0]
	return readLine(reader, long, false)
}

func readCounted(reader *bufio.Reader, length int, long *[]byte) ([]byte, error) {
	if length <= reader.Size() {
		message, err := reader.Peek(length)
		if err != nil {
			return nil, io.ErrUnexpectedEOF
		}
		reader.Discard(length)
		return message, nil
	}
	*long = append((*long)[:0], make([]byte, length)...)
	if _, err := io.ReadFull(reader, *long); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return *long, nil
}

// readLine reads up to the next newline; with `gathered`, *long already holds its start.
func readLine(reader *bufio.Reader, long *[]byte, gathered bool) ([]byte, error) {
	for {
		chunk, err := reader.ReadSlice('\n')
		switch {
		case err == nil && !gathered:
			return chunk[:len(chunk)-1], nil
		case err == nil:
			*long = append(*long, chunk[:len(chunk)-1]...)
			return *long, nil
		case errors.Is(err, bufio.ErrBufferFull):
			*long = append(*long, chunk...)
			gathered = true
		default:
			return nil, err
		}
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
