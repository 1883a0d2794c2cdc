package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
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
// tar stream (capped by the upload limit), or multipart with the build's
// secrets first (buildBody); the options are query parameters (tag,
// dockerfile, target, no_cache, network, pull and build_arg=K=V,
// repeated); the reply streams the build's output as NDJSON frames and
// ends with its result or error.
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
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	body, secrets, err := buildBody(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	o.Secrets = secrets
	if err := contexttar.Extract(body, dir); err != nil {
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

// buildBody returns the context's tar stream and the secrets of a build
// request: the body itself (application/x-tar), or the parts of a
// multipart/form-data body, api.BuildSecretsPart (optional, first) then
// api.BuildContextPart. The secrets are kept in memory only, and no error
// quotes them.
func buildBody(r *http.Request) (io.Reader, map[string]string, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return r.Body, nil, nil
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		return nil, nil, partError(err, "build request: read its first part: %v")
	}
	var secrets map[string]string
	if part.FormName() == api.BuildSecretsPart {
		if secrets, err = readSecretsPart(part); err != nil {
			return nil, nil, err
		}
		if part, err = mr.NextPart(); err != nil {
			return nil, nil, partError(err, "build request: a "+strconv.Quote(api.BuildContextPart)+" part must follow the secrets: %v")
		}
	}
	if part.FormName() != api.BuildContextPart {
		return nil, nil, unprocessable(api.CodeInvalid, "build request: part %q: want %q (optional, first) and %q", part.FormName(), api.BuildSecretsPart, api.BuildContextPart)
	}
	return part, secrets, nil
}

// partError is the error of reading a part's headers: too large (the
// body past the upload limit, or headers past multipart's own limits) is
// 413 as for any body too large; anything else is the request's fault,
// said with format.
func partError(err error, format string) error {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) || errors.Is(err, multipart.ErrMessageTooLarge) {
		return &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: "build request: the headers of its parts exceed the server's limits (--max-upload-size for the body)"}
	}
	return unprocessable(api.CodeInvalid, format, err)
}

// readSecretsPart reads the secrets part: a JSON object of base64 values
// by id, each at most sbx.MaxBuildSecretBytes.
func readSecretsPart(part io.Reader) (map[string]string, error) {
	data, err := io.ReadAll(io.LimitReader(part, api.MaxBuildSecretsPartBytes+1))
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return nil, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Message: "build request exceeds the server's upload limit (--max-upload-size)"}
	}
	if err != nil {
		return nil, unprocessable(api.CodeInvalid, "build request: read its secrets: %v", err)
	}
	if len(data) > api.MaxBuildSecretsPartBytes {
		return nil, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("build request: the secrets part exceeds %d bytes", api.MaxBuildSecretsPartBytes)}
	}
	var raw map[string][]byte
	if json.Unmarshal(data, &raw) != nil {
		// The decoder's message may quote the value: say only what is wrong.
		return nil, unprocessable(api.CodeInvalid, "build request: the secrets part must be a JSON object of base64 values by id")
	}
	out := make(map[string]string, len(raw))
	for id, v := range raw {
		if id == "" {
			return nil, unprocessable(api.CodeInvalid, "build request: a secret has an empty id")
		}
		if len(v) > sbx.MaxBuildSecretBytes {
			return nil, unprocessable(api.CodeInvalid, "build request: secret %q is %d bytes, more than %d", id, len(v), sbx.MaxBuildSecretBytes)
		}
		out[id] = string(v)
	}
	return out, nil
}

// pruneBuildCache is POST /v1/images/build/prune: sbx build prune on the
// server's host.
func (s *Server) pruneBuildCache(w http.ResponseWriter, r *http.Request) {
	p, ok := s.b.(sbx.BuildCachePruner)
	if !ok {
		s.fail(w, &StatusError{Status: http.StatusNotImplemented, Code: api.CodeInvalid, Message: "this server's backend has no build cache"})
		return
	}
	rep, err := p.PruneBuildCache(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// frameWriter sends each write as a frame.
type frameWriter func([]byte)

func (f frameWriter) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
