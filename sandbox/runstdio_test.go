package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

// TestRunReopensItsPipes: a one-shot command given readers and writers
// (as the REST server gives them) gets pipes it may reopen as its own
// (echo > /dev/stderr, cat /dev/stdin), in the host's user namespace and
// in a private one, where the pipes belong to the sandbox's root.
func TestRunReopensItsPipes(t *testing.T) {
	h := newHost(t, HostConfig{})
	// A private user namespace's root must be able to reach its root.
	if err := os.Chmod(filepath.Dir(h.store.Root()), 0o711); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{sbx.UserNSHost, sbx.UserNSPrivate} {
		var out, errb bytes.Buffer
		o := sbx.RunOptions{Options: busybox(t), Stdin: strings.NewReader("in"), Stdout: &out, Stderr: &errb}
		o.UserNS = mode
		o.Cmd = []string{"sh", "-c", "echo out > /dev/stdout; echo err > /proc/self/fd/2; cat /dev/stdin"}
		rep, err := h.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ExitCode != 0 || out.String() != "out\nin" || errb.String() != "err\n" {
			t.Errorf("userns %s: exit %d, stdout %q, stderr %q", mode, rep.ExitCode, out.String(), errb.String())
		}
	}
}

// TestRunStdioSharesOnePipeForOneWriter: a caller giving one writer for
// both streams gets one pipe and one copy, so the writer is never written
// by two goroutines at once (a bytes.Buffer would lose output).
func TestRunStdioSharesOnePipeForOneWriter(t *testing.T) {
	var buf bytes.Buffer
	s, err := newRunStdio(&sbx.RunOptions{Stdout: &buf, Stderr: &buf}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if s.out != s.err || len(s.readers) != 1 {
		t.Fatalf("one writer got %d pipes (out %v, err %v)", len(s.readers), s.out, s.err)
	}
	w := s.out.(*os.File)
	if _, err := w.Write([]byte("out and err\n")); err != nil {
		t.Fatal(err)
	}
	s.finish()
	if buf.String() != "out and err\n" {
		t.Fatalf("copied %q", buf.String())
	}
	var other bytes.Buffer
	if s, err = newRunStdio(&sbx.RunOptions{Stdout: &buf, Stderr: &other}, -1); err != nil {
		t.Fatal(err)
	}
	defer s.abort()
	if s.out == s.err || len(s.readers) != 2 {
		t.Fatalf("two writers got %d pipes", len(s.readers))
	}
}
