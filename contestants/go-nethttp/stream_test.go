package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// sseMessage is one message of an event stream as a client parses it.
type sseMessage struct {
	event, id, data string
	comment         bool
}

// readSSE reads a whole stream (it must end by its duration_ms).
func readSSE(t *testing.T, ts *testServer, target, lastEventID string) (*http.Response, []sseMessage) {
	t.Helper()
	request, _ := http.NewRequest("GET", ts.base+target, nil)
	if lastEventID != "" {
		request.Header.Set("Last-Event-ID", lastEventID)
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	var messages []sseMessage
	var current sseMessage
	lines := bufio.NewScanner(response.Body)
	for lines.Scan() {
		line := lines.Text()
		field, value, _ := strings.Cut(line, ": ")
		switch {
		case line == "":
			messages = append(messages, current)
			current = sseMessage{}
		case strings.HasPrefix(line, ":"):
			current.comment = true
		case field == "event":
			current.event = value
		case field == "id":
			current.id = value
		case field == "data":
			current.data = value
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	return response, messages
}

type deliveryShape struct {
	Response struct {
		Event struct {
			Name        string          `json:"name"`
			Seq         int64           `json:"seq"`
			Data        json.RawMessage `json:"data"`
			Replayed    bool            `json:"replayed"`
			Connections struct {
				Total int `json:"total"`
				Place int `json:"place"`
			} `json:"connections"`
		} `json:"event"`
	} `json:"response"`
	Request json.RawMessage `json:"request"`
}

func parseDelivery(t *testing.T, text string) deliveryShape {
	t.Helper()
	var delivery deliveryShape
	if err := json.Unmarshal([]byte(text), &delivery); err != nil {
		t.Fatalf("delivery %q: %v", text, err)
	}
	return delivery
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !done(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestSSEStreamsDeliveriesHeartbeatsAndTimeout(t *testing.T) {
	ts := startTestServer(t)
	ts.do(t, "POST", "/event/set", `{"name":"a","interval_ms":20}`)
	response, messages := readSSE(t, ts, "/sse?events=a,b&heartbeat_ms=40&duration_ms=300", "")
	ts.do(t, "POST", "/event/clear", "")
	if response.Header.Get("Content-Type") != "text/event-stream" || response.Header.Get("Cache-Control") != "no-cache" ||
		response.TransferEncoding[0] != "chunked" {
		t.Fatalf("head %v", response.Header)
	}
	opening := messages[0]
	if opening.data != "" || !strings.HasPrefix(opening.id, "a:") || !strings.HasSuffix(opening.id, ",b:0") {
		t.Fatalf("opening message %+v", opening)
	}
	var seqs []int64
	heartbeats := 0
	for _, message := range messages[1 : len(messages)-1] {
		if message.comment {
			heartbeats++
			continue
		}
		delivery := parseDelivery(t, message.data)
		seqs = append(seqs, delivery.Response.Event.Seq)
		if want := fmt.Sprintf("a:%d,b:0", delivery.Response.Event.Seq); message.id != want || delivery.Response.Event.Replayed {
			t.Fatalf("message %+v, want id %s", message, want)
		}
		if string(delivery.Request) != `{"type":"sse","events":["a","b"],"heartbeat_ms":40,"duration_ms":300}` {
			t.Fatalf("request %s", delivery.Request)
		}
	}
	if len(seqs) < 5 || heartbeats < 3 {
		t.Fatalf("%d deliveries and %d heartbeats in 300 ms", len(seqs), heartbeats)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("seqs %v", seqs)
		}
	}
	last := messages[len(messages)-1]
	if last.event != "timeout" || last.id != "" || !strings.HasPrefix(last.data, `{"response":{"timeout":true}`) {
		t.Fatalf("last message %+v", last)
	}
	waitFor(t, "sse.open to return to 0", func() bool { return ts.stats(t).SSE.Open == 0 })
	report := ts.stats(t)
	if report.SSE.Total != 1 || report.SSE.Timeouts != 1 || report.SSE.Deliveries != int64(len(seqs)) ||
		report.SSE.Heartbeats != int64(heartbeats) || report.Events["a"].Deliveries != int64(len(seqs)) {
		t.Fatalf("stats %+v after %d deliveries", report.SSE, len(seqs))
	}
}

func TestSSEReplaysTheNewest64AndSaysWhatIsLost(t *testing.T) {
	ts := startTestServer(t)
	ts.do(t, "POST", "/event/set", `{"name":"r","interval_ms":10}`)
	waitFor(t, "80 emits", func() bool { return ts.stats(t).Events["r"].LastSeq >= 80 })
	ts.do(t, "POST", "/event/clear", "")
	newest := ts.stats(t).Events["r"].LastSeq

	_, messages := readSSE(t, ts, "/sse?events=r&heartbeat_ms=0&duration_ms=50", "r:5")
	gap := messages[0]
	wantGap := fmt.Sprintf(`{"gap":{"name":"r","after":5,"next":%d}}`, newest-63)
	if gap.event != "gap" || gap.data != wantGap || gap.id != fmt.Sprintf("r:%d", newest-64) {
		t.Fatalf("gap message %+v, want %s", gap, wantGap)
	}
	for i, message := range messages[1:65] {
		delivery := parseDelivery(t, message.data)
		event := delivery.Response.Event
		if event.Seq != newest-63+int64(i) || !event.Replayed || event.Connections.Total != 1 ||
			message.id != fmt.Sprintf("r:%d", event.Seq) {
			t.Fatalf("replay %d: %+v", i, message)
		}
	}
	if opening := messages[65]; opening.id != fmt.Sprintf("r:%d", newest) || opening.data != "" {
		t.Fatalf("opening %+v", opening)
	}

	_, messages = readSSE(t, ts, "/sse?events=r&heartbeat_ms=0&duration_ms=50", fmt.Sprintf("r:%d", newest+100))
	wantGap = fmt.Sprintf(`{"gap":{"name":"r","after":%d,"next":%d}}`, newest+100, newest+1)
	if messages[0].data != wantGap || messages[1].id != fmt.Sprintf("r:%d", newest) || messages[2].event != "timeout" {
		t.Fatalf("an id from another run: %+v", messages)
	}
	report := ts.stats(t).SSE
	if report.Gaps != 2 || report.Replayed != 64 || report.Deliveries != 0 {
		t.Fatalf("stats %+v", report)
	}
}

func TestSSERefusesBadRequests(t *testing.T) {
	ts := startTestServer(t)
	for _, c := range []struct{ target, lastEventID string }{
		{"/sse", ""}, {"/sse?events=", ""}, {"/sse?events=a,a", ""}, {"/sse?events=a%20b", ""},
		{"/sse?events=a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", ""}, {"/sse?events=a&heartbeat_ms=5", ""},
		{"/sse?events=a&heartbeat_ms=1e3", ""}, {"/sse?events=a&duration_ms=0", ""},
		{"/sse?events=a&events=b", ""}, {"/sse?events=a", "17"}, {"/sse?events=a", "a:017"},
		{"/sse?events=a", "a:1,a:2"}, {"/sse?events=a", "a:9007199254740992"},
	} {
		request, _ := http.NewRequest("GET", ts.base+c.target, nil)
		request.Header.Set("Last-Event-ID", c.lastEventID)
		response, err := http.DefaultClient.Do(request)
		if err != nil {
			t.Fatal(err)
		}
		response.Body.Close()
		if response.StatusCode != 400 {
			t.Errorf("%s (Last-Event-ID %q): %d, want 400", c.target, c.lastEventID, response.StatusCode)
		}
	}
	response, body := ts.do(t, "POST", "/sse?events=a", "")
	expectStatus(t, response, body, 405)
	if response.Header.Get("Allow") != "GET" {
		t.Fatalf("Allow %q", response.Header.Get("Allow"))
	}
}

func dialWS(t *testing.T, ts *testServer) *websocket.Conn {
	t.Helper()
	conn, response, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.base, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	if response.Header.Get("Sec-WebSocket-Extensions") != "" || response.Header.Get("Sec-WebSocket-Protocol") != "" {
		t.Fatalf("101 selects %v", response.Header)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	return conn
}

func exchange(t *testing.T, conn *websocket.Conn, message string) string {
	t.Helper()
	if err := conn.WriteMessage(websocket.TextMessage, []byte(message)); err != nil {
		t.Fatal(err)
	}
	return readWS(t, conn)
}

func readWS(t *testing.T, conn *websocket.Conn) string {
	t.Helper()
	_, reply, err := conn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return string(reply)
}

func TestWebSocketEchoSubscribeAndPublish(t *testing.T) {
	ts := startTestServer(t)
	subscriber, publisher := dialWS(t, ts), dialWS(t, ts)
	if reply := exchange(t, publisher, `{"type":"echo","data":{"n":[1, true]}}`); reply != `{"type":"echo","data":{"n":[1,true]}}` {
		t.Fatalf("echo reply %s", reply)
	}
	big := `{"type":"echo","data":"` + strings.Repeat("x", maxWebSocketMessage-len(`{"type":"echo","data":""}`)) + `"}`
	if reply := exchange(t, publisher, big); len(reply) != maxWebSocketMessage {
		t.Fatalf("a 65,536-byte echo came back as %d bytes", len(reply))
	}
	if reply := exchange(t, subscriber, `{"type":"subscribe","events":["p"]}`); reply != `{"type":"subscribed","events":["p"]}` {
		t.Fatalf("subscribe reply %s", reply)
	}
	if reply := exchange(t, publisher, `{"type":"publish","event":"p","data":{"k":1}}`); reply != `{"type":"published","event":"p","seq":1,"total":1}` {
		t.Fatalf("published reply %s", reply)
	}
	delivery := parseDelivery(t, readWS(t, subscriber))
	if event := delivery.Response.Event; event.Seq != 1 || string(event.Data) != `{"k":1}` ||
		string(delivery.Request) != `{"type":"subscribe","events":["p"]}` {
		t.Fatalf("delivery %+v", delivery)
	}
	// A subscribed publisher gets its own delivery before its reply.
	first := parseDelivery(t, exchange(t, subscriber, `{"type":"publish","event":"p"}`))
	if first.Response.Event.Seq != 2 || string(first.Response.Event.Data) != "null" {
		t.Fatalf("own delivery %+v", first)
	}
	if reply := readWS(t, subscriber); reply != `{"type":"published","event":"p","seq":2,"total":1}` {
		t.Fatalf("published reply %s", reply)
	}
	report := ts.stats(t)
	if ws := report.WebSocket; ws.Open != 2 || ws.Total != 2 || ws.Subscribers != 1 || ws.Deliveries != 2 ||
		ws.Echoes != 2 || ws.Publishes != 2 {
		t.Fatalf("websocket stats %+v", ws)
	}
	if p := report.Events["p"]; p.IntervalMS != 0 || p.Active || p.Emits != 2 || p.Deliveries != 2 {
		t.Fatalf("a published event in /stats: %+v", p)
	}
}

func TestWebSocketClosesWithTheCodeOfTheFault(t *testing.T) {
	ts := startTestServer(t)
	for _, c := range []struct {
		kind    int
		message string
		code    int
	}{
		{websocket.BinaryMessage, `{"type":"echo"}`, websocket.CloseUnsupportedData},
		{websocket.TextMessage, "{\"type\":\"echo\",\"data\":\"\xff\"}", websocket.CloseInvalidFramePayloadData},
		{websocket.TextMessage, `{"type":"dance"}`, websocket.ClosePolicyViolation},
		{websocket.TextMessage, `[1]`, websocket.ClosePolicyViolation},
		{websocket.TextMessage, `{"type":"subscribe","events":["a","a"]}`, websocket.ClosePolicyViolation},
		{websocket.TextMessage, `{"type":"publish"}`, websocket.ClosePolicyViolation},
		{websocket.TextMessage, strings.Repeat(" ", maxWebSocketMessage+1), websocket.CloseMessageTooBig},
	} {
		conn := dialWS(t, ts)
		conn.WriteMessage(c.kind, []byte(c.message))
		_, _, err := conn.ReadMessage()
		var closed *websocket.CloseError
		if !errors.As(err, &closed) || closed.Code != c.code {
			t.Errorf("%.30q: %v, want close %d", c.message, err, c.code)
		}
	}
	conn := dialWS(t, ts)
	exchange(t, conn, `{"type":"subscribe","events":["a"]}`)
	// Echoes right before the bad message are all answered, ahead of the close frame.
	const echoes = 300
	for i := range echoes {
		conn.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"echo","data":%d}`, i))
	}
	conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"subscribe","events":["b"]}`))
	for i := range echoes {
		if reply, want := readWS(t, conn), fmt.Sprintf(`{"type":"echo","data":%d}`, i); reply != want {
			t.Fatalf("reply %s before the close, want %s", reply, want)
		}
	}
	_, _, err := conn.ReadMessage()
	var closed *websocket.CloseError
	if !errors.As(err, &closed) || closed.Code != websocket.ClosePolicyViolation {
		t.Errorf("a second subscribe: %v, want close 1008", err)
	}
}

func TestWebSocketAnswersACloseWithItsCodeAndForgetsAGoneClient(t *testing.T) {
	ts := startTestServer(t)
	conn := dialWS(t, ts)
	conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "bye"))
	_, _, err := conn.ReadMessage()
	var closed *websocket.CloseError
	if !errors.As(err, &closed) || closed.Code != 4001 {
		t.Fatalf("the close was answered with %v", err)
	}
	gone := dialWS(t, ts)
	exchange(t, gone, `{"type":"subscribe","events":["g"]}`)
	if ts.stats(t).WebSocket.Subscribers != 1 {
		t.Fatal("the subscriber is not counted")
	}
	gone.NetConn().Close() // no close frame, as when a client dies
	// Only /stats's own connection stays open.
	waitFor(t, "the gone subscriber to leave", func() bool {
		report := ts.stats(t)
		return report.WebSocket.Subscribers == 0 && report.WebSocket.Open == 0 && report.Connections.Open == 1
	})
}

func TestWebSocketHandshakeRefusals(t *testing.T) {
	ts := startTestServer(t)
	upgrade := "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	for request, status := range map[string]int{
		"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n":                                                                                            400,
		"GET /ws HTTP/1.1\r\nHost: x\r\n" + upgrade + "Sec-WebSocket-Version: 13\r\n\r\n":                                                400,
		"GET /ws HTTP/1.1\r\nHost: x\r\n" + upgrade + "Sec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n":                 400,
		"GET /ws HTTP/1.1\r\nHost: x\r\n" + upgrade + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 12\r\n\r\n": 426,
		"POST /ws HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n":                                                                      405,
	} {
		response := rawExchange(t, ts, request)
		body := make([]byte, response.ContentLength)
		response.Body.Read(body)
		expectStatus(t, response, string(body), status)
		if status == 426 && response.Header.Get("Sec-WebSocket-Version") != "13" {
			t.Errorf("426 without Sec-WebSocket-Version: 13")
		}
	}
}
