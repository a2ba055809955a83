package main

import (
	"container/list"
	"net/http"
	"regexp"
	"sort"
	"sync"
	"time"
)

var eventNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

const (
	minIntervalMS = 10
	maxDurationMS = 3_600_000
)

// pushHub is the seed 004 Event Manager: named events, their emitters and subscribers of
// every transport (long poll, comet, SSE, WebSocket).
// mu guards the events map and every event's subscriber list; an emit cycle only holds
// it while it takes its snapshot.
type pushHub struct {
	stats  *stats
	mu     sync.Mutex
	events map[string]*event
}

type event struct {
	name        string
	subscribers *list.List // of *subscriber, in the order they subscribed
	listed      bool       // set or published at least once: only those appear in /stats
	active      bool
	intervalMS  int64
	stop        chan struct{}
	seq         int64
	ring        [replayBuffer]cycleRecord // the newest cycles, at seq % replayBuffer
	counters    eventCounters
	durations   emitDurations
	// cycle keeps cycles from overlapping: a replaced emitter's last with the new one's
	// first, and a publish cycle with a timed one.
	cycle sync.Mutex
}

// replayBuffer is how many of an event's newest cycles an SSE reconnect can recover
// (spec §10): exactly 64.
const replayBuffer = 64

type cycleRecord struct {
	seq, created int64
	data         []byte // a publish cycle's data (spec §11); nil for a timed emit
}

// history is an event's last seq and its buffered cycles, oldest first, at one instant.
type history struct {
	last   int64
	cycles []cycleRecord
}

type eventCounters struct {
	emits, deliveries int64
}

// emitDurations are an event's emit durations (spec §5): a cycle's runs from its created to
// the latest `sent` of its deliveries. The connections' goroutines take those stamps as
// they write, so a cycle's duration still grows after the emitter has moved on; its own
// lock keeps those raises off the hub's.
type emitDurations struct {
	mu               sync.Mutex
	newest           int64 // seq of the newest cycle begun: last is its duration
	last, max, total int64
}

// begin starts cycle seq at duration 0 (a cycle that reaches nobody keeps 0).
func (d *emitDurations) begin(seq int64) {
	d.mu.Lock()
	d.newest, d.last = seq, 0
	d.mu.Unlock()
}

// raise notes that cycle seq's duration rose by `by` to `duration`.
func (d *emitDurations) raise(seq, duration, by int64) {
	d.mu.Lock()
	d.total += by
	d.max = max(d.max, duration)
	if seq == d.newest {
		d.last = duration
	}
	d.mu.Unlock()
}

func (d *emitDurations) read() (last, most, total int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last, d.max, d.total
}

func newPushHub(st *stats) *pushHub {
	return &pushHub{stats: st, events: make(map[string]*event)}
}

// eventLocked returns the named event, creating it; the caller holds h.mu.
func (h *pushHub) eventLocked(name string) *event {
	e := h.events[name]
	if e == nil {
		e = &event{name: name, subscribers: list.New()}
		h.events[name] = e
	}
	return e
}

func (h *pushHub) serveSet(w http.ResponseWriter, r *http.Request) {
	var request struct {
		Name       *string `json:"name"`
		IntervalMS *int64  `json:"interval_ms"`
	}
	if _, ok := readJSON(w, r, h.stats, &request, false); !ok {
		return
	}
	if request.Name == nil || !eventNamePattern.MatchString(*request.Name) {
		writeError(w, h.stats, http.StatusBadRequest, "name must match ^[A-Za-z0-9_.-]{1,64}$")
		return
	}
	if request.IntervalMS == nil || *request.IntervalMS < minIntervalMS || *request.IntervalMS > maxDurationMS {
		writeError(w, h.stats, http.StatusBadRequest, "interval_ms must be an integer from 10 to 3600000")
		return
	}
	replaced := h.set(*request.Name, *request.IntervalMS)
	writeValue(w, h.stats, http.StatusOK, struct {
		Name       string `json:"name"`
		IntervalMS int64  `json:"interval_ms"`
		Replaced   bool   `json:"replaced"`
	}{*request.Name, *request.IntervalMS, replaced})
}

func (h *pushHub) set(name string, intervalMS int64) (replaced bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.eventLocked(name)
	replaced = e.active
	if e.active {
		close(e.stop)
	}
	e.listed, e.active, e.intervalMS = true, true, intervalMS
	e.stop = make(chan struct{})
	go h.emitEvery(e, time.Duration(intervalMS)*time.Millisecond, e.stop)
	return replaced
}

func (h *pushHub) serveClear(w http.ResponseWriter, r *http.Request) {
	var request struct {
		Name *string `json:"name"`
	}
	if _, ok := readJSON(w, r, h.stats, &request, true); !ok {
		return
	}
	var cleared []string
	if request.Name == nil {
		cleared = h.clearAll()
	} else if h.clear(*request.Name) {
		cleared = []string{*request.Name}
	} else {
		writeError(w, h.stats, http.StatusNotFound, "unknown event")
		return
	}
	writeValue(w, h.stats, http.StatusOK, struct {
		Cleared []string `json:"cleared"`
	}{cleared})
}

func (h *pushHub) clear(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.events[name]
	if e == nil || !e.active {
		return false
	}
	e.deactivateLocked()
	return true
}

