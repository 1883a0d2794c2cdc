package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/sbxrun/sbx"
)

// runTTLMargin is added to a run's timeout to give its sandbox a TTL, so
// the server removes it even if this client dies without cleaning up.
const runTTLMargin = 2 * time.Minute

// createGrace is how long a run's create may still take after a signal or
// the end of the caller's context, so that its sandbox can be removed.
const createGrace = 30 * time.Second

// Run runs one command in a fresh sandbox on the server and removes it:
// create, exec (attach with a terminal or input), stats, remove, on every
// exit path. The image's Entrypoint and Cmd run as docker runs them, as
// locally. A signal on o.Signals, or the end of ctx, removes the sandbox;
// the report then says the command was killed by that signal (SIGKILL
// for ctx). Host mode is sbx.ErrUnsupported.
func (c *Client) Run(ctx context.Context, o sbx.RunOptions) (*sbx.Report, error) {
	if o.Image == "" && o.Rootfs == "" {
		return nil, fmt.Errorf("%w: host mode (sbx run -- CMD) needs this host; with a server give an image or a rootfs (a directory on the server)", sbx.ErrUnsupported)
	}
	if o.Name != "" || o.TTL != 0 || len(o.Labels) > 0 {
		return nil, fmt.Errorf("%w: name, ttl and labels are for long-lived sandboxes (Create), not runs", sbx.ErrInvalid)
	}
	if o.PullProgress != nil && o.Image != "" {
		if _, err := c.InspectImage(ctx, o.Image); errors.Is(err, sbx.ErrNotFound) {
			if _, err := c.PullImage(ctx, o.Image, o.PullProgress); err != nil {
				return nil, err
			}
		}
	}
	create := o.Options
	create.Cmd, create.Labels = nil, map[string]string{"sbx.run": "1"}
	if o.Timeout > 0 {
		create.TTL = o.Timeout + runTTLMargin
	}

	// A signal or the end of ctx ends the run: the command is killed by
	// removing its sandbox.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var caught os.Signal
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case s, ok := <-o.Signals:
			if ok {
				caught = s
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	interrupted := func(rep *sbx.Report) bool {
		if ctx.Err() == nil {
			return false
		}
		cancel()
		<-stopped
		sig := syscall.SIGKILL
		if s, ok := caught.(syscall.Signal); ok {
			sig = s
		}
		rep.Status, rep.ExitCode, rep.Signal = sbx.RunSignaled, 128+int(sig), signalName(sig)
		return true
	}

	rep := &sbx.Report{}
	start := time.Now()
	// A signal does not cut the create short: the server would go on (or
	// roll back) after this client left, and a sandbox whose create reply
	// never arrived has an id this client does not know, so `sbx run`
	// could exit while its sandbox still exists. The create gets
	// createGrace to finish after a signal; then it is removed below.
	cctx, ccancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ccancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-cctx.Done():
			return
		}
		t := time.NewTimer(createGrace)
		defer t.Stop()
		select {
		case <-t.C:
			ccancel()
		case <-cctx.Done():
		}
	}()
	sb, err := c.Create(cctx, create)
	ccancel()
	if err != nil {
		if interrupted(rep) {
			return rep, nil
		}
		return nil, err
	}
	started := time.Now()
	defer func() {
		t := time.Now()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer rcancel()
		_ = c.Remove(rctx, sb.ID, sbx.RemoveOptions{Force: true})
		rep.Timings.TeardownS = time.Since(t).Seconds()
	}()
	argv, err := remoteArgv(sb, &o)
	if err != nil {
		return nil, err
	}
	// Killed at its timeout, as a local run is.
	req := sbx.ExecRequest{Argv: argv, Cwd: o.Workdir, User: o.User, Timeout: o.Timeout, StopSignal: "SIGKILL"}
	var res sbx.ExecResult
	if o.Stdin != nil || o.Tty {
		res, err = c.Attach(ctx, sb.ID, sbx.AttachOptions{ExecRequest: req, Tty: o.Tty, Stdin: o.Stdin,
			Stdout: o.Stdout, Stderr: o.Stderr, Size: o.ConsoleSize, Resize: o.Resize})
	} else {
		res, err = c.Exec(ctx, sb.ID, req, func(f sbx.ExecFrame) error {
			switch {
			case f.Type == sbx.FrameStdout && o.Stdout != nil:
				_, err := o.Stdout.Write([]byte(f.Data))
				return err
			case f.Type == sbx.FrameStderr && o.Stderr != nil:
				_, err := o.Stderr.Write([]byte(f.Data))
				return err
			}
			return nil
		})
	}
	ran := time.Now()
	rep.WallTimeS = ran.Sub(started).Seconds()
	rep.Timings = sbx.Timings{StartS: started.Sub(start).Seconds(), CommandS: ran.Sub(started).Seconds()}
	if interrupted(rep) {
		return rep, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run in sandbox %s: %w", sb.ID, err)
	}
	// The usage of the whole sandbox (its executor included), read before
	// it is removed.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	if u, err := c.Stats(sctx, sb.ID); err == nil {
		rep.CPUTimeS, rep.UserTimeS, rep.SysTimeS = u.CPUTimeS, u.UserTimeS, u.SysTimeS
		rep.MemoryPeakBytes, rep.OOMKilled = u.MemoryPeakBytes, u.OOMKills > 0
		if u.PidsPeak > 0 {
			p := u.PidsPeak
			rep.PidsPeak = &p
		}
	}
	scancel()
	switch {
	case res.TimedOut:
		rep.Status, rep.ExitCode, rep.TimedOut, rep.Signal = sbx.RunTimeout, sbx.ExitTimeout, true, "SIGKILL"
	case res.Signal != "":
		rep.Status, rep.ExitCode, rep.Signal = sbx.RunSignaled, res.ExitCode, res.Signal
		if rep.OOMKilled && res.Signal == "SIGKILL" {
			rep.Status, rep.ExitCode = sbx.RunOOM, sbx.ExitOOM
		}
	case res.ExitCode != 0:
		rep.Status, rep.ExitCode = sbx.RunNonzeroExit, res.ExitCode
	default:
		rep.Status = sbx.RunOK
	}
	return rep, nil
}

// remoteArgv is the command of a remote run: the image's Entrypoint and
// Cmd (from the create's reply) with the run's over them, as docker runs
// an image; with a rootfs, the run's own.
func remoteArgv(sb *sbx.Sandbox, o *sbx.RunOptions) ([]string, error) {
	if sb.Image == nil {
		argv := append(append([]string{}, o.Entrypoint...), o.Cmd...)
		if len(argv) == 0 {
			return nil, fmt.Errorf("%w: no command given", sbx.ErrInvalid)
		}
		return argv, nil
	}
	cfg := sbx.ImageConfig{Entrypoint: sb.Image.Entrypoint, Cmd: sb.Image.Cmd}
	p, err := cfg.Process(o.Entrypoint, o.Cmd, nil, "", "")
	if err != nil {
		return nil, fmt.Errorf("%w: image %s: %w", sbx.ErrInvalid, o.Image, err)
	}
	return p.Args, nil
}

// signalName names a signal the way reports do (SIGINT).
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL",
		syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT"}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}
