package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/sandbox/state"
)

// The sandbox's main command (Options.Cmd) runs supervised by its
// executor: exec'd directly (no shell), its output kept in a
// bounded ring with absolute offsets, its end recorded. The host treats
// what the executor says as the sandbox's word: exit codes and output are
// reported, never acted on, and OOM kills come from the sandbox's cgroup.

// mainCmdRecord is how the main command ended and the tail of its output,
// saved in the sandbox's state directory once the host has seen it end
// (Wait, Logs or Stop), so that Wait and Logs answer after the executor
// is gone and from any process that opens the same root.
type mainCmdRecord struct {
	Exit sbx.Exit `json:"exit"`
	// Restarts is how many times the restart policy restarted it.
	Restarts int `json:"restarts,omitempty"`
	// Tail is the latest output, at most mainCmdTailBytes, in order;
	// TailFrom is the offset of its first byte and LogEnd the offset
	// after the last.
	Tail     []sbx.LogFrame `json:"tail,omitempty"`
	TailFrom int64          `json:"tail_from"`
	LogEnd   int64          `json:"log_end"`
}

const (
	mainCmdRecordFile = "maincmd.json"
	// mainCmdTailBytes caps the output kept on disk after the command
	// ended.
	mainCmdTailBytes = 64 << 10
	// mainCmdRecordMax caps the record read back (the tail, JSON-escaped,
	// plus the exit).
	mainCmdRecordMax = 8*mainCmdTailBytes + 64<<10
	// mainCmdSaveTimeout bounds reading the tail from the executor.
	mainCmdSaveTimeout = 10 * time.Second
)

// startMainCmd starts Options.Cmd as the executor's main command. A command
// that cannot start at all (not found, not executable) fails the create.
func (h *Host) startMainCmd(ctx context.Context, sb *sbx.Sandbox) (*sbx.CmdStart, error) {
	c, err := h.executor(sb)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := os.Remove(h.mainCmdRecordPath(sb)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the previous end of the sandbox's command: %w", err)
	}
	spec := execapi.MainCmdSpec{Argv: sb.Options.Cmd, Cwd: sb.Options.Workdir, User: sb.Options.User}
	restartSpec(&spec, sb.Options.Restart)
	st, err := c.StartMainCmd(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start the sandbox's command: %w", err)
	}
	// A command that cannot start fails at once, restart policy or not
	// (the caller removes or stops the sandbox, which ends the restarts).
	if st.Exit != nil && st.Exit.Error != "" && st.Restarts <= 1 {
		return nil, invalid("cmd %q cannot start in the sandbox: %s", sb.Options.Cmd[0], capString(st.Exit.Error, maxExitError))
	}
	cs := &sbx.CmdStart{Status: capString(st.State, maxExecutorWord)}
	if st.Exit != nil {
		code := st.Exit.ExitCode
		cs.ExitCode = &code
	}
	return cs, nil
}

// restartSpec sets the executor's restart policy of the main command from
// p: always and unless-stopped both restart after any exit (no sbx process
// stops a sandbox when it restarts).
func restartSpec(spec *execapi.MainCmdSpec, p sbx.RestartPolicy) {
	switch p.Name {
	case sbx.RestartOnFailure:
		spec.Restart, spec.MaxRestarts = execapi.RestartOnFailure, p.MaxRetries
	case sbx.RestartAlways, sbx.RestartUnlessStopped:
		spec.Restart = execapi.RestartAlways
	}
}

// The executor's words about its main command are capped before they
// reach a record, an event or an error: a hostile executor's reply may be
// as large as the client's reply cap (64 MiB), and a record larger than
// mainCmdRecordMax could not be read back.
const (
	maxExecutorWord = 32   // a signal name ("SIGRTMIN+15") or a state
	maxExitError    = 4096 // why the command could not run
)

