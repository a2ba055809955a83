package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// GET /ws (spec §11) with gorilla/websocket: the handshake is checked here first (so that
// a refusal gets the spec's JSON error, and 426 for a wrong version), then gorilla does the
// framing, pongs, 1002 for protocol errors, 1009 over the read limit, and echoes a client's
// close code. 1003, 1007 and 1008, and the messages, are ours. Each connection has two
// goroutines: its handler reads, and a writer sends what its outbox holds.

const (
	maxWebSocketMessage = 64 << 10
	// closeGrace is how long a connection the server closes waits for the client's close
	// frame before it closes TCP.
	closeGrace = 2 * time.Second
)

func newUpgrader(st *stats) *websocket.Upgrader {
	return &websocket.Upgrader{
		// No EnableCompression: every extension offered is declined. No Subprotocols: none
		// is selected. The spec does not check Origin.
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			writeError(w, st, status, strings.ToLower(reason.Error()))
		},
	}
}

// handshakeProblem says why r is not a valid upgrade: a status and a reason, or 0.
func handshakeProblem(r *http.Request) (int, string) {
	switch version := r.Header.Values("Sec-WebSocket-Version"); {
	case !headerHasToken(r.Header, "Upgrade", "websocket"):
		return http.StatusBadRequest, "a websocket upgrade is required"
	case !headerHasToken(r.Header, "Connection", "upgrade"):
		return http.StatusBadRequest, "connection: upgrade is required"
	case len(version) == 0:
		return http.StatusBadRequest, "sec-websocket-version is required"
	case len(version) > 1 || version[0] != "13":
		return http.StatusUpgradeRequired, "sec-websocket-version 13 only"
	}
	key := r.Header.Values("Sec-WebSocket-Key")
	if decoded, err := base64.StdEncoding.DecodeString(strings.Join(key, ",")); len(key) != 1 || err != nil || len(decoded) != 16 {
		return http.StatusBadRequest, "sec-websocket-key is not 16 bytes in base64"
	}
	return 0, ""
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, value := range h.Values(name) {
		for _, item := range strings.Split(value, ",") {
			if strings.EqualFold(strings.TrimSpace(item), token) {
				return true
			}
		}
	}
	return false
}

// hijackRecorder hands gorilla the connection and notes that it was taken, so that this
// server reads it past its HTTP framing check and counts it open until it closes.
type hijackRecorder struct {
	http.ResponseWriter
	conn net.Conn
}

func (hr *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(hr.ResponseWriter).Hijack()
	if err == nil {
		hr.conn = conn
		if checked, ok := conn.(*jsonErrorConn); ok {
			checked.framing.passThrough()
		}
	}
	return conn, rw, err
}

func (s *server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if status, reason := handshakeProblem(r); status != 0 {
		if status == http.StatusUpgradeRequired {
			w.Header().Set("Sec-WebSocket-Version", "13")
		}
		writeError(w, s.stats, status, reason)
		return
	}
	recorder := &hijackRecorder{ResponseWriter: w}
	conn, err := s.upgrader.Upgrade(recorder, r, nil)
	if recorder.conn != nil {
		defer s.stats.connectionsOpen.Add(-1)
		defer recorder.conn.Close()
	}
	if err != nil {
		return
	}
	s.stats.responses.Add(1)
	conn.SetReadLimit(maxWebSocketMessage)
	session := &wsSession{hub: s.push, stats: s.stats, conn: conn, out: newOutbox(), stop: make(chan struct{})}
	session.run()
}

// wsSession is one WebSocket connection after its 101.
type wsSession struct {
	hub   *pushHub
	stats *stats
	conn  *websocket.Conn
	out   *outbox
	sub   *subscriber // set by the subscribe message
	stop  chan struct{}
	// flush tells the writer, when it stops, to send what is queued first: replies to the
	// messages before a bad one still go out, ahead of this server's close frame.
	flush atomic.Bool
}

func (s *wsSession) run() {
	s.stats.websocket.total.Add(1)
	s.stats.websocket.open.Add(1)
	defer s.stats.websocket.open.Add(-1)
	written := make(chan struct{})
	go s.writeLoop(written)
	code, reason, err := s.readLoop()
	s.leave()
	s.flush.Store(code != 0)
	close(s.stop)
	<-written
	s.close(code, reason, err)
}

// readLoop handles messages until the client leaves or breaks the contract: then the
// close code this server owes it (0 if gorilla has sent one or none is due) and the read
// error, if any.
func (s *wsSession) readLoop() (code int, reason string, err error) {
	for {
		kind, data, err := s.conn.ReadMessage()
		if err != nil {
			return 0, "", err
		}
		if code, reason := s.handle(kind, data); code != 0 {
			return code, reason, nil
		}
	}
}

