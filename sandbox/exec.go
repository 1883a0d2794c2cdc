package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/executor/client"
)

// executor returns a client for the executor of a running sandbox; the
// caller closes it. The executor is untrusted: the client caps every reply
// and puts a deadline on every call.
func (h *Host) executor(sb *sbx.Sandbox) (*client.Client, error) {
	return client.New(sb.Socket, client.Options{}), nil
}

// Exec runs a command in a running sandbox through its executor. With
// onOutput, output is streamed to it as it is produced; the result comes
// last either way.
func (h *Host) Exec(ctx context.Context, ref string, req sbx.ExecRequest, onOutput func(sbx.ExecFrame) error) (sbx.ExecResult, error) {
	sb, done, err := h.use(ctx, ref)
	if err != nil {
		return sbx.ExecResult{}, err
	}
	defer done()
	c, _ := h.executor(sb)
	defer c.Close()
	ctx, stop := h.watchFrozen(ctx, sb)
	defer stop()
	oom := h.watchOOM(sb)
	var res sbx.ExecResult
	if onOutput == nil {
		res, err = c.Exec(ctx, req)
	} else {
		res, err = c.ExecStream(ctx, req, onOutput)
	}
	res = oom.note(res)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errFrozen) {
		err = fmt.Errorf("%w: sandbox %s is frozen though its record says running (sbx resume %s thaws it)", sbx.ErrState, sb.ShortID(), sb.ShortID())
	}
	return res, err
}

// oomWatch is a sandbox's OOM kill count, read from the host's side of
// its cgroup, when a command started.
type oomWatch struct {
	id     string
	before uint64
	err    error
}

func (h *Host) watchOOM(sb *sbx.Sandbox) oomWatch {
	n, err := cgroup.OOMKills(sb.ID)
	return oomWatch{id: sb.ID, before: n, err: err}
}

// note decides res.OOMKilled from the host's count, never from the
// executor's word: the command died of SIGKILL, not at its timeout, and
// the count rose while it ran.
func (w oomWatch) note(res sbx.ExecResult) sbx.ExecResult {
	res.OOMKilled = false
	if w.err == nil && res.Signal == "SIGKILL" && !res.TimedOut {
		if n, err := cgroup.OOMKills(w.id); err == nil && n > w.before {
			res.OOMKilled = true
		}
	}
	return res
}

// errFrozen is the cause of an exec cancelled by watchFrozen.
var errFrozen = errors.New("sandbox frozen")

// frozenCheckEvery is how often a long exec checks that its sandbox is
// not frozen behind its record's back.
const frozenCheckEvery = 2 * time.Second

// watchFrozen gives an exec a deadline against a sandbox that is frozen
// while its record says running (nothing in it can answer): every
// frozenCheckEvery, once the exec has run that long, it reads the record
// and the freezer, and cancels ctx with errFrozen when the sandbox is
// frozen and the record does not say paused (a pause recorded by sbx pause
// or a reading export is waited out). Short execs cost nothing.
func (h *Host) watchFrozen(ctx context.Context, sb *sbx.Sandbox) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(frozenCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var cur sbx.Sandbox
			if h.store.Read(sb.ID, &cur) != nil || cur.Status != sbx.StatusRunning {
				continue
			}
			if ctr, err := h.container(&cur); err == nil && ctr.Status() == "paused" {
				cancel(errFrozen)
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}