// cmdExit is the contract's form of one run's end.
func cmdExit(e *execapi.MainCmdExit) sbx.Exit {
	return sbx.Exit{ExitCode: e.ExitCode, Signal: capString(e.Signal, maxExecutorWord), Error: capString(e.Error, maxExitError),
		StartedAt: e.StartedAt, FinishedAt: e.FinishedAt}
}

// Logs calls fn with the main command's output as o selects, ending with a
// LogEnd frame whose offset is where to resume. After the executor is
// gone it serves the saved tail (a gap frame says what is no longer held).
func (h *Host) Logs(ctx context.Context, ref string, o sbx.LogOptions, fn func(sbx.LogFrame) error) error {
	if o.Since < 0 || o.Tail < 0 {
		return fmt.Errorf("%w: log offsets must not be negative", sbx.ErrInvalid)
	}
	sb, err := h.withCmd(ctx, ref)
	if err != nil {
		return err
	}
	if sb.Status == sbx.StatusPaused && !o.Follow {
		return fmt.Errorf("%w: sandbox %s is paused: resume it first, or follow its logs", sbx.ErrState, sb.ShortID())
	}
	if sb.Status == sbx.StatusRunning || sb.Status == sbx.StatusPaused {
		c, _ := h.executor(sb)
		defer c.Close()
		lo := client.LogOptions{Since: o.Since, TailBytes: -1, Follow: o.Follow}
		if o.Tail > 0 {
			lo.TailBytes = o.Tail
		}
		// fnErr is the caller's own error: it ends the stream as it is,
		// and says nothing about the executor.
		var fnErr error
		end, err := c.MainCmdLogs(ctx, lo, func(f execapi.LogFrame) error {
			fnErr = fn(sbx.LogFrame{Type: f.Type, Offset: f.Offset, Data: f.Data, Time: f.Time, Lost: f.Lost})
			return fnErr
		})
		if fnErr != nil {
			return fnErr
		}
		if err == nil {
			if end.MainCmd != nil && end.MainCmd.State == execapi.MainCmdExited {
				rec := h.saveMainCmd(ctx, sb, c, end.MainCmd)
				h.noteCmdEnd(sb, rec)
			}
			return fn(sbx.LogFrame{Type: sbx.LogEnd, Offset: end.Offset, Time: end.Time})
		}
		if ctx.Err() != nil || !executorGone(err) {
			return err
		}
		// The executor went away meanwhile: what was saved is all there
		// is.
	}
	rec, err := h.mainCmdRecord(sb)
	if err != nil {
		return err
	}
	from := max(o.Since, rec.TailFrom)
	if o.Tail > 0 {
		from = max(rec.LogEnd-o.Tail, rec.TailFrom)
	} else if o.Since < rec.TailFrom {
		if err := fn(sbx.LogFrame{Type: sbx.LogGap, Offset: o.Since, Lost: rec.TailFrom - o.Since}); err != nil {
			return err
		}
	}
	for _, f := range rec.Tail {
		end := f.Offset + int64(len(f.Data))
		if end <= from {
			continue
		}
		if f.Offset < from {
			f.Data, f.Offset = f.Data[from-f.Offset:], from
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return fn(sbx.LogFrame{Type: sbx.LogEnd, Offset: max(rec.LogEnd, from)})
}

// Wait waits until the main command has ended for good and says how. It
// works from any process, and after the executor is gone (from the saved
// record, or as killed with PID 1 when nothing was saved).
func (h *Host) Wait(ctx context.Context, ref string) (*sbx.Exit, error) {
	sb, err := h.withCmd(ctx, ref)
	if err != nil {
		return nil, err
	}
	for sb.Status == sbx.StatusRunning || sb.Status == sbx.StatusPaused {
		c, _ := h.executor(sb)
		st, err := c.WaitMainCmd(ctx)
		if err == nil && st.Exit != nil && st.State == execapi.MainCmdExited {
			rec := h.saveMainCmd(ctx, sb, c, &st)
			c.Close()
			h.noteCmdEnd(sb, rec)
			return &rec.Exit, nil
		}
		c.Close()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err == nil:
			return nil, fmt.Errorf("executor of sandbox %s: its wait ended before its command did", sb.ShortID())
		case !executorGone(err):
			return nil, fmt.Errorf("wait for the command of sandbox %s: %w", sb.ShortID(), err)
		}
		// PID 1 is going or gone: wait for the host to see it, without
		// hammering a sandbox that is only slow to answer.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if sb, err = h.Get(ctx, ref); err != nil {
			return nil, err
		}
	}
	if rec, err := h.mainCmdRecord(sb); err == nil {
		return &rec.Exit, nil
	} else if !errors.Is(err, sbx.ErrNotFound) {
		return nil, err
	}
	// PID 1 ended before the command's end was saved: the command died
	// with it.
	exit := &sbx.Exit{ExitCode: 128 + 9, Signal: "SIGKILL", Error: "the sandbox's PID 1 ended before its command"}
	if sb.Stopped != nil {
		exit.FinishedAt = *sb.Stopped
	}
	return exit, nil
}

