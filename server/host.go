package server

import (
	"net/http"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/version"
	"github.com/sbxrun/sbx/server/api"
)

// hostInfo is GET /v1/info: Config.HostInfo's facts, or the few the
// server knows by itself.
func (s *Server) hostInfo(w http.ResponseWriter, r *http.Request) {
	if s.cfg.HostInfo != nil {
		writeJSON(w, http.StatusOK, s.cfg.HostInfo())
		return
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	info := api.HostInfo{
		Version:      version.Version + " (" + version.Commit + ")",
		Kernel:       unix.ByteSliceToString(uts.Release[:]),
		CgroupMode:   string(cgroup.DetectMode()),
		CgroupParent: "/" + cgroup.Parent(),
	}
	info.CgroupControllers, _ = cgroup.Controllers()
	writeJSON(w, http.StatusOK, info)
}

// gc is POST /v1/gc: the Manager's garbage collection (expired sandboxes,
// interrupted creates and removes, orphaned runtime state).
func (s *Server) gc(w http.ResponseWriter, r *http.Request) {
	rep, err := s.mgr.GC(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.GCReport{Expired: rep.Expired, Interrupted: rep.Interrupted, Stopped: rep.Stopped, Orphans: rep.Orphans})
}
