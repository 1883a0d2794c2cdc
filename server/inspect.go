package server

import (
	"net/http"
	"strconv"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	var f sbx.Filter
	q := r.URL.Query()
	for _, l := range q["label"] {
		if err := f.ParseLabel(l); err != nil {
			s.fail(w, badRequest("label filter %q: want key=value", l))
			return
		}
	}
	f.Status = sbx.Status(q.Get("status"))
	f.Name = q.Get("name")
	for name, dst := range map[string]*bool{"running": &f.Running, "pooled": &f.Pooled} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				s.fail(w, badRequest("%s=%q: want true or false", name, v))
				return
			}
			*dst = b
		}
	}
	list, err := s.b.List(r.Context(), f)
	if err != nil {
		s.fail(w, err)
		return
	}
	if list == nil {
		list = []*sbx.Sandbox{}
	}
	writeJSON(w, http.StatusOK, api.SandboxList{Sandboxes: list})
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.b.Inspect(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}
