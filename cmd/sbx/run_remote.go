package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/sandbox"
)

// remoteRunTTLMargin is added to --timeout to give a remote run's sandbox
// a TTL, so the server removes it even if this CLI dies without cleaning
// up (kill -9, lost connection).
const remoteRunTTLMargin = 2 * time.Minute

// runRemote is `sbx run --host`: create a sandbox on the server, run the
// command through its executor with streamed output, read its usage and
// remove it, on every exit path and on SIGINT/SIGTERM too. With -i or -t
// the command is attached instead (stdin streamed, a terminal).
func runRemote(cmd *cobra.Command, o *runOptions, args []string) error {
	fail := func(err error) error { return &exitError{code: exitSbxFailed, msg: err.Error()} }
	if err := rejectRemoteImageFlags(cmd, "pull", "platform", "insecure-registry"); err != nil {
		return err
	}
	opts, argv, err := o.remoteOptions(cmd, args)
	if err != nil {
		return fail(err)
	}
	req := execapi.ExecRequest{Argv: argv, Cwd: o.workdir, User: o.user, TimeoutS: o.timeout.Seconds()}
	b, err := openSandboxes()
	if err != nil {
		return sbxError(err)
	}

	// A SIGINT or SIGTERM ends the run: the command is killed by removing
	// its sandbox, and sbx exits 128+signal as the command would have.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var caught os.Signal
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case caught = <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	interrupted := func() (int, bool) {
		cancel()
		<-stopped
		if s, ok := caught.(syscall.Signal); ok {
			return 128 + int(s), true
		}
		return 0, false
	}

	start := time.Now()
	sb, err := b.Create(ctx, opts)
	if err != nil {
		if code, ok := interrupted(); ok {
			return exitWith(code)
		}
		return sbxError(err)
	}
	started := time.Now()
	remove := func() float64 {
		t := time.Now()
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		if err := b.Remove(rctx, sb.ID, true); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			fmt.Fprintf(cmd.ErrOrStderr(), "sbx: remove sandbox %s on %s: %v\n", sb.ID, remoteHost, err)
		}
		return time.Since(t).Seconds()
	}

	var res execapi.ExecResult
	var execErr error
	if o.interactive || o.tty {
		// Input streamed, a terminal when asked: the executor's attach.
		res, execErr = attachExecutor(ctx, cmd, b, sb.ID, execapi.AttachRequest{ExecRequest: req, Tty: o.tty}, o.interactive)
		execErr = remoteErr(execErr)
	} else {
		stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
		res, execErr = b.Exec(ctx, sb.ID, req, func(f execapi.ExecFrame) error {
			switch f.Type {
			case execapi.FrameStdout:
				_, err := io.WriteString(stdout, f.Data)
				return err
			case execapi.FrameStderr:
				_, err := io.WriteString(stderr, f.Data)
				return err
			}
			return nil
		})
	}
	ran := time.Now()
	if code, ok := interrupted(); ok {
		remove()
		return exitWith(code)
	}
	rep := &sandbox.Report{
		WallTimeS: ran.Sub(started).Seconds(),
		Timings:   sandbox.Timings{StartS: started.Sub(start).Seconds(), CommandS: ran.Sub(started).Seconds()},
	}
	if execErr == nil && (o.report != "" || o.stats) {
		// The usage of the whole sandbox (its executor included), read
		// before it is removed.
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		if u, err := b.Stats(sctx, sb.ID); err == nil {
			rep.CPUTimeS, rep.UserTimeS, rep.SysTimeS = u.CPUTime.Seconds(), u.UserTime.Seconds(), u.SysTime.Seconds()
			rep.MemoryPeakBytes, rep.OOMKilled = u.MemoryPeak, u.OOMKills > 0
			if u.PidsPeak > 0 {
				p := u.PidsPeak
				rep.PidsPeak = &p
			}
		}
		scancel()
	}
	rep.Timings.TeardownS = remove()
	switch {
	case execErr != nil:
		rep.Status, rep.ExitCode, rep.Error = sandbox.StatusError, exitSbxFailed, execErr.Error()
	case res.TimedOut:
		rep.Status, rep.ExitCode, rep.TimedOut = sandbox.StatusTimeout, exitTimeout, true
	case res.Signal != "":
		rep.Status, rep.ExitCode = sandbox.StatusSignaled, res.ExitCode
		rep.Signal = res.ExitCode - 128
		if rep.OOMKilled && res.Signal == "SIGKILL" {
			rep.Status = sandbox.StatusOOM
		}
	case res.ExitCode != 0:
		rep.Status, rep.ExitCode = sandbox.StatusNonzeroExit, res.ExitCode
	default:
		rep.Status = sandbox.StatusOK
	}
	if err := writeReport(o.report, o.stats, rep, cmd.ErrOrStderr()); err != nil {
		return fail(err)
	}
	if execErr != nil {
		return sbxError(fmt.Errorf("run in sandbox %s: %w", sb.ID, execErr))
	}
	return exitWith(rep.ExitCode)
}

// remoteOptions turns the flags and arguments of a remote run into the
// create request and the command. The first argument is always an image
// (unless --rootfs, a path on the server, is given); host mode needs the
// host itself.
func (o *runOptions) remoteOptions(cmd *cobra.Command, args []string) (sandbox.Options, []string, error) {
	var opts sandbox.Options
	if o.timeout < 0 {
		return opts, nil, errors.New("invalid --timeout: must be positive")
	}
	if o.workdir != "" && !filepath.IsAbs(o.workdir) {
		return opts, nil, fmt.Errorf("invalid --workdir %q: must be an absolute path", o.workdir)
	}
	command := args
	switch {
	case o.rootfs != "":
		opts.Rootfs = o.rootfs // a path on the server, checked by its policy
	case cmd.Flags().ArgsLenAtDash() == 0 || strings.HasPrefix(args[0], "/") || strings.HasPrefix(args[0], "."):
		return opts, nil, errors.New("host mode (sbx run -- CMD) needs this host; with --host give an image or --rootfs (a directory on the server)")
	default:
		opts.Image = args[0]
		command = args[1:]
	}
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if cmd.Flags().Changed("entrypoint") && o.entrypoint != "" {
		command = append([]string{o.entrypoint}, command...)
	}
	if len(command) == 0 {
		return opts, nil, errors.New("sbx run --host needs a command after the image (the image's own entrypoint and cmd are not known to the client)")
	}
	limits, err := o.limits()
	if err != nil {
		return opts, nil, err
	}
	disk, err := o.diskBytes()
	if err != nil {
		return opts, nil, err
	}
	if _, err := o.networkOptions(); err != nil {
		return opts, nil, err
	}
	if opts.Env, err = o.environ(); err != nil {
		return opts, nil, err
	}
	opts.Limits = sandbox.Limits{MemoryBytes: limits.MemoryBytes, CPUs: limits.CPUs, Pids: limits.Pids, DiskBytes: disk}
	opts.Network, opts.Publish, opts.Egress = o.network, o.publish, o.egress
	opts.AllowHostPorts, opts.DNS = o.hostPorts, o.dns
	opts.Workdir, opts.User, opts.Hostname = o.workdir, o.user, o.hostname
	opts.ReadonlyRootfs, opts.Seccomp = o.readOnly, o.seccomp
	opts.CapAdd, opts.CapDrop = o.capAdd, o.capDrop
	opts.Labels = map[string]string{"sbx.run": "1"}
	if o.timeout > 0 {
		opts.TTL = o.timeout + remoteRunTTLMargin
	}
	return opts, command, nil
}
