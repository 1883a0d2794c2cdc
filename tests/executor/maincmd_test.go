package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// mainCmdLog collects a main command's output with its streams.
func mainCmdLog(t *testing.T, c *client.Client, o client.LogOptions) (string, api.LogFrame) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	end, err := c.MainCmdLogs(ctx, o, func(f api.LogFrame) error {
		switch f.Type {
		case api.LogGap:
			b.WriteString("[gap]")
		default:
			b.WriteString(f.Type + ":" + f.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("service logs: %v", err)
	}
	return b.String(), end
}

func TestExecutorMainCmdLifecycle(t *testing.T) {
	e := startExecutor(t)
	ctx := context.Background()
	c := e.client
	if _, err := c.MainCmd(ctx); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("status before any service: %v, want not_found", err)
	}
	st, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exec sleep 100"}, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != api.MainCmdRunning || st.Pid <= 0 || st.Restart != api.RestartNo || st.StartedAt.IsZero() {
		t.Fatalf("started: %+v", st)
	}
	// The main command belongs to no request: it outlives the call that started it.
	harness.WaitFor(t, func() bool { st, _ := c.MainCmd(ctx); return st.LogEnd == int64(len("out\nerr\n")) })
	// A second main command while one runs is refused and changes nothing.
	if _, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"true"}}); !client.IsCode(err, api.CodeExists) {
		t.Fatalf("second service: %v, want exists", err)
	}
	out, end := mainCmdLog(t, c, client.LogOptions{TailBytes: -1})
	if out != "stdout:out\nstderr:err\n" && out != "stderr:err\nstdout:out\n" {
		t.Fatalf("logs: %q", out)
	}
	if end.Offset != 8 || end.MainCmd.State != api.MainCmdRunning {
		t.Fatalf("end frame: %+v", end)
	}
	// Resume from an offset; the tail of the output.
	if out, _ := mainCmdLog(t, c, client.LogOptions{Since: 6, TailBytes: -1}); out != "stderr:r\n" && out != "stdout:t\n" {
		t.Fatalf("logs since 6: %q", out)
	}
	if out, _ := mainCmdLog(t, c, client.LogOptions{TailBytes: 2}); !strings.HasSuffix(out, ":r\n") && !strings.HasSuffix(out, ":t\n") {
		t.Fatalf("tail 2: %q", out)
	}
	// A signal reaches the whole process group; the main command ends for good.
	if _, err := c.SignalMainCmd(ctx, "TERM"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err = c.WaitMainCmd(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != api.MainCmdExited || st.Exit == nil || st.Exit.ExitCode != 143 || st.Exit.Signal != "SIGTERM" || st.Pid != 0 {
		t.Fatalf("after SIGTERM: %+v %+v", st, st.Exit)
	}
	if _, err := c.SignalMainCmd(ctx, "TERM"); !client.IsCode(err, api.CodeNotRunning) {
		t.Fatalf("signal of an ended service: %v", err)
	}
	if _, err := c.SignalMainCmd(ctx, "SIGBOGUS"); !client.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("unknown signal: %v", err)
	}
	// A new main command replaces an ended one and continues its log.
	st, err = c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"sh", "-c", "echo $GREETING again"}, Env: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.WaitMainCmd(wctx)
	if err != nil || st.Exit.ExitCode != 0 {
		t.Fatalf("second run: %+v %v", st, err)
	}
	if out, end := mainCmdLog(t, c, client.LogOptions{Since: 8, TailBytes: -1}); out != "stdout:hello again\n" || end.Offset != 8+int64(len("hello again\n")) {
		t.Fatalf("second run's log: %q %+v", out, end)
	}
	// create_cwd makes a missing working directory, owned by the user.
	base, err := os.MkdirTemp("", "sbxsvc") // reachable by the main command's user
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	wd := filepath.Join(base, "work", "space")
	if _, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"sh", "-c", "pwd; touch mine"}, Cwd: wd, CreateCwd: true, User: "4321:4321"}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.WaitMainCmd(wctx); err != nil || st.Exit.ExitCode != 0 {
		t.Fatalf("service in a created directory: %+v %v", st, err)
	}
	for _, p := range []string{filepath.Join(base, "work"), wd, filepath.Join(wd, "mine")} {
		var fi syscall.Stat_t
		if err := syscall.Stat(p, &fi); err != nil || fi.Uid != 4321 || fi.Gid != 4321 {
			t.Errorf("%s: owner %d:%d %v, want 4321:4321", p, fi.Uid, fi.Gid, err)
		}
	}
	var fi syscall.Stat_t
	if syscall.Stat(base, &fi); fi.Uid != 0 {
		t.Errorf("an existing directory changed owner to %d", fi.Uid)
	}
}

