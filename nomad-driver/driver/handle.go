package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// taskState is what the task handle keeps for RecoverTask: enough to find
// the sandbox again and report its network.
type taskState struct {
	SandboxID string
	StartedAt time.Time
	Network   *drivers.DriverNetwork
}

// taskHandle follows one task's sandbox: it forwards the main command's
// output into Nomad's log FIFOs and waits for the command to end.
type taskHandle struct {
	cfg       *drivers.TaskConfig
	sandboxID string
	startedAt time.Time
	network   *drivers.DriverNetwork
	sbxs      sbx.Sandboxes
	logger    hclog.Logger

	// cancel stops the log forwarding and the wait (destroy, or the
	// plugin going away).
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed once exit is set.
	done chan struct{}
	// logsDone is closed when the log forwarding has returned.
	logsDone chan struct{}

	mu          sync.Mutex
	completedAt time.Time
	exit        *drivers.ExitResult
}

func newTaskHandle(parent context.Context, sbxs sbx.Sandboxes, cfg *drivers.TaskConfig, st taskState, logger hclog.Logger) *taskHandle {
	ctx, cancel := context.WithCancel(parent)
	return &taskHandle{
		cfg:       cfg,
		sandboxID: st.SandboxID,
		startedAt: st.StartedAt,
		network:   st.Network,
		sbxs:      sbxs,
		logger:    logger.With("alloc_id", cfg.AllocID, "task", cfg.Name, "sandbox", st.SandboxID),
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		logsDone:  make(chan struct{}),
	}
}

// run forwards the logs and waits for the main command; it returns when
// the command has ended (and its output is in the FIFOs) or the handle is
// cancelled.
func (h *taskHandle) run() {
	go func() {
		defer close(h.logsDone)
		h.forwardLogs()
	}()
	exit, err := h.wait()
	if h.ctx.Err() != nil {
		// Destroyed, or the plugin is going away: the task goes on, and
		// the next plugin recovers it.
		return
	}
	res := exitResult(exit, err)
	// The output of a command that ended is complete: let it reach the
	// FIFOs before Nomad learns the task ended (bounded: the FIFOs' reader
	// may be gone).
	select {
	case <-h.logsDone:
	case <-time.After(10 * time.Second):
		h.logger.Warn("log forwarding did not finish 10s after the task ended")
	}
	h.mu.Lock()
	h.exit = res
	h.completedAt = time.Now()
	h.mu.Unlock()
	close(h.done)
}

// wait waits for the main command to end. A failed wait while the
// sandbox still runs (its executor restarting, a transient error) is
// retried for a while rather than taken for the task's end.
func (h *taskHandle) wait() (*sbx.Exit, error) {
	for attempt := 0; ; attempt++ {
		exit, err := h.sbxs.Wait(h.ctx, h.sandboxID)
		if err == nil || h.ctx.Err() != nil || attempt >= 30 || errors.Is(err, sbx.ErrNotFound) || errors.Is(err, sbx.ErrUnsupported) {
			return exit, err
		}
		sb, gerr := h.sbxs.Get(h.ctx, h.sandboxID)
		if gerr != nil || sb.Status != sbx.StatusRunning {
			return exit, err
		}
		h.logger.Debug("waiting for the task failed while its sandbox runs; retrying", "error", err)
		select {
		case <-h.ctx.Done():
			return nil, h.ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// exitResult converts how the main command ended into Nomad's terms.
func exitResult(exit *sbx.Exit, err error) *drivers.ExitResult {
	if err != nil {
		return &drivers.ExitResult{ExitCode: -1, Err: fmt.Errorf("sbx: waiting for the task: %w", err)}
	}
	res := &drivers.ExitResult{ExitCode: exit.ExitCode, OOMKilled: exit.OOMKilled}
	if exit.Signal != "" {
		res.Signal = int(unix.SignalNum(exit.Signal))
	}
	if exit.Error != "" {
		res.Err = errors.New(exit.Error)
	}
	return res
}

// isRunning reports whether the main command has not ended yet.
func (h *taskHandle) isRunning() bool {
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// status is the handle's TaskStatus.
func (h *taskHandle) status() *drivers.TaskStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := &drivers.TaskStatus{
		ID:               h.cfg.ID,
		Name:             h.cfg.Name,
		State:            drivers.TaskStateRunning,
		StartedAt:        h.startedAt,
		DriverAttributes: map[string]string{"sandbox_id": h.sandboxID},
		NetworkOverride:  h.network,
	}
	if h.exit != nil {
		st.State = drivers.TaskStateExited
		st.CompletedAt = h.completedAt
		st.ExitResult = h.exit.Copy()
	}
	return st
}

// exitResult returns how the task ended, once it has.
func (h *taskHandle) exitResult() *drivers.ExitResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.exit.Copy()
}

// taskStore holds the handles of the tasks this plugin process follows.
type taskStore struct {
	mu    sync.RWMutex
	tasks map[string]*taskHandle
}

func newTaskStore() *taskStore { return &taskStore{tasks: map[string]*taskHandle{}} }

func (s *taskStore) get(id string) (*taskHandle, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.tasks[id]
	return h, ok
}

// add stores h unless a handle for its task exists; it reports whether h
// was stored.
func (s *taskStore) add(h *taskHandle) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[h.cfg.ID]; ok {
		return false
	}
	s.tasks[h.cfg.ID] = h
	return true
}

func (s *taskStore) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, id)
}

// all returns every handle.
func (s *taskStore) all() []*taskHandle {
	s.mu.RLock()
	defer s.mu.RUnlock()
	hs := make([]*taskHandle, 0, len(s.tasks))
	for _, h := range s.tasks {
		hs = append(hs, h)
	}
	return hs
}
