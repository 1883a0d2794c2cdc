package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
)

// ImageStore is what the image routes need of the image cache. Errors may
// be *StatusError to choose the reply (404 for an unknown image).
type ImageStore interface {
	// Pull fetches ref into the cache, reporting progress (never
	// concurrently) if progress is not nil.
	Pull(ctx context.Context, ref string, progress func(api.PullProgress)) (api.Image, error)
	// List returns the cached images.
	List(ctx context.Context) ([]api.Image, error)
	// Remove drops ref from the cache.
	Remove(ctx context.Context, ref string) error
}

// ImageInspector is an ImageStore that can also show one image in full
// (GET /v1/images/{ref}).
type ImageInspector interface {
	Inspect(ctx context.Context, ref string) (api.ImageDetail, error)
}

// ImageCollector is an ImageStore that can remove unused layers (POST
// /v1/images/gc); inUse reports the layer directories sandboxes use.
type ImageCollector interface {
	GC(ctx context.Context, inUse func() ([]string, error)) (api.ImageGCReport, error)
}

// ImageImporter is an ImageStore that can import an uploaded archive (POST
// /v1/images/import): an OCI archive, a docker save tar or a root
// filesystem tarball, read from body.
type ImageImporter interface {
	Import(ctx context.Context, body io.Reader, name string) (api.Image, error)
}

var errNoImages = &StatusError{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
	Message: "this server has no image store: create sandboxes with a rootfs, or run a server built with the image cache"}

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
	if s.cfg.Images == nil {
		s.fail(w, errNoImages)
		return
	}
	if !wantsNDJSON(r) {
		img, err := s.cfg.Images.Pull(r.Context(), req.Ref, nil)
		if err != nil {
			s.metrics.pulls.WithLabelValues("error").Inc()
			s.fail(w, err)
			return
		}
		s.pulled(img)
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
	img, err := s.cfg.Images.Pull(r.Context(), req.Ref, func(p api.PullProgress) {
		write(api.PullFrame{Type: api.FrameProgress, Progress: &p})
	})
	if err != nil {
		s.metrics.pulls.WithLabelValues("error").Inc()
		_, code := statusOf(err)
		s.metrics.errors.WithLabelValues(code).Inc()
		write(api.PullFrame{Type: api.FrameError, Error: &api.ErrorBody{Code: code, Message: err.Error()}})
		return
	}
	s.pulled(img)
	write(api.PullFrame{Type: api.FrameResult, Image: &img})
}

func (s *Server) pulled(img api.Image) {
	s.metrics.pulls.WithLabelValues("ok").Inc()
	s.events.publish(api.Event{Type: api.EventImagePulled, Image: img.Name})
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Images == nil {
		s.fail(w, errNoImages)
		return
	}
	list, err := s.cfg.Images.List(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	if list == nil {
		list = []api.Image{}
	}
	writeJSON(w, http.StatusOK, api.ImageList{Images: list})
}

func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Images == nil {
		s.fail(w, errNoImages)
		return
	}
	ref := r.PathValue("ref")
	if ref == "" {
		s.fail(w, badRequest("give the image reference: DELETE /v1/images/{ref}"))
		return
	}
	if err := s.cfg.Images.Remove(r.Context(), ref); err != nil {
		s.fail(w, err)
		return
	}
	s.events.publish(api.Event{Type: api.EventImageRemove, Image: ref})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) inspectImage(w http.ResponseWriter, r *http.Request) {
	in, ok := s.cfg.Images.(ImageInspector)
	if !ok {
		s.fail(w, errNoImages)
		return
	}
	ref := r.PathValue("ref")
	if ref == "" {
		s.fail(w, badRequest("give the image reference: GET /v1/images/{ref}"))
		return
	}
	img, err := in.Inspect(r.Context(), ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, img)
}

// gcImages removes the layers no image uses, keeping those of the
// sandboxes on record (stopped ones too), as sbx image gc does locally.
func (s *Server) gcImages(w http.ResponseWriter, r *http.Request) {
	gc, ok := s.cfg.Images.(ImageCollector)
	if !ok {
		s.fail(w, errNoImages)
		return
	}
	rep, err := gc.GC(r.Context(), s.cfg.Manager.ImageLayers)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// importImage imports the archive in the request body (at most
// MaxUploadBytes) under ?name=.
func (s *Server) importImage(w http.ResponseWriter, r *http.Request) {
	imp, ok := s.cfg.Images.(ImageImporter)
	if !ok {
		s.fail(w, errNoImages)
		return
	}
	limit := s.cfg.MaxUploadBytes
	if r.ContentLength > limit {
		s.fail(w, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("archive of %d bytes exceeds the server's upload limit of %d (--max-upload-size)", r.ContentLength, limit)})
		return
	}
	img, err := imp.Import(r.Context(), http.MaxBytesReader(w, r.Body, limit), r.URL.Query().Get("name"))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			err = &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
				Message: fmt.Sprintf("archive exceeds the server's upload limit of %d bytes (--max-upload-size)", limit)}
		}
		s.fail(w, err)
		return
	}
	s.pulled(img)
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

// prepareImage builds (once) an image from a base image and a script
// with the Manager's Prepare, the same cache key as a local sbx prepare.
// The build sandbox goes through the create policy (network host only
// with --allow-host-network) and the concurrent create limit.
func (s *Server) prepareImage(w http.ResponseWriter, r *http.Request) {
	var req api.PrepareRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	if strings.TrimSpace(req.Base) == "" || strings.TrimSpace(req.Script) == "" {
		s.fail(w, unprocessable(api.CodeInvalid, "base and script are required: the image to start from and the setup script"))
		return
	}
	opts, err := s.options(&api.CreateRequest{Image: req.Base, Env: req.Env, User: req.User, Workdir: req.Workdir, Network: req.Network})
	if err != nil {
		s.fail(w, err)
		return
	}
	select {
	case s.creates <- struct{}{}:
		defer func() { <-s.creates }()
	default:
		s.fail(w, &StatusError{Status: http.StatusTooManyRequests, Code: api.CodeLimit,
			Message: fmt.Sprintf("%d creates are in flight, the server's maximum (sbx serve --max-concurrent-creates); retry", s.cfg.MaxConcurrentCreates)})
		return
	}
	out := &tailBuffer{max: maxPrepareOutput}
	img, cached, err := s.mgr.Prepare(r.Context(), sandbox.PrepareOptions{Base: req.Base, Script: req.Script, Sandbox: opts, Output: out})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PrepareReply{Image: api.Image{Name: strings.TrimSpace(img.Ref), Digest: img.Digest}, Cached: cached, Output: string(out.buf)})
}