// Signal sends a signal ("SIGTERM") to the main command's process group.
// The command's restart policy still applies.
func (h *Host) Signal(ctx context.Context, ref, signal string) error {
	if signal == "" {
		return fmt.Errorf("%w: signal is required, e.g. SIGTERM", sbx.ErrInvalid)
	}
	if err := h.checkDestructiveRef(ref); err != nil {
		return err
	}
	sb, done, err := h.use(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	if len(sb.Options.Cmd) == 0 {
		return noCmd(sb)
	}
	c, _ := h.executor(sb)
	defer c.Close()
	if _, err := c.SignalMainCmd(ctx, signal); err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status == 400 {
			return fmt.Errorf("%w: signal %q: %s", sbx.ErrInvalid, signal, ce.Message)
		}
		return fmt.Errorf("signal the command of sandbox %s: %w", sb.ShortID(), err)
	}
	return nil
}

// stopMainCmd ends the main command of a running sandbox with sig, SIGKILL
// after timeout, and saves how it ended, before PID 1 goes; sb.CmdExit says
// so (the caller, holding the lock, writes sb). Failures are logged: the
// stop goes on without the record.
func (h *Host) stopMainCmd(ctx context.Context, sb *sbx.Sandbox, sig string, timeout time.Duration) {
	if len(sb.Options.Cmd) == 0 || sb.Status != sbx.StatusRunning {
		return
	}
	c, _ := h.executor(sb)
	defer c.Close()
	st, err := c.StopMainCmd(ctx, sig, timeout)
	if err != nil {
		h.log.Warn("stop the sandbox's command", "id", sb.ID, "err", err)
		return
	}
	if st.State == execapi.MainCmdExited && st.Exit != nil {
		rec := h.saveMainCmd(ctx, sb, c, &st)
		if sb.CmdExit == nil {
			exit := rec.Exit
			sb.CmdExit, sb.CmdRestarting, sb.RestartCount = &exit, nil, rec.Restarts
			h.emit(changeCmdEnd, sb)
		}
	}
}

// cmdEndProbe bounds how long List, Inspect and the event watcher ask a
// running sandbox's executor whether its main command has ended.
const cmdEndProbe = time.Second

// cmdEndUnknown reports whether sb runs a main command whose end, if it
// came, is not on record yet.
func cmdEndUnknown(sb *sbx.Sandbox) bool {
	return sb.Status == sbx.StatusRunning && len(sb.Options.Cmd) > 0 && sb.CmdExit == nil && sb.Pool == ""
}

// recordCmdEnd writes into sb's record, under its lock l, that its main
// command ended for good as rec says, and reports it (sbx.EventDied).
func (h *Host) recordCmdEnd(l *state.Lock, sb *sbx.Sandbox, rec mainCmdRecord) error {
	exit := rec.Exit
	sb.CmdExit, sb.CmdRestarting, sb.RestartCount = &exit, nil, rec.Restarts
	if err := l.Write(sb); err != nil {
		sb.CmdExit = nil
		return err
	}
	h.emit(changeCmdEnd, sb)
	return nil
}

