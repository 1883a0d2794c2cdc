package runc_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sbxrun/sbx/tests/fixture"
)

// containerd is a containerd of the test's own: its own root, state,
// socket and namespace, stopped and cleaned up at the end of the test.
type containerd struct {
	sock, ns string
}

// startContainerd starts Debian's containerd with the CRI plugin off.
func startContainerd(t *testing.T) *containerd {
	t.Helper()
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("containerd is missing (make deps-test installs Debian's containerd): %v", err)
	}
	dir := t.TempDir()
	c := &containerd{sock: filepath.Join(dir, "containerd.sock"), ns: fmt.Sprintf("sbx-test-%d", os.Getpid())}
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock, c.sock+".ttrpc"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", conf)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
		// What the shim keeps outside containerd's own directories.
		_ = os.RemoveAll(filepath.Join("/run/containerd/runc", c.ns))
		for _, d := range []string{"/run/containerd/runc", "/run/containerd/fifo", "/run/containerd/s", "/run/containerd"} {
			_ = os.Remove(d) // only when empty: another containerd may use them
		}
		if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(data), dir) {
			t.Errorf("mounts left below %s:\n%s", dir, data)
		}
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("containerd log:\n%s", data)
		}
		for _, d := range append(mustGlob("/sys/fs/cgroup/*/"+c.ns), mustGlob("/sys/fs/cgroup/"+c.ns)...) {
			if err := os.Remove(d); err != nil {
				t.Errorf("cgroup left behind: %v", err)
			}
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := c.ctr("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(log.Name())
			t.Fatalf("containerd did not answer within 30 s:\n%s", data)
		}
	}
	return c
}

func mustGlob(p string) []string {
	m, _ := filepath.Glob(p)
	return m
}

// ctr runs ctr against this containerd in its namespace.
func (c *containerd) ctr(args ...string) (string, error) {
	cmd := exec.Command("ctr", append([]string{"--address", c.sock, "--namespace", c.ns}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.String(), fmt.Errorf("ctr %v: %w: %s", args, err, out.String())
		}
		return out.String(), nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("ctr %v: still running after 60 s: %s", args, out.String())
	}
}

// TestContainerdRunsSbxRunc: containerd's runc shim (io.containerd.runc.v2)
// with sbx-runc as its runc binary runs a busybox image imported into
// containerd: a one-shot run with its output, then a detached task with
// exec, ps, pause, resume, kill and delete, all through sbx (its seccomp
// filter shows in the task).
func TestContainerdRunsSbxRunc(t *testing.T) {
	c := startContainerd(t)
	ref := "sbx.test/busybox:latest"
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "busybox.tar")
	if err := tarball.WriteToFile(archive, tag, fixture.BusyboxImage(t)); err != nil {
		t.Fatal(err)
	}
	if out, err := c.ctr("images", "import", archive); err != nil {
		t.Fatalf("import: %v", err)
	} else if !strings.Contains(out, "sbx.test/busybox") {
		t.Logf("import: %s", out)
	}
	rt := []string{"--runtime", "io.containerd.runc.v2", "--runc-binary", sbxRunc}

	out, err := c.ctr(append(append([]string{"run", "--rm"}, rt...), ref, "oneshot", "sh", "-c", "echo hello-from-sbx; grep Seccomp: /proc/self/status")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "hello-from-sbx") || !strings.Contains(out, "Seccomp:\t2") {
		t.Errorf("ctr run: %q, want the output and sbx's seccomp filter", out)
	}
	if _, err := os.Stat(filepath.Join("/run/containerd/runc", c.ns, "oneshot")); !os.IsNotExist(err) {
		t.Errorf("ctr run --rm left the container's state: %v", err)
	}

	if _, err := c.ctr(append(append([]string{"run", "-d"}, rt...), ref, "task", "sleep", "300")...); err != nil {
		t.Fatal(err)
	}
	out, err = c.ctr("task", "exec", "--exec-id", "e1", "task", "sh", "-c", "echo exec-ok")
	if err != nil || !strings.Contains(out, "exec-ok") {
		t.Errorf("task exec: %q %v", out, err)
	}
	if out, err = c.ctr("task", "ps", "task"); err != nil || len(strings.Fields(out)) < 4 {
		t.Errorf("task ps: %q %v", out, err)
	}
	if _, err := c.ctr("task", "pause", "task"); err != nil {
		t.Error(err)
	}
	if out, _ := c.ctr("task", "ls"); !strings.Contains(out, "PAUSED") {
		t.Errorf("after pause: %s", out)
	}
	if _, err := c.ctr("task", "resume", "task"); err != nil {
		t.Error(err)
	}
	if _, err := c.ctr("task", "kill", "-s", "SIGKILL", "task"); err != nil {
		t.Error(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if out, _ := c.ctr("task", "ls"); strings.Contains(out, "STOPPED") {
			break
		}
		if time.Now().After(deadline) {
			out, _ := c.ctr("task", "ls")
			t.Fatalf("task did not stop after SIGKILL: %s", out)
		}
	}
	if _, err := c.ctr("task", "rm", "task"); err != nil {
		t.Error(err)
	}
	if _, err := c.ctr("containers", "rm", "task"); err != nil {
		t.Error(err)
	}
	if _, err := c.ctr("images", "rm", ref); err != nil {
		t.Error(err)
	}
}
