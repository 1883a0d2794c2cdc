package executor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// sessionShells are the shells every session behaviour is checked with.
var sessionShells = []struct{ name, spec string }{
	{"bash", "bash"},
	{"busybox", "/usr/bin/busybox sh"},
}

// sess wraps a session for terse tests.
type sess struct {
	t  *testing.T
	c  *client.Client
	id string
}

func newSession(t *testing.T, c *client.Client, req api.SessionRequest) *sess {
	t.Helper()
	s, err := c.CreateSession(harness.Context(t), req)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSession(context.Background(), s.ID) })
	return &sess{t: t, c: c, id: s.ID}
}

func secs(v float64) *float64 { return &v }

func (s *sess) run(req api.RunRequest) api.RunResult {
	s.t.Helper()
	res, err := s.c.Run(harness.Context(s.t), s.id, req)
	if err != nil {
		s.t.Fatalf("run %q: %v", req.Command, err)
	}
	if strings.ContainsAny(res.Output, "\x1e\x1f") || strings.Contains(res.Output, "SBX") {
		s.t.Fatalf("marker text leaked into output %q", res.Output)
	}
	return res
}

// ok runs a command that must complete with exit code 0 and returns its
// output.
func (s *sess) ok(cmd string) string {
	s.t.Helper()
	res := s.run(api.RunRequest{Command: cmd, TimeoutS: 30})
	if res.Status != api.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 {
		s.t.Fatalf("run %q: %+v", cmd, res)
	}
	return res.Output
}

// interrupt presses C-c and returns the result once the command ended. A
// shell can lose a C-c, as on a real terminal: bash running a loop gives
// the terminal to each child in turn, and a SIGINT sent to the group of a
// child that has just exited normally reaches no one, so the loop goes on
// (on a loaded machine often). Then C-c is pressed again, as a user would.
func (s *sess) interrupt() api.RunResult {
	s.t.Helper()
	res := s.run(api.RunRequest{Command: "C-c", IsInput: true, TimeoutS: 5})
	for i := 0; res.Status == api.StatusRunning && i < 10; i++ {
		res = s.run(api.RunRequest{Command: "C-c", IsInput: true, TimeoutS: 5})
	}
	return res
}

func wantOutput(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: output %q, want %q", what, got, want)
	}
}

