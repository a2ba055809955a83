package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// GET /sse (spec §10): a Server-Sent Events stream is one subscriber of its events, held
// by its request's goroutine like a comet stream. Its id is the stream's position,
// name:seq per event; a reconnect with Last-Event-ID gets what it missed from each
// event's replay buffer, or a gap message for what the buffer no longer holds.

const (
	defaultHeartbeatMS = 15_000
	maxSafeInteger     = 1<<53 - 1
)

var (
	eventStream = []string{"text/event-stream"}
	noCache     = []string{"no-cache"}
)

// sseQuery is a stream's parameters; request is the `request` of its deliveries.
type sseQuery struct {
	names     []string
	heartbeat time.Duration // 0: no heartbeats
	duration  time.Duration // 0: open until the client leaves
	request   []byte
}

// parseSSEQuery reads the query as application/x-www-form-urlencoded; reason is set when
// it is not a valid stream request.
func parseSSEQuery(raw string) (query sseQuery, reason string) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return query, "malformed query"
	}
	for _, given := range values {
		if len(given) > 1 {
			return query, "a parameter is given twice"
		}
	}
	query.names = strings.Split(values.Get("events"), ",")
	if reason := distinctNames(query.names); reason != "" {
		return query, reason
	}
	request := struct {
		Type        string   `json:"type"`
		Events      []string `json:"events"`
		HeartbeatMS *int64   `json:"heartbeat_ms,omitempty"`
		DurationMS  *int64   `json:"duration_ms,omitempty"`
	}{Type: "sse", Events: query.names}
	heartbeatMS := int64(defaultHeartbeatMS)
	if text, given := values["heartbeat_ms"]; given {
		value, ok := parseMillis(text[0])
		if !ok || value != 0 && (value < minIntervalMS || value > maxDurationMS) {
			return query, "heartbeat_ms must be 0 or an integer from 10 to 3600000"
		}
		heartbeatMS, request.HeartbeatMS = value, &value
	}
	if text, given := values["duration_ms"]; given {
		value, ok := parseMillis(text[0])
		if !ok || value < 1 || value > maxDurationMS {
			return query, "duration_ms must be an integer from 1 to 3600000"
		}
		query.duration, request.DurationMS = time.Duration(value)*time.Millisecond, &value
	}
	query.heartbeat = time.Duration(heartbeatMS) * time.Millisecond
	query.request, _ = json.Marshal(request)
	return query, ""
}

// parsePosition reads a Last-Event-ID of the form name:seq,...; ok is false if the
// header is not of that form. An empty header names nothing.
func parsePosition(header string) (named map[string]int64, ok bool) {
	named = map[string]int64{}
	if header == "" {
		return named, true
	}
	for _, pair := range strings.Split(header, ",") {
		name, digits, found := strings.Cut(pair, ":")
		seq, valid := parseMillis(digits)
		if _, twice := named[name]; !found || twice || !eventNamePattern.MatchString(name) ||
			!valid || seq > maxSafeInteger || len(digits) > 1 && digits[0] == '0' {
			return nil, false
		}
		named[name] = seq
	}
	return named, true
}

func (h *pushHub) serveSSE(w http.ResponseWriter, r *http.Request) {
	query, reason := parseSSEQuery(r.URL.RawQuery)
	if reason != "" {
		writeError(w, h.stats, http.StatusBadRequest, reason)
		return
	}
	named, ok := parsePosition(r.Header.Get("Last-Event-ID"))
	if !ok {
		writeError(w, h.stats, http.StatusBadRequest, "malformed last-event-id")
		return
	}
	stream := &sseWriter{w: w, controller: http.NewResponseController(w), stats: h.stats,
		names: query.names, positions: make(map[string]int64, len(query.names))}
	w.Header()["Content-Type"] = eventStream
	w.Header()["Cache-Control"] = noCache
	sendHeader(w, h.stats, http.StatusOK)
	if stream.controller.Flush() != nil {
		return
	}
	h.stats.sse.total.Add(1)
	h.stats.sse.open.Add(1)
	defer h.stats.sse.open.Add(-1)
	sub := newSubscriber(sseStream, query.request, newOutbox())
	var histories []history
	h.subscribe(sub, query.names, func(now []history) { histories = now })
	defer h.leave(sub)

	for i, name := range query.names {
		after, resumed := named[name]
		if !resumed {
			after = histories[i].last
		}
		stream.positions[name] = after
	}
	for i, name := range query.names {
		if after, resumed := named[name]; resumed && !stream.resume(sub, name, after, histories[i]) {
			return
		}
	}
	if stream.send("", "", 0, nil) != nil { // the opening message: the position, no data
		return
	}
	stream.hold(r, sub, query)
}

