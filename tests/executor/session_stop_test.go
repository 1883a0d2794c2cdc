package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// A session's run with stop_signal stops its command at the call's
// timeout, or when the caller goes away, as an exec's is stopped: the
// signal to the command's job (its handler runs, its exit code is
// reported), SIGKILL stop_grace later for a job that ignores it; the
// shell and its state stay. Without stop_signal a timeout leaves the
// command running, as before.
func TestExecutorSessionStopsGracefully(t *testing.T) {
	e := startExecutor(t)
	for _, shl := range sessionShells {
		t.Run(shl.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSession(t, e.client, api.SessionRequest{Shell: shl.spec, Cwd: dir})
			s.ok("KEPT=k1")

			// The handler runs; its exit code and output are the reply's.
			// (The timeouts leave the shell seconds to set its trap: a
			// signal before it ends the command otherwise, on a loaded
			// machine.)
			res := s.run(api.RunRequest{
				Command:    `sh -c 'trap "echo cleaned; exit 3" TERM; echo started; while :; do sleep 0.05; done'`,
				TimeoutS:   3,
				StopSignal: "SIGTERM",
			})
			if res.Status != api.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 3 || res.Reason != api.ReasonTimeout ||
				!strings.Contains(res.Output, "started") || !strings.Contains(res.Output, "cleaned") || !strings.Contains(res.Notice, "stopped") {
				t.Fatalf("a stopped command with a handler: %+v", res)
			}
			wantOutput(t, "state after a stop", s.ok("echo $KEPT"), "k1\n")

			// A job that ignores the signal is killed after the grace.
			start := time.Now()
			res = s.run(api.RunRequest{
				Command:    `sh -c 'trap "" TERM; echo started; while :; do sleep 0.05; done'`,
				TimeoutS:   2,
				StopSignal: "TERM",
				StopGrace:  sbx.Duration(300 * time.Millisecond),
			})
			if res.Status != api.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 137 {
				t.Fatalf("a stopped command that ignores SIGTERM: %+v", res)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("the stop took %v", d)
			}
			wantOutput(t, "state after a kill", s.ok("echo $KEPT"), "k1\n")

			// A caller that goes away stops its command too: it goes once
			// the command has set its trap.
			mark, trapped := filepath.Join(dir, "handled"), filepath.Join(dir, "trapped")
			ctx, cancel := context.WithCancel(harness.Context(t))
			go func() {
				defer cancel()
				for range 600 {
					if _, err := os.Stat(trapped); err == nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			_, err := e.client.Run(ctx, s.id, api.RunRequest{
				Command:    `sh -c 'trap "echo term > ` + mark + `; exit 0" TERM; touch ` + trapped + `; while :; do sleep 0.05; done'`,
				TimeoutS:   60,
				StopSignal: "SIGTERM",
			})
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a run whose caller went away: %v", err)
			}
			var data []byte
			for range 200 {
				if data, _ = os.ReadFile(mark); len(data) > 0 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if string(data) != "term\n" {
				t.Fatalf("the handler of the command whose caller went away did not run: %q", data)
			}
			// The executor ends the abandoned call once the command has
			// ended, which can be just after the handler wrote its mark:
			// until then the session answers busy.
			res = s.run(api.RunRequest{Command: "echo $KEPT", TimeoutS: 30})
			for i := 0; i < 200 && res.Status == api.StatusBusy; i++ {
				time.Sleep(50 * time.Millisecond)
				res = s.run(api.RunRequest{Command: "echo $KEPT", TimeoutS: 30})
			}
			if res.Status != api.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 {
				t.Fatalf("run \"echo $KEPT\" after a cancel: %+v", res)
			}
			wantOutput(t, "state after a cancel", res.Output, "k1\n")

			// Without stop_signal the command runs on.
			res = s.run(api.RunRequest{Command: "echo started; sleep 30", TimeoutS: 0.5})
			if res.Status != api.StatusRunning || res.Reason != api.ReasonTimeout {
				t.Fatalf("a timeout without stop_signal: %+v", res)
			}
			s.interrupt()

			// Bad stop parameters are refused before anything runs.
			for _, req := range []api.RunRequest{
				{Command: "true", StopSignal: "SIGNOPE"},
				{Command: "true", StopSignal: "TERM", StopGrace: sbx.Duration(-time.Second)},
				{Command: "true", StopGrace: sbx.Duration(time.Second)},
			} {
				if _, err := e.client.Run(harness.Context(t), s.id, req); err == nil || !errors.Is(err, sbx.ErrInvalid) {
					t.Errorf("run %+v: %v, want a refusal", req, err)
				}
			}
		})
	}
}
