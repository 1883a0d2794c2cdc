package lifecycle

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// On a full state disk, sbx tells the truth and can free its own space:
// stop either records the stop or fails without leaving ps saying running
// and start pretending, rm -f removes the sandbox and rmi the image
// without writing new files first.
func TestFullDiskPsTruthAndRemoval(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	if err := os.MkdirAll(h.Root, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "sbx-full", h.Root).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs as the state root: %v %s", err, out)
	}
	t.Cleanup(func() { _ = unix.Unmount(h.Root, unix.MNT_DETACH) })
	img := h.ImportBusybox(t, "full/base:1")
	id := strings.TrimSpace(h.Must(t, "create", img))
	h.Saw(id)
	keep := strings.TrimSpace(h.Must(t, "create", img))
	h.Saw(keep)

	// Fill the disk.
	filler := filepath.Join(h.Root, "filler")
	_ = exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").Run()
	free := func() uint64 {
		var st unix.Statfs_t
		if err := unix.Statfs(h.Root, &st); err != nil {
			t.Fatal(err)
		}
		return st.Bavail * uint64(st.Bsize)
	}
	if f := free(); f > 64<<10 {
		t.Fatalf("the disk is not full: %d bytes free", f)
	}

	r := h.Sbx(t, "", "stop", "-t", "1", id)
	status := func() sbx.Status {
		var list []sbx.Sandbox
		r := h.Sbx(t, "", "ps", "-a", "--format", "json")
		if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
			t.Fatalf("ps on a full disk: %v %q %q", err, r.Stdout, r.Stderr)
		}
		for _, sb := range list {
			if sb.ID == id {
				return sb.Status
			}
		}
		t.Fatalf("ps lost %s", id)
		return ""
	}
	st := status()
	t.Logf("stop on a full disk: exit %d %q; ps says %s", r.Code, strings.TrimSpace(r.Stderr), st)
	if st == sbx.StatusRunning {
		// Then it must really run.
		if out := h.Sbx(t, "", "exec", id, "--", "true"); out.Code != 0 {
			t.Errorf("ps says running after stop on a full disk, but exec fails: %d %q", out.Code, out.Stderr)
		}
	}
	if r.Code == 0 && st != sbx.StatusStopped {
		t.Errorf("stop exited 0 but ps says %s", st)
	}
	// start either starts it (exec works) or fails: never exit 0 for nothing.
	r = h.Sbx(t, "", "start", id)
	if r.Code == 0 {
		if out := h.Sbx(t, "", "exec", id, "--", "true"); out.Code != 0 {
			t.Errorf("start exited 0 on a full disk but the sandbox does not run: exec %d %q", out.Code, out.Stderr)
		}
	}

	// Removal frees space without writing first.
	before := free()
	if r := h.Sbx(t, "", "rm", "-f", id, keep); r.Code != 0 {
		t.Errorf("rm -f on a full disk: exit %d %q", r.Code, r.Stderr)
	}
	if out := h.Sbx(t, "", "ps", "-aq"); strings.TrimSpace(out.Stdout) != "" {
		t.Errorf("after rm -f, ps -aq still lists %q", out.Stdout)
	}
	if r := h.Sbx(t, "", "rmi", img); r.Code != 0 {
		t.Errorf("rmi on a full disk: exit %d %q", r.Code, r.Stderr)
	}
	if r := h.Sbx(t, "", "image", "gc"); r.Code != 0 {
		t.Errorf("image gc on a full disk: exit %d %q", r.Code, r.Stderr)
	}
	if after := free(); after <= before {
		t.Errorf("rm -f, rmi and image gc freed nothing: %d bytes free before, %d after", before, after)
	}
	_ = os.Remove(filler)
}
