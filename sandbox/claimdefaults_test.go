package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// heldAt starts a process that holds f at claimDefaultsFD, as a pool
// member's executor does its claim defaults file, and returns the path
// the host opens it by.
func heldAt(t *testing.T, f *os.File) string {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.ExtraFiles = []*os.File{f, f, f} // descriptors 3, 4 and 5
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd/" + strconv.Itoa(claimDefaultsFD)
}

func memfd(t *testing.T, content string) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOpenClaimDefaultsTakesOnlyAnEmptyMemfd: the host opens for writing
// what a member's executor holds at its claim defaults descriptor only if
// it is an empty memfd. Anything else a hostile executor put there (a
// file of its own or of a volume, a FIFO, a terminal, a device) is
// refused without being opened for writing (no device open runs, nothing
// blocks) and stays as it was.
func TestOpenClaimDefaultsTakesOnlyAnEmptyMemfd(t *testing.T) {
	mf := memfd(t, "")
	f, err := openClaimDefaults(heldAt(t, mf))
	if err != nil {
		t.Fatalf("an empty memfd: %v", err)
	}
	_, err = f.WriteString(`{"workdir":"/w"}`)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile("/proc/self/fd/" + strconv.Itoa(int(mf.Fd()))); string(got) != `{"workdir":"/w"}` {
		t.Fatalf("the memfd holds %q after the write", got)
	}

	dir := t.TempDir()
	disk, err := os.Create(filepath.Join(dir, "empty"))
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	fifoPath := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifoPath, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo, err := os.OpenFile(fifoPath, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a reader: a plain open would succeed
	if err != nil {
		t.Fatal(err)
	}
	defer fifo.Close()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for name, held := range map[string]*os.File{
		"a non-empty memfd":          memfd(t, "x"),
		"an empty file on disk":      disk,
		"a FIFO with a reader":       fifo,
		"a terminal's master (ptmx)": ptmx,
		"/dev/null, opened to read":  null,
	} {
		if f, err := openClaimDefaults(heldAt(t, held)); err == nil {
			f.Close()
			t.Errorf("%s: opened for writing", name)
		}
	}
	if fi, err := disk.Stat(); err != nil || fi.Size() != 0 {
		t.Fatalf("the file on disk after the refusal: %v, %v", fi, err)
	}
}
