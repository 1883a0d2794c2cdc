package server

import (
	"fmt"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// The named volume routes (/v1/volumes), over the backend's sbx.Volumes.
// A create mounts one by naming it in Options.Volumes.

// volumes is the backend as sbx.Volumes, or an error for one without.
func (s *Server) volumes() (sbx.Volumes, error) {
	v, ok := s.b.(sbx.Volumes)
	if !ok {
		return nil, fmt.Errorf("%w: this server's backend has no named volumes", sbx.ErrUnsupported)
	}
	return v, nil
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	var spec sbx.VolumeSpec
	if err := s.decodeJSON(w, r, &spec, false); err != nil {
		s.fail(w, err)
		return
	}
	v, err := s.volumes()
	if err == nil {
		var info *sbx.VolumeInfo
		if info, err = v.CreateVolume(r.Context(), spec); err == nil {
			w.Header().Set("Location", "/v1/volumes/"+info.Name)
			writeJSON(w, http.StatusCreated, info)
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	v, err := s.volumes()
	if err == nil {
		var list []*sbx.VolumeInfo
		if list, err = v.ListVolumes(r.Context()); err == nil {
			if list == nil {
				list = []*sbx.VolumeInfo{}
			}
			writeJSON(w, http.StatusOK, api.VolumeList{Volumes: list})
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) inspectVolume(w http.ResponseWriter, r *http.Request) {
	v, err := s.volumes()
	if err == nil {
		var info *sbx.VolumeInfo
		if info, err = v.InspectVolume(r.Context(), r.PathValue("name")); err == nil {
			writeJSON(w, http.StatusOK, info)
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) removeVolume(w http.ResponseWriter, r *http.Request) {
	v, err := s.volumes()
	if err == nil {
		if err = v.RemoveVolume(r.Context(), r.PathValue("name")); err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) pruneVolumes(w http.ResponseWriter, r *http.Request) {
	v, err := s.volumes()
	if err == nil {
		var rep *sbx.VolumePruneReport
		if rep, err = v.PruneVolumes(r.Context()); err == nil {
			writeJSON(w, http.StatusOK, rep)
			return
		}
	}
	s.fail(w, err)
}