// noteCmdEnd records the end of sb's main command, seen without the
// sandbox's lock (Wait, Logs): only when the lock is free at once and the
// record is still of the same run; otherwise the next look (List,
// Inspect, the watcher) records it.
func (h *Host) noteCmdEnd(sb *sbx.Sandbox, rec mainCmdRecord) {
	l, err := h.store.TryLock(sb.ID)
	if err != nil {
		return
	}
	defer l.Unlock()
	var cur sbx.Sandbox
	if l.Read(&cur) != nil || !cmdEndUnknown(&cur) || cur.Pid != sb.Pid || cur.PidStart != sb.PidStart {
		return
	}
	if err := h.recordCmdEnd(l, &cur, rec); err != nil {
		h.log.Warn("record the end of a sandbox's command", "id", sb.ID, "err", err)
	}
}

// probeCmdEnd asks the executor of sb, when its main command's end is not
// on record, whether the command has ended for good, and records it (sb
// is updated; while the command runs or waits to be restarted, sb gets
// its restart count and latest end, not written). It takes the sandbox's lock only when it is free at once
// (a busy sandbox is looked at next time) and asks for at most
// cmdEndProbe; what the executor says is reported, never acted on.
func (h *Host) probeCmdEnd(ctx context.Context, sb *sbx.Sandbox) {
	if !cmdEndUnknown(sb) {
		return
	}
	l, err := h.store.TryLock(sb.ID)
	if err != nil {
		return
	}
	defer l.Unlock()
	var cur sbx.Sandbox
	if l.Read(&cur) != nil || !cmdEndUnknown(&cur) || cur.Pid != sb.Pid || !pid1Alive(&cur) {
		return
	}
	c, _ := h.executor(&cur)
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, cmdEndProbe)
	st, err := c.MainCmd(pctx)
	cancel()
	if err != nil {
		return
	}
	if st.State != execapi.MainCmdExited || st.Exit == nil {
		// Running, or waiting to be restarted: shown, not recorded.
		sb.RestartCount, sb.CmdRestarting = max(st.Restarts, 0), nil
		if st.State == execapi.MainCmdRestarting && st.Exit != nil {
			exit := cmdExit(st.Exit)
			sb.CmdRestarting = &exit
		}
		return
	}
	rec := h.saveMainCmd(ctx, &cur, c, &st)
	if err := h.recordCmdEnd(l, &cur, rec); err != nil {
		h.log.Warn("record the end of a sandbox's command", "id", sb.ID, "err", err)
		return
	}
	*sb = cur
}

// probeCmdEnds runs probeCmdEnd for the sandboxes of list, a few at a
// time.
func (h *Host) probeCmdEnds(ctx context.Context, list []*sbx.Sandbox) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for _, sb := range list {
		if !cmdEndUnknown(sb) {
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			h.probeCmdEnd(ctx, sb)
		}()
	}
	wg.Wait()
}

// withCmd returns the record of a sandbox that has a main command.
func (h *Host) withCmd(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	sb, err := h.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if len(sb.Options.Cmd) == 0 {
		return nil, noCmd(sb)
	}
	return sb, nil
}

func noCmd(sb *sbx.Sandbox) error {
	return fmt.Errorf("%w: sandbox %s has no main command (create it with a cmd)", sbx.ErrState, sb.ShortID())
}