func (h *pushHub) clearAll() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	cleared := []string{}
	for name, e := range h.events {
		if e.active {
			e.deactivateLocked()
			cleared = append(cleared, name)
		}
	}
	sort.Strings(cleared)
	return cleared
}

func (e *event) deactivateLocked() {
	close(e.stop)
	e.active = false
}

// emitEvery runs emit cycles on a fixed schedule; a cycle that overruns its interval
// delays the next one instead of overlapping it.
func (h *pushHub) emitEvery(e *event, interval time.Duration, stop <-chan struct{}) {
	next := time.Now().Add(interval)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		select {
		case <-stop: // cleared while the timer fired: no cycle after a clear
			return
		default:
		}
		h.emit(e, nil)
		next = next.Add(interval)
		wait := time.Until(next)
		if wait < 0 {
			next, wait = time.Now(), 0
		}
		timer.Reset(wait)
	}
}

// emit runs one emit cycle: a snapshot of the subscribers of every transport, each handed
// its delivery in order, to be built and written by its connection's goroutine. Long polls
// leave every list as they are answered; streams stay. data is a publish cycle's (nil for a
// timed emit). It returns the cycle's seq and size.
func (h *pushHub) emit(e *event, data []byte) (seq int64, total int) {
	e.cycle.Lock()
	defer e.cycle.Unlock()
	created := time.Now().UnixMilli()
	h.mu.Lock()
	e.seq++
	seq = e.seq
	e.ring[seq%replayBuffer] = cycleRecord{seq: seq, created: created, data: data}
	e.counters.emits++
	snapshot := make([]*subscriber, 0, e.subscribers.Len())
	for element := e.subscribers.Front(); element != nil; element = element.Next() {
		snapshot = append(snapshot, element.Value.(*subscriber))
	}
	h.mu.Unlock()

	cycle := &emitCycle{name: e.name, seq: seq, created: created, total: len(snapshot), data: data,
		durations: &e.durations}
	cycle.lastSent.Store(created)
	e.durations.begin(seq)
	var delivered int64
	for i, sub := range snapshot {
		// A subscriber noticed gone is skipped; a long poll answered meanwhile by another
		// event or its timeout takes nothing more.
		if sub.gone.Load() || !sub.claim() {
			continue
		}
		// The delivery's bytes and its `sent` are made by the connection's goroutine
		// right before it writes them (spec §6), not here.
		if !sub.out.put(message{event: e.name, seq: seq, cycle: cycle, place: i + 1, sub: sub}) {
			continue // a reader too far behind: its connection ends
		}
		if sub.transport == longPoll {
			h.unsubscribe(sub)
		}
		delivered++
		h.stats.countDelivery(sub.transport)
	}

	h.mu.Lock()
	e.counters.deliveries += delivered
	h.mu.Unlock()
	return seq, len(snapshot)
}

// publish runs a publish cycle of name (spec §11) now, whether or not it has an emitter;
// the name is listed in /stats from then on.
func (h *pushHub) publish(name string, data []byte) (seq int64, total int) {
	h.mu.Lock()
	e := h.eventLocked(name)
	e.listed = true
	h.mu.Unlock()
	return h.emit(e, data)
}

// subscribe registers sub with each event and counts it open. atOnce, if given, runs
// before the hub lets go of its lock, with each event's history at that instant: what it
// does precedes every cycle that reaches sub. An SSE stream takes what it will replay (so
// that a cycle is either replayed or live), a WebSocket queues its subscribed reply.
func (h *pushHub) subscribe(sub *subscriber, names []string, atOnce func([]history)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub.connStart = h.stats.subscribers.Add(1)
	var histories []history
	for _, name := range names {
		e := h.eventLocked(name)
		sub.memberships = append(sub.memberships, membership{e, e.subscribers.PushBack(sub)})
		if atOnce != nil {
			histories = append(histories, e.historyLocked())
		}
	}
	if atOnce != nil {
		atOnce(histories)
	}
}

func (e *event) historyLocked() history {
	first := max(1, e.seq-replayBuffer+1)
	cycles := make([]cycleRecord, 0, max(0, e.seq-first+1))
	for seq := first; seq <= e.seq; seq++ {
		cycles = append(cycles, e.ring[seq%replayBuffer])
	}
	return history{last: e.seq, cycles: cycles}
}

// leave ends sub: noticed as gone, out of every list and of the open count.
func (h *pushHub) leave(sub *subscriber) {
	sub.gone.Store(true)
	h.unsubscribe(sub)
	h.stats.subscribers.Add(-1)
}

// unsubscribe removes sub from every list it is on; it is safe to call twice.
func (h *pushHub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range sub.memberships {
		m.event.subscribers.Remove(m.element)
		// Names only subscribed to, never set or published, would otherwise pile up.
		if !m.event.listed && m.event.subscribers.Len() == 0 {
			delete(h.events, m.event.name)
		}
	}
	sub.memberships = nil
}

func (h *pushHub) report() map[string]eventReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	reports := make(map[string]eventReport, len(h.events))
	for name, e := range h.events {
		if !e.listed {
			continue
		}
		last, most, total := e.durations.read()
		reports[name] = eventReport{
			IntervalMS:          e.intervalMS,
			Active:              e.active,
			Emits:               e.counters.emits,
			LastSeq:             e.seq,
			Deliveries:          e.counters.deliveries,
			LastEmitDurationMS:  last,
			MaxEmitDurationMS:   most,
			TotalEmitDurationMS: total,
		}
	}
	return reports
}
