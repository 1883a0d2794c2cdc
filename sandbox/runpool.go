package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// One-shot runs claim too: a run whose options match a warm pool's key
// runs its command in a claimed member (personalised as a create's claim
// is) through the member's executor, and the member is removed when the
// command has ended. The report's figures come from the host where it
// can tell: CPU time, peak memory and OOM kills from the member's cgroup,
// the wall time from the host's clock, the timeout from the host's timer
// (the executor's own deadline ends the command first); the exit code and
// signal are the executor's wait status of the command. A run with a
// terminal or input runs cold (the pooled path has neither).

// runPooled runs o's command in a claimed pool member. It returns nil and
// the miss reason when no member could be had: the caller runs cold.
func (h *Host) runPooled(ctx context.Context, o *sbx.RunOptions, policy *sbx.Policy) (*sbx.Report, string, error) {
	if o.Tty || o.Stdin != nil || (o.Image == "" && o.Rootfs == "") || o.Name != "" || o.TTL != 0 || len(o.Labels) > 0 {
		return nil, "", nil
	}
	if len(o.Cmd) == 0 && o.Image == "" {
		return nil, "", nil
	}
	if names, err := h.poolNames(); err != nil || len(names) == 0 {
		return nil, "no pool defined", nil // without resolving the image twice
	}
	opts := o.Options
	opts.Cmd, opts.AutoRemove = nil, false
	if err := h.checkOptions(&opts, true, policy); err != nil {
		return nil, "", nil // the cold path reports it
	}
	t0 := time.Now()
	root, release, err := h.resolveRoot(ctx, &opts, o.PullProgress)
	if err != nil {
		return nil, "", nil
	}
	proc := sbx.Process{Args: o.Cmd, Cwd: o.Workdir, User: o.User}
	if root.config != nil {
		if proc, err = root.config.Process(o.Entrypoint, o.Cmd, o.Env, o.Workdir, o.User); err != nil {
			release()
			return nil, "", nil
		}
	} else if o.Entrypoint != nil {
		proc.Args = append(append([]string{}, o.Entrypoint...), o.Cmd...)
	}
	if len(proc.Args) == 0 {
		release()
		return nil, "", nil
	}
	sb, reason, err := h.claimOrReason(ctx, &opts, root.info, t0)
	release()
	if sb == nil || err != nil {
		return nil, reason, err
	}
	rep := &sbx.Report{Timings: sbx.Timings{Pool: "hit, " + sb.FromPool, StartS: time.Since(t0).Seconds()}}
	defer func() {
		tr := time.Now()
		if err := h.Remove(context.WithoutCancel(ctx), sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			h.log.Warn("remove the pool member of a run", "id", sb.ID, "err", err)
		}
		rep.Timings.TeardownS = time.Since(tr).Seconds()
	}()
	return rep, "", h.runInMember(ctx, sb, proc, o, rep)
}

// runInMember runs proc in the claimed sandbox sb as o asks and fills in
// rep.
func (h *Host) runInMember(ctx context.Context, sb *sbx.Sandbox, proc sbx.Process, o *sbx.RunOptions, rep *sbx.Report) error {
	before, _ := h.Stats(ctx, sb.ID)
	// Killed at its timeout, as a run in a sandbox of its own is.
	req := sbx.ExecRequest{Argv: proc.Args, Cwd: proc.Cwd, User: proc.User, StopSignal: "SIGKILL", Timeout: o.Timeout}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var signal os.Signal
	var timedOut bool
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		var timer <-chan time.Time
		if o.Timeout > 0 {
			t := time.NewTimer(o.Timeout + time.Second) // the executor's deadline comes first
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-stop:
		case <-timer:
			timedOut = true
			cancel()
		case s, ok := <-o.Signals:
			if ok {
				signal = s
			}
			cancel()
		}
	}()
	t := time.Now()
	res, err := h.Exec(rctx, sb.ID, req, func(f sbx.ExecFrame) error {
		switch f.Type {
		case sbx.FrameStdout:
			_, err := io.WriteString(writerOr(o.Stdout), f.Data)
			return err
		case sbx.FrameStderr:
			_, err := io.WriteString(writerOr(o.Stderr), f.Data)
			return err
		}
		return nil
	})
	rep.WallTimeS = time.Since(t).Seconds()
	rep.Timings.CommandS = rep.WallTimeS
	close(stop)
	<-watched
	after, serr := h.Stats(context.WithoutCancel(ctx), sb.ID)
	if serr == nil && before != nil {
		rep.CPUTimeS = max(after.CPUTimeS-before.CPUTimeS, 0)
		rep.UserTimeS = max(after.UserTimeS-before.UserTimeS, 0)
		rep.SysTimeS = max(after.SysTimeS-before.SysTimeS, 0)
		rep.MemoryPeakBytes = after.MemoryPeakBytes
		rep.OOMKilled = after.OOMKills > before.OOMKills
		if after.PidsPeak > 0 {
			p := after.PidsPeak
			rep.PidsPeak = &p
		}
	}
	switch {
	case timedOut || res.TimedOut:
		rep.Status, rep.ExitCode, rep.Signal, rep.TimedOut = sbx.RunTimeout, sbx.ExitTimeout, "SIGKILL", true
	case signal != nil:
		n := signal.(unix.Signal)
		rep.Status, rep.ExitCode, rep.Signal = sbx.RunSignaled, 128+int(n), unix.SignalName(n)
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("run in pool member %s: %w", sb.ShortID(), err)
	default:
		rep.ExitCode, rep.Signal = res.ExitCode, res.Signal
	}
	if rep.OOMKilled && rep.Status == "" && (rep.Signal == "SIGKILL" || rep.ExitCode != 0) {
		rep.Status, rep.ExitCode = sbx.RunOOM, sbx.ExitOOM
	}
	if rep.Status == "" && (rep.ExitCode == sbx.ExitNotFound || rep.ExitCode == sbx.ExitCannotExec) && res.CPUTimeS == 0 && rep.Signal == "" {
		rep.Status, rep.Error = sbx.RunError, fmt.Sprintf("the command could not be executed (exit %d)", rep.ExitCode)
	}
	settleStatus(rep)
	return nil
}
