package main

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// fileServer serves GET /files/<path> through an os.Root, which refuses any path that
// leaves the document root, symbolic links included, at the system-call level.
type fileServer struct {
	root *os.Root
}

var octetStream = []string{"application/octet-stream"}

func newFileServer(docroot string) (*fileServer, error) {
	if docroot == "" {
		return &fileServer{}, nil
	}
	root, err := os.OpenRoot(docroot)
	if err != nil {
		return nil, err
	}
	return &fileServer{root: root}, nil
}

// unsafeName reports the names the spec refuses before any lookup; net/http has already
// percent-decoded the path exactly once.
func unsafeName(name string) bool {
	if name == "" || name[0] == '/' || strings.ContainsAny(name, "\\\x00") {
		return true
	}
	for _, segment := range strings.Split(name, "/") {
		if segment == ".." {
			return true
		}
	}
	return false
}

func (fsrv *fileServer) serve(w http.ResponseWriter, r *http.Request, st *stats, name string) {
	if unsafeName(name) {
		writeError(w, st, http.StatusForbidden, "path outside the document root")
		return
	}
	if fsrv.root == nil {
		writeError(w, st, http.StatusNotFound, "no document root")
		return
	}
	file, err := fsrv.root.Open(name)
	if err != nil {
		fileError(w, st, err)
		return
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || !info.Mode().IsRegular() {
		writeError(w, st, http.StatusNotFound, "not a file")
		return
	}
	h := w.Header()
	h["Content-Type"] = octetStream
	h["Content-Length"] = []string{strconv.FormatInt(info.Size(), 10)}
	sendHeader(w, st, http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// A LimitedReader around the *os.File is what lets net/http hand the copy to sendfile.
	io.Copy(w, io.LimitReader(file, info.Size()))
}

func fileError(w http.ResponseWriter, st *stats, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrInvalid):
		writeError(w, st, http.StatusNotFound, "file not found")
	case errors.Is(err, fs.ErrPermission):
		writeError(w, st, http.StatusForbidden, "permission denied")
	default:
		// os.Root reports a symbolic link that escapes the root as a plain error.
		writeError(w, st, http.StatusForbidden, "path outside the document root")
	}
}
