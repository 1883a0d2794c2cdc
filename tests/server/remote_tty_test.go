package server

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// ptyOutput collects what a program writes to its terminal.
type ptyOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *ptyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output, after offset from, contains want, and
// returns the offset just past it.
func (o *ptyOutput) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := o.String()
		if i := strings.Index(s[from:], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("terminal output never showed %q; got:\n%q", want, s[from:])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServerRemoteTTY drives `sbx exec -it` and `sbx shell` against a
// server through a real pseudo-terminal: the command sees a terminal of
// the local size, follows a resize (SIGWINCH), and its exit code comes
// back; without -t, -i passes stdin and separates stdout from stderr.
func TestServerRemoteTTY(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	defer p.Stop(t)
	c := p.Client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, sbx.Options{Rootfs: fixture.CacheDir + "/busybox", Name: "tty"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove: %v", err)
		}
	}()
	local := t.TempDir()
	base := []string{"--root", local + "/root", "--run-root", local + "/run", "--host", "unix://" + p.Sock}
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	env := append(os.Environ(), "SBX_TOKEN="+harness.ServerTestToken, "TERM=dumb")

	drive := func(t *testing.T, args []string, script func(out *ptyOutput, tty *os.File)) int {
		t.Helper()
		cmd := exec.Command(harness.SbxBin, append(append([]string{}, base...), args...)...)
		cmd.Env = env
		ptm, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer ptm.Close()
		out := &ptyOutput{}
		go func() { _, _ = io.Copy(out, ptm) }()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		defer func() {
			select {
			case <-done:
			default:
				_ = cmd.Process.Kill()
				<-done
			}
		}()
		script(out, ptm)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("sbx %v did not exit; output:\n%q", args, out.String())
		}
		return cmd.ProcessState.ExitCode()
	}

	code := drive(t, []string{"exec", "-it", "-e", "MARK=xyz", "tty", "--", "sh"}, func(out *ptyOutput, tty *os.File) {
		_, _ = tty.WriteString("tty; echo \"m=$MARK t=$TERM\"\n")
		off := out.waitFor(t, 0, "/dev/pts/")
		off = out.waitFor(t, off, "m=xyz t=dumb")
		_, _ = tty.WriteString("stty size\n")
		off = out.waitFor(t, off, "30 100")
		if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		// The resize travels as a frame after SIGWINCH; ask until it shows.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			_, _ = tty.WriteString("stty size\n")
			if strings.Contains(out.String()[off:], "40 120") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the resize never reached the sandbox:\n%q", out.String()[off:])
			}
		}
		_, _ = tty.WriteString("exit 3\n")
	})
	if code != 3 {
		t.Fatalf("sbx exec -it: exit %d, want 3", code)
	}

	code = drive(t, []string{"shell", "tty"}, func(out *ptyOutput, tty *os.File) {
		_, _ = tty.WriteString("echo shell-$((40+2)); tty\n")
		off := out.waitFor(t, 0, "shell-42")
		out.waitFor(t, off, "/dev/pts/")
		_, _ = tty.WriteString("exit 5\n")
	})
	if code != 5 {
		t.Fatalf("sbx shell: exit %d, want 5", code)
	}

	// sbx run -it: a fresh sandbox with a terminal, removed afterwards.
	code = drive(t, []string{"run", "-it", "--rootfs", fixture.CacheDir + "/busybox", "--", "sh"}, func(out *ptyOutput, tty *os.File) {
		_, _ = tty.WriteString("tty; stty size\n")
		off := out.waitFor(t, 0, "/dev/pts/")
		out.waitFor(t, off, "30 100")
		_, _ = tty.WriteString("exit 9\n")
	})
	if code != 9 {
		t.Fatalf("sbx run -it: exit %d, want 9", code)
	}
	if list, err := c.List(ctx, sbx.Filter{Labels: map[string]string{"sbx.run": "1"}}); err != nil || len(list) != 0 {
		t.Fatalf("sandboxes left after sbx run -it: %v %+v", err, list)
	}

	// -i without -t: stdin streamed, stdout and stderr apart, exit code.
	r := harness.RunSbx(t, "a\nb\nc\n", append(append([]string{}, base...), "exec", "-i", "tty", "--", "sh", "-c", "wc -l; echo e >&2; exit 6")...)
	if strings.TrimSpace(r.Stdout) != "3" || r.Stderr != "e\n" || r.Code != 6 {
		t.Fatalf("sbx exec -i: exit %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	// --timeout applies: 124.
	r = harness.RunSbx(t, "", append(append([]string{}, base...), "exec", "-i", "--timeout", "500ms", "tty", "--", "sleep", "30")...)
	if r.Code != 124 {
		t.Fatalf("sbx exec -i --timeout: exit %d, want 124 (%s)", r.Code, r.Stderr)
	}
	// Through the Go client: closing the attachment kills the command.
	ex := c.Executor(sb.ID, execclient.Options{})
	defer ex.Close()
	a, err := ex.Attach(ctx, execapi.AttachRequest{ExecRequest: execapi.ExecRequest{Argv: []string{"sleep", "321"}}, Tty: true})
	if err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		res, err := ex.Exec(ctx, execapi.ExecRequest{Command: "ps -o args | grep -c '^sleep 321'"})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(res.Stdout) != "0"
	}
	for deadline := time.Now().Add(10 * time.Second); !running(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the attached command never ran")
		}
	}
	_ = a.Close()
	for deadline := time.Now().Add(10 * time.Second); running(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the attached command outlived its connection")
		}
	}
	// A missing command: 127; a missing sandbox: 1.
	if r = harness.RunSbx(t, "", append(append([]string{}, base...), "exec", "-i", "tty", "--", "/no/such")...); r.Code != 127 {
		t.Fatalf("sbx exec -i of a missing command: exit %d, want 127 (%s)", r.Code, r.Stderr)
	}
	if r = harness.RunSbx(t, "", append(append([]string{}, base...), "exec", "-it", "nosuch", "--", "true")...); r.Code != 1 {
		t.Fatalf("sbx exec -it in no sandbox: exit %d, want 1 (%s)", r.Code, r.Stderr)
	}
}
