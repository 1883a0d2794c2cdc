package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/rootfs"
)

// Attach runs an interactive process in a running sandbox. The process
// joins the sandbox's namespaces, cgroups, seccomp filter and capability
// set, the way `docker exec` does; with o.Tty it gets a terminal of its own
// whose size follows o.Resize. It ends when the process exits, when
// o.TimeoutS passes (the result says TimedOut) or when ctx ends (the
// process is killed).
//
// Non-interactive commands go through the executor instead (Exec).
func (h *Host) Attach(ctx context.Context, ref string, o sbx.AttachOptions) (sbx.ExecResult, error) {
	var res sbx.ExecResult
	args := o.Argv
	if len(args) == 0 && o.Command != "" {
		args = []string{"/bin/sh", "-c", o.Command}
	}
	if len(args) == 0 {
		return res, fmt.Errorf("%w: no command given", sbx.ErrInvalid)
	}
	sb, err := h.running(ctx, ref)
	if err != nil {
		return res, err
	}
	ctr, err := h.container(sb)
	if err != nil {
		return res, err
	}
	user, cwd, env := sb.Options.User, o.Cwd, sb.Options.Env
	if cwd == "" {
		cwd = sb.Options.Workdir
	}
	if sb.Image != nil {
		env = sbx.MergeEnv(sb.Image.Env, env)
		if user == "" {
			user = sb.Image.User
		}
		if cwd == "" {
			cwd = sb.Image.Workdir
		}
	}
	if o.User != "" {
		user = o.User
	}
	if cwd == "" {
		cwd = "/"
	}
	u, err := rootfs.LookupUser(sb.RootPath, user)
	if err != nil {
		return res, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	env = sbx.MergeEnv(env, envList(o.Env))
	if o.TimeoutS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(o.TimeoutS*float64(time.Second)))
		defer cancel()
	}
	t0 := time.Now()
	p, err := ctr.Exec(isolate.ExecSpec{
		Args: args, Env: processEnv(env, hostname(sb), o.Tty, u.Home), Cwd: cwd,
		UID: u.UID, GID: u.GID, AdditionalGIDs: u.AdditionalGroups,
		Tty: o.Tty, ConsoleSize: o.Size, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr,
	})
	if err != nil {
		return res, err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = p.Kill()
		case <-done:
		}
	}()
	var copies sync.WaitGroup
	if con := p.Console(); con != nil {
		defer con.Close()
		copies.Add(1)
		go func() {
			defer copies.Done()
			_, _ = io.Copy(writerOr(o.Stdout), con) // ends with EIO when the process exits
		}()
		if o.Stdin != nil {
			go func() { _, _ = io.Copy(con, o.Stdin) }()
		}
		if o.Resize != nil {
			go func() {
				for {
					select {
					case sz, ok := <-o.Resize:
						if !ok {
							return
						}
						_ = unix.IoctlSetWinsize(int(con.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: sz[0], Row: sz[1]})
					case <-done:
						return
					}
				}
			}()
		}
	}
	code, sig, err := p.Wait()
	copies.Wait()
	if err != nil {
		return res, fmt.Errorf("sandbox %s: %w", sb.ShortID(), err)
	}
	res.ExitCode, res.DurationS = code, time.Since(t0).Seconds()
	if sig != 0 {
		res.Signal = unix.SignalName(sig)
	}
	res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded) && o.TimeoutS > 0
	return res, nil
}

// envList turns an exec request's variables into KEY=VALUE entries, in a
// stable order.
func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
