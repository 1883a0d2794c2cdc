package server

import (
	"io"
	"net/http"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// renameSandbox is POST /v1/sandboxes/{id}/rename.
func (s *Server) renameSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.RenameRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	sb, err := s.b.Rename(r.Context(), r.PathValue("id"), req.Name)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

// diffSandbox is GET /v1/sandboxes/{id}/diff.
func (s *Server) diffSandbox(w http.ResponseWriter, r *http.Request) {
	changes, err := s.b.Diff(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if changes == nil {
		changes = []sbx.Change{}
	}
	writeJSON(w, http.StatusOK, api.ChangeList{Changes: changes})
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

// diskUsage is GET /v1/system/df.
func (s *Server) diskUsage(w http.ResponseWriter, r *http.Request) {
	du, err := s.b.DiskUsage(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, du)
}

// prune is POST /v1/system/prune {"all"}: stopped sandboxes, then (all)
// unused images, then unused layers.
func (s *Server) prune(w http.ResponseWriter, r *http.Request) {
	var req sbx.PruneOptions
	if err := s.decodeJSON(w, r, &req, true); err != nil {
		s.fail(w, err)
		return
	}
	rep, err := s.b.Prune(r.Context(), req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// topSandbox is GET /v1/sandboxes/{id}/top.
func (s *Server) topSandbox(w http.ResponseWriter, r *http.Request) {
	ps, err := s.b.Top(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if ps == nil {
		ps = []sbx.ProcessInfo{}
	}
	writeJSON(w, http.StatusOK, api.ProcessList{Processes: ps})
}

// exportSandbox is GET /v1/sandboxes/{id}/export: the root as a tar. An
// error before the first byte is a plain error reply; a later one aborts
// the connection, so that a client never takes a short tar for a whole.
func (s *Server) exportSandbox(w http.ResponseWriter, r *http.Request) {
	fw := &firstWrite{w: w, start: func() {
		w.Header().Set("Content-Type", api.ContentTypeTar)
		w.WriteHeader(http.StatusOK)
	}}
	if err := s.b.Export(r.Context(), r.PathValue("id"), fw); err != nil {
		if !fw.started {
			s.fail(w, err)
			return
		}
		s.log.Warn("export", "id", r.PathValue("id"), "err", err)
		panic(http.ErrAbortHandler)
	}
	if !fw.started {
		fw.start()
	}
}

// firstWrite calls start before the first byte goes to w.
type firstWrite struct {
	w       io.Writer
	start   func()
	started bool
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if !f.started {
		f.started = true
		f.start()
	}
	return f.w.Write(p)
}
