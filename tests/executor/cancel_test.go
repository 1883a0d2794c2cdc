package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestExecCancelStopsGracefully: cancelling an exec (the library's
// context, the Go client's, whose connection then closes) returns at once
// and stops the command as docker stop does: SIGTERM to its process group
// (the command's handler runs), SIGKILL after the grace for what ignores
// it; a timeout stops it the same way (exit 124, TimedOut) and keeps the
// handler's output; StopSignal picks another signal.
func TestExecCancelStopsGracefully(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, b := range []struct {
		name string
		b    sbx.Sandboxes
	}{{"host", e.Host}, {"client", e.C}} {
		t.Run(b.name, func(t *testing.T) {
			sb, err := b.b.Create(ctx, harness.BusyboxCreate(""))
			if err != nil {
				t.Fatal(err)
			}
			e.See(sb.ID)
			defer func() { _ = b.b.Remove(context.Background(), sb.ID, sbx.RemoveOptions{Force: true}) }()
			run := func(req sbx.ExecRequest) sbx.ExecResult {
				t.Helper()
				res, err := b.b.Exec(ctx, sb.ID, req, nil)
				if err != nil {
					t.Fatalf("exec %q: %v", req.Command, err)
				}
				return res
			}
			// cancelled runs cmd until its "started" line, then cancels the
			// call, which must end with the context's error.
			cancelled := func(req sbx.ExecRequest) {
				t.Helper()
				cctx, ccancel := context.WithCancel(ctx)
				defer ccancel()
				_, err := b.b.Exec(cctx, sb.ID, req, func(f sbx.ExecFrame) error {
					if strings.Contains(f.Data, "started") {
						ccancel()
					}
					return nil
				})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled exec %q: %v, want context.Canceled", req.Command, err)
				}
			}
			// waitFile waits (bounded) until path in the sandbox holds want.
			waitFile := func(path, want string) {
				t.Helper()
				var got string
				for range 100 {
					got = run(sbx.ExecRequest{Command: "cat " + path + " 2>/dev/null"}).Stdout
					if got == want {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				t.Fatalf("%s holds %q, want %q", path, got, want)
			}

			// The handler of SIGTERM runs after a cancel.
			cancelled(sbx.ExecRequest{Command: `trap 'echo term > /tmp/handled; exit 0' TERM; echo started; while :; do sleep 0.05; done`})
			waitFile("/tmp/handled", "term\n")

			// A command that ignores SIGTERM is killed after the grace: its
			// marker process is gone.
			cancelled(sbx.ExecRequest{Command: `trap '' TERM; echo started; while :; do sleep 0.05; done; echo never`, StopGrace: 500 * time.Millisecond})
			for i := 0; ; i++ {
				ps := run(sbx.ExecRequest{Command: "ps -o args | grep -c '[w]hile :'"}).Stdout
				if strings.TrimSpace(ps) == "0" {
					break
				}
				if i == 100 {
					t.Fatalf("the command that ignores SIGTERM still runs 10s after the cancel")
				}
				time.Sleep(100 * time.Millisecond)
			}

			// StopSignal picks the signal.
			cancelled(sbx.ExecRequest{Command: `trap 'echo int > /tmp/int; exit 0' INT; echo started; while :; do sleep 0.05; done`, StopSignal: "SIGINT"})
			waitFile("/tmp/int", "int\n")

			// A timeout stops it the same way; the handler's output is kept.
			res := run(sbx.ExecRequest{Command: `trap 'echo cleaning up; exit 3' TERM; while :; do sleep 0.05; done`, Timeout: 300 * time.Millisecond})
			if !res.TimedOut || res.ExitCode != sbx.ExitTimeout || res.Stdout != "cleaning up\n" {
				t.Fatalf("timed out: %+v", res)
			}

			// A bad stop signal is refused before anything runs.
			if _, err := b.b.Exec(ctx, sb.ID, sbx.ExecRequest{Command: "touch /tmp/ran", StopSignal: "SIGNOPE"}, nil); err == nil || !strings.Contains(err.Error(), `unknown signal "SIGNOPE"`) {
				t.Fatalf("bad stop signal: %v, want it refused", err)
			}
			if got := run(sbx.ExecRequest{Command: "ls /tmp/ran 2>&1"}); got.ExitCode == 0 {
				t.Fatalf("the command with a bad stop signal ran")
			}
		})
	}
}
