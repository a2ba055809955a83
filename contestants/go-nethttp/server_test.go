package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testServer runs the real server on loopback ports the OS picks.
type testServer struct {
	base       string
	syslogAddr string
	docroot    string
}

func startTestServer(t *testing.T) *testServer {
	t.Helper()
	docroot := t.TempDir()
	os.WriteFile(filepath.Join(docroot, "hello.txt"), []byte("hello\n"), 0o644)
	os.Mkdir(filepath.Join(docroot, "sub"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(docroot, "escape"))
	srv, err := newServer(docroot)
	if err != nil {
		t.Fatal(err)
	}
	syslogAddr := freeSyslogAddress(t, srv)
	listeners := serveOn(t, srv, []string{loopback})
	return &testServer{base: "http://" + listeners[0].Addr().String(), syslogAddr: syslogAddr, docroot: docroot}
}

// serveOn serves srv on one port the OS picks at every host.
func serveOn(t *testing.T, srv *server, hosts []string) []net.Listener {
	t.Helper()
	listeners, err := listenHTTP(hosts, 0)
	if err != nil {
		t.Fatal(err)
	}
	httpServer := newHTTPServer(srv)
	for _, ln := range listeners {
		go httpServer.Serve(jsonErrorListener{Listener: ln, stats: srv.stats})
	}
	t.Cleanup(func() { httpServer.Close() })
	return listeners
}

func TestListensOnTheHostAddressToo(t *testing.T) {
	srv, err := newServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	listeners := serveOn(t, srv, addresses("127.0.0.2"))
	if len(listeners) != 2 {
		t.Fatalf("%d listeners for loopback and 127.0.0.2", len(listeners))
	}
	for _, ln := range listeners {
		ts := &testServer{base: "http://" + ln.Addr().String()}
		response, body := ts.do(t, "GET", "/perf", "")
		if response.StatusCode != 200 || body != string(perfBody) {
			t.Errorf("%s answered %d %q", ln.Addr(), response.StatusCode, body)
		}
	}
	if len(addresses("127.0.0.1")) != 1 {
		t.Fatal("a host of 127.0.0.1 must not bind loopback twice")
	}
}

// freeSyslogAddress retries because the TCP and UDP ports must be free together.
func freeSyslogAddress(t *testing.T, srv *server) string {
	for range 20 {
		probe, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		address := probe.Addr().String()
		probe.Close()
		if srv.syslog.listen(address) == nil {
			return address
		}
	}
	t.Fatal("no free syslog port")
	return ""
}

func (ts *testServer) do(t *testing.T, method, path, body string) (*http.Response, string) {
	t.Helper()
	request, _ := http.NewRequest(method, ts.base+path, strings.NewReader(body))
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	data, _ := io.ReadAll(response.Body)
	return response, string(data)
}

func (ts *testServer) stats(t *testing.T) statsReport {
	t.Helper()
	_, body := ts.do(t, "GET", "/stats", "")
	var report statsReport
	if err := json.Unmarshal([]byte(body), &report); err != nil {
		t.Fatal(err)
	}
	return report
}

func expectStatus(t *testing.T, response *http.Response, body string, status int) {
	t.Helper()
	if response.StatusCode != status {
		t.Fatalf("status %d, want %d (body %q)", response.StatusCode, status, body)
	}
	if status >= 400 && !strings.HasPrefix(body, `{"error":"`) {
		t.Fatalf("error body %q is not the spec's JSON error", body)
	}
}

func TestPerfAndMethods(t *testing.T) {
	ts := startTestServer(t)
	response, body := ts.do(t, "GET", "/perf", "")
	expectStatus(t, response, body, 200)
	if len(body) != 84 || body != string(perfBody) || response.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("perf answered %q as %q", body, response.Header.Get("Content-Type"))
	}
	response, body = ts.do(t, "POST", "/perf", "")
	expectStatus(t, response, body, 405)
	if response.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("Allow = %q", response.Header.Get("Allow"))
	}
	response, body = ts.do(t, "GET", "/nowhere", "")
	expectStatus(t, response, body, 404)
}

func TestFiles(t *testing.T) {
	ts := startTestServer(t)
	response, body := ts.do(t, "GET", "/files/hello.txt", "")
	expectStatus(t, response, body, 200)
	if body != "hello\n" || response.ContentLength != 6 {
		t.Fatalf("file body %q, length %d", body, response.ContentLength)
	}
	for path, status := range map[string]int{
		"/files/%2e%2e/etc/passwd": 403, "/files/%2Fetc/passwd": 403, "/files/a%5cb": 403,
		"/files/a%00b": 403, "/files/escape": 403, "/files/sub": 404, "/files/missing": 404,
	} {
		response, body := ts.do(t, "GET", path, "")
		if response.StatusCode != status || strings.Contains(body, "root:") {
			t.Errorf("%s: status %d body %q, want %d", path, response.StatusCode, body, status)
		}
	}
}

func TestUploadHashesChunkedBody(t *testing.T) {
	ts := startTestServer(t)
	payload := strings.Repeat("serverlab", 100_000)
	request, _ := http.NewRequest("POST", ts.base+"/upload", io.MultiReader(strings.NewReader(payload)))
	request.ContentLength = -1 // forces Transfer-Encoding: chunked
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	var answer struct {
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	}
	json.NewDecoder(response.Body).Decode(&answer)
	digest := sha256.Sum256([]byte(payload))
	if answer.Bytes != int64(len(payload)) || answer.SHA256 != hex.EncodeToString(digest[:]) {
		t.Fatalf("upload answered %+v", answer)
	}
}

// rawExchange sends bytes the Go client would refuse to send and returns the reply.
func rawExchange(t *testing.T, ts *testServer, request string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(request))
	response, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return response
}

