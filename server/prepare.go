package server

import (
	"net/http"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// prepareImage builds (once) an image from a base image and a script,
// the same cache key as a local sbx prepare. The build sandbox goes
// through the backend's policy and the concurrent create limit.
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
	release, err := s.admitCreate()
	if err != nil {
		s.fail(w, err)
		return
	}
	defer release()
	opts := sbx.Options{Env: req.Env, User: req.User, Workdir: req.Workdir, Network: req.Network}
	if req.Sandbox != nil {
		if len(req.Env) > 0 || req.User != "" || req.Workdir != "" || req.Network != "" {
			s.fail(w, unprocessable(api.CodeInvalid, "give the build sandbox's options in sandbox or as env, user, workdir and network, not both"))
			return
		}
		opts = *req.Sandbox
	}
	out := &tailBuffer{max: maxPrepareOutput}
	res, err := s.b.Prepare(r.Context(), sbx.PrepareOptions{Base: req.Base, Script: req.Script, Output: out, Sandbox: opts})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PrepareReply{Image: res.Image, Cached: res.Cached, Output: string(out.buf)})
}