// hold writes live deliveries and heartbeats until the duration passes or the client
// leaves (net/http's read of the connection sees the close and cancels the context).
func (stream *sseWriter) hold(r *http.Request, sub *subscriber, query sseQuery) {
	var heartbeats, timeout <-chan time.Time
	if query.heartbeat > 0 {
		ticker := time.NewTicker(query.heartbeat)
		defer ticker.Stop()
		heartbeats = ticker.C
	}
	if query.duration > 0 {
		timer := time.NewTimer(query.duration)
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		select {
		case <-sub.out.wake:
			if items, ok := sub.out.take(); !stream.sendQueued(items, ok) {
				return
			}
		case <-heartbeats:
			if stream.write([]byte(": heartbeat\n\n")) != nil {
				return
			}
			stream.stats.sse.heartbeats.Add(1)
		case <-timeout:
			if items, ok := sub.out.seal(); !stream.sendQueued(items, ok) {
				return
			}
			answer := sub.timeoutAnswer(time.Now().UnixMilli(), stream.stats.subscribers.Load())
			if stream.send("timeout", "", 0, answer) == nil {
				stream.stats.sse.timeouts.Add(1)
			}
			return
		case <-r.Context().Done():
			return
		}
	}
}

// sseWriter writes one stream's messages and keeps its position, the newest seq sent per
// event.
type sseWriter struct {
	w          http.ResponseWriter
	controller *http.ResponseController
	stats      *stats
	names      []string
	positions  map[string]int64
}

// resume sends what the stream missed of name after seq after: a gap message if the
// buffer no longer reaches back that far (or after is from another run of the server),
// then the buffered cycles as replayed deliveries. false if the stream broke.
func (stream *sseWriter) resume(sub *subscriber, name string, after int64, past history) bool {
	if after == past.last {
		return true
	}
	replays := past.cycles
	for len(replays) > 0 && replays[0].seq <= after {
		replays = replays[1:]
	}
	next := past.last + 1
	if len(replays) > 0 {
		next = replays[0].seq
	}
	if next > after+1 || after > past.last {
		gap := []byte(`{"gap":{"name":"` + name + `","after":` + strconv.FormatInt(after, 10) +
			`,"next":` + strconv.FormatInt(next, 10) + `}}`)
		if stream.send("gap", name, next-1, gap) != nil {
			return false
		}
		stream.stats.sse.gaps.Add(1)
	}
	for _, cycle := range replays {
		sent := time.Now().UnixMilli()
		replay := &emitCycle{name: name, seq: cycle.seq, created: cycle.created, total: 1,
			data: cycle.data, replayed: true}
		if stream.send("", name, cycle.seq, sub.delivery(replay, 1, sent, stream.stats.subscribers.Load())) != nil {
			return false
		}
		stream.stats.sse.replayed.Add(1)
	}
	return true
}

// sendQueued writes the outbox's deliveries; false when the stream must end.
func (stream *sseWriter) sendQueued(items []message, ok bool) bool {
	for _, item := range items {
		if stream.send("", item.event, item.seq, item.bytes(stream.stats.subscribers.Load())) != nil {
			return false
		}
	}
	if !ok {
		panic(http.ErrAbortHandler) // too far behind: drop the connection, not a clean end
	}
	return true
}

// send writes one message with one flush. A message about an event (name set) moves the
// position and carries the id after it; data is left out when nil.
func (stream *sseWriter) send(kind, name string, seq int64, data []byte) error {
	text := make([]byte, 0, 64+len(data))
	if kind != "" {
		text = append(append(append(text, "event: "...), kind...), '\n')
	}
	if name != "" || data == nil {
		if name != "" {
			stream.positions[name] = seq
		}
		text = append(stream.appendID(append(text, "id: "...)), '\n')
	}
	if data != nil {
		text = append(append(append(text, "data: "...), data...), '\n')
	}
	return stream.write(append(text, '\n'))
}

func (stream *sseWriter) appendID(text []byte) []byte {
	for i, name := range stream.names {
		if i > 0 {
			text = append(text, ',')
		}
		text = append(append(text, name...), ':')
		text = strconv.AppendInt(text, stream.positions[name], 10)
	}
	return text
}

func (stream *sseWriter) write(text []byte) error {
	if _, err := stream.w.Write(text); err != nil {
		return err
	}
	return stream.controller.Flush()
}
