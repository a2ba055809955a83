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

// subscriber is one open POST /push request, long poll or comet stream. The emitter hands
// it finished delivery lines; the request's own goroutine writes them to its connection,
// so a slow client never stalls an emit cycle.
type subscriber struct {
	longPoll    bool
	request     []byte // the request body, compacted: echoed in every answer
	created     int64
	connStart   int64
	memberships []membership // guarded by pushHub.mu
	answered    atomic.Bool  // long poll only: set by whichever answer comes first
	mu          sync.Mutex
	pending     [][]byte
	wake        chan struct{}
}

type membership struct {
	event   *event
	element *list.Element
}

type emitCycle struct {
	name    string
	seq     int64
	created int64
	total   int
}

// claim reports whether this subscriber may receive a delivery now; a long poll takes
// only the first of a delivery or its timeout.
func (sub *subscriber) claim() bool {
	return !sub.longPoll || sub.answered.CompareAndSwap(false, true)
}

func (sub *subscriber) enqueue(line []byte) {
	sub.mu.Lock()
	sub.pending = append(sub.pending, line)
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (sub *subscriber) takePending() [][]byte {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	lines := sub.pending
	sub.pending = nil
	return lines
}

// delivery builds the seed 004 response shape by hand: at 20,000 subscribers per cycle,
// reflection-based encoding would dominate the emit duration being measured.
func (sub *subscriber) delivery(cycle emitCycle, place int, sent, openPush int64) []byte {
	line := make([]byte, 0, 320+len(sub.request))
	line = append(line, `{"response":{"event":{"name":"`...)
	line = append(line, cycle.name...) // the name pattern needs no JSON escaping
	line = append(line, `","seq":`...)
	line = strconv.AppendInt(line, cycle.seq, 10)
	line = appendTimings(append(line, `,"timings":`...), cycle.created, sent)
	line = append(line, `,"connections":{"total":`...)
	line = strconv.AppendInt(line, int64(cycle.total), 10)
	line = append(line, `,"place":`...)
	line = strconv.AppendInt(line, int64(place), 10)
	line = append(line, `}}}`...)
	return sub.appendRequestPart(line, sent, openPush)
}

func (sub *subscriber) timeoutAnswer(sent, openPush int64) []byte {
	line := make([]byte, 0, 160+len(sub.request))
	line = append(line, `{"response":{"timeout":true}`...)
	return sub.appendRequestPart(line, sent, openPush)
}

func (sub *subscriber) appendRequestPart(line []byte, sent, openPush int64) []byte {
	line = append(line, `,"request":`...)
	line = append(line, sub.request...)
	line = appendTimings(append(line, `,"timings":`...), sub.created, sent)
	line = append(line, `,"connections":{"start":`...)
	line = strconv.AppendInt(line, sub.connStart, 10)
	line = append(line, `,"finish":`...)
	line = strconv.AppendInt(line, openPush, 10)
	return append(line, "}}\n"...)
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
	var compact bytes.Buffer
	json.Compact(&compact, body) // cannot fail: body was just decoded
	sub := &subscriber{
		longPoll: *request.Type == "longpoll",
		request:  compact.Bytes(),
		created:  time.Now().UnixMilli(),
		wake:     make(chan struct{}, 1),
	}
	sub.connStart = h.stats.openPush.Add(1)
	defer h.stats.openPush.Add(-1)
	h.subscribe(sub, names)
	defer h.unsubscribe(sub)

	var timeout <-chan time.Time
	if request.DurationMS != nil {
		timer := time.NewTimer(time.Duration(*request.DurationMS) * time.Millisecond)
		defer timer.Stop()
		timeout = timer.C
	}
	if sub.longPoll {
		h.holdLongPoll(w, r, sub, timeout)
	} else {
		h.streamComet(w, r, sub, timeout)
	}
}

func (h *pushHub) holdLongPoll(w http.ResponseWriter, r *http.Request, sub *subscriber, timeout <-chan time.Time) {
	select {
	case <-sub.wake:
	case <-timeout:
		if sub.answered.CompareAndSwap(false, true) {
			h.unsubscribe(sub)
			h.stats.timeouts.Add(1)
			writeJSON(w, h.stats, http.StatusOK, sub.timeoutAnswer(time.Now().UnixMilli(), h.stats.openPush.Load()))
			return
		}
		<-sub.wake // an emitter claimed it first and is handing over its delivery
	case <-r.Context().Done():
		if sub.answered.CompareAndSwap(false, true) {
			return
		}
		<-sub.wake
	}
	h.stats.pushResponses.Add(1)
	writeJSON(w, h.stats, http.StatusOK, sub.takePending()[0])
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
		case <-sub.wake:
			if !h.writeLines(w, controller, sub.takePending()) {
				return
			}
		case <-timeout:
			h.unsubscribe(sub)
			if !h.writeLines(w, controller, sub.takePending()) {
				return
			}
			h.stats.timeouts.Add(1)
			w.Write(sub.timeoutAnswer(time.Now().UnixMilli(), h.stats.openPush.Load()))
			return
		case <-r.Context().Done():
			return
		}
	}
}

// writeLines writes each delivery as its own flush so that no line is split across flushes.
func (h *pushHub) writeLines(w http.ResponseWriter, controller *http.ResponseController, lines [][]byte) bool {
	for _, line := range lines {
		if _, err := w.Write(line); err != nil {
			return false
		}
		if controller.Flush() != nil {
			return false
		}
		h.stats.pushResponses.Add(1)
	}
	return true
}
