//go:build cgo && seccomp

package seccomp

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// TestMain lets the test binary act as a child that loads a filter and
// reports what a few syscalls return under it.
func TestMain(m *testing.M) {
	if os.Getenv("SBX_SECCOMP_CHILD") == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("nnp:", err)
		return 1
	}
	if err := LoadFromFD(3); err != nil {
		fmt.Println("load:", err)
		return 1
	}
	_, _, unshareErr := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	_, _, futureErr := unix.RawSyscall(600, 0, 0, 0) // beyond any syscall the profile names
	_, _, getpidErr := unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
	fmt.Printf("unshare=%d future=%d getpid=%d\n", unshareErr, futureErr, getpidErr)
	return 0
}

func compileDefault(t *testing.T) []byte {
	t.Helper()
	p, err := Resolve(Default, &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := specconv.SetupSeccomp(p)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

func TestCompiledDefaultProfile(t *testing.T) {
	prog := compileDefault(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(prog)
	w.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SBX_SECCOMP_CHILD=1")
	cmd.ExtraFiles = []*os.File{r}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := fmt.Sprintf("unshare=%d future=%d getpid=0\n", unix.EPERM, unix.ENOSYS)
	if string(out) != want {
		t.Errorf("under the compiled default profile: %q, want %q", out, want)
	}
}

func TestCompileCachedReuses(t *testing.T) {
	p, _ := Resolve(Default, &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	cfg, _ := specconv.SetupSeccomp(p)
	dir := t.TempDir()
	a, err := CompileCached(cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".bpf") {
		t.Fatalf("cache holds %v, want one program", entries)
	}
	b, err := CompileCached(cfg, dir)
	if err != nil || string(a) != string(b) {
		t.Fatalf("cached program differs: %v", err)
	}
}

func TestLoadRejectsGarbage(t *testing.T) {
	for _, prog := range [][]byte{nil, []byte("SBXF"), []byte("XXXX\x00\x00\x00\x00\x06\x00\x00\x00\x00\x00\xff\x7f")} {
		if err := Load(prog); err == nil {
			t.Errorf("Load(%q) succeeded", prog)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	spec := &specs.Spec{Process: &specs.Process{}}
	if _, err := Resolve("/nonexistent.json", spec); err == nil || !strings.Contains(err.Error(), "default, unconfined") {
		t.Errorf("missing file: %v", err)
	}
	bad := t.TempDir() + "/bad.json"
	os.WriteFile(bad, []byte("{not json"), 0o644)
	if _, err := Resolve(bad, spec); err == nil {
		t.Error("malformed profile accepted")
	}
	if p, err := Resolve(Unconfined, spec); p != nil || err != nil {
		t.Errorf("unconfined: %v %v", p, err)
	}
}
