package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
)

// maxJSONBody is the spec's limit for control and push request bodies.
const maxJSONBody = 64 << 10

// The Allow header values of the kinds of endpoint.
const (
	methodsRead = "GET, HEAD"
	methodsGet  = "GET"
	methodsPost = "POST"
)

// sendHeader is the one place response headers go out, so responses.total counts exactly
// the responses whose header section was sent.
func sendHeader(w http.ResponseWriter, st *stats, status int) {
	st.responses.Add(1)
	w.WriteHeader(status)
}

func writeJSON(w http.ResponseWriter, st *stats, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	sendHeader(w, st, status)
	w.Write(body)
}

func writeValue(w http.ResponseWriter, st *stats, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, st, http.StatusInternalServerError, "cannot encode response")
		return
	}
	writeJSON(w, st, status, body)
}

func writeError(w http.ResponseWriter, st *stats, status int, reason string) {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{reason})
	writeJSON(w, st, status, body)
}

// allow answers 405 with an Allow header when the method is not one of allowed.
func allow(w http.ResponseWriter, r *http.Request, st *stats, allowed string) bool {
	if allowed == methodsPost && r.Method == http.MethodPost ||
		allowed == methodsGet && r.Method == http.MethodGet ||
		allowed == methodsRead && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", allowed)
	writeError(w, st, http.StatusMethodNotAllowed, "method not allowed")
	return false
}

func loopbackOnly(w http.ResponseWriter, r *http.Request, st *stats) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return true
	}
	writeError(w, st, http.StatusForbidden, "control endpoints answer loopback clients only")
	return false
}

// readJSONBody reads a control or push body of at most maxJSONBody bytes; on failure it
// has already answered and returns ok == false.
func readJSONBody(w http.ResponseWriter, r *http.Request, st *stats) (body []byte, ok bool) {
	if r.ContentLength > maxJSONBody {
		writeError(w, st, http.StatusRequestEntityTooLarge, "json body over 64 KiB")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, st, http.StatusRequestEntityTooLarge, "json body over 64 KiB")
		return nil, false
	case err != nil:
		writeError(w, st, http.StatusBadRequest, "unreadable request body")
		return nil, false
	}
	return body, true
}

// readJSON reads a control or push body and decodes it into v, answering 400 when it is
// not valid JSON of that shape. An empty body leaves v untouched when emptyAllowed.
func readJSON(w http.ResponseWriter, r *http.Request, st *stats, v any, emptyAllowed bool) (body []byte, ok bool) {
	if body, ok = readJSONBody(w, r, st); !ok {
		return nil, false
	}
	if len(body) == 0 && emptyAllowed {
		return body, true
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, st, http.StatusBadRequest, "malformed json or wrong field type")
		return nil, false
	}
	return body, true
}
