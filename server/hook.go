package server

import (
	"sync"

	"github.com/sbxrun/sbx/sandbox"
)

// ManagerEvents forwards the Manager's own events (sandbox.Config.Events)
// to a Server, so that changes made through the Manager are reported the
// moment they happen (a create as soon as it is recorded, a TTL removal
// when it is done) rather than at the next look at the state. The Manager
// is built before the Server, hence the late binding:
//
//	var fwd server.ManagerEvents
//	m, _ := sandbox.New(sandbox.Config{Events: fwd.Handle})
//	s, _ := server.New(server.Config{Manager: m, ManagerEvents: &fwd})
//
// Events before the Server exists are dropped; the Server's first look at
// the state covers them.
type ManagerEvents struct {
	mu sync.Mutex
	s  *Server
}

// Handle is the sandbox.Config.Events function.
func (f *ManagerEvents) Handle(e sandbox.Event) {
	f.mu.Lock()
	s := f.s
	f.mu.Unlock()
	if s != nil {
		s.managerEvent(e)
	}
}

func (f *ManagerEvents) bind(s *Server) {
	f.mu.Lock()
	f.s = s
	f.mu.Unlock()
}

// managerEvent turns a Manager event into the tracker's state, which emits
// the server's events for the transition (once, whoever sees it first).
func (s *Server) managerEvent(e sandbox.Event) {
	status := map[string]sandbox.Status{
		sandbox.EventCreated: sandbox.StatusCreating,
		sandbox.EventReady:   sandbox.StatusRunning,
		sandbox.EventPaused:  sandbox.StatusPaused,
		sandbox.EventResumed: sandbox.StatusRunning,
		sandbox.EventStopped: sandbox.StatusStopped,
		sandbox.EventStarted: sandbox.StatusRunning,
	}
	switch st, ok := status[e.Type]; {
	case ok:
		s.tracker.observe(&sandbox.Sandbox{ID: e.ID, Name: e.Name, Status: st})
	case e.Type == sandbox.EventRemoved:
		s.tracker.goneNamed(e.ID, e.Name)
		s.proxy.forget(e.ID)
	}
}
