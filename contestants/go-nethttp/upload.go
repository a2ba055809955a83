package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// uploadBuffers reuses copy buffers so that a stream of uploads does not churn the heap.
var uploadBuffers = sync.Pool{New: func() any { buffer := make([]byte, 64<<10); return &buffer }}

func (s *server) serveUpload(w http.ResponseWriter, r *http.Request) {
	hash := sha256.New()
	buffer := uploadBuffers.Get().(*[]byte)
	size, err := io.CopyBuffer(hash, r.Body, *buffer)
	uploadBuffers.Put(buffer)
	if err != nil {
		writeError(w, s.stats, http.StatusBadRequest, "request body ended early or was malformed")
		return
	}
	body := make([]byte, 0, 96)
	body = append(body, `{"bytes":`...)
	body = strconv.AppendInt(body, size, 10)
	body = append(body, `,"sha256":"`...)
	body = hex.AppendEncode(body, hash.Sum(nil))
	body = append(body, `"}`...)
	writeJSON(w, s.stats, http.StatusOK, body)
}
