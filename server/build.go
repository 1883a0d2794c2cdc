package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/build/contexttar"
	"github.com/sbxrun/sbx/server/api"
)

// buildImage is POST /v1/images/build: the body is the build context as a
// tar stream (capped by the upload limit), the options are query
// parameters (tag, dockerfile, target, no_cache, network, pull and
// build_arg=K=V, repeated); the reply streams the build's output as NDJSON
// frames and ends with its result or error.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	builder, ok := s.b.(sbx.Builder)
	if !ok {
		s.fail(w, &StatusError{Status: http.StatusNotImplemented, Code: api.CodeInvalid, Message: "this server's backend cannot build images"})
		return
	}
	q := r.URL.Query()
	o := sbx.BuildOptions{Tag: q.Get("tag"), Target: q.Get("target"), Network: q.Get("network"), Pull: q.Get("pull")}
	o.NoCache, _ = strconv.ParseBool(q.Get("no_cache"))
	for _, kv := range q["build_arg"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			s.fail(w, unprocessable(api.CodeInvalid, "build_arg %q: use KEY=VALUE", kv))
			return
		}
		if o.BuildArgs == nil {
			o.BuildArgs = map[string]string{}
		}
		o.BuildArgs[k] = v
	}
	df := q.Get("dockerfile")
	if df == "" {
		df = "Dockerfile"
	}
	if !filepath.IsLocal(df) {
		s.fail(w, unprocessable(api.CodeInvalid, "dockerfile %q must be a path inside the context", df))
		return
	}
	limit := s.cfg.MaxUploadBytes
	if r.ContentLength > limit {
		s.fail(w, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("build context of %d bytes exceeds the server's upload limit of %d (--max-upload-size)", r.ContentLength, limit)})
		return
	}
	release, err := s.admitCreate()
	if err != nil {
		s.fail(w, err)
		return
	}
	defer release()
	dir, err := os.MkdirTemp("", "sbx-build-context-")
	if err != nil {
		s.fail(w, err)
		return
	}
	defer os.RemoveAll(dir)
	if err := contexttar.Extract(http.MaxBytesReader(w, r.Body, limit), dir); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			s.fail(w, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
				Message: fmt.Sprintf("build context exceeds the server's upload limit of %d bytes (--max-upload-size)", limit)})
			return
		}
		s.fail(w, unprocessable(api.CodeInvalid, "%s", err.Error()))
		return
	}
	o.ContextDir, o.Dockerfile = dir, filepath.Join(dir, df)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	write := func(f api.BuildFrame) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(f)
		_ = rc.Flush()
	}
	o.Output = frameWriter(func(p []byte) { write(api.BuildFrame{Type: api.FrameOutput, Output: string(p)}) })
	res, err := builder.Build(r.Context(), o)
	if err != nil {
		_, code := statusOf(err)
		s.metrics.errors.Inc(code)
		write(api.BuildFrame{Type: api.FrameError, Error: &api.ErrorBody{Code: code, Message: err.Error()}})
		return
	}
	write(api.BuildFrame{Type: api.FrameResult, Build: res})
}

// frameWriter sends each write as a frame.
type frameWriter func([]byte)

func (f frameWriter) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
