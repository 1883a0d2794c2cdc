package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/fifo"
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
	}
}

// run forwards the logs and waits for the main command; it returns when
// the command has ended (and its output is in the FIFOs) or the handle is
// cancelled.
func (h *taskHandle) run() {
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
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
	case <-logsDone:
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

// forwardLogs copies the main command's output into the task's stdout and
// stderr FIFOs, from the offset saved by the previous forwarder (a
// restarted plugin resumes where the old one stopped), until the command
// has ended for good. When a write fails (the FIFOs' reader, Nomad's
// logmon, was replaced: a restarted client reattaches to the old one and
// then starts a new one), the FIFOs are opened again and the output
// resumes from the last offset written.
func (h *taskHandle) forwardLogs() {
	if h.cfg.StdoutPath == "" || h.cfg.StderrPath == "" {
		return
	}
	off := newOffsetFile(filepath.Join(h.cfg.TaskDir().Dir, ".sbx-log-offset"))
	since := off.load()
	defer off.save(true)
	for attempt := 0; ; attempt++ {
		err := h.forwardOnce(&since, off)
		if err == nil || h.ctx.Err() != nil || errors.Is(err, sbx.ErrNotFound) || errors.Is(err, sbx.ErrState) {
			return
		}
		h.logger.Debug("log forwarding interrupted; resuming", "offset", since, "error", err)
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(time.Duration(min(attempt+1, 5)) * time.Second):
		}
	}
}

// forwardOnce opens the FIFOs (waiting for their reader) and forwards the
// output from *since until the command has ended for good or a write or
// the stream fails.
func (h *taskHandle) forwardOnce(since *int64, off *offsetFile) error {
	stdout, err := openFIFO(h.ctx, h.cfg.StdoutPath)
	if err != nil {
		return fmt.Errorf("open the stdout log fifo: %w", err)
	}
	defer stdout.Close()
	stderr, err := openFIFO(h.ctx, h.cfg.StderrPath)
	if err != nil {
		return fmt.Errorf("open the stderr log fifo: %w", err)
	}
	defer stderr.Close()
	return h.sbxs.Logs(h.ctx, h.sandboxID, sbx.LogOptions{Since: *since, Follow: true}, func(f sbx.LogFrame) error {
		var w io.Writer
		switch f.Type {
		case sbx.LogStdout:
			w = stdout
		case sbx.LogStderr:
			w = stderr
		case sbx.LogGap:
			fmt.Fprintf(stderr, "[sbx: %d bytes of output were lost: the sandbox keeps only the latest]\n", f.Lost)
			*since = f.Offset + f.Lost
			off.set(*since)
			return nil
		case sbx.LogEnd:
			*since = f.Offset
			off.set(*since)
			return nil
		default:
			return nil
		}
		if _, err := io.WriteString(w, f.Data); err != nil {
			return fmt.Errorf("write to the log fifo: %w", err)
		}
		*since = f.Offset + int64(len(f.Data))
		off.set(*since)
		return nil
	})
}

// openFIFO opens a log FIFO for writing; it blocks until the reader (the
// client's logmon) has it open, so ctx bounds it.
func openFIFO(ctx context.Context, path string) (io.WriteCloser, error) {
	type result struct {
		w   io.WriteCloser
		err error
	}
	ch := make(chan result, 1)
	go func() {
		w, err := fifo.OpenWriter(path)
		ch <- result{w, err}
	}()
	select {
	case r := <-ch:
		return r.w, r.err
	case <-ctx.Done():
		// Unblock the open by being a reader ourselves, then close both.
		if rf, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
			if r := <-ch; r.w != nil {
				r.w.Close()
			}
			rf.Close()
		}
		return nil, ctx.Err()
	}
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

// offsetFile keeps the log offset forwarded so far in the task directory
// (Nomad's, not visible in the sandbox), written at most once a second.
type offsetFile struct {
	path    string
	cur     int64
	written int64
	last    time.Time
}

func newOffsetFile(path string) *offsetFile { return &offsetFile{path: path, written: -1} }

func (o *offsetFile) load() int64 {
	b, err := os.ReadFile(o.path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	o.cur, o.written = n, n
	return n
}

func (o *offsetFile) set(n int64) {
	o.cur = n
	o.save(false)
}

func (o *offsetFile) save(force bool) {
	if o.cur == o.written || (!force && time.Since(o.last) < time.Second) {
		return
	}
	tmp := o.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(o.cur, 10)), 0o600); err != nil {
		return
	}
	if os.Rename(tmp, o.path) == nil {
		o.written, o.last = o.cur, time.Now()
	}
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
