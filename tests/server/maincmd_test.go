package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// logsOf collects the main command's output (stdout and stderr apart) and
// the end frame's offset.
func logsOf(ctx context.Context, t testing.TB, b sbx.Sandboxes, ref string, o sbx.LogOptions) (stdout, stderr string, end int64, frames []sbx.LogFrame) {
	t.Helper()
	var out, errb strings.Builder
	end = -1
	err := b.Logs(ctx, ref, o, func(f sbx.LogFrame) error {
		frames = append(frames, f)
		switch f.Type {
		case sbx.LogStdout:
			out.WriteString(f.Data)
		case sbx.LogStderr:
			errb.WriteString(f.Data)
		case sbx.LogEnd:
			end = f.Offset
		}
		return nil
	})
	if err != nil {
		t.Fatalf("logs of %s %+v: %v", ref, o, err)
	}
	if end < 0 {
		t.Fatalf("logs of %s %+v: no end frame", ref, o)
	}
	return out.String(), errb.String(), end, frames
}

// TestServerMainCommand drives a sandbox's main command (Options.Cmd run
// as the executor's main command) through the library and through the REST
// server: exit code, output by offset, follow, signal, stop saving the end
// and the tail (served from disk after the executor is gone, and by a
// second Host on the same root), start running it again, an OOM kill
// read from the cgroup, and a command that cannot start.
func TestServerMainCommand(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	for _, b := range []struct {
		name string
		b    sbx.Sandboxes
	}{{"host", e.Host}, {"client", e.C}} {
		t.Run(b.name, func(t *testing.T) {
			// A command that writes to both streams and exits 7.
			o := harness.BusyboxCreate("")
			o.Cmd = []string{"sh", "-c", "echo out1; echo err1 >&2; echo out2; exit 7"}
			sb, err := b.b.Create(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			e.See(sb.ID)
			if sb.Cmd == nil || (sb.Cmd.Status != "running" && sb.Cmd.Status != "exited") {
				t.Fatalf("cmd_start: %+v", sb.Cmd)
			}
			exit, err := b.b.Wait(ctx, sb.ID)
			if err != nil || exit.ExitCode != 7 || exit.Signal != "" || exit.OOMKilled || exit.FinishedAt.IsZero() {
				t.Fatalf("wait: %+v %v, want exit 7", exit, err)
			}
			out, errOut, end, frames := logsOf(ctx, t, b.b, sb.ID, sbx.LogOptions{})
			if out != "out1\nout2\n" || errOut != "err1\n" || end != int64(len("out1\nerr1\nout2\n")) {
				t.Fatalf("logs: stdout %q stderr %q end %d", out, errOut, end)
			}
			// Resuming from an offset gives only what follows it; tail
			// gives the last bytes. (The two streams interleave as the
			// executor read them.)
			all := dataOf(frames)
			if _, _, end2, fs := logsOf(ctx, t, b.b, sb.ID, sbx.LogOptions{Since: 5}); dataOf(fs) != all[5:] || end2 != end || fs[0].Offset != 5 {
				t.Fatalf("logs since 5: %q end %d, want %q", dataOf(fs), end2, all[5:])
			}
			if _, _, _, fs := logsOf(ctx, t, b.b, sb.ID, sbx.LogOptions{Tail: 5}); dataOf(fs) != all[len(all)-5:] {
				t.Fatalf("logs tail 5: %q, want %q", dataOf(fs), all[len(all)-5:])
			}
			// The sandbox outlives its command; a second wait answers the
			// same.
			if again, err := b.b.Wait(ctx, sb.ID); err != nil || again.ExitCode != 7 {
				t.Fatalf("second wait: %+v %v", again, err)
			}
			if err := b.b.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}

			// A long-running command: follow its output, signal it.
			o = harness.BusyboxCreate("")
			o.Cmd = []string{"sh", "-c", "trap 'echo got-usr1; exit 3' USR1; echo ready; while :; do sleep 0.05; done"}
			sb, err = b.b.Create(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			e.See(sb.ID)
			if sb.Cmd == nil || sb.Cmd.Status != "running" {
				t.Fatalf("cmd_start of a long command: %+v", sb.Cmd)
			}
			followed := make(chan string, 1)
			go func() {
				var got strings.Builder
				_ = b.b.Logs(ctx, sb.ID, sbx.LogOptions{Follow: true}, func(f sbx.LogFrame) error {
					if f.Type == sbx.LogStdout {
						got.WriteString(f.Data)
					}
					return nil
				})
				followed <- got.String()
			}()
			harness.WaitUntil(t, 30*time.Second, "the command's first output", func() bool {
				out, _, _, _ := logsOf(ctx, t, b.b, sb.ID, sbx.LogOptions{})
				return out == "ready\n"
			})
			// An error of the caller's own fn ends the stream as it is,
			// while the command runs on: it says nothing about the
			// executor (it was once taken for a gone executor, and the
			// caller got "not recorded" instead).
			errStop := errors.New("the reader went away")
			if err := b.b.Logs(ctx, sb.ID, sbx.LogOptions{Follow: true}, func(sbx.LogFrame) error { return errStop }); !errors.Is(err, errStop) {
				t.Fatalf("logs whose fn fails: %v, want fn's error", err)
			}
			if err := b.b.Signal(ctx, sb.ID, "SIGUSR1"); err != nil {
				t.Fatal(err)
			}
			if exit, err := b.b.Wait(ctx, sb.ID); err != nil || exit.ExitCode != 3 {
				t.Fatalf("wait after SIGUSR1: %+v %v", exit, err)
			}
			select {
			case got := <-followed:
				if got != "ready\ngot-usr1\n" {
					t.Fatalf("followed logs: %q", got)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("follow did not end with the command")
			}
			if err := b.b.Signal(ctx, sb.ID, "SIGNOPE"); !errors.Is(err, sbx.ErrInvalid) && !errors.Is(err, sbx.ErrState) {
				t.Fatalf("unknown signal: %v", err)
			}
			if err := b.b.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}

			// A command that cannot start fails the create and leaves
			// nothing.
			o = harness.BusyboxCreate("")
			o.Cmd = []string{"/no/such/program"}
			if sb, err := b.b.Create(ctx, o); !errors.Is(err, sbx.ErrInvalid) {
				t.Fatalf("create with a missing program: %+v %v, want invalid", sb, err)
			}
			// A sandbox without a main command has nothing to wait for.
			plain, err := b.b.Create(ctx, harness.BusyboxCreate(""))
			if err != nil {
				t.Fatal(err)
			}
			e.See(plain.ID)
			if _, err := b.b.Wait(ctx, plain.ID); !errors.Is(err, sbx.ErrState) {
				t.Fatalf("wait without a command: %v", err)
			}
			if err := b.b.Remove(ctx, plain.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		})
	}

	// Stop saves the command's end and output: Wait and Logs answer from
	// disk, also to a second Host on the same root (another process after
	// a restart), and Start runs the command again.
	o := harness.BusyboxCreate("")
	o.Cmd = []string{"sh", "-c", "trap 'echo bye; exit 5' TERM; echo hello; while :; do sleep 0.05; done"}
	sb, err := e.Host.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	harness.WaitUntil(t, 30*time.Second, "hello", func() bool {
		out, _, _, _ := logsOf(ctx, t, e.Host, sb.ID, sbx.LogOptions{})
		return out == "hello\n"
	})
	if _, err := e.C.Stop(ctx, sb.ID, sbx.StopOptions{Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	other, err := sandbox.Open(sandbox.HostConfig{Root: e.Root, RunRoot: e.RunRoot, Executor: harness.ServerExecutorBin(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, b := range []sbx.Sandboxes{e.Host, other, e.C} {
		exit, err := b.Wait(ctx, sb.ID)
		if err != nil || exit.ExitCode != 5 {
			t.Fatalf("wait after stop: %+v %v, want exit 5", exit, err)
		}
		// (The shell may report its killed sleep on stderr.)
		out, errOut, end, _ := logsOf(ctx, t, b, sb.ID, sbx.LogOptions{Follow: true})
		if out != "hello\nbye\n" || end != int64(len(out)+len(errOut)) {
			t.Fatalf("logs after stop: %q %q end %d", out, errOut, end)
		}
		if out, _, end2, frames := logsOf(ctx, t, b, sb.ID, sbx.LogOptions{Since: 6}); out != "bye\n" || end2 != end || frames[0].Offset != 6 {
			t.Fatalf("logs since 6 after stop: %q %+v", out, frames)
		}
	}
	if err := e.Host.Signal(ctx, sb.ID, "SIGTERM"); !errors.Is(err, sbx.ErrState) {
		t.Fatalf("signal a stopped sandbox: %v", err)
	}
	if _, err := e.Host.Start(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	harness.WaitUntil(t, 30*time.Second, "hello after start", func() bool {
		out, _, _, _ := logsOf(ctx, t, e.Host, sb.ID, sbx.LogOptions{})
		return strings.HasSuffix(out, "hello\n")
	})
	if err := e.Host.Signal(ctx, sb.ID, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	if exit, err := other.Wait(ctx, sb.ID); err != nil || exit.ExitCode != 5 {
		t.Fatalf("wait after start and SIGTERM: %+v %v", exit, err)
	}

	// A create that claims a warm pool's member starts its main command
	// too, with the create's environment (given to the member's executor
	// at the claim).
	if _, err := e.Host.CreatePool(ctx, sbx.PoolSpec{Name: "maincmd", Size: 1, Options: harness.BusyboxCreate("")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Host.FillPool(ctx, "maincmd"); err != nil {
		t.Fatal(err)
	}
	o = harness.BusyboxCreate("")
	o.Env = []string{"GREETING=from-the-claim"}
	o.Cmd = []string{"sh", "-c", "echo $GREETING"}
	sb, err = e.Host.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if sb.FromPool != "maincmd" {
		t.Fatalf("the create did not claim the pool's member: from pool %q", sb.FromPool)
	}
	if exit, err := e.Host.Wait(ctx, sb.ID); err != nil || exit.ExitCode != 0 {
		t.Fatalf("wait for the claimed member's command: %+v %v", exit, err)
	}
	if out, _, _, _ := logsOf(ctx, t, e.Host, sb.ID, sbx.LogOptions{}); out != "from-the-claim\n" {
		t.Fatalf("the claimed member's command printed %q", out)
	}
	if _, err := e.Host.RemovePool(ctx, "maincmd"); err != nil {
		t.Fatal(err)
	}

	// An OOM kill of the command is read from the sandbox's cgroup.
	o = harness.BusyboxCreate("")
	o.Limits.MemoryBytes = 24 << 20
	o.Cmd = []string{"awk", `BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }`}
	sb, err = e.C.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if exit, err := e.C.Wait(ctx, sb.ID); err != nil || !exit.OOMKilled || exit.Signal != "SIGKILL" || exit.ExitCode != 137 {
		t.Fatalf("wait for the memory hog: %+v %v, want OOM-killed", exit, err)
	}
}

// dataOf is the output of frames, in order.
func dataOf(frames []sbx.LogFrame) string {
	var b strings.Builder
	for _, f := range frames {
		if f.Type == sbx.LogStdout || f.Type == sbx.LogStderr {
			b.WriteString(f.Data)
		}
	}
	return b.String()
}
