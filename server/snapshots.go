package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// The snapshot routes: checkpoint and fork of sandboxes, and the snapshot
// store (/v1/snapshots), over the backend's sbx.Snapshots.

// snapshots is the backend as sbx.Snapshots, or an error for one without.
func (s *Server) snapshots() (sbx.Snapshots, error) {
	p, ok := s.b.(sbx.Snapshots)
	if !ok {
		return nil, fmt.Errorf("%w: this server's backend cannot checkpoint sandboxes", sbx.ErrUnsupported)
	}
	return p, nil
}

// checkpointSandbox is POST /v1/sandboxes/{id}/checkpoint.
func (s *Server) checkpointSandbox(w http.ResponseWriter, r *http.Request) {
	var o sbx.CheckpointOptions
	if err := s.decodeJSON(w, r, &o, true); err != nil {
		s.fail(w, err)
		return
	}
	p, err := s.snapshots()
	if err == nil {
		var snap *sbx.Snapshot
		if snap, err = p.Checkpoint(r.Context(), r.PathValue("id"), o); err == nil {
			writeJSON(w, http.StatusCreated, snap)
			return
		}
	}
	s.fail(w, err)
}

// forkSandbox is POST /v1/sandboxes/{id}/fork.
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) {
	var o sbx.ForkOptions
	if err := s.decodeJSON(w, r, &o, true); err != nil {
		s.fail(w, err)
		return
	}
	p, err := s.snapshots()
	if err == nil {
		var sbs []*sbx.Sandbox
		if sbs, err = p.Fork(r.Context(), r.PathValue("id"), o); err == nil {
			writeJSON(w, http.StatusCreated, api.ForkReply{Sandboxes: sbs})
			return
		}
	}
	s.fail(w, err)
}

// restoreSnapshot is POST /v1/snapshots/{name}/restore.
func (s *Server) restoreSnapshot(w http.ResponseWriter, r *http.Request) {
	var o sbx.RestoreOptions
	if err := s.decodeJSON(w, r, &o, true); err != nil {
		s.fail(w, err)
		return
	}
	p, err := s.snapshots()
	if err == nil {
		var sb *sbx.Sandbox
		if sb, err = p.Restore(r.Context(), r.PathValue("name"), o); err == nil {
			w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
			writeJSON(w, http.StatusCreated, sb)
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	p, err := s.snapshots()
	if err == nil {
		var list []*sbx.Snapshot
		if list, err = p.ListSnapshots(r.Context()); err == nil {
			if list == nil {
				list = []*sbx.Snapshot{}
			}
			writeJSON(w, http.StatusOK, api.SnapshotList{Snapshots: list})
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) inspectSnapshot(w http.ResponseWriter, r *http.Request) {
	p, err := s.snapshots()
	if err == nil {
		var snap *sbx.Snapshot
		if snap, err = p.InspectSnapshot(r.Context(), r.PathValue("name")); err == nil {
			writeJSON(w, http.StatusOK, snap)
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) removeSnapshot(w http.ResponseWriter, r *http.Request) {
	p, err := s.snapshots()
	if err == nil {
		if err = p.RemoveSnapshot(r.Context(), r.PathValue("name")); err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	s.fail(w, err)
}

// exportSnapshot is GET /v1/snapshots/{name}/export: the snapshot as one
// tar; a failure midway aborts the connection (see exportSandbox).
func (s *Server) exportSnapshot(w http.ResponseWriter, r *http.Request) {
	p, err := s.snapshots()
	if err != nil {
		s.fail(w, err)
		return
	}
	fw := &firstWrite{w: w, start: func() {
		w.Header().Set("Content-Type", api.ContentTypeTar)
		w.WriteHeader(http.StatusOK)
	}}
	if err := p.ExportSnapshot(r.Context(), r.PathValue("name"), fw); err != nil {
		if !fw.started {
			s.fail(w, err)
			return
		}
		s.log.Warn("snapshot export", "name", r.PathValue("name"), "err", err)
		panic(http.ErrAbortHandler)
	}
	if !fw.started {
		fw.start()
	}
}

// importSnapshot is POST /v1/snapshots/import[?name=N] with a tar written
// by an export, capped by the server's upload limit.
func (s *Server) importSnapshot(w http.ResponseWriter, r *http.Request) {
	p, err := s.snapshots()
	if err != nil {
		s.fail(w, err)
		return
	}
	limit := s.cfg.MaxUploadBytes
	if r.ContentLength > limit {
		s.fail(w, &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Message: fmt.Sprintf("snapshot of %d bytes exceeds the server's upload limit of %d (--max-upload-size)", r.ContentLength, limit)})
		return
	}
	snap, err := p.ImportSnapshot(r.Context(), http.MaxBytesReader(w, r.Body, limit), r.URL.Query().Get("name"))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			err = &StatusError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
				Message: fmt.Sprintf("snapshot exceeds the server's upload limit of %d bytes (--max-upload-size)", limit)}
		}
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, snap)
}
