package server

import (
	"context"
	"time"
)

// keepPool keeps Config.NetworkPool prepared bridged namespaces waiting:
// it fills the pool at start and after every bridged create (refill
// signals), in the background, until Shutdown.
func (s *Server) keepPool() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		s.topUpPool(ctx)
		select {
		case <-s.done:
			return
		case <-s.refill:
		}
	}
}

// topUpPool prefills the pool up to Config.NetworkPool.
func (s *Server) topUpPool(ctx context.Context) {
	n, err := s.mgr.Network()
	if err != nil {
		s.log.Warn("network pool: open the network", "err", err)
		return
	}
	have, err := n.Pooled()
	if err != nil {
		s.log.Warn("network pool: count", "err", err)
		return
	}
	if have >= s.cfg.NetworkPool {
		return
	}
	t0 := time.Now()
	added, err := n.Prefill(ctx, s.cfg.NetworkPool-have)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("network pool: prefill", "added", added, "err", err)
		return
	}
	s.log.Debug("network pool filled", "added", added, "seconds", time.Since(t0).Seconds())
}

// askRefill wakes keepPool after a bridged create took a namespace.
func (s *Server) askRefill() {
	if s.cfg.NetworkPool <= 0 {
		return
	}
	select {
	case s.refill <- struct{}{}:
	default: // a refill is already due
	}
}

// drainPool removes the prepared namespaces at Close.
func (s *Server) drainPool() {
	if s.cfg.NetworkPool <= 0 {
		return
	}
	n, err := s.mgr.Network()
	if err != nil {
		s.log.Warn("network pool: open the network", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.DrainPool(ctx); err != nil {
		s.log.Warn("network pool: drain (run sbx gc)", "err", err)
	}
}
