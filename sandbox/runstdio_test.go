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