// saveMainCmd records how the main command ended, with the cgroup's word
// on OOM kills and the tail of its output, and returns the record. A
// failure to save is logged: the caller still gets the exit.
func (h *Host) saveMainCmd(ctx context.Context, sb *sbx.Sandbox, c *client.Client, st *execapi.MainCmdStatus) mainCmdRecord {
	rec := mainCmdRecord{LogEnd: max(st.LogEnd, 0), Restarts: max(st.Restarts, 0)}
	if e := st.Exit; e != nil {
		rec.Exit = cmdExit(e)
	}
	if ctr, err := h.container(sb); err == nil {
		if u, err := ctr.Usage(); err == nil && u.OOMKills > 0 && rec.Exit.Signal == "SIGKILL" {
			rec.Exit.OOMKilled = true
		}
	}
	if old, err := h.mainCmdRecord(sb); err == nil && old.LogEnd == rec.LogEnd && old.Exit == rec.Exit && old.Restarts == rec.Restarts {
		return *old
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mainCmdSaveTimeout)
	defer cancel()
	if tail, from, end, err := mainCmdTail(tctx, c); err == nil && end >= rec.LogEnd {
		rec.Tail, rec.TailFrom, rec.LogEnd = tail, from, end
	} else {
		rec.TailFrom = rec.LogEnd
	}
	data, err := json.Marshal(rec)
	if err == nil {
		p := h.mainCmdRecordPath(sb)
		tmp := p + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, p)
		}
	}
	if err != nil {
		h.log.Warn("save the end of a sandbox's command", "id", sb.ID, "err", err)
	}
	return rec
}

// mainCmdTail reads at most mainCmdTailBytes of the main command's latest
// output as frames, and the offsets it covers. The executor's frames are
// checked: in order, contiguous, within the cap.
func mainCmdTail(ctx context.Context, c *client.Client) (tail []sbx.LogFrame, from, end int64, err error) {
	from = -1
	var held int64
	last, err := c.MainCmdLogs(ctx, client.LogOptions{TailBytes: mainCmdTailBytes}, func(f execapi.LogFrame) error {
		if f.Type == execapi.LogGap {
			return nil
		}
		if from < 0 {
			from, end = f.Offset, f.Offset
		}
		held += int64(len(f.Data))
		if f.Offset != end || held > mainCmdTailBytes {
			return errors.New("executor main command logs: the tail is not contiguous or larger than asked")
		}
		end += int64(len(f.Data))
		tail = append(tail, sbx.LogFrame{Type: f.Type, Offset: f.Offset, Data: f.Data, Time: f.Time})
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	if from < 0 {
		from, end = last.Offset, last.Offset
	}
	if last.Offset != end {
		return nil, 0, 0, errors.New("executor main command logs: the tail does not reach the end")
	}
	return tail, from, end, nil
}

func (h *Host) mainCmdRecordPath(sb *sbx.Sandbox) string {
	return filepath.Join(h.store.Dir(sb.ID), mainCmdRecordFile)
}

// mainCmdRecord reads the saved end of the main command; sbx.ErrNotFound
// when none was saved.
func (h *Host) mainCmdRecord(sb *sbx.Sandbox) (*mainCmdRecord, error) {
	f, err := os.Open(h.mainCmdRecordPath(sb))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: sandbox %s: the end of its command was not recorded", sbx.ErrNotFound, sb.ShortID())
		}
		return nil, err
	}
	defer f.Close()
	var rec mainCmdRecord
	dec := json.NewDecoder(io.LimitReader(f, mainCmdRecordMax))
	if err := dec.Decode(&rec); err != nil || !rec.valid() {
		return nil, fmt.Errorf("sandbox %s: the saved end of its command (%s) is damaged; remove the sandbox", sb.ShortID(), mainCmdRecordFile)
	}
	return &rec, nil
}

// valid reports whether the tail's frames are contiguous from TailFrom to
// LogEnd.
func (r *mainCmdRecord) valid() bool {
	at := r.TailFrom
	for _, f := range r.Tail {
		if f.Offset != at || (f.Type != sbx.LogStdout && f.Type != sbx.LogStderr) {
			return false
		}
		at += int64(len(f.Data))
	}
	return r.TailFrom >= 0 && at == r.LogEnd
}

// executorGone reports whether err says the executor cannot be reached
// (PID 1 exiting or gone), as opposed to an answer it gave.
func executorGone(err error) bool {
	var ce *client.Error
	return !errors.As(err, &ce)
}

// capString is s cut to at most n bytes.
func capString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
