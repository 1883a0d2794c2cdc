package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerRemoteRun runs `sbx run --host` against `sbx serve` on a unix
// socket: streamed output, exit codes, -e/-w/-u, --timeout, the report,
// stdin with -i, removal of the sandbox on every path including SIGINT,
// and clear refusals of what needs the host itself.
func TestServerRemoteRun(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	defer p.Stop(t)
	host := "unix://" + p.Sock
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	local := t.TempDir()
	base := []string{"--root", local + "/root", "--run-root", local + "/run", "--host", host}
	cli := func(stdin string, args ...string) harness.Result {
		return harness.RunSbx(t, stdin, append(append([]string{}, base...), args...)...)
	}
	rootfs := fixture.CacheDir + "/busybox"
	c := p.Client(t)
	assertNone := func(when string) {
		t.Helper()
		list, err := c.List(context.Background(), sbx.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 0 {
			t.Fatalf("%s: %d sandboxes left on the server: %+v", when, len(list), list)
		}
	}

	// Output streamed to the right streams; the exit code propagated; env,
	// workdir and user applied.
	r := cli("", "run", "--rootfs", rootfs, "-e", "GREETING=hi", "-w", "/tmp", "-u", "65534:65534", "--",
		"sh", "-c", `echo "$GREETING $(pwd) $(id -u):$(id -g)"; echo err >&2; exit 7`)
	if r.Code != 7 || r.Stdout != "hi /tmp 65534:65534\n" || r.Stderr != "err\n" {
		t.Fatalf("remote run: exit %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	assertNone("after a run")

	// A command that is not found: 127, as locally.
	if r = cli("", "run", "--rootfs", rootfs, "--", "/no/such/cmd"); r.Code != 127 {
		t.Fatalf("remote run of a missing command: exit %d, want 127 (%s)", r.Code, r.Stderr)
	}

	// stdin with -i.
	if r = cli("one\ntwo\n", "run", "-i", "--rootfs", rootfs, "--", "wc", "-l"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "2" {
		t.Fatalf("remote run -i: exit %d %q %s", r.Code, r.Stdout, r.Stderr)
	}

	// --timeout: 124 and a report saying so; --stats prints it on stderr.
	report := filepath.Join(t.TempDir(), "report.json")
	if r = cli("", "run", "--rootfs", rootfs, "--timeout", "1s", "--report", report, "--", "sleep", "30"); r.Code != 124 {
		t.Fatalf("remote run --timeout: exit %d, want 124 (%s)", r.Code, r.Stderr)
	}
	var rep struct {
		Status   string  `json:"status"`
		ExitCode int     `json:"exit_code"`
		TimedOut bool    `json:"timed_out"`
		WallS    float64 `json:"wall_time_s"`
	}
	data, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(data, &rep) != nil {
		t.Fatalf("report: %v %s", err, data)
	}
	if rep.Status != "timeout" || rep.ExitCode != 124 || !rep.TimedOut || rep.WallS < 0.9 || rep.WallS > 20 {
		t.Fatalf("report after --timeout: %+v", rep)
	}
	if r = cli("", "run", "--rootfs", rootfs, "--stats", "--", "true"); r.Code != 0 || !strings.Contains(r.Stderr, "status: ok  exit: 0") || !strings.Contains(r.Stderr, "peak memory:") {
		t.Fatalf("remote run --stats: exit %d %q", r.Code, r.Stderr)
	}
	if r = cli("", "run", "--rootfs", rootfs, "--", "sh", "-c", "kill -9 $$"); r.Code != 137 {
		t.Fatalf("remote run of a command killed by SIGKILL: exit %d, want 137 (%s)", r.Code, r.Stderr)
	}
	assertNone("after the runs")

	// SIGINT while the command runs, and while the sandbox is still being
	// created: the sandbox is removed, sbx exits 130. (A create cut short
	// by the signal left a "creating" sandbox behind on the server.)
	for _, duringCreate := range []bool{false, true} {
		cmd := exec.Command(harness.SbxBin, append(append([]string{}, base...), "run", "--rootfs", rootfs, "--", "sleep", "60")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Env = append(os.Environ(), "SBX_TOKEN="+harness.ServerTestToken)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var id string
		for deadline := time.Now().Add(20 * time.Second); id == ""; time.Sleep(5 * time.Millisecond) {
			list, _ := c.List(context.Background(), sbx.Filter{Labels: map[string]string{"sbx.run": "1"}, Running: true})
			if len(list) == 1 && (duringCreate || list[0].Status == sbx.StatusRunning) {
				id = list[0].ID
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("the remote run's sandbox never appeared: %s", stderr.String())
			}
		}
		if !duringCreate {
			time.Sleep(300 * time.Millisecond) // let the exec start (before it, the outcome is the same)
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("sbx run --host did not end within 60s of SIGINT: %s", stderr.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Fatalf("remote run after SIGINT (during create: %v): exit %d, want 130 (%s)", duringCreate, code, stderr.String())
		}
		assertNone(fmt.Sprintf("after SIGINT (during create: %v)", duringCreate))
		assertNoSandboxProcesses(t, []string{id})
	}

	// What needs this host refuses clearly and creates nothing.
	for _, args := range [][]string{
		{"run", "--", "true"},
		{"run", "--rootfs", rootfs},
		{"run", "--pull", "always", "busybox", "true"},
	} {
		if r = cli("", args...); r.Code != 125 || r.Stderr == "" {
			t.Fatalf("sbx %v with --host: exit %d %q, want 125 and an error", args, r.Code, r.Stderr)
		}
	}
	for _, args := range [][]string{
		{"bench"},
	} {
		if r = cli("", args...); r.Code != 125 || !strings.Contains(r.Stderr, "this host only") {
			t.Fatalf("sbx %v with --host: exit %d %q, want 125 and a refusal", args, r.Code, r.Stderr)
		}
	}
	assertNone("after the refusals")
}

// TestServerRemoteRunOOMCounted: the OOM kill of a remote one-shot run,
// whose sandbox is removed at once, reaches the event stream and
// sbx_oom_kills_total.
func TestServerRemoteRunOOMCounted(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	defer p.Stop(t)
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	local := t.TempDir()
	r := harness.RunSbx(t, "", "--root", local+"/root", "--run-root", local+"/run", "--host", "unix://"+p.Sock,
		"run", "-m", "32m", "--rootfs", fixture.CacheDir+"/busybox", "--", "awk", `BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }`)
	if r.Code != 137 {
		t.Fatalf("remote run over its memory: exit %d, want 137 (%s)", r.Code, r.Stderr)
	}
	c := p.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errOOM := errors.New("seen")
	err := c.Events(ctx, sbx.EventsBuffered, func(e sbx.Event) error {
		if e.Type == sbx.EventOOM && e.OOMKills >= 1 {
			return errOOM
		}
		return nil
	})
	if !errors.Is(err, errOOM) {
		t.Fatalf("no sandbox.oom event for the remote run: %v", err)
	}
	resp, err := c.Do(ctx, "GET", "/metrics", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if !regexp.MustCompile(`(?m)^sbx_oom_kills_total [1-9]`).Match(metrics) {
		t.Fatalf("sbx_oom_kills_total did not count the run's kill:\n%s", regexp.MustCompile(`(?m)^sbx_oom.*$`).Find(metrics))
	}
}
