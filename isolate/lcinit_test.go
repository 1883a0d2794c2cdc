package isolate

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestMain turns the test binary into libcontainer's init when the
// handover to sbx-lcinit does not happen, so that a failed handover shows
// as a wrong binary below instead of a hang. It does not call Init in the
// test process itself: TestStartWithoutInit needs a program that never did.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		Init()
	}
	flag.Parse()
	if !testing.Short() {
		helperbin.ExitUnlessEmbedded("isolate")
	}
	// The test's container gets a private parent cgroup, removed at the
	// end, instead of leaving the host's default parent behind.
	release := cgroup.PrivateParent("sbx-test")
	code := m.Run()
	_ = release()
	os.Exit(code)
}

// libcontainer re-executes this test binary as the container's init; the
// constructor hands over to the embedded sbx-lcinit before the binary's
// Go runtime starts. Stopped before it executes PID 1 (libcontainer's
// Start, without Run), the init stage shows which binary it runs.
func TestInitStageRunsSmallBinary(t *testing.T) {
	roottest.Require(t, "it starts a container")
	dir := t.TempDir()
	s := &Spec{ID: "lcinit-" + filepath.Base(dir), Rootfs: fixture.BusyboxRootfs(t), ReadonlyRootfs: true,
		Args: []string{"/bin/true"}, Seccomp: "unconfined"}
	cfg, _, err := build(s, "")
	if err != nil {
		t.Fatal(err)
	}
	lcinit, err := lcinitFile(filepath.Join(dir, "helpers"))
	if err != nil || lcinit == nil {
		t.Fatalf("no sbx-lcinit (%v): build the helpers first with `make build`", err)
	}
	lc, err := libcontainer.Create(filepath.Join(dir, "state"), s.ID, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Destroy()
	p := &libcontainer.Process{Args: s.Args, Cwd: "/", Init: true, ExtraFiles: []*os.File{lcinit}}
	if err := lc.Start(p); err != nil {
		t.Fatalf("start: %v", err)
	}
	pid, err := p.Pid()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(exe), "sbx-lcinit-") {
		t.Errorf("init stage runs %s, want the sealed sbx-lcinit", exe)
	}
	// Its Go runtime started with one P: the handover set GOMAXPROCS,
	// which libcontainer passes empty when this process has none.
	if os.Getenv("GOMAXPROCS") == "" {
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		if vars := strings.Split(string(environ), "\x00"); !slices.Contains(vars, "GOMAXPROCS=1") {
			t.Errorf("init stage's environment %q, want GOMAXPROCS=1", vars)
		}
	}
	if err := lc.Exec(); err != nil {
		t.Fatalf("exec PID 1: %v", err)
	}
	if ps, err := p.Wait(); err != nil || !ps.Success() {
		t.Errorf("PID 1 /bin/true: %v %v", ps, err)
	}
	// The handle is sealed: it cannot be opened for writing.
	if f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", lcinit.Fd()), os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Error("the sbx-lcinit handle opens for writing")
	}
}
