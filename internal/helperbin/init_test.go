package helperbin

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// withInit runs f with the embedded sbx-init (cmd/sbx-init/c), the one
// init of one-shot runs.
func withInit(t *testing.T, f func(t *testing.T, bin string)) {
	roottest.Require(t, "it starts sbx-init as PID 1 of a PID namespace")
	bin, err := Install(t.TempDir(), Init)
	if err != nil {
		t.Fatal(err)
	}
	f(t, bin)
}

// initStatus is the status line sbx-init writes (isolate/initstatus.Status).
type initStatus struct {
	ExitCode  int    `json:"exit_code"`
	Signal    int    `json:"signal"`
	ExecError string `json:"exec_error"`
}

// runInit runs the embedded sbx-init as PID 1 of a PID namespace of its
// own (as in a sandbox: its lifeline kills "every process" there, which
// on the host would be every process of the machine), with the status
// pipe as fd 3 and extra files after it. It returns the exit code, the
// status, stdout and stderr.
func runInit(t *testing.T, bin string, extra []*os.File, args ...string) (int, *initStatus, string, string) {
	t.Helper()
	cmd, statusR, stdout, stderr := startInit(t, bin, extra, args...)
	err := cmd.Wait()
	return initResult(t, cmd, err, statusR, stdout, stderr)
}

// runInitIgnoring is runInit with SIGUSR1, SIGPIPE and SIGCHLD ignored
// when the init starts (coreutils' env --ignore-signal execs it).
func runInitIgnoring(t *testing.T, bin string, args ...string) (int, *initStatus, string, string) {
	t.Helper()
	cmd, statusR, stdout, stderr := startInit(t, bin, nil, append([]string{"\x00ignoring"}, args...)...)
	err := cmd.Wait()
	return initResult(t, cmd, err, statusR, stdout, stderr)
}

func startInit(t *testing.T, initPath string, extra []*os.File, args ...string) (*exec.Cmd, *os.File, *syncBuffer, *syncBuffer) {
	t.Helper()
	return startInitIn(t, initPath, nil, "", extra, args...)
}

// startInitIn is startInit with the init's environment and directory.
func startInitIn(t *testing.T, initPath string, env []string, dir string, extra []*os.File, args ...string) (*exec.Cmd, *os.File, *syncBuffer, *syncBuffer) {
	t.Helper()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(initPath, append([]string{"reaper", "--status-fd", "3"}, args...)...)
	if len(args) > 0 && args[0] == "\x00ignoring" {
		cmd = exec.Command("env", append([]string{"--ignore-signal=USR1", "--ignore-signal=PIPE", "--ignore-signal=CHLD", initPath, "reaper", "--status-fd", "3"}, args[1:]...)...)
	}
	cmd.ExtraFiles = append([]*os.File{statusW}, extra...)
	cmd.Env, cmd.Dir = env, dir
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sbx-init in a PID namespace (needs root): %v", err)
	}
	statusW.Close()
	return cmd, statusR, &stdout, &stderr
}

func initResult(t *testing.T, cmd *exec.Cmd, err error, statusR *os.File, stdout, stderr *syncBuffer) (int, *initStatus, string, string) {
	t.Helper()
	defer statusR.Close()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(statusR)
	var st *initStatus
	if len(data) > 0 {
		st = &initStatus{}
		if err := json.Unmarshal(data, st); err != nil || !strings.HasSuffix(string(data), "}\n") {
			t.Fatalf("status %q: %v", data, err)
		}
	}
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return code, st, stdout.String(), stderr.String()
}

// syncBuffer is an output buffer the test reads while the process writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestInitOutcomes: the exit code and the status line of sbx-init for
// commands that exit, die of a signal or cannot start: the host's
// initstatus.Decide reads both.
func TestInitOutcomes(t *testing.T) {
	withInit(t, func(t *testing.T, bin string) {
		for _, c := range []struct {
			name string
			args []string
			code int
			st   initStatus
		}{
			{"ok", []string{"--", "true"}, 0, initStatus{}},
			{"exit 3", []string{"--", "sh", "-c", "exit 3"}, 3, initStatus{ExitCode: 3}},
			{"signal", []string{"--", "sh", "-c", "kill -TERM $$"}, 143, initStatus{ExitCode: 143, Signal: 15}},
			{"not found", []string{"--", "no-such-command"}, 127,
				initStatus{ExitCode: 127, ExecError: `exec: "no-such-command": executable file not found in $PATH`}},
			{"no such path", []string{"--", "/no/such"}, 127, initStatus{ExitCode: 127, ExecError: `exec: "/no/such": stat /no/such: no such file or directory`}},
			{"not executable", []string{"--", "/etc/passwd"}, 126, initStatus{ExitCode: 126, ExecError: `exec: "/etc/passwd": permission denied`}},
			{"directory", []string{"--", "/"}, 126, initStatus{ExitCode: 126, ExecError: `exec: "/": is a directory`}},
			{"flags after =", []string{"--tty=false", "true"}, 0, initStatus{}},
		} {
			t.Run(c.name, func(t *testing.T) {
				code, st, _, stderr := runInit(t, bin, nil, c.args...)
				if code != c.code || st == nil || *st != c.st {
					t.Errorf("exit %d, status %+v (stderr %q); want %d, %+v", code, st, stderr, c.code, c.st)
				}
			})
		}
		for _, bad := range [][]string{{"--"}, {"--bogus", "1", "--", "true"}, {"--status-fd", "x", "--", "true"}} {
			if code, st, _, stderr := runInit(t, bin, nil, bad...); code != 125 || st != nil || stderr == "" {
				t.Errorf("%q: exit %d, status %+v, stderr %q; want 125, no status and a message", bad, code, st, stderr)
			}
		}
	})
}

