package client_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestMain starts `$SBX_BIN serve` on a unix socket of a temporary state
// directory for the examples, which find it in $SBX_HOST and a busybox
// root file system the server allows in $SBX_EXAMPLE_ROOTFS. This test
// binary links no cgo: the examples are what a remote controller builds.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if run, code := roottest.Package("server/client examples", "they run a real sbx serve"); !run {
		return code
	}
	bin := os.Getenv("SBX_BIN")
	if bin == "" {
		fmt.Fprintln(os.Stderr, "server/client examples: need SBX_BIN, a static sbx binary (make build; make test sets it)")
		return 1
	}
	root, err := fixture.BusyboxRootfsDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "busybox fixture:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "sbx-client-example-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Sandboxes in private user namespaces (the default) need the run
	// root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The server's sandboxes live under this test binary's own parent
	// cgroup, removed at the end, never under the host's default one.
	releaseParent := cgroup.PrivateParent("sbx-test-client")
	defer func() { _ = releaseParent() }()
	sock := filepath.Join(dir, "sbx.sock")
	srv := exec.Command(bin, "--root", filepath.Join(dir, "root"), "--run-root", filepath.Join(dir, "run"),
		"serve", "--unix", sock, "--allow-host-dir", filepath.Dir(root))
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start sbx serve:", err)
		return 1
	}
	defer func() {
		_ = srv.Process.Signal(os.Interrupt)
		_ = srv.Wait()
		_ = exec.Command(bin, "--root", filepath.Join(dir, "root"), "--run-root", filepath.Join(dir, "run"), "gc").Run()
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "sbx serve did not listen on", sock)
			return 1
		}
	}
	os.Setenv("SBX_HOST", "unix://"+sock)
	os.Setenv("SBX_EXAMPLE_ROOTFS", root)
	return m.Run()
}
