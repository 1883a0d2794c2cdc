package proc

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// collected is the output of a run, per stream.
type collected struct {
	mu    sync.Mutex
	out   [2]bytes.Buffer
	reads [2][][]byte
}

func (c *collected) sink(stream int, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out[stream].Write(b)
	c.reads[stream] = append(c.reads[stream], append([]byte(nil), b...))
	return nil
}

func (c *collected) String(stream int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out[stream].String()
}

// shCommand is sh -c script with two output pipes; it returns the command
// and its output's read ends.
func shCommand(t *testing.T, script string, group Group) (Command, []*os.File) {
	t.Helper()
	c := Command{Argv: []string{"sh", "-c", script}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"}, Group: group}
	var outputs []*os.File
	for i := 1; i <= 2; i++ {
		r, w, err := OutputPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.Stdio[i] = w
		c.Close = append(c.Close, w)
		outputs = append(outputs, r)
	}
	return c, outputs
}

func newSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	sup, err := NewSupervisor()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.Close)
	return sup
}

func TestRunStreamsOutputAndReportsTheExit(t *testing.T) {
	sup := newSupervisor(t)
	for _, tc := range []struct {
		script    string
		code      int
		signal    string
		out, errs string
	}{
		{"echo out; echo err >&2; exit 3", 3, "", "out\n", "err\n"},
		{"echo $PWD", 0, "", "/\n", ""},
		{"kill -TERM $$", 128 + int(unix.SIGTERM), "SIGTERM", "", ""},
		{"kill -KILL $$", 137, "SIGKILL", "", ""},
	} {
		c, outputs := shCommand(t, tc.script, OwnGroup)
		var got collected
		var startedPid int
		r, err := sup.Run(c, Output{Files: outputs, Sink: got.sink}, Limits{}, func(p *Process) { startedPid = p.Pid })
		if err != nil {
			t.Fatalf("%s: %v", tc.script, err)
		}
		if r.ExitCode != tc.code || r.Signal != tc.signal || r.TimedOut {
			t.Errorf("%s: exit %d %q timed out %v, want %d %q", tc.script, r.ExitCode, r.Signal, r.TimedOut, tc.code, tc.signal)
		}
		if got.String(0) != tc.out || got.String(1) != tc.errs {
			t.Errorf("%s: stdout %q stderr %q, want %q %q", tc.script, got.String(0), got.String(1), tc.out, tc.errs)
		}
		if startedPid <= 0 || r.Duration <= 0 {
			t.Errorf("%s: started pid %d, duration %v", tc.script, startedPid, r.Duration)
		}
	}
}

