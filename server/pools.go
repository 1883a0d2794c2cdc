package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// The warm pool routes (/v1/pools): definitions and their members, over
// the backend's sbx.Pools. A create that matches a pool claims a member
// through POST /v1/sandboxes as usual.

// pools is the backend as sbx.Pools, or an error for one without pools.
func (s *Server) pools() (sbx.Pools, error) {
	p, ok := s.b.(sbx.Pools)
	if !ok {
		return nil, fmt.Errorf("%w: this server's backend has no warm pools", sbx.ErrUnsupported)
	}
	return p, nil
}

func (s *Server) createPool(w http.ResponseWriter, r *http.Request) {
	var spec sbx.PoolSpec
	if err := s.decodeJSON(w, r, &spec, false); err != nil {
		s.fail(w, err)
		return
	}
	p, err := s.pools()
	if err == nil {
		var pool *sbx.Pool
		if pool, err = p.CreatePool(r.Context(), spec); err == nil {
			w.Header().Set("Location", "/v1/pools/"+pool.Name)
			writeJSON(w, http.StatusCreated, pool)
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) listPools(w http.ResponseWriter, r *http.Request) {
	p, err := s.pools()
	if err == nil {
		var list []*sbx.Pool
		if list, err = p.ListPools(r.Context()); err == nil {
			if list == nil {
				list = []*sbx.Pool{}
			}
			writeJSON(w, http.StatusOK, api.PoolList{Pools: list})
			return
		}
	}
	s.fail(w, err)
}

func (s *Server) getPool(w http.ResponseWriter, r *http.Request) {
	p, err := s.pools()
	if err == nil {
		var pool *sbx.Pool
		if pool, err = p.GetPool(r.Context(), r.PathValue("name")); err == nil {
			writeJSON(w, http.StatusOK, pool)
			return
		}
	}
	s.fail(w, err)
}

// poolOp runs a pool operation that returns a report.
func (s *Server) poolOp(op func(p sbx.Pools, ctx context.Context, name string) (*sbx.PoolReport, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.pools()
		if err == nil {
			var rep *sbx.PoolReport
			if rep, err = op(p, r.Context(), r.PathValue("name")); err == nil {
				writeJSON(w, http.StatusOK, rep)
				return
			}
		}
		s.fail(w, err)
	}
}
