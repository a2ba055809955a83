package main

import (
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

const specVersion = "3.4"

// stats holds the counters of GET /stats; all are atomics so that no request takes a lock
// to count itself.
type stats struct {
	started         time.Time
	connectionsOpen atomic.Int64
	connections     atomic.Int64
	requests        atomic.Int64
	openPush        atomic.Int64
	// subscribers counts open subscribers of every transport: the connections.start and
	// finish of a delivery (spec §6).
	subscribers   atomic.Int64
	responses     atomic.Int64
	pushResponses atomic.Int64
	timeouts      atomic.Int64
	syslog        syslogCounters
	sse           sseCounters
	websocket     websocketCounters
	grpc          grpcCounters
}

type sseCounters struct {
	open, total, deliveries, replayed, gaps, heartbeats, timeouts atomic.Int64
}

type websocketCounters struct {
	open, total, subscribers, deliveries, echoes, publishes atomic.Int64
}

// grpcCounters are /stats' group grpc (spec §16).
type grpcCounters struct {
	calls, open, deliveries atomic.Int64
}

type syslogCounters struct {
	received       atomic.Int64
	bytes          atomic.Int64
	tcpConnections atomic.Int64
	mode           string // spec §7.1: "count" or "parse", fixed at start
	parsed         atomic.Int64
	malformed      atomic.Int64
	rfc3164        atomic.Int64
	sdElements     atomic.Int64
	msgBytes       atomic.Int64
}

func newStats() *stats {
	st := &stats{started: time.Now()}
	st.syslog.mode = "count"
	return st
}

// trackConn is the http.Server's ConnState hook.
func (st *stats) trackConn(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		st.connections.Add(1)
		st.connectionsOpen.Add(1)
	case http.StateClosed:
		st.connectionsOpen.Add(-1)
		// A hijacked connection (a WebSocket) stays open: its handler counts it down when
		// it closes the TCP connection.
	}
}

type statsReport struct {
	SpecVersion string                 `json:"spec_version"`
	Server      string                 `json:"server"`
	UptimeMS    int64                  `json:"uptime_ms"`
	Connections connectionsReport      `json:"connections"`
	Requests    requestsReport         `json:"requests"`
	Responses   responsesReport        `json:"responses"`
	Events      map[string]eventReport `json:"events"`
	Syslog      syslogReport           `json:"syslog"`
	SSE         sseReport              `json:"sse"`
	WebSocket   websocketReport        `json:"websocket"`
	GRPC        grpcReport             `json:"grpc"`
}

type grpcReport struct {
	Calls      int64 `json:"calls"`
	Open       int64 `json:"open"`
	Deliveries int64 `json:"deliveries"`
}

type sseReport struct {
	Open       int64 `json:"open"`
	Total      int64 `json:"total"`
	Deliveries int64 `json:"deliveries"`
	Replayed   int64 `json:"replayed"`
	Gaps       int64 `json:"gaps"`
	Heartbeats int64 `json:"heartbeats"`
	Timeouts   int64 `json:"timeouts"`
}

type websocketReport struct {
	Open        int64 `json:"open"`
	Total       int64 `json:"total"`
	Subscribers int64 `json:"subscribers"`
	Deliveries  int64 `json:"deliveries"`
	Echoes      int64 `json:"echoes"`
	Publishes   int64 `json:"publishes"`
}

type connectionsReport struct {
	Open  int64 `json:"open"`
	Total int64 `json:"total"`
}

type requestsReport struct {
	Total    int64 `json:"total"`
	OpenPush int64 `json:"open_push"`
}

type responsesReport struct {
	Total    int64 `json:"total"`
	Push     int64 `json:"push"`
	Timeouts int64 `json:"timeouts"`
}

type eventReport struct {
	IntervalMS          int64 `json:"interval_ms"`
	Active              bool  `json:"active"`
	Emits               int64 `json:"emits"`
	LastSeq             int64 `json:"last_seq"`
	Deliveries          int64 `json:"deliveries"`
	LastEmitDurationMS  int64 `json:"last_emit_duration_ms"`
	MaxEmitDurationMS   int64 `json:"max_emit_duration_ms"`
	TotalEmitDurationMS int64 `json:"total_emit_duration_ms"`
}

type syslogReport struct {
	Received       int64  `json:"received"`
	Bytes          int64  `json:"bytes"`
	TCPConnections int64  `json:"tcp_connections"`
	Mode           string `json:"mode"`
	Parsed         int64  `json:"parsed"`
	Malformed      int64  `json:"malformed"`
	RFC3164        int64  `json:"rfc3164"`
	SDElements     int64  `json:"sd_elements"`
	MsgBytes       int64  `json:"msg_bytes"`
}

func (s *server) serveStats(w http.ResponseWriter) {
	st := s.stats
	writeValue(w, st, http.StatusOK, statsReport{
		SpecVersion: specVersion,
		Server:      "go-nethttp",
		UptimeMS:    time.Since(st.started).Milliseconds(),
		Connections: connectionsReport{Open: st.connectionsOpen.Load(), Total: st.connections.Load()},
		Requests:    requestsReport{Total: st.requests.Load(), OpenPush: st.openPush.Load()},
		Responses: responsesReport{
			Total:    st.responses.Load(),
			Push:     st.pushResponses.Load(),
			Timeouts: st.timeouts.Load(),
		},
		Events: s.push.report(),
		Syslog: syslogReport{
			Received:       st.syslog.received.Load(),
			Bytes:          st.syslog.bytes.Load(),
			TCPConnections: st.syslog.tcpConnections.Load(),
			Mode:           st.syslog.mode,
			Parsed:         st.syslog.parsed.Load(),
			Malformed:      st.syslog.malformed.Load(),
			RFC3164:        st.syslog.rfc3164.Load(),
			SDElements:     st.syslog.sdElements.Load(),
			MsgBytes:       st.syslog.msgBytes.Load(),
		},
		SSE: sseReport{
			Open:       st.sse.open.Load(),
			Total:      st.sse.total.Load(),
			Deliveries: st.sse.deliveries.Load(),
			Replayed:   st.sse.replayed.Load(),
			Gaps:       st.sse.gaps.Load(),
			Heartbeats: st.sse.heartbeats.Load(),
			Timeouts:   st.sse.timeouts.Load(),
		},
		WebSocket: websocketReport{
			Open:        st.websocket.open.Load(),
			Total:       st.websocket.total.Load(),
			Subscribers: st.websocket.subscribers.Load(),
			Deliveries:  st.websocket.deliveries.Load(),
			Echoes:      st.websocket.echoes.Load(),
			Publishes:   st.websocket.publishes.Load(),
		},
		GRPC: grpcReport{
			Calls:      st.grpc.calls.Load(),
			Open:       st.grpc.open.Load(),
			Deliveries: st.grpc.deliveries.Load(),
		},
	})
}