func TestExecutorSessionSemantics(t *testing.T) {
	e := startExecutor(t)
	for _, sh := range sessionShells {
		t.Run(sh.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSession(t, e.client, api.SessionRequest{Shell: sh.spec, Cwd: dir, Env: map[string]string{"FROM_SESSION": "yes"}})

			// State persists: cwd, exported and plain variables, functions, aliases.
			wantOutput(t, "first", s.ok("echo hello"), "hello\n")
			wantOutput(t, "env", s.ok(`echo "$FROM_SESSION $TERM"`), "yes dumb\n")
			s.ok("mkdir -p sub && cd sub")
			s.ok("export EXPORTED=e1; PLAIN=p1")
			s.ok("greet() { echo \"hi $1\"; }")
			s.ok("alias say='echo said'")
			res := s.run(api.RunRequest{Command: `echo "$EXPORTED $PLAIN"; greet you; say it; pwd`})
			wantOutput(t, "state", res.Output, fmt.Sprintf("e1 p1\nhi you\nsaid it\n%s/sub\n", dir))
			if res.Cwd != dir+"/sub" {
				t.Fatalf("cwd %q", res.Cwd)
			}
			s.ok("cd " + dir)

			// Exit codes, stderr merged as a terminal shows it.
			res = s.run(api.RunRequest{Command: "echo out; echo err >&2; (exit 7)"})
			if *res.ExitCode != 7 || res.Output != "out\nerr\n" {
				t.Fatalf("exit code: %+v", res)
			}

			// Several lines are one command; the exit code is the last one's.
			res = s.run(api.RunRequest{Command: "cat <<'EOF'\nline $1\n  two\nEOF\nfor i in 1 2 3; do\n  echo n$i\ndone\necho a \\\n  b\nfalse\ntrue\n(exit 3)"})
			wantOutput(t, "multi-line", res.Output, "line $1\n  two\nn1\nn2\nn3\na b\n")
			if *res.ExitCode != 3 {
				t.Fatalf("multi-line exit code %d", *res.ExitCode)
			}
			// A syntax error is reported, and the session goes on.
			res = s.run(api.RunRequest{Command: "if then fi"})
			if res.Status != api.StatusCompleted || *res.ExitCode == 0 || res.Output == "" {
				t.Fatalf("syntax error: %+v", res)
			}
			wantOutput(t, "after syntax error", s.ok("echo still"), "still\n")

			// Prompts answered with is_input.
			res = s.run(api.RunRequest{Command: `printf 'name? '; read name; printf 'age? '; read age; echo "hi $name, $age"`, NoOutputTimeoutS: secs(0.5)})
			if res.Status != api.StatusRunning || res.Reason != api.ReasonNoOutput || res.Output != "name? " {
				t.Fatalf("prompt: %+v", res)
			}
			res = s.run(api.RunRequest{Command: "bob", IsInput: true, NoOutputTimeoutS: secs(0.5)})
			if res.Status != api.StatusRunning || res.Output != "age? " {
				t.Fatalf("second prompt: %+v", res)
			}
			res = s.run(api.RunRequest{Command: "42", IsInput: true})
			if res.Status != api.StatusCompleted || res.Output != "hi bob, 42\n" || *res.ExitCode != 0 {
				t.Fatalf("after input: %+v", res)
			}
			// python3 input() prompts the same way.
			// (python starts in well over a second on a loaded machine: the
			// silence that ends the call must be longer than its start.)
			res = s.run(api.RunRequest{Command: `python3 -c 'x = input("py? "); print("got", x)'`, NoOutputTimeoutS: secs(4)})
			if res.Status != api.StatusRunning || res.Output != "py? " {
				t.Fatalf("python prompt: %+v", res)
			}
			res = s.run(api.RunRequest{Command: "answer", IsInput: true})
			wantOutput(t, "python input", res.Output, "got answer\n")

			// Lines of a heredoc fed to a running cat, ended with C-d.
			res = s.run(api.RunRequest{Command: "cat", NoOutputTimeoutS: secs(0.3)})
			if res.Status != api.StatusRunning || res.Output != "" {
				t.Fatalf("cat: %+v", res)
			}
			res = s.run(api.RunRequest{Command: "fed line", IsInput: true, NoOutputTimeoutS: secs(0.3)})
			if res.Status != api.StatusRunning || res.Output != "fed line\n" {
				t.Fatalf("input to cat: %+v", res)
			}
			res = s.run(api.RunRequest{Command: "C-d", IsInput: true})
			if res.Status != api.StatusCompleted || res.Output != "" || *res.ExitCode != 0 {
				t.Fatalf("C-d: %+v", res)
			}

			// Continuation with "" until completion; output is never repeated.
			var out strings.Builder
			res = s.run(api.RunRequest{Command: "for i in 1 2 3 4; do echo step$i; sleep 0.3; done; echo end", TimeoutS: 0.4})
			if res.Status != api.StatusRunning || res.Reason != api.ReasonTimeout {
				t.Fatalf("first slice: %+v", res)
			}
			out.WriteString(res.Output)
			// Busy: any other command is refused while one runs.
			busy := s.run(api.RunRequest{Command: "echo must-not-run"})
			if busy.Status != api.StatusBusy || busy.ExitCode != nil {
				t.Fatalf("busy: %+v", busy)
			}
			out.WriteString(busy.Output)
			for i := 0; res.Status == api.StatusRunning && i < 50; i++ {
				res = s.run(api.RunRequest{Command: "", TimeoutS: 0.4})
				out.WriteString(res.Output)
			}
			if res.Status != api.StatusCompleted || *res.ExitCode != 0 {
				t.Fatalf("continuation: %+v", res)
			}
			wantOutput(t, "continued", out.String(), "step1\nstep2\nstep3\nstep4\nend\n")

			// "" or input with nothing running is an error, not a hang.
			if _, err := e.client.Run(harness.Context(t), s.id, api.RunRequest{Command: ""}); !client.IsCode(err, api.CodeNotRunning) {
				t.Fatalf("empty command while idle: %v", err)
			}
			if _, err := e.client.Run(harness.Context(t), s.id, api.RunRequest{Command: "y", IsInput: true}); !client.IsCode(err, api.CodeNotRunning) {
				t.Fatalf("input while idle: %v", err)
			}

			// C-c of a foreground program, C-z of another.
			res = s.run(api.RunRequest{Command: "sleep 60", NoOutputTimeoutS: secs(0.3)})
			if res.Status != api.StatusRunning {
				t.Fatalf("sleep: %+v", res)
			}
			res = s.interrupt()
			if res.Status != api.StatusCompleted || *res.ExitCode != 130 {
				t.Fatalf("C-c: %+v", res)
			}
			res = s.run(api.RunRequest{Command: "sleep 60", NoOutputTimeoutS: secs(0.3)})
			res = s.run(api.RunRequest{Command: "C-z", IsInput: true})
			if res.Status != api.StatusCompleted || *res.ExitCode != 148 {
				t.Fatalf("C-z: %+v", res)
			}
			// Bring the stopped job back with fg, then interrupt it.
			res = s.run(api.RunRequest{Command: "fg", NoOutputTimeoutS: secs(0.5)})
			if res.Status != api.StatusRunning || !strings.Contains(res.Output, "sleep 60") {
				t.Fatalf("fg: %+v", res)
			}
			res = s.interrupt()
			if res.Status != api.StatusCompleted || *res.ExitCode != 130 {
				t.Fatalf("C-c after fg: %+v", res)
			}

			// The hard timeout and the no-output timeout never kill.
			res = s.run(api.RunRequest{Command: "while true; do echo tick; sleep 0.05; done", TimeoutS: 2, NoOutputTimeoutS: secs(1.5)})
			if res.Status != api.StatusRunning || res.Reason != api.ReasonTimeout || !strings.Contains(res.Output, "tick\n") {
				t.Fatalf("ticking: %+v", res)
			}
			res = s.interrupt()
			if res.Status != api.StatusCompleted {
				t.Fatalf("C-c ticking: %+v", res)
			}

			// A command printing megabytes keeps its head and tail.
			res = s.run(api.RunRequest{Command: "seq 1 300000", TimeoutS: 60})
			if !res.Truncated || !strings.HasPrefix(res.Output, "1\n2\n3\n") || !strings.HasSuffix(res.Output, "\n299999\n300000\n") || len(res.Output) > 70<<10 {
				t.Fatalf("big output: truncated=%v len=%d", res.Truncated, len(res.Output))
			}
			res = s.run(api.RunRequest{Command: "seq 1 3000", MaxOutputBytes: 100})
			if !res.Truncated || len(res.Output) > 200 || !strings.HasSuffix(res.Output, "3000\n") {
				t.Fatalf("max_output_bytes 100: %+v", res)
			}

			// Output is exactly what was printed: no echo, no prompt, even
			// after a program turned echo back on.
			res = s.run(api.RunRequest{Command: "stty echo"})
			wantOutput(t, "stty echo", res.Output, "")
			wantOutput(t, "after stty echo", s.ok("echo clean"), "clean\n")
		})
	}
}