func TestNetHTTPErrorsCarryJSONBodies(t *testing.T) {
	ts := startTestServer(t)
	cases := map[string]int{
		"GET /perf HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70_000) + "\r\n\r\n": 431,
		"NOT A REQUEST LINE\r\n\r\n":                        400,
		"GET /perf HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n": 400,
	}
	for request, status := range cases {
		response := rawExchange(t, ts, request)
		body, _ := io.ReadAll(response.Body)
		expectStatus(t, response, string(body), status)
		if response.Header.Get("Date") == "" || response.ContentLength != int64(len(body)) {
			t.Errorf("%d reply lacks Date or Content-Length: %v", status, response.Header)
		}
	}
	response := rawExchange(t, ts, "GET /perf HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 8000)+"\r\n\r\n")
	if response.StatusCode != 200 {
		t.Fatalf("an 8 KB header got %d", response.StatusCode)
	}
}

func TestControlValidation(t *testing.T) {
	ts := startTestServer(t)
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/logging", `{"enabled":"yes"}`, 400},
		{"/logging", `{}`, 400},
		{"/logging", `{"enabled":false}`, 200},
		{"/logging", `{"pad":"` + strings.Repeat("x", 70_000) + `"}`, 413},
		{"/event/set", `{"name":"bad name","interval_ms":100}`, 400},
		{"/event/set", `{"name":"e","interval_ms":5}`, 400},
		{"/event/clear", `{"name":"never"}`, 404},
		{"/event/clear", ``, 200},
		{"/push", `{"type":"longpoll","events":["e"]}`, 400},
		{"/push", `{"type":"comet","events":["e"],"duration_ms":1.5}`, 400},
		{"/push", `{"type":"longpoll","events":[`, 400},
	} {
		response, body := ts.do(t, "POST", c.path, c.body)
		if response.StatusCode != c.status {
			t.Errorf("%s %.40s: %d %s, want %d", c.path, c.body, response.StatusCode, body, c.status)
		}
	}
	response, body := ts.do(t, "GET", "/timestamp?client=-1", "")
	expectStatus(t, response, body, 400)
}

func TestLongPollDeliveryThenTimeout(t *testing.T) {
	ts := startTestServer(t)
	ts.do(t, "POST", "/event/set", `{"name":"tick","interval_ms":50}`)
	response, body := ts.do(t, "POST", "/push", `{"type":"longpoll","events":["tick"],"duration_ms":5000}`)
	expectStatus(t, response, body, 200)
	var delivery struct {
		Response struct {
			Event struct {
				Name string `json:"name"`
				Seq  int64  `json:"seq"`
			} `json:"event"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(body), &delivery); err != nil || delivery.Response.Event.Name != "tick" ||
		delivery.Response.Event.Seq < 1 || strings.Contains(body, "timeout") {
		t.Fatalf("delivery %s", body)
	}
	ts.do(t, "POST", "/event/clear", `{"name":"tick"}`)
	_, body = ts.do(t, "POST", "/push", `{"type":"longpoll","events":["tick"],"duration_ms":100}`)
	if !strings.HasPrefix(body, `{"response":{"timeout":true}`) {
		t.Fatalf("timeout answer %s", body)
	}
	report := ts.stats(t)
	if report.Responses.Timeouts != 1 || report.Responses.Push != 1 || report.Events["tick"].Active {
		t.Fatalf("stats after long polls: %+v", report)
	}
}

func TestCometSequenceRisesByOne(t *testing.T) {
	ts := startTestServer(t)
	ts.do(t, "POST", "/event/set", `{"name":"c","interval_ms":20}`)
	response, err := http.Post(ts.base+"/push", "application/json",
		strings.NewReader(`{"type":"comet","events":["c"],"duration_ms":400}`))
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	if response.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("comet content type %q", response.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(response.Body)
	var seqs []int64
	var last string
	for lines.Scan() {
		last = lines.Text()
		var line struct {
			Response struct {
				Event struct{ Seq int64 } `json:"event"`
			} `json:"response"`
		}
		json.Unmarshal([]byte(last), &line)
		if seq := line.Response.Event.Seq; seq > 0 {
			seqs = append(seqs, seq)
		}
	}
	if !strings.Contains(last, `"timeout":true`) || len(seqs) < 5 {
		t.Fatalf("comet ended with %q after %d events", last, len(seqs))
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("sequence %v has a gap or repeat", seqs)
		}
	}
}

func TestSyslogCountsBothFramingsAndUDP(t *testing.T) {
	ts := startTestServer(t)
	conn, err := net.Dial("tcp", ts.syslogAddr)
	if err != nil {
		t.Fatal(err)
	}
	var stream strings.Builder
	var wantBytes int64
	for i := range 1000 {
		message := fmt.Sprintf("<14>1 - host app - - - seq=%d", i)
		wantBytes += int64(len(message))
		if i%2 == 0 {
			fmt.Fprintf(&stream, "%d %s", len(message), message)
		} else {
			stream.WriteString(message + "\n")
		}
	}
	stream.WriteString("\n\n12 incomplete") // empty lines and a cut frame do not count
	data := stream.String()
	for i := 0; i < len(data); i += 7 { // messages split across segments
		conn.Write([]byte(data[i:min(i+7, len(data))]))
	}
	conn.Close()
	udp, _ := net.Dial("udp", ts.syslogAddr)
	udp.Write([]byte("<14>1 udp\n"))
	udp.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := ts.stats(t).Syslog
		if got.Received == 1001 && got.Bytes == wantBytes+9 && got.TCPConnections == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("syslog counters %+v, want 1001 messages of %d bytes", got, wantBytes+9)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
