package main

import (
	"bytes"
	"container/list"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const maxEventsPerPush = 16

// transport says how a subscriber's deliveries reach its client.
type transport int8

const (
	longPoll transport = iota
	comet
	sseStream
	webSocket
	grpcStream
)

// subscriber is one registration with events: an open POST /push request (long poll or
// comet stream), an SSE stream, a subscribed WebSocket, or a gRPC Subscribe stream. The emitter hands it deliveries
// through its outbox; the connection's own goroutine builds and stamps each one as it writes
// it, so a slow client never stalls an emit cycle and `sent` is the moment of the write.
type subscriber struct {
	transport   transport
	request     []byte // the request, compacted: echoed in every answer
	created     int64
	connStart   int64
	memberships []membership // guarded by pushHub.mu
	answered    atomic.Bool  // long poll only: set by whichever answer comes first
	gone        atomic.Bool  // noticed gone (or ended): emit cycles skip it
	out         *outbox
}

func newSubscriber(kind transport, request []byte, out *outbox) *subscriber {
	return &subscriber{transport: kind, request: request, created: time.Now().UnixMilli(), out: out}
}

type membership struct {
	event   *event
	element *list.Element
}

// emitCycle is one cycle of an event as its deliveries see it, shared by them all.
type emitCycle struct {
	name     string
	seq      int64
	created  int64
	total    int
	data     []byte // a publish cycle's data; nil for a timed emit
	replayed bool   // an SSE replay (spec §10)
	// lastSent is the latest `sent` of the cycle's deliveries so far (created before the
	// first); durations is the event's, which it raises. nil for an SSE replay: no emit.
	lastSent  atomic.Int64
	durations *emitDurations
}

// stamp takes `sent` for one delivery of c, now, and raises the cycle's emit duration to it.
func (c *emitCycle) stamp() int64 {
	sent := time.Now().UnixMilli()
	for c.durations != nil {
		last := c.lastSent.Load()
		if sent <= last {
			break
		}
		if c.lastSent.CompareAndSwap(last, sent) {
			c.durations.raise(c.seq, sent-c.created, sent-last)
			break
		}
	}
	return sent
}

// maxBacklog is how far a stream's reader may fall behind before it is disconnected
// instead of buffered without bound. A delivery counts once it is in this bounded buffer
// (spec §6).
const maxBacklog = 1 << 20

// outbox is a connection's bounded send buffer: emit cycles (and a WebSocket's replies)
// put messages in, the connection's goroutine takes them out and writes them.
type outbox struct {
	mu    sync.Mutex
	items []message
	bytes int
	state outboxState
	wake  chan struct{}
}

type outboxState int8

const (
	outboxOpen       outboxState = iota
	outboxSealed                 // the stream is ending: nothing more goes in
	outboxOverflowed             // the reader fell too far behind: its connection is to be dropped
)

// message is one thing to send: a delivery of an event's cycle, or (event "") a reply.
type message struct {
	event string
	seq   int64
	body  []byte // a reply's bytes; a delivery's are built when it is written
	// A delivery: of cycle, at place, to sub.
	cycle *emitCycle
	place int
	sub   *subscriber
}

// size is what m takes of the backlog; for a delivery, the bound of its bytes.
func (m message) size() int {
	if m.cycle == nil {
		return len(m.body)
	}
	return m.sub.deliveryCap(m.cycle)
}

// bytes is what m sends. A delivery is built here, by the connection's goroutine, with its
// `sent` taken now: the caller writes it at once (spec §6). open is connections.finish.
func (m message) bytes(open int64) []byte {
	if m.cycle == nil {
		return m.body
	}
	return m.sub.delivery(m.cycle, m.place, m.cycle.stamp(), open)
}

func newOutbox() *outbox {
	return &outbox{wake: make(chan struct{}, 1)}
}

// put queues m; false when the outbox is sealed or the reader is too far behind, so that
// a delivery is counted only when it will be written.
func (o *outbox) put(m message) bool {
	o.mu.Lock()
	size := m.size()
	ok := o.state == outboxOpen && o.bytes+size <= maxBacklog
	if ok {
		o.items = append(o.items, m)
		o.bytes += size
	} else if o.state == outboxOpen {
		o.state = outboxOverflowed
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return ok
}

// take empties the outbox; ok is false once it overflowed.
func (o *outbox) take() (items []message, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	items = o.items
	o.items, o.bytes = nil, 0
	return items, o.state != outboxOverflowed
}

// seal refuses every later put and empties the outbox, for a stream's last writes.
func (o *outbox) seal() (items []message, ok bool) {
	o.mu.Lock()
	if o.state == outboxOpen {
		o.state = outboxSealed
	}
	o.mu.Unlock()
	return o.take()
}

// claim reports whether this subscriber may receive a delivery now; a long poll takes
// only the first of a delivery or its timeout.
func (sub *subscriber) claim() bool {
	return sub.transport != longPoll || sub.answered.CompareAndSwap(false, true)
}

// countDelivery counts one delivery in its transport's /stats group (long poll and comet
// answers count in responses.push when written).
func (st *stats) countDelivery(kind transport) {
	switch kind {
	case sseStream:
		st.sse.deliveries.Add(1)
	case webSocket:
		st.websocket.deliveries.Add(1)
	case grpcStream:
		st.grpc.deliveries.Add(1)
	}
}

// delivery builds the seed 004 response shape by hand: at 20,000 subscribers per cycle,
// reflection-based encoding would dominate the emit duration being measured.
func (sub *subscriber) delivery(cycle *emitCycle, place int, sent, open int64) []byte {
	line := make([]byte, 0, sub.deliveryCap(cycle))
	line = append(line, `{"response":{"event":{"name":"`...)
	line = append(line, cycle.name...) // the name pattern needs no JSON escaping
	line = append(line, `","seq":`...)
	line = strconv.AppendInt(line, cycle.seq, 10)
	line = appendTimings(append(line, `,"timings":`...), cycle.created, sent)
	line = append(line, `,"connections":{"total":`...)
	line = strconv.AppendInt(line, int64(cycle.total), 10)
	line = append(line, `,"place":`...)
	line = strconv.AppendInt(line, int64(place), 10)
	line = append(line, '}')
	if cycle.data != nil {
		line = append(append(line, `,"data":`...), cycle.data...)
	}
	if cycle.replayed {
		line = append(line, `,"replayed":true`...)
	}
	line = append(line, `}}`...)
	return sub.appendRequestPart(line, sent, open)
}

// deliveryCap bounds the size of a delivery of cycle to sub.
func (sub *subscriber) deliveryCap(cycle *emitCycle) int {
	return 330 + len(sub.request) + len(cycle.data)
}

func (sub *subscriber) timeoutAnswer(sent, open int64) []byte {
	line := make([]byte, 0, 160+len(sub.request))
	line = append(line, `{"response":{"timeout":true}`...)
	return sub.appendRequestPart(line, sent, open)
}

func (sub *subscriber) appendRequestPart(line []byte, sent, open int64) []byte {
	line = append(line, `,"request":`...)
	line = append(line, sub.request...)
	line = appendTimings(append(line, `,"timings":`...), sub.created, sent)
	line = append(line, `,"connections":{"start":`...)
	line = strconv.AppendInt(line, sub.connStart, 10)
	line = append(line, `,"finish":`...)
	line = strconv.AppendInt(line, open, 10)
	return append(line, "}}"...)
}

func appendTimings(line []byte, created, sent int64) []byte {
	line = append(line, `{"duration":`...)
	line = strconv.AppendInt(line, sent-created, 10)
	line = append(line, `,"sent":`...)
	line = strconv.AppendInt(line, sent, 10)
	line = append(line, `,"created":`...)
	line = strconv.AppendInt(line, created, 10)
	return append(line, '}')
}

// compactJSON is valid JSON without insignificant whitespace, so that it fits one line of
// a comet or SSE stream.
func compactJSON(valid []byte) []byte {
	var compact bytes.Buffer
	json.Compact(&compact, valid) // cannot fail: the caller decoded it already
	return compact.Bytes()
}

type pushRequest struct {
	Type       *string   `json:"type"`
	Events     *[]string `json:"events"`
	DurationMS *int64    `json:"duration_ms"`
}

// validate returns the distinct event names, or a reason for a 400.
func (p *pushRequest) validate() (names []string, reason string) {
	if p.Type == nil || (*p.Type != "longpoll" && *p.Type != "comet") {
		return nil, `type must be "longpoll" or "comet"`
	}
	if p.DurationMS == nil && *p.Type == "longpoll" {
		return nil, "duration_ms is required for a long poll"
	}
	if p.DurationMS != nil && (*p.DurationMS < 1 || *p.DurationMS > maxDurationMS) {
		return nil, "duration_ms must be an integer from 1 to 3600000"
	}
	if p.Events == nil || len(*p.Events) > maxEventsPerPush {
		return nil, "events must be a list of at most 16 names"
	}
	seen := make(map[string]bool, len(*p.Events))
	for _, name := range *p.Events {
		if !eventNamePattern.MatchString(name) {
			return nil, "event names must match ^[A-Za-z0-9_.-]{1,64}$"
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names, ""
}

// distinctNames checks the event list of an SSE stream or a WebSocket subscribe: 1 to 16
// names of the pattern, none twice. It returns a reason, or "".
func distinctNames(names []string) string {
	if len(names) == 0 || len(names) > maxEventsPerPush {
		return "events must be 1 to 16 event names"
	}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if !eventNamePattern.MatchString(name) {
			return "event names must match ^[A-Za-z0-9_.-]{1,64}$"
		}
		if seen[name] {
			return "an event is named twice"
		}
		seen[name] = true
	}
	return ""
}

func (h *pushHub) servePush(w http.ResponseWriter, r *http.Request) {
	var request pushRequest
	body, ok := readJSON(w, r, h.stats, &request, false)
	if !ok {
		return
	}
	names, reason := request.validate()
	if reason != "" {
		writeError(w, h.stats, http.StatusBadRequest, reason)
		return
	}
	kind := comet
	if *request.Type == "longpoll" {
		kind = longPoll
	}
	sub := newSubscriber(kind, compactJSON(body), newOutbox())
	h.stats.openPush.Add(1)
	defer h.stats.openPush.Add(-1)
	h.subscribe(sub, names, nil)
	defer h.leave(sub)

	var timeout <-chan time.Time
	if request.DurationMS != nil {
		timer := time.NewTimer(time.Duration(*request.DurationMS) * time.Millisecond)
		defer timer.Stop()
		timeout = timer.C
	}
	if kind == longPoll {
		h.holdLongPoll(w, r, sub, timeout)
	} else {
		h.streamComet(w, r, sub, timeout)
	}
}

func (h *pushHub) holdLongPoll(w http.ResponseWriter, r *http.Request, sub *subscriber, timeout <-chan time.Time) {
	select {
	case <-sub.out.wake:
	case <-timeout:
		if sub.answered.CompareAndSwap(false, true) {
			h.unsubscribe(sub)
			h.stats.timeouts.Add(1)
			writeJSON(w, h.stats, http.StatusOK, sub.timeoutAnswer(time.Now().UnixMilli(), h.stats.subscribers.Load()))
			return
		}
		<-sub.out.wake // an emitter claimed it first and is handing over its delivery
	case <-r.Context().Done():
		if sub.answered.CompareAndSwap(false, true) {
			return
		}
		<-sub.out.wake
	}
	items, _ := sub.out.take()
	h.stats.pushResponses.Add(1)
	writeJSON(w, h.stats, http.StatusOK, items[0].bytes(h.stats.subscribers.Load()))
	// Handed to the kernel now, as its `sent` says, not when the handler has returned.
	http.NewResponseController(w).Flush()
}

var ndjson = []string{"application/x-ndjson"}

func (h *pushHub) streamComet(w http.ResponseWriter, r *http.Request, sub *subscriber, timeout <-chan time.Time) {
	controller := http.NewResponseController(w)
	w.Header()["Content-Type"] = ndjson
	sendHeader(w, h.stats, http.StatusOK)
	if controller.Flush() != nil {
		return
	}
	for {
		select {
		case <-sub.out.wake:
			if items, ok := sub.out.take(); !h.writeLines(w, controller, items, ok) {
				return
			}
		case <-timeout:
			h.unsubscribe(sub)
			if items, ok := sub.out.seal(); !h.writeLines(w, controller, items, ok) {
				return
			}
			h.stats.timeouts.Add(1)
			w.Write(append(sub.timeoutAnswer(time.Now().UnixMilli(), h.stats.subscribers.Load()), '\n'))
			return
		case <-r.Context().Done():
			return
		}
	}
}

// writeLines writes each queued delivery as its own flush so that no line is split across
// flushes; false when the stream must end.
func (h *pushHub) writeLines(w http.ResponseWriter, controller *http.ResponseController, items []message, ok bool) bool {
	for _, item := range items {
		if _, err := w.Write(append(item.bytes(h.stats.subscribers.Load()), '\n')); err != nil {
			return false
		}
		if controller.Flush() != nil {
			return false
		}
		h.stats.pushResponses.Add(1)
	}
	if !ok {
		panic(http.ErrAbortHandler) // too far behind: drop the connection, not a clean end
	}
	return true
}