func TestRunMeasuresCPUAndMemory(t *testing.T) {
	sup := newSupervisor(t)
	// A busy loop for a while, in the shell itself (its children would be
	// counted too, since it waits for them).
	c, outputs := shCommand(t, "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done", OwnGroup)
	r, err := sup.Run(c, Output{Files: outputs, Sink: func(int, []byte) error { return nil }}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.User+r.Sys <= 0 || r.MaxRSSBytes < 64<<10 {
		t.Fatalf("user %v sys %v max rss %d: want CPU time and a resident set", r.User, r.Sys, r.MaxRSSBytes)
	}
}

func TestRunPutsTheCommandInItsOwnGroupOrSession(t *testing.T) {
	sup := newSupervisor(t)
	for _, g := range []Group{OwnGroup, OwnSession} {
		c, outputs := shCommand(t, "echo $$; cut -d' ' -f5,6 /proc/$$/stat", g)
		var got collected
		if _, err := sup.Run(c, Output{Files: outputs, Sink: got.sink}, Limits{}, nil); err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(got.String(0))
		if len(lines) != 3 {
			t.Fatalf("group %d: output %q", g, got.String(0))
		}
		pid, pgid, sid := lines[0], lines[1], lines[2]
		if pgid != pid {
			t.Errorf("group %d: pgid %s, pid %s", g, pgid, pid)
		}
		sidNum, _ := unix.Getsid(0)
		self := strconv.Itoa(sidNum)
		if g == OwnSession && sid != pid || g == OwnGroup && sid == pid {
			t.Errorf("group %d: sid %s, pid %s, the test's session %s", g, sid, pid, self)
		}
	}
}

func TestRunTimeoutKillsTheWholeGroup(t *testing.T) {
	sup := newSupervisor(t)
	// The background sleep keeps the output open and outlives the shell
	// unless its group is killed.
	c, outputs := shCommand(t, "sleep 60 & echo $!; wait", OwnGroup)
	var got collected
	begin := time.Now()
	r, err := sup.Run(c, Output{Files: outputs, Sink: got.sink}, Limits{Timeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.ExitCode != sbx.ExitTimeout || r.Signal != "SIGKILL" {
		t.Fatalf("exit %d %q timed out %v, want %d SIGKILL timed out", r.ExitCode, r.Signal, r.TimedOut, sbx.ExitTimeout)
	}
	if el := time.Since(begin); el > 20*time.Second {
		t.Fatalf("the run took %v", el)
	}
	child, err := strconv.Atoi(strings.TrimSpace(got.String(0)))
	if err != nil {
		t.Fatalf("background pid: %q", got.String(0))
	}
	waitGone(t, child)
}

func TestRunCancelAndAFailingSinkKillTheCommand(t *testing.T) {
	sup := newSupervisor(t)
	cancel := make(chan struct{})
	c, outputs := shCommand(t, "echo started; exec sleep 60", OwnGroup)
	r, err := sup.Run(c, Output{Files: outputs, Sink: func(int, []byte) error { close(cancel); return nil }}, Limits{Cancel: cancel}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Signal != "SIGKILL" || r.TimedOut {
		t.Fatalf("cancelled: exit %d %q timed out %v", r.ExitCode, r.Signal, r.TimedOut)
	}
	c, outputs = shCommand(t, "echo started; exec sleep 60", OwnGroup)
	r, err = sup.Run(c, Output{Files: outputs, Sink: func(int, []byte) error { return errors.New("the caller went away") }}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Signal != "SIGKILL" {
		t.Fatalf("sink failed: exit %d %q", r.ExitCode, r.Signal)
	}
}

// A cancel or a timeout with a StopSignal sends it to the group first: a
// command that handles it ends in its own way (its output kept), one that
// ignores it is killed StopGrace later.
func TestRunStopsGracefullyWithAStopSignal(t *testing.T) {
	sup := newSupervisor(t)
	cancel := make(chan struct{})
	c, outputs := shCommand(t, `trap 'echo cleaned up; exit 3' TERM; echo started; while :; do sleep 0.05; done`, OwnGroup)
	var got collected
	var once sync.Once
	sink := func(stream int, b []byte) error {
		once.Do(func() { close(cancel) })
		return got.sink(stream, b)
	}
	r, err := sup.Run(c, Output{Files: outputs, Sink: sink}, Limits{Cancel: cancel, StopSignal: unix.SIGTERM, StopGrace: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 3 || r.Signal != "" || !strings.Contains(got.String(0), "cleaned up") {
		t.Fatalf("cancelled with SIGTERM: exit %d %q, output %q; want the trap's exit 3", r.ExitCode, r.Signal, got.String(0))
	}

	c, outputs = shCommand(t, `trap '' TERM; echo started; while :; do sleep 0.05; done`, OwnGroup)
	start := time.Now()
	r, err = sup.Run(c, Output{Files: outputs, Sink: (&collected{}).sink}, Limits{Timeout: 100 * time.Millisecond, StopSignal: unix.SIGTERM, StopGrace: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.ExitCode != sbx.ExitTimeout || r.Signal != "SIGKILL" || time.Since(start) < 400*time.Millisecond {
		t.Fatalf("ignoring SIGTERM past its timeout: exit %d %q timed out %v after %v; want SIGKILL after the grace", r.ExitCode, r.Signal, r.TimedOut, time.Since(start))
	}
}

// A background child that holds the output open does not hold the run:
// the output is read for DrainGrace after the command exited, then left.
func TestRunStopsReadingOutputHeldOpenByABackgroundChild(t *testing.T) {
	sup := newSupervisor(t)
	c, outputs := shCommand(t, "sleep 60 & echo $!; exit 5", OwnGroup)
	var got collected
	begin := time.Now()
	r, err := sup.Run(c, Output{Files: outputs, Sink: got.sink}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 5 {
		t.Fatalf("exit %d", r.ExitCode)
	}
	if el := time.Since(begin); el > 10*time.Second {
		t.Fatalf("the run waited %v for a background child", el)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(got.String(0)))
	if child <= 0 || unix.Kill(child, 0) != nil {
		t.Fatalf("the background child %q should still run (only a timeout kills the group)", got.String(0))
	}
	_ = unix.Kill(child, unix.SIGKILL)
	waitGone(t, child)
}

func TestRunReportsCommandsThatCannotStart(t *testing.T) {
	sup := newSupervisor(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/data", []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/badexec", []byte("\x7fELF garbage"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv0 string
		code  int
	}{
		{"no-such-command", 127},
		{dir + "/missing", 127},
		{dir + "/data", 126},
		{dir + "/badexec", 126},
	} {
		r, w, err := OutputPipe()
		if err != nil {
			t.Fatal(err)
		}
		c := Command{Argv: []string{tc.argv0}, Dir: "/", Env: []string{"PATH=" + dir}, Close: []*os.File{w}}
		c.Stdio[1] = w
		called := false
		_, err = sup.Run(c, Output{Files: []*os.File{r}, Sink: func(int, []byte) error { return nil }}, Limits{}, func(*Process) { called = true })
		var se *StartError
		if !errors.As(err, &se) || se.Code != tc.code || called {
			t.Errorf("%s: %v (started %v), want a start error with code %d", tc.argv0, err, called, tc.code)
		}
		// Run closed both ends.
		if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: the read end is still open: %v", tc.argv0, err)
		}
		if err := w.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: the write end is still open: %v", tc.argv0, err)
		}
	}
}

func TestRunWholeRunesKeepsEveryReadValidUTF8(t *testing.T) {
	sup := newSupervisor(t)
	// "é" is 0xc3 0xa9: its two bytes arrive in two writes, apart.
	c, outputs := shCommand(t, `printf 'a\303'; sleep 0.2; printf '\251b'`, OwnGroup)
	var got collected
	if _, err := sup.Run(c, Output{Files: outputs, Sink: got.sink, WholeRunes: true}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	if got.String(0) != "aéb" {
		t.Fatalf("output %q", got.String(0))
	}
	for _, b := range got.reads[0] {
		if !utf8.Valid(b) {
			t.Fatalf("a read cut a character: %q of %q", b, got.reads[0])
		}
	}
	// An incomplete sequence at the end still arrives.
	c, outputs = shCommand(t, `printf 'z\303'`, OwnGroup)
	got = collected{}
	if _, err := sup.Run(c, Output{Files: outputs, Sink: got.sink, WholeRunes: true}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	if got.String(0) != "z\xc3" {
		t.Fatalf("output %q", got.String(0))
	}
}

func TestCompleteUTF8(t *testing.T) {
	for in, want := range map[string]int{"": 0, "abc": 3, "a\xc3": 1, "a\xc3\xa9": 3, "\xe2\x82": 0, "\xe2\x82\xac": 3, "\xf0\x9f\x98": 0, "\xa9\xa9\xa9\xa9": 4} {
		if got := completeUTF8([]byte(in)); got != want {
			t.Errorf("completeUTF8(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestWaitKillsALaunchedCommandAtItsTimeout(t *testing.T) {
	sup := newSupervisor(t)
	p, err := sup.Launch(Command{Argv: []string{"sleep", "60"}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"}, Group: OwnSession})
	if err != nil {
		t.Fatal(err)
	}
	r := sup.Wait(p, nil, Limits{Timeout: 100 * time.Millisecond})
	if !r.TimedOut || r.Signal != "SIGKILL" || !p.Exited() {
		t.Fatalf("exit %d %q timed out %v exited %v", r.ExitCode, r.Signal, r.TimedOut, p.Exited())
	}
}

// waitGone waits until pid is gone (reaped by the supervisor as an orphan).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); unix.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
	}
}