// TestInitCommandEnvironment: the command runs in its own process group
// with only stdin, stdout and stderr of the init's descriptors, and no
// signal ignored or blocked (the init blocks them all for itself).
func TestInitCommandEnvironment(t *testing.T) {
	withInit(t, func(t *testing.T, bin string) {
		leak, err := os.Open("/dev/null")
		if err != nil {
			t.Fatal(err)
		}
		defer leak.Close()
		script := `ls /proc/self/fd | tr '\n' ' '; echo; grep -E '^(SigIgn|SigBlk)' /proc/self/status; ` +
			`set -- $(cat /proc/self/stat); echo pgid-is-own=$([ "$4" = "$5" ] && echo yes)` // cat's parent (sh) leads its group
		code, st, out, stderr := runInit(t, bin, []*os.File{leak}, "--", "sh", "-c", script)
		_, _, ignored, _ := runInitIgnoring(t, bin, "--", "grep", "^SigIgn:", "/proc/self/status")
		if ignored != "SigIgn:\t0000000000000000\n" {
			t.Errorf("a signal the init inherited as ignored stays ignored for the command: %q", ignored)
		}
		// An inherited SIGCHLD "ignored" must not hide the command's exit.
		if code, st, _, stderr := runInitIgnoring(t, bin, "--", "sh", "-c", "sleep 0.1; exit 3"); code != 3 || st == nil || st.ExitCode != 3 {
			t.Errorf("started with SIGCHLD ignored: exit %d status %+v stderr %q; want 3", code, st, stderr)
		}
		// An empty $PATH entry is the current directory, which Go's LookPath
		// refuses to run from (exec.ErrDot).
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "here"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd, statusR, stdout, stderr2 := startInitIn(t, bin, []string{"PATH=:"}, dir, nil, "--", "here")
		werr := cmd.Wait()
		code2, st2, _, _ := initResult(t, cmd, werr, statusR, stdout, stderr2)
		if want := `exec: "here": cannot run executable found relative to current directory`; code2 != 126 || st2 == nil || st2.ExecError != want {
			t.Errorf("PATH=\":\": exit %d status %+v; want 126 and %q", code2, st2, want)
		}
		if code != 0 || st == nil || st.ExitCode != 0 {
			t.Fatalf("exit %d status %+v stderr %q", code, st, stderr)
		}
		lines := strings.Split(out, "\n")
		// sh's own fds: 0 1 2 and the one ls opens to list them.
		if fds := strings.Fields(lines[0]); len(fds) != 4 || fds[0] != "0" || fds[1] != "1" || fds[2] != "2" {
			t.Errorf("the command inherited descriptors beyond stdio: %q", lines[0])
		}
		for _, want := range []string{"SigIgn:\t0000000000000000", "SigBlk:\t0000000000000000", "pgid-is-own=yes"} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("command environment lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestInitForwardsSignalsAndReaps: a signal to PID 1 reaches the command
// (here: its whole process group), and the init exits with the command's
// status once it is gone.
func TestInitForwardsSignalsAndReaps(t *testing.T) {
	withInit(t, func(t *testing.T, bin string) {
		cmd, statusR, stdout, stderr := startInit(t, bin, nil, "--", "sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done")
		waitUntil(t, func() bool { return strings.Contains(stdout.String(), "ready") })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		code, st, out, errOut := initResult(t, cmd, err, statusR, stdout, stderr)
		if code != 7 || st == nil || st.ExitCode != 7 || !strings.Contains(out, "got-term") {
			t.Errorf("after SIGTERM: exit %d status %+v stdout %q stderr %q; want 7 and the trap's output", code, st, out, errOut)
		}
	})
}

// TestInitLifeline: when the lifeline's write end closes (the host's sbx
// died), the init kills every process of its PID namespace and exits.
func TestInitLifeline(t *testing.T) {
	withInit(t, func(t *testing.T, bin string) {
		lifeR, lifeW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd, statusR, stdout, stderr := startInit(t, bin, []*os.File{lifeR}, "--lifeline-fd", "4", "--",
			"sh", "-c", "setsid sleep 300 & echo ready; wait")
		lifeR.Close()
		waitUntil(t, func() bool { return strings.Contains(stdout.String(), "ready") })
		time.Sleep(50 * time.Millisecond) // the orphan-to-be has started
		lifeW.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("sbx-init did not end the sandbox when its lifeline closed")
		}
		code, _, _, errOut := initResult(t, cmd, err, statusR, stdout, stderr)
		if code != 137 {
			t.Errorf("after the lifeline closed: exit %d (stderr %q), want 137", code, errOut)
		}
	})
}

// TestInitLoadsSeccomp: the compiled program read from --seccomp-fd
// ("SBXF", flags, classic BPF) applies to the command: here one that
// fails mkdir and mkdirat with EPERM. A malformed program stops the init
// with 126 before anything runs.
func TestInitLoadsSeccomp(t *testing.T) {
	withInit(t, func(t *testing.T, bin string) {
		const ret, errnoEPERM = unix.BPF_RET | unix.BPF_K, 0x00050000 | 1 // SECCOMP_RET_ERRNO | EPERM
		insns := [][4]uint32{
			{unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, 0, 0, 0}, // nr
			{unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, 2, 0, unix.SYS_MKDIR},
			{unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, 1, 0, unix.SYS_MKDIRAT},
			{ret, 0, 0, 0x7fff0000}, // SECCOMP_RET_ALLOW
			{ret, 0, 0, errnoEPERM},
		}
		prog := []byte("SBXF\x00\x00\x00\x00")
		for _, in := range insns {
			prog = binary.LittleEndian.AppendUint16(prog, uint16(in[0]))
			prog = append(prog, byte(in[1]), byte(in[2]))
			prog = binary.LittleEndian.AppendUint32(prog, in[3])
		}
		pipeOf := func(data []byte) *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			_, _ = w.Write(data)
			w.Close()
			return r
		}
		dir := filepath.Join(t.TempDir(), "made")
		code, st, out, stderr := runInit(t, bin, []*os.File{pipeOf(prog)}, "--seccomp-fd", "4", "--", "sh", "-c",
			"grep '^Seccomp:' /proc/self/status; mkdir "+dir+" 2>&1 || echo refused")
		if code != 0 || st == nil || !strings.Contains(out, "Seccomp:\t2") || !strings.Contains(out, "refused") {
			t.Errorf("with the filter: exit %d status %+v stdout %q stderr %q", code, st, out, stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Error("mkdir ran despite the filter")
		}
		code, st, _, stderr = runInit(t, bin, []*os.File{pipeOf([]byte("SBXF\x00\x00\x00\x00bad"))}, "--seccomp-fd", "4", "--", "touch", dir)
		if code != 126 || st != nil || !strings.Contains(stderr, "invalid seccomp program") {
			t.Errorf("malformed program: exit %d status %+v stderr %q; want 126 and a message", code, st, stderr)
		}
		// A profile that denies what the init itself waits with (poll): it
		// must never report an outcome it did not see: it sees the command's
		// 3 or, when it cannot wait, ends
		// the sandbox and says why with 126.
		deny := [][4]uint32{
			{unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, 0, 0, 0},
			{unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, 2, 0, unix.SYS_POLL},
			{unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, 1, 0, unix.SYS_PPOLL},
			{ret, 0, 0, 0x7fff0000},
			{ret, 0, 0, errnoEPERM},
		}
		prog = []byte("SBXF\x00\x00\x00\x00")
		for _, in := range deny {
			prog = binary.LittleEndian.AppendUint16(prog, uint16(in[0]))
			prog = append(prog, byte(in[1]), byte(in[2]))
			prog = binary.LittleEndian.AppendUint32(prog, in[3])
		}
		code, st, _, stderr = runInit(t, bin, []*os.File{pipeOf(prog)}, "--seccomp-fd", "4", "--", "sh", "-c", "sleep 0.2; exit 3")
		if !(code == 3 && st != nil && st.ExitCode == 3) && !(code == 126 && st != nil && st.ExitCode == 126 && strings.Contains(st.ExecError, "poll")) {
			t.Errorf("poll denied: exit %d status %+v stderr %q; want the command's 3, or 126 and the reason", code, st, stderr)
		}
	})
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("timed out")
}