// leave takes the subscriber out of every list and count as soon as the client is gone.
func (s *wsSession) leave() {
	if s.sub != nil {
		s.hub.leave(s.sub)
		s.stats.websocket.subscribers.Add(-1)
	}
}

// close ends the connection: after the close frame this server owes, it waits for the
// client's (or closeGrace); after a protocol error gorilla already answered, it drops what
// the client still sends for as long, so that closing does not become a reset that
// destroys that close frame.
func (s *wsSession) close(code int, reason string, err error) {
	deadline := time.Now().Add(closeGrace)
	var closed *websocket.CloseError
	switch {
	case code != 0:
		s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), deadline)
		s.conn.SetReadDeadline(deadline)
		for err == nil {
			_, _, err = s.conn.ReadMessage()
		}
	case errors.As(err, &closed): // gorilla answered the client's close with its code
	default:
		s.conn.NetConn().SetReadDeadline(deadline)
		io.Copy(io.Discard, s.conn.NetConn())
	}
	s.conn.Close()
}

// writeLoop sends the outbox's messages in order until the session stops; a reader too far
// behind, or a failed write, ends the connection.
func (s *wsSession) writeLoop(written chan<- struct{}) {
	defer close(written)
	for {
		select {
		case <-s.out.wake:
		case <-s.stop:
			if s.flush.Load() {
				s.conn.SetWriteDeadline(time.Now().Add(closeGrace))
				s.send(s.out.seal())
			}
			return
		}
		if !s.send(s.out.take()) {
			s.conn.NetConn().Close() // the reader sees the connection end and cleans up
			return
		}
	}
}

// send writes items in order; false if a write failed or the outbox overflowed.
func (s *wsSession) send(items []message, ok bool) bool {
	for _, item := range items {
		if s.conn.WriteMessage(websocket.TextMessage, item.bytes(s.stats.subscribers.Load())) != nil {
			return false
		}
	}
	return ok
}

// handle answers one message; a close code and reason when the message breaks §11.
func (s *wsSession) handle(kind int, data []byte) (int, string) {
	if kind != websocket.TextMessage {
		return websocket.CloseUnsupportedData, "binary messages are not accepted"
	}
	if !utf8.Valid(data) {
		return websocket.CloseInvalidFramePayloadData, "a text message must be utf-8"
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil || fields == nil {
		return websocket.ClosePolicyViolation, "a message is one json object"
	}
	var kindName string
	json.Unmarshal(fields["type"], &kindName)
	switch kindName {
	case "subscribe":
		return s.subscribe(data, fields)
	case "echo":
		s.stats.websocket.echoes.Add(1)
		s.reply(struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}{"echo", fields["data"]})
		return 0, ""
	case "publish":
		return s.publish(fields)
	}
	return websocket.ClosePolicyViolation, "unknown message type"
}

func (s *wsSession) subscribe(data []byte, fields map[string]json.RawMessage) (int, string) {
	if s.sub != nil {
		return websocket.ClosePolicyViolation, "subscribed already"
	}
	var names []string
	if json.Unmarshal(fields["events"], &names) != nil {
		return websocket.ClosePolicyViolation, "events must be a list of event names"
	}
	if reason := distinctNames(names); reason != "" {
		return websocket.ClosePolicyViolation, reason
	}
	// Registered before the reply is queued, so that a publish the client sends after the
	// reply reaches it; queued before any cycle can reach it, so the reply comes first.
	s.sub = newSubscriber(webSocket, compactJSON(data), s.out)
	s.hub.subscribe(s.sub, names, func([]history) {
		s.stats.websocket.subscribers.Add(1)
		s.reply(struct {
			Type   string   `json:"type"`
			Events []string `json:"events"`
		}{"subscribed", names})
	})
	return 0, ""
}

func (s *wsSession) publish(fields map[string]json.RawMessage) (int, string) {
	var name string
	if json.Unmarshal(fields["event"], &name) != nil || !eventNamePattern.MatchString(name) {
		return websocket.ClosePolicyViolation, "publish needs a valid event name"
	}
	data := []byte("null")
	if raw := fields["data"]; raw != nil {
		data = compactJSON(raw)
	}
	s.stats.websocket.publishes.Add(1)
	// The cycle has handed over every delivery, this connection's own first, when it
	// returns; the reply follows them in the outbox.
	seq, total := s.hub.publish(name, data)
	s.reply(struct {
		Type  string `json:"type"`
		Event string `json:"event"`
		Seq   int64  `json:"seq"`
		Total int    `json:"total"`
	}{"published", name, seq, total})
	return 0, ""
}

func (s *wsSession) reply(v any) {
	body, _ := json.Marshal(v)
	s.out.put(message{body: body})
}
