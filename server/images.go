package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// wantsNDJSON reports whether a pull asked for NDJSON progress.
func wantsNDJSON(r *http.Request) bool {
	if v := r.URL.Query().Get("progress"); v != "" {
		b, _ := strconv.ParseBool(v)
		return b
	}
	return strings.Contains(r.Header.Get("Accept"), api.ContentTypeNDJSON)
}

func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	var req api.PullRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	if strings.TrimSpace(req.Ref) == "" {
		s.fail(w, unprocessable(api.CodeInvalid, "ref is required: the image reference to pull"))
		return
	}
	if !wantsNDJSON(r) {
		img, err := s.b.PullImage(r.Context(), req.Ref, nil)
		if err != nil {
			s.metrics.pulls.Inc("error")
			s.fail(w, err)
			return
		}
		s.metrics.pulls.Inc("ok")
		writeJSON(w, http.StatusOK, img)
		return
	}
	// Progress as NDJSON: one frame per line, flushed, ending with one
	// result or error frame.
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	write := func(f api.PullFrame) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(f)
		_ = rc.Flush()
	}
	img, err := s.b.PullImage(r.Context(), req.Ref, func(p sbx.PullProgress) {
		write(api.PullFrame{Type: api.FrameProgress, Progress: &p})
	})
	if err != nil {
		s.metrics.pulls.Inc("error")
		_, code := statusOf(err)
		s.metrics.errors.Inc(code)
		write(api.PullFrame{Type: api.FrameError, Error: &api.ErrorBody{Code: code, Message: err.Error()}})
		return
	}
	s.metrics.pulls.Inc("ok")
	write(api.PullFrame{Type: api.FrameResult, Image: img})
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	list, err := s.b.ListImages(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	if list == nil {
		list = []sbx.Image{}
	}
	writeJSON(w, http.StatusOK, api.ImageList{Images: list})
}

func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	if ref == "" {
		s.fail(w, badRequest("give the image reference: DELETE /v1/images/{ref}"))
		return
	}
	if err := s.b.RemoveImage(r.Context(), ref); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) inspectImage(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	if ref == "" {
		s.fail(w, badRequest("give the image reference: GET /v1/images/{ref}"))
		return
	}
	img, err := s.b.InspectImage(r.Context(), ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, img)
}

// gcImages removes the layers no image uses, keeping those of the
// sandboxes on record (stopped ones too), as sbx image gc does locally.
func (s *Server) gcImages(w http.ResponseWriter, r *http.Request) {
	rep, err := s.b.GCImages(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// importImage imports the archive in the request body (at most
// MaxUploadBytes) under ?name=.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	limit := s.cfg.MaxUploadBytes
	if r.ContentLength > limit {
		s.fail(w, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("archive of %d bytes exceeds the server's upload limit of %d (--max-upload-size)", r.ContentLength, limit)})
		return
	}
	img, err := s.b.ImportImage(r.Context(), sbx.ImportOptions{Archive: http.MaxBytesReader(w, r.Body, limit), Name: r.URL.Query().Get("name")})
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			err = &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
				Message: fmt.Sprintf("archive exceeds the server's upload limit of %d bytes (--max-upload-size)", limit)}
		}
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, img)
}

// maxPrepareOutput is how much of a preparation script's output the reply
// carries (its end).
const maxPrepareOutput = 64 << 10

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// tagImage is POST /v1/images/tag.
func (s *Server) tagImage(w http.ResponseWriter, r *http.Request) {
	var req api.TagRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	if strings.TrimSpace(req.Source) == "" || strings.TrimSpace(req.Target) == "" {
		s.fail(w, unprocessable(api.CodeInvalid, "source and target are required: the cached image and its new name"))
		return
	}
	img, err := s.b.TagImage(r.Context(), req.Source, req.Target)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, img)
}

// imageHistory is GET /v1/images/history?ref=REF.
func (s *Server) imageHistory(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		s.fail(w, badRequest("give the image: GET /v1/images/history?ref=REF"))
		return
	}
	h, err := s.b.ImageHistory(r.Context(), ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	if h == nil {
		h = []sbx.ImageHistoryEntry{}
	}
	writeJSON(w, http.StatusOK, api.ImageHistory{History: h})
}

// saveImages is POST /v1/images/save: the images as one OCI archive. The
// images are looked up first, so that a missing one is a plain error
// reply; a failure once the archive streams aborts the connection, and
// the client sees a truncated body rather than a short archive.
func (s *Server) saveImages(w http.ResponseWriter, r *http.Request) {
	var req api.SaveRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	if len(req.Refs) == 0 {
		s.fail(w, unprocessable(api.CodeInvalid, "refs is required: the images to save"))
		return
	}
	for _, ref := range req.Refs {
		if _, err := s.b.InspectImage(r.Context(), ref); err != nil {
			s.fail(w, err)
			return
		}
	}
	w.Header().Set("Content-Type", api.ContentTypeTar)
	w.WriteHeader(http.StatusOK)
	if err := s.b.SaveImage(r.Context(), req.Refs, w); err != nil {
		s.log.Warn("save images", "refs", req.Refs, "err", err)
		panic(http.ErrAbortHandler)
	}
}
