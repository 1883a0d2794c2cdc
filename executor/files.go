package executor

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/sbxrun/sbx/executor/api"
)

func (s *Server) pathParam(r *http.Request) (string, error) {
	return s.fileOps().Resolve(r.URL.Query().Get("path"))
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	q := r.URL.Query()
	if q.Has("start_line") || q.Has("end_line") {
		start, err1 := optInt(q.Get("start_line"), 1)
		end, err2 := optInt(q.Get("end_line"), -1)
		if err1 != nil || err2 != nil {
			s.fail(w, badRequest("start_line and end_line must be integers"))
			return
		}
		data, err := s.fileOps().ReadLines(p, start, end)
		if err != nil {
			s.fail(w, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = io.Copy(w, bytes.NewReader(data))
		return
	}
	f, fi, err := s.fileOps().Open(p)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer f.Close()
	// Open admits regular files only: the size is known and bounds the read.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	if _, err := io.CopyN(w, f, fi.Size()); err != nil {
		// The file shrank or the client left; a short body tells the client.
		panic(http.ErrAbortHandler)
	}
}

func optInt(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	var mode *os.FileMode
	if m := r.URL.Query().Get("mode"); m != "" {
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil || n > 0o7777 {
			s.fail(w, badRequest("mode %q must be octal permission bits, such as 0644", m))
			return
		}
		fm := os.FileMode(n & 0o777)
		if n&0o1000 != 0 {
			fm |= os.ModeSticky
		}
		if n&0o2000 != 0 {
			fm |= os.ModeSetgid
		}
		if n&0o4000 != 0 {
			fm |= os.ModeSetuid
		}
		mode = &fm
	}
	n, err := s.fileOps().Write(p, r.Body, mode)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.WriteResult{Path: p, Bytes: n})
}

func (s *Server) editFile(w http.ResponseWriter, r *http.Request) {
	var req api.EditRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	res, err := s.fileOps().Edit(req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	l, err := s.fileOps().List(p)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) putArchive(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	res, err := s.fileOps().Extract(p, r.Body)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) getArchive(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	cw := &countingWriter{w: w}
	if err := s.fileOps().WriteArchive(cw, p); err != nil {
		if cw.n == 0 {
			s.fail(w, err)
			return
		}
		// Headers are gone; cutting the stream short tells the client.
		s.log.Warn("executor: archive failed", "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// countingWriter tells whether anything was written yet.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
