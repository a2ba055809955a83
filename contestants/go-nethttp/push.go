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

// pushHub is the seed 004 Event Manager: named events, their emitters and subscribers.
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
	set         bool       // has ever had an emitter: only those appear in /stats
	active      bool
	intervalMS  int64
	stop        chan struct{}
	seq         int64
	counters    eventCounters
	// cycle keeps a replaced emitter's last cycle from overlapping the new emitter's first.
	cycle sync.Mutex
}

type eventCounters struct {
	emits, deliveries                        int64
	lastDuration, maxDuration, totalDuration int64
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
	e.set, e.active, e.intervalMS = true, true, intervalMS
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
		h.emit(e)
		next = next.Add(interval)
		wait := time.Until(next)
		if wait < 0 {
			next, wait = time.Now(), 0
		}
		timer.Reset(wait)
	}
}

// emit runs one emit cycle: a snapshot of the subscribers, each handed its delivery in
// order. Long polls leave every list as they are answered; comet streams stay.
func (h *pushHub) emit(e *event) {
	e.cycle.Lock()
	defer e.cycle.Unlock()
	created := time.Now().UnixMilli()
	h.mu.Lock()
	e.seq++
	seq := e.seq
	e.counters.emits++
	snapshot := make([]*subscriber, 0, e.subscribers.Len())
	for element := e.subscribers.Front(); element != nil; element = element.Next() {
		snapshot = append(snapshot, element.Value.(*subscriber))
	}
	h.mu.Unlock()

	cycle := emitCycle{name: e.name, seq: seq, created: created, total: len(snapshot)}
	var delivered, lastSent int64 = 0, created
	for i, sub := range snapshot {
		if !sub.claim() {
			continue // a long poll answered meanwhile by another event or its timeout
		}
		lastSent = time.Now().UnixMilli()
		sub.enqueue(sub.delivery(cycle, i+1, lastSent, h.stats.openPush.Load()))
		if sub.longPoll {
			h.unsubscribe(sub)
		}
		delivered++
	}

	duration := lastSent - created
	h.mu.Lock()
	e.counters.deliveries += delivered
	e.counters.lastDuration = duration
	e.counters.maxDuration = max(e.counters.maxDuration, duration)
	e.counters.totalDuration += duration
	h.mu.Unlock()
}

func (h *pushHub) subscribe(sub *subscriber, names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		e := h.eventLocked(name)
		sub.memberships = append(sub.memberships, membership{e, e.subscribers.PushBack(sub)})
	}
}

// unsubscribe removes sub from every list it is on; it is safe to call twice.
func (h *pushHub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range sub.memberships {
		m.event.subscribers.Remove(m.element)
		// Names only subscribed to, never set, would otherwise pile up in the map.
		if !m.event.set && m.event.subscribers.Len() == 0 {
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
		if !e.set {
			continue
		}
		reports[name] = eventReport{
			IntervalMS:          e.intervalMS,
			Active:              e.active,
			Emits:               e.counters.emits,
			LastSeq:             e.seq,
			Deliveries:          e.counters.deliveries,
			LastEmitDurationMS:  e.counters.lastDuration,
			MaxEmitDurationMS:   e.counters.maxDuration,
			TotalEmitDurationMS: e.counters.totalDuration,
		}
	}
	return reports
}
