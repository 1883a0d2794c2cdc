package proc

import (
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStatFieldSurvivesOddCommandNames(t *testing.T) {
	stat := []byte("1234 (a) b (c)) S 77 1234 99 0 -1")
	if got := statField(stat, 4); got != 77 {
		t.Fatalf("ppid = %d", got)
	}
	if got := statField(stat, 6); got != 99 {
		t.Fatalf("sid = %d", got)
	}
	if got := statField([]byte("garbage"), 4); got != -1 {
		t.Fatalf("garbage = %d", got)
	}
}

func TestBuildEnv(t *testing.T) {
	env := BuildEnv([]string{"A=1", "PATH=/img", "B=2"}, map[string]string{"B": "3", "C": "4"}, Identity{Name: "u", Home: "/home/u"})
	want := "A=1 PATH=/img B=3 C=4 HOME=/home/u USER=u LOGNAME=u"
	if strings.Join(env, " ") != want {
		t.Fatalf("env %v, want %s", env, want)
	}
	if Getenv(env, "B") != "3" || Getenv(env, "NOPE") != "" {
		t.Fatal("Getenv")
	}
	if env := BuildEnv(nil, nil, Identity{Home: "/"}); Getenv(env, "PATH") != DefaultPath {
		t.Fatalf("default PATH missing: %v", env)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/tool", []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(dir+"/data", nil, 0o644)
	env := []string{"PATH=/nonexistent:" + dir}
	if p, err := LookPath("tool", env, "/"); err != nil || p != dir+"/tool" {
		t.Fatalf("tool: %q %v", p, err)
	}
	if _, err := LookPath("data", env, "/"); err == nil {
		t.Fatal("found a non-executable file")
	}
	if p, _ := LookPath("./x", env, "/"); p != "./x" {
		t.Fatalf("a path with a slash is kept: %q", p)
	}
}

func TestSupervisorReapsChildrenAndOrphans(t *testing.T) {
	sup, err := NewSupervisor()
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	sh := "/bin/sh"
	p, err := sup.Start(sh, []string{"sh", "-c", "sleep 0.1 & exit 3"}, &os.ProcAttr{
		Files: []*os.File{nil, nil, nil}, Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("child never reaped")
	}
	if code, sig := p.ExitCode(); code != 3 || sig != "" {
		t.Fatalf("exit %d %q", code, sig)
	}
	// The orphaned sleep comes back to this process (a subreaper) and is
	// reaped without an owner.
	for deadline := time.Now().Add(10 * time.Second); sup.Orphans() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("orphan never reaped")
		}
	}
	p, err = sup.Start(sh, []string{"sh", "-c", "kill -KILL $$"}, &os.ProcAttr{Files: []*os.File{nil, nil, nil}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if code, sig := p.ExitCode(); code != 137 || sig != "SIGKILL" {
		t.Fatalf("killed: %d %q", code, sig)
	}
	if len(sup.Running()) != 0 {
		t.Fatalf("still running: %v", sup.Running())
	}
}

func TestSecondsCaps(t *testing.T) {
	if Seconds(1.5) != 1500*time.Millisecond || Seconds(1e300) != MaxTimeout || Seconds(1e12) != MaxTimeout {
		t.Fatal("Seconds")
	}
}

// A child is reaped when it exits even with SIGCHLD out of the picture
// (its pidfd wakes the reaper), it sees only the descriptors it was given,
// and nothing of the supervisor's (pidfds, pipes) is left open afterwards.
func TestSupervisorReapsByPidfdAndLeaksNothing(t *testing.T) {
	sup, err := NewSupervisor()
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	if !sup.pidfds {
		t.Fatal("this kernel gives no pidfds (CLONE_PIDFD, Linux 5.3); the executor relies on them to reap at once")
	}
	signal.Stop(sup.sigc)                   // only the pidfd can reap now
	if r, w, err := os.Pipe(); err == nil { // Go's poller has its descriptors before the count
		r.Close()
		w.Close()
	}
	fdsBefore := openFDs(t)
	// Descriptors this test process inherited without close-on-exec reach
	// every child; anything else would be a leak.
	want := map[string]bool{"0": true, "1": true, "2": true} // 0: ls's own directory
	for fd, flags := range fdFlags(t) {
		if flags&syscall.O_CLOEXEC == 0 && fd > 2 {
			want[strconv.Itoa(fd)] = true
		}
	}
	for i := range 20 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		p, err := sup.Start("/bin/sh", []string{"sh", "-c", "ls /proc/self/fd; exit 7"}, &os.ProcAttr{
			Files: []*os.File{nil, w, w}, Sys: &syscall.SysProcAttr{Setpgid: true},
		})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(r)
		r.Close()
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: child not reaped without SIGCHLD", i)
		}
		if code, _ := p.ExitCode(); code != 7 {
			t.Fatalf("exit code %d", code)
		}
		got := strings.Fields(string(out))
		for _, fd := range got {
			if !want[fd] {
				t.Fatalf("the child has descriptors %v; %s is not one it was given", got, fd)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("the child has descriptors %v, want %v", got, want)
		}
	}
	// Other tests' reapers may still close descriptors of theirs: the
	// count only has to come back to where it was (20 leaked pidfds or
	// pipes would not).
	for deadline := time.Now().Add(5 * time.Second); openFDs(t) > fdsBefore; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open before 20 commands, %d after", fdsBefore, openFDs(t))
		}
	}
}

// fdFlags returns the open descriptors of this process and their flags.
func fdFlags(t *testing.T) map[int]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[int]int{}
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue // the directory's own descriptor, gone
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
				flags[fd] = int(n)
			}
		}
	}
	return flags
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
