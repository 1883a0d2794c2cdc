package lifecycle

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestMainCmdEndIsRecorded: when a sandbox's main command ends (and the
// sandbox runs on), its record says so, with the exit code and the time,
// its state is exited (sbx ps says "Exited (6) ... ago", leaves it out
// without -a and selects it with --filter status=exited), and a
// sandbox.died event carries the exit code, as docker's die: in the CLI
// (sbx ps, sbx inspect, sbx events, without a server) and over REST
// (list, inspect, the event stream).
func TestMainCmdEndIsRecorded(t *testing.T) {
	t.Run("cli", func(t *testing.T) {
		h := harness.NewHost(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ev := h.Command("events", "--format", "json")
		out, err := ev.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := ev.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ev.Process.Kill(); _ = ev.Wait() }()
		died := make(chan sbx.Event, 16)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var e sbx.Event
				if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == sbx.EventDied {
					died <- e
				}
			}
		}()
		// The stream seeds what exists without events, right after it
		// watches the state directory (an inotify descriptor): a command
		// that ended before that gives no sandbox.died. Wait for the
		// watch, and end the command only after it.
		harness.WaitUntil(t, 30*time.Second, "sbx events watches the state directory", func() bool {
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", ev.Process.Pid))
			for _, fd := range fds {
				if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", ev.Process.Pid, fd.Name())); l == "anon_inode:inotify" {
					return true
				}
			}
			return false
		})
		id := h.Create(t, "--", "sh", "-c", "until [ -e /go ]; do sleep 0.05; done; exit 6")
		h.Must(t, "exec", id, "--", "touch", "/go")
		harness.WaitFor(t, func() bool {
			time.Sleep(200 * time.Millisecond)
			return strings.Contains(h.Must(t, "ps", "-a", "--no-trunc"), "Exited (6) ")
		})
		sb := h.Inspect(t, id)
		if sb.Status != sbx.StatusRunning || sb.State() != sbx.StatusExited || sb.CmdExit == nil || sb.CmdExit.ExitCode != 6 || sb.CmdExit.FinishedAt.IsZero() {
			t.Fatalf("inspect after the command ended: status %s, state %s, cmd_exit %+v", sb.Status, sb.State(), sb.CmdExit)
		}
		if out := h.Must(t, "inspect", "-f", "{{.State}} {{.CmdExit.ExitCode}}", id); out != "exited 6\n" {
			t.Fatalf("inspect -f state and exit code: %q", out)
		}
		for _, c := range []struct {
			args []string
			want bool
		}{
			{[]string{"ps", "-q", "--no-trunc"}, false},
			{[]string{"ps", "-a", "-q", "--no-trunc", "--filter", "status=exited"}, true},
			{[]string{"ps", "-a", "-q", "--no-trunc", "--filter", "status=running"}, false},
		} {
			if got := strings.Contains(h.Must(t, c.args...), id); got != c.want {
				t.Errorf("%v lists the sandbox whose command exited: %v, want %v", c.args, got, c.want)
			}
		}
		select {
		case e := <-died:
			if e.Sandbox != id || e.ExitCode == nil || *e.ExitCode != 6 {
				t.Fatalf("die event: %+v", e)
			}
		case <-ctx.Done():
			t.Fatal("sbx events printed no sandbox.died")
		}
		// A start runs the command again: the record forgets the old end.
		h.Must(t, "stop", "-t", "1", id)
		if sb := h.Inspect(t, id); sb.CmdExit == nil || sb.CmdExit.ExitCode != 6 {
			t.Fatalf("after stop: cmd_exit %+v", sb.CmdExit)
		}
		h.Must(t, "rm", "-f", id)
	})

	t.Run("rest", func(t *testing.T) {
		fixture.BusyboxRootfs(t)
		e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		died := make(chan sbx.Event, 16)
		ectx, ecancel := context.WithCancel(ctx)
		defer ecancel()
		go func() {
			// Every event the server holds, so none is missed however late
			// the stream opens.
			_ = e.C.Events(ectx, sbx.EventsBuffered, func(ev sbx.Event) error {
				if ev.Type == sbx.EventDied {
					died <- ev
				}
				return nil
			})
		}()
		o := harness.BusyboxCreate("")
		o.Cmd = []string{"sh", "-c", "sleep 0.3; exit 5"}
		sb, err := e.C.Create(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		e.See(sb.ID)
		select {
		case ev := <-died:
			if ev.Sandbox != sb.ID || ev.ExitCode == nil || *ev.ExitCode != 5 {
				t.Fatalf("die event: %+v", ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no sandbox.died event over REST")
		}
		got, err := e.C.Inspect(ctx, sb.ID)
		if err != nil || got.Status != sbx.StatusRunning || got.CmdExit == nil || got.CmdExit.ExitCode != 5 || got.CmdExit.FinishedAt.IsZero() {
			t.Fatalf("inspect: %+v %v", got, err)
		}
		list, err := e.C.List(ctx, sbx.Filter{Status: sbx.StatusExited})
		if err != nil || len(list) != 1 || list[0].CmdExit == nil || list[0].CmdExit.ExitCode != 5 || list[0].State() != sbx.StatusExited {
			t.Fatalf("list: %v %v", list, err)
		}
		if list, err := e.C.List(ctx, sbx.Filter{Running: true}); err != nil || len(list) != 0 {
			t.Fatalf("list of running sandboxes holds one whose command exited: %v %v", list, err)
		}
		// Started again, the record no longer says the command ended.
		if _, err := e.C.Stop(ctx, sb.ID, sbx.StopOptions{Timeout: time.Second}); err != nil {
			t.Fatal(err)
		}
		if got, err := e.C.Start(ctx, sb.ID); err != nil || got.CmdExit != nil {
			t.Fatalf("start: %+v %v", got, err)
		}
		if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	})
}
