package main

import (
	"net/http"
	"strconv"
	"time"
)

func (s *server) serveTimestamp(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UnixMilli()
	reply := struct {
		Server   int64  `json:"server"`
		Client   *int64 `json:"client"`
		OffsetMS *int64 `json:"offset_ms"`
	}{Server: now}
	if values, given := r.URL.Query()["client"]; given {
		client, ok := parseMillis(values[0])
		if !ok {
			writeError(w, s.stats, http.StatusBadRequest, "client must be a non-negative integer")
			return
		}
		offset := now - client
		reply.Client, reply.OffsetMS = &client, &offset
	}
	writeValue(w, s.stats, http.StatusOK, reply)
}

// parseMillis accepts only plain decimal digits: no sign, no fraction, no exponent.
func parseMillis(text string) (int64, bool) {
	if text == "" || text[0] < '0' || text[0] > '9' {
		return 0, false
	}
	value, err := strconv.ParseInt(text, 10, 64)
	return value, err == nil
}

func (s *server) serveLogging(w http.ResponseWriter, r *http.Request) {
	var request struct {
		Enabled *bool `json:"enabled"`
	}
	if _, ok := readJSON(w, r, s.stats, &request, false); !ok {
		return
	}
	if request.Enabled == nil {
		writeError(w, s.stats, http.StatusBadRequest, "enabled must be true or false")
		return
	}
	s.logging.Store(*request.Enabled)
	writeValue(w, s.stats, http.StatusOK, struct {
		Enabled bool `json:"enabled"`
	}{*request.Enabled})
}