func TestExecutorSessionBackgroundServer(t *testing.T) {
	e := startExecutor(t)
	for _, sh := range sessionShells {
		t.Run(sh.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSession(t, e.client, api.SessionRequest{Shell: sh.spec, Cwd: dir})
			port := freePort(t)
			os.WriteFile(filepath.Join(dir, "index.html"), []byte("served\n"), 0o644)
			// A background server returns at once and keeps running.
			res := s.run(api.RunRequest{Command: fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1 > server.log 2>&1 &", port), TimeoutS: 10})
			if res.Status != api.StatusCompleted || *res.ExitCode != 0 {
				t.Fatalf("background server: %+v", res)
			}
			// The server may take seconds to listen on a loaded machine:
			// the fetch tries for 20 s.
			fetch := fmt.Sprintf(`python3 -c 'import time, urllib.request
for i in range(400):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:%d/index.html").read().decode(), end=""); break
    except OSError: time.sleep(0.05)'`, port)
			wantOutput(t, "fetch from background server", s.ok(fetch), "served\n")
			// nohup'd jobs too.
			res = s.run(api.RunRequest{Command: "nohup sleep 30 > /dev/null 2>&1 &", TimeoutS: 10})
			if res.Status != api.StatusCompleted {
				t.Fatalf("nohup: %+v", res)
			}
			// SIGKILL: a SIGTERM that reaches a job's forked shell before it
			// resets the interactive shell's ignored signals is lost, and the
			// job then runs on (busybox ash, on a loaded machine).
			s.ok("kill -KILL %1 %2; wait; true")

			// C-c of a server started in the foreground, once it serves (a
			// C-c during python's start interrupts its imports instead).
			res = s.run(api.RunRequest{Command: fmt.Sprintf("python3 -m http.server %d --bind 127.0.0.1", port), NoOutputTimeoutS: secs(1)})
			if res.Status != api.StatusRunning || res.Reason != api.ReasonNoOutput {
				t.Fatalf("foreground server: %+v", res)
			}
			waitServing(t, fmt.Sprintf("http://127.0.0.1:%d/index.html", port))
			res = s.run(api.RunRequest{Command: "C-c", IsInput: true, TimeoutS: 10})
			if res.Status != api.StatusCompleted || !strings.Contains(res.Output, "Keyboard interrupt received") {
				t.Fatalf("C-c of foreground server: %+v", res)
			}
			wantOutput(t, "after C-c", s.ok("echo next"), "next\n")
		})
	}
}

// waitServing waits until url answers 200 (bounded).
func waitServing(t *testing.T, url string) {
	t.Helper()
	cl := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := cl.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 60s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestExecutorSessionRecovers(t *testing.T) {
	e := startExecutor(t)
	for _, sh := range sessionShells {
		t.Run(sh.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSession(t, e.client, api.SessionRequest{Shell: sh.spec, Cwd: dir})
			s.ok("mkdir -p d && cd d && X=1")

			// set -e, then a failing command: the shell dies, the session
			// says so, and the next command gets a fresh shell.
			s.ok("set -e")
			res := s.run(api.RunRequest{Command: "echo before; false; echo after"})
			if res.Status != api.StatusExited || *res.ExitCode != 1 || res.Output != "before\n" {
				t.Fatalf("set -e failure: %+v", res)
			}
			res = s.run(api.RunRequest{Command: `echo "fresh X=$X"; pwd`})
			if res.Status != api.StatusCompleted || res.Output != "fresh X=\n"+dir+"/d\n" || !strings.Contains(res.Notice, "exited with status 1") {
				t.Fatalf("after set -e: %+v", res)
			}

			// exit N likewise.
			res = s.run(api.RunRequest{Command: "exit 4"})
			if res.Status != api.StatusExited || *res.ExitCode != 4 {
				t.Fatalf("exit: %+v", res)
			}
			res = s.run(api.RunRequest{Command: "echo again"})
			if res.Output != "again\n" || !strings.Contains(res.Notice, "status 4") {
				t.Fatalf("after exit: %+v", res)
			}

			// A command killing its own process group (here: the shell's).
			res = s.run(api.RunRequest{Command: "kill -9 0"})
			if res.Status != api.StatusExited {
				t.Fatalf("kill -9 0: %+v", res)
			}
			// The shell killed from outside between commands.
			res = s.run(api.RunRequest{Command: "kill -9 $$"})
			if res.Status != api.StatusExited {
				t.Fatalf("kill -9 $$: %+v", res)
			}
			wantOutput(t, "after kills", s.ok("echo alive"), "alive\n")
			if _, err := e.client.Health(harness.Context(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestExecutorSessionsRunInParallel: a command in one session waits for a
// file that a command in another session creates; if sessions were
// serialised it would time out.
func TestExecutorSessionsRunInParallel(t *testing.T) {
	e := startExecutor(t)
	dir := t.TempDir()
	flag := filepath.Join(dir, "flag")
	a := newSession(t, e.client, api.SessionRequest{})
	b := newSession(t, e.client, api.SessionRequest{Shell: "/usr/bin/busybox sh"})
	var wg sync.WaitGroup
	var resA api.RunResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		resA, _ = e.client.Run(context.Background(), a.id, api.RunRequest{
			Command: "while [ ! -e " + flag + " ]; do sleep 0.02; done; echo saw-flag", TimeoutS: 30,
		})
	}()
	time.Sleep(100 * time.Millisecond)
	wantOutput(t, "session b", b.ok("touch "+flag+"; echo made-flag"), "made-flag\n")
	wg.Wait()
	if resA.Status != api.StatusCompleted || resA.Output != "saw-flag\n" {
		t.Fatalf("session a: %+v", resA)
	}
	list, err := e.client.ListSessions(harness.Context(t))
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}

	// A call arriving while another waits on the same session is refused
	// at once, and runs nothing.
	waiting := make(chan api.RunResult)
	go func() {
		r, _ := e.client.Run(context.Background(), a.id, api.RunRequest{Command: "while [ ! -e " + flag + "2 ]; do sleep 0.02; done", TimeoutS: 30})
		waiting <- r
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l, _ := e.client.ListSessions(harness.Context(t)); len(l) == 2 && (l[0].Running && l[0].ID == a.id || l[1].Running && l[1].ID == a.id) {
			break
		}
	}
	if _, err := e.client.Run(harness.Context(t), a.id, api.RunRequest{Command: ""}); !client.IsCode(err, api.CodeBusy) {
		t.Fatalf("second waiter: %v", err)
	}
	res, err := e.client.Run(harness.Context(t), a.id, api.RunRequest{Command: "touch " + flag + "3"})
	if err != nil || res.Status != api.StatusBusy {
		t.Fatalf("command during a wait: %+v %v", res, err)
	}
	os.WriteFile(flag+"2", nil, 0o644)
	if r := <-waiting; r.Status != api.StatusCompleted {
		t.Fatalf("first waiter: %+v", r)
	}
	if _, err := os.Stat(flag + "3"); err == nil {
		t.Fatal("a command refused as busy ran anyway")
	}
}

func TestExecutorSessionLifecycle(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	s, err := e.client.CreateSession(ctx, api.SessionRequest{User: "nobody", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.client.Run(ctx, s.ID, api.RunRequest{Command: "id -u; sleep 100 & echo $!"})
	if err != nil || res.Status != api.StatusCompleted {
		t.Fatalf("%+v %v", res, err)
	}
	lines := strings.Fields(res.Output)
	if len(lines) < 2 || lines[0] != "65534" {
		t.Fatalf("output %q", res.Output)
	}
	var bg int
	fmt.Sscan(lines[len(lines)-1], &bg)
	// Deleting a session kills its shell and its jobs.
	if err := e.client.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	waitGone(t, bg, "background job of a deleted session")
	if _, err := e.client.Run(ctx, s.ID, api.RunRequest{Command: "true"}); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("run on deleted session: %v", err)
	}
	if err := e.client.DeleteSession(ctx, s.ID); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	for _, bad := range []api.SessionRequest{{Shell: "no-such-shell"}, {Cwd: "/no/such/dir"}, {User: "no-such-user"}} {
		if _, err := e.client.CreateSession(ctx, bad); !client.IsCode(err, api.CodeBadRequest) {
			t.Fatalf("create %+v: %v", bad, err)
		}
	}
	// sh where there is no bash: the default shell falls back to sh.
	s2, err := e.client.CreateSession(ctx, api.SessionRequest{Env: map[string]string{"PATH": "/nonexistent"}})
	if err != nil {
		t.Fatalf("session without bash in PATH: %v", err)
	}
	defer e.client.DeleteSession(ctx, s2.ID)
	if strings.Contains(s2.Shell, "bash") {
		t.Fatalf("shell %q, want sh", s2.Shell)
	}
}

// The executor writes each command into the command file it created, by
// descriptor: a session user who replaces that file (with a symlink to a
// file only root may write, say) does not get the executor, which runs as
// root, to write through it.
func TestExecutorSessionCommandFileIsNotFollowed(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := e.client.CreateSession(ctx, api.SessionRequest{User: "nobody", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.client.DeleteSession(ctx, s.ID)
	// The prompt file is exported as ENV; the command file sits beside it.
	res, err := e.client.Run(ctx, s.ID, api.RunRequest{Command: `d=$(dirname "$ENV"); rm -f "$d/cmd" && ln -s ` + victim + ` "$d/cmd" && echo swapped`, TimeoutS: 30})
	if err != nil || res.Status != api.StatusCompleted || !strings.Contains(res.Output, "swapped") {
		t.Fatalf("swap the command file: %+v %v", res, err)
	}
	// The next command goes to the executor's own file; the shell then
	// sources the symlink, which nobody may not read: an error, no harm.
	if _, err := e.client.Run(ctx, s.ID, api.RunRequest{Command: "echo overwritten", TimeoutS: 30}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != "root's\n" {
		t.Fatalf("the file behind the symlink now holds %q (%v)", got, err)
	}
}

// The sessions' scratch directory is made by the first session, not at
// start: an executor that runs no session never writes it, and one whose
// directory cannot be made still starts and runs commands, the session
// failing with the reason (and the next one trying again).
func TestExecutorSessionScratchMadeOnFirstSession(t *testing.T) {
	ctx := harness.Context(t)
	dir := t.TempDir()
	scratch := filepath.Join(dir, "scratch")
	e := startExecutor(t, "--scratch-dir", scratch)
	if _, err := e.client.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := e.client.Exec(ctx, api.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("scratch directory before any session: %v, want none", err)
	}
	s := newSession(t, e.client, api.SessionRequest{})
	if st, err := os.Stat(scratch); err != nil || !st.IsDir() {
		t.Fatalf("scratch directory after the first session: %v", err)
	}
	wantOutput(t, "session", s.ok("echo hi"), "hi\n")

	// A scratch directory that cannot be made (a file is in its way).
	blocked := filepath.Join(dir, "blocked")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e2 := startExecutor(t, "--scratch-dir", filepath.Join(blocked, "scratch"))
	if res, err := e2.client.Exec(ctx, api.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec with no scratch directory: %+v %v", res, err)
	}
	if _, err := e2.client.CreateSession(ctx, api.SessionRequest{}); err == nil || !strings.Contains(err.Error(), "scratch directory") {
		t.Fatalf("session without a scratch directory: %v, want its error", err)
	}
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	s2 := newSession(t, e2.client, api.SessionRequest{})
	wantOutput(t, "session after the directory could be made", s2.ok("echo again"), "again\n")
}