func TestExecutorMainCmdFollowAndRestart(t *testing.T) {
	e := startExecutor(t)
	ctx := context.Background()
	c := e.client
	// on-failure restarts a failing command, at most max_restarts times,
	// with a back-off; the log keeps every run.
	_, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"sh", "-c", "echo run; sleep 0.1; exit 3"}, Restart: api.RestartOnFailure, MaxRestarts: 2})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var frames []string
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := c.MainCmdLogs(fctx, client.LogOptions{Follow: true, TailBytes: -1}, func(f api.LogFrame) error {
		mu.Lock()
		frames = append(frames, f.Data)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := end.MainCmd
	if strings.Join(frames, "") != "run\nrun\nrun\n" || st.State != api.MainCmdExited || st.Restarts != 2 || len(st.RecentExits) != 3 || st.Exit.ExitCode != 3 {
		t.Fatalf("follow of a restarting service: %q %+v", frames, st)
	}
	// A command that does not exist fails to start: exit 127 and a log line.
	st2, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"/no/such/program"}})
	if err != nil {
		t.Fatal(err)
	}
	if st2.State != api.MainCmdExited {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st2, _ = c.WaitMainCmd(wctx)
	}
	if st2.Exit == nil || st2.Exit.ExitCode != 127 || st2.Exit.Error == "" {
		t.Fatalf("missing program: %+v", st2)
	}
	if out, _ := mainCmdLog(t, c, client.LogOptions{TailBytes: 200}); !strings.Contains(out, "stderr:sbx: start main command /no/such/program") {
		t.Fatalf("missing program's log: %q", out)
	}
	// always restarts until stopped; stop ends it for good, killing what
	// ignores SIGTERM after the grace.
	if _, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"}, Restart: api.RestartAlways}); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, func() bool {
		out, _ := mainCmdLog(t, c, client.LogOptions{TailBytes: 3})
		return strings.HasSuffix(out, "up\n")
	})
	st3, err := c.StopMainCmd(ctx, "", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st3.State != api.MainCmdExited || st3.Exit.Signal != "SIGKILL" || st3.Restarts != 0 {
		t.Fatalf("stopped: %+v %+v", st3, st3.Exit)
	}
	// The group's other members (sh's sleep) die with it; the executor
	// reaps them as they go.
	harness.WaitFor(t, func() bool { return len(descendants(e.pid())) == 0 })
	// stop with a chosen signal (Nomad's kill_signal): a clean exit on it.
	if _, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"sh", "-c", "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.1; done"}, Restart: api.RestartAlways}); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, func() bool {
		out, _ := mainCmdLog(t, c, client.LogOptions{TailBytes: 6})
		return strings.HasSuffix(out, "ready\n")
	})
	st4, err := c.StopMainCmd(ctx, "SIGINT", 20*time.Second)
	if err != nil || st4.Exit == nil || st4.Exit.ExitCode != 7 || st4.Restarts != 0 {
		t.Fatalf("stop with SIGINT: %+v %v", st4, err)
	}
	if out, _ := mainCmdLog(t, c, client.LogOptions{TailBytes: 8}); !strings.HasSuffix(out, "got-int\n") {
		t.Fatalf("log after SIGINT: %q", out)
	}
	// Bad specs change nothing.
	for _, bad := range []api.MainCmdSpec{{}, {Argv: []string{"true"}, Restart: "sometimes"}, {Argv: []string{"true"}, LogBytes: 1 << 30}, {Argv: []string{"true"}, Cwd: "/no/such/dir"}} {
		if _, err := c.StartMainCmd(ctx, bad); !client.IsCode(err, api.CodeBadRequest) {
			t.Errorf("spec %+v: %v, want bad_request", bad, err)
		}
	}
}

func TestExecutorMainCmdOutputIsBounded(t *testing.T) {
	e := startExecutor(t)
	ctx := context.Background()
	c := e.client
	// 64 MiB of output through a 64 KiB ring: the executor's memory stays
	// small, the log says how much was lost, and the end is kept.
	_, err := c.StartMainCmd(ctx, api.MainCmdSpec{Argv: []string{"sh", "-c", "head -c 67108864 /dev/zero | tr '\\0' x; echo; echo LAST"}, LogBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	st, err := c.WaitMainCmd(wctx)
	if err != nil || st.Exit.ExitCode != 0 {
		t.Fatalf("flood: %+v %v", st, err)
	}
	if want := int64(64<<20 + len("\nLAST\n")); st.LogEnd != want {
		t.Fatalf("log end %d, want %d", st.LogEnd, want)
	}
	var lost, held int64
	end, err := c.MainCmdLogs(ctx, client.LogOptions{TailBytes: -1}, func(f api.LogFrame) error {
		if f.Type == api.LogGap {
			lost += f.Lost
		}
		held += int64(len(f.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if held > 64<<10 || lost+held != st.LogEnd || end.Offset != st.LogEnd {
		t.Fatalf("held %d lost %d end %d", held, lost, end.Offset)
	}
	tail, _, err := c.MainCmdLogTail(ctx, 5)
	if err != nil || tail != "LAST\n" {
		t.Fatalf("tail: %q %v", tail, err)
	}
	if rss := vmRSS(t, e.pid()); rss > 64<<20 {
		t.Fatalf("executor RSS %d MiB after a 64 MiB flood through a 64 KiB ring", rss>>20)
	}
}

// TestExecutorMainCmdEndsWithExecutor: SIGTERM to the executor ends a
// main command whose policy would restart it, and nothing is left (checked by
// the helper's stop).
func TestExecutorMainCmdEndsWithExecutor(t *testing.T) {
	e := startExecutor(t)
	if _, err := e.client.StartMainCmd(context.Background(), api.MainCmdSpec{Argv: []string{"sleep", "1000"}, Restart: api.RestartAlways}); err != nil {
		t.Fatal(err)
	}
	e.stop(t)
}
