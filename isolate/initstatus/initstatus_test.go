package initstatus

import (
	"bytes"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// exited and killed build the wait statuses the kernel reports.
func exited(code int) unix.WaitStatus        { return unix.WaitStatus(code << 8) }
func killed(sig unix.Signal) unix.WaitStatus { return unix.WaitStatus(sig) }

func TestDecideTrustsTheKernel(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   unix.WaitStatus
		st   *Status
		want Outcome
	}{
		{"exit, no status", exited(3), nil, Outcome{ExitCode: 3}},
		{"exit, agreeing status", exited(3), &Status{ExitCode: 3}, Outcome{ExitCode: 3}},
		{"signal, agreeing status", exited(137), &Status{ExitCode: 137, Signal: 9}, Outcome{ExitCode: 137, Signal: 9}},
		{"exit 137 without a signal", exited(137), &Status{ExitCode: 137}, Outcome{ExitCode: 137}},
		{"forged exit code", exited(1), &Status{ExitCode: 0}, Outcome{ExitCode: 1}},
		{"forged signal", exited(1), &Status{ExitCode: 137, Signal: 9}, Outcome{ExitCode: 1}},
		{"signal that does not match the code", exited(137), &Status{ExitCode: 137, Signal: 15}, Outcome{ExitCode: 137}},
		{"exec error", exited(127), &Status{ExitCode: 127, ExecError: "nope: not found"}, Outcome{ExitCode: 127, ExecError: "nope: not found"}},
		{"exec error on a plain exit", exited(0), &Status{ExitCode: 0, ExecError: "fake"}, Outcome{ExitCode: 0}},
		{"escape sequences", exited(126), &Status{ExitCode: 126, ExecError: "\x1b]0;owned\x07x\u202e"}, Outcome{ExitCode: 126, ExecError: "?]0;owned?x?"}},
		{"init killed by sbx", killed(unix.SIGKILL), &Status{ExitCode: 0}, Outcome{ExitCode: 137, Signal: 9}},
	} {
		if got := Decide(tc.ws, tc.st); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestStatusReaderNeverBlocksTheWriter(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := ReadStatus(r)
	// Far more than a pipe holds: the writer must not block.
	big := bytes.Repeat([]byte("x"), 1<<20)
	done := make(chan error, 1)
	go func() { _, err := w.Write(big); w.Close(); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer blocked")
	}
	if st := s.Status(time.Second); st != nil {
		t.Errorf("garbage decoded as %+v", st)
	}
	// A pipe that stays open gives no status after the wait.
	r2, w2, _ := os.Pipe()
	defer w2.Close()
	if st := ReadStatus(r2).Status(10 * time.Millisecond); st != nil {
		t.Errorf("open pipe: %+v", st)
	}
	r3, w3, _ := os.Pipe()
	w3.Write([]byte(`{"exit_code":3}` + "\n"))
	w3.Close()
	if st := ReadStatus(r3).Status(time.Second); st == nil || st.ExitCode != 3 {
		t.Errorf("status: %+v", st)
	}
}
