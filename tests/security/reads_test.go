package security

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestAdversarialImageFilesDoNotHangTheHost: an image whose /etc/passwd
// and /etc/group are FIFOs (or a directory) cannot hang the host-side
// user lookup of a one-shot run (which held the image store's lock while
// it waited for ever): the run ends at once, numeric users still work and
// a user name is refused clearly, in the host's user namespace and in a
// private one.
func TestAdversarialImageFilesDoNotHangTheHost(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	// A private user namespace's root must be able to reach its root.
	if err := os.Chmod(filepath.Dir(h.Run), 0o711); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, image, passwd string }{
		{"fifo", "hostile-fifo:1", "fifo"},
		{"directory", "hostile-dir:1", "dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			fixture.NewBusyboxRootfs(t, root)
			for _, f := range []string{"etc/passwd", "etc/group"} {
				p := filepath.Join(root, f)
				os.Remove(p)
				var err error
				if tc.passwd == "fifo" {
					err = syscall.Mkfifo(p, 0o644)
				} else {
					err = os.Mkdir(p, 0o755)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			tarball := filepath.Join(t.TempDir(), "hostile.tar")
			if out, err := exec.Command("tar", "-C", root, "-cf", tarball, ".").CombinedOutput(); err != nil {
				t.Fatalf("tar: %v: %s", err, out)
			}
			h.Must(t, "import", "-q", tarball, tc.image)
			type run struct {
				args     []string
				wantCode int
				wantErr  string
			}
			var runs []run
			for _, mode := range []string{"host", "private"} {
				runs = append(runs,
					run{[]string{"run", "--rm", "--userns", mode, tc.image, "--", "true"}, 0, ""},
					run{[]string{"run", "--rm", "--userns", mode, "--user", "1000:1000", tc.image, "--", "true"}, 0, ""},
					run{[]string{"run", "--rm", "--userns", mode, "--user", "nobody", tc.image, "--", "true"}, 125, "nobody"})
			}
			for _, c := range runs {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				cmd := h.Command(c.args...)
				cmd.Env = append(os.Environ(), h.Env...)
				var out, errb strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case <-done:
				case <-ctx.Done():
					_ = cmd.Process.Kill()
					<-done
					t.Errorf("sbx %s hangs on an image whose /etc/passwd is a %s", strings.Join(c.args, " "), tc.passwd)
					h.Sbx(t, "", "gc")
				}
				cancel()
				code := cmd.ProcessState.ExitCode()
				if ctx.Err() == nil && (code != c.wantCode || !strings.Contains(errb.String(), c.wantErr)) {
					t.Errorf("sbx %s: exit %d (want %d), stderr %q (want %q)", strings.Join(c.args, " "), code, c.wantCode, errb.String(), c.wantErr)
				}
			}
			// The image store is not held: the image can be removed.
			h.Must(t, "rmi", tc.image)
		})
	}
}
