package runc_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/tests/fixture"
)

// These tests run the built sbx as sbx-runc (a symlink) and Debian's runc,
// the reference, on the same bundles, and compare what they do: exit
// codes, JSON, the texts containerd's shim matches. They need root,
// SBX_BIN (make test sets it) and runc (make deps-test installs it).

var (
	sbxRunc string // the sbx-runc symlink
	refRunc string // Debian's runc
	busybox string // the shared busybox root
	workDir string
)

// cgroupParent holds the tests' containers in every hierarchy; removed at
// the end.
const cgroupParent = "sbx-test-runc"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if run, code := roottest.Package("runc", "they run containers, and Debian's runc beside them"); !run {
		return code
	}
	bin := os.Getenv("SBX_BIN")
	if bin == "" {
		fmt.Fprintln(os.Stderr, "runc: the tests need SBX_BIN, a static sbx binary (make build; make test sets it)")
		return 1
	}
	var err error
	if refRunc, err = exec.LookPath("runc"); err != nil {
		fmt.Fprintln(os.Stderr, "runc: the reference runc is missing (make deps-test installs Debian's runc):", err)
		return 1
	}
	if busybox, err = fixture.BusyboxRootfsDir(); err != nil {
		fmt.Fprintln(os.Stderr, "busybox fixture:", err)
		return 1
	}
	if workDir, err = os.MkdirTemp("", "sbx-runc-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	abs, err := filepath.Abs(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sbxRunc = filepath.Join(workDir, "sbx-runc")
	if err := os.Symlink(abs, sbxRunc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if left := cgroupLeftovers(); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "runc: cgroups left behind:", left)
		code = 1
	}
	return code
}

// cgroupLeftovers removes the tests' parent cgroups and returns the
// container cgroups still below them.
func cgroupLeftovers() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupParent)
	if d := "/sys/fs/cgroup/" + cgroupParent; isDir(d) {
		dirs = append(dirs, d)
	}
	var left []string
	for _, d := range dirs {
		subs, _ := filepath.Glob(d + "/*")
		for _, s := range subs {
			if isDir(s) {
				left = append(left, s)
			}
		}
		_ = os.Remove(d)
	}
	return left
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// runtime is one runc-compatible binary with its own state root.
type runtime struct {
	name, bin, root string
}

// runtimes returns sbx-runc and the reference runc, each with a fresh root.
func runtimes(t *testing.T) []runtime {
	dir := t.TempDir()
	return []runtime{
		{"sbx-runc", sbxRunc, filepath.Join(dir, "sbx-runc-root")},
		{"runc", refRunc, filepath.Join(dir, "runc-root")},
	}
}

// result is what one command did.
type result struct {
	code           int
	stdout, stderr string
	stdoutPath     string // the file stdout went to (a created container keeps writing there)
}

// run runs the runtime with its --root and args, stdin from in.
func (r runtime) run(t *testing.T, in string, args ...string) result {
	t.Helper()
	cmd := exec.Command(r.bin, append([]string{"--root", r.root}, args...)...)
	cmd.Stdin = strings.NewReader(in)
	// Files, not pipes: a created container inherits them and keeps them
	// open after the runtime exits.
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stdout, cmd.Stderr = out, errf
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s %v: %v", r.name, args, err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v: still running after 60 s", r.name, args)
	}
	stdout, _ := os.ReadFile(out.Name())
	stderr, _ := os.ReadFile(errf.Name())
	return result{cmd.ProcessState.ExitCode(), string(stdout), string(stderr), out.Name()}
}

// state runs state and decodes it.
func (r runtime) state(t *testing.T, id string) map[string]any {
	t.Helper()
	res := r.run(t, "", "state", id)
	if res.code != 0 {
		t.Fatalf("%s state %s: exit %d: %s", r.name, id, res.code, res.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &m); err != nil {
		t.Fatalf("%s state %s: not JSON: %v\n%s", r.name, id, err, res.stdout)
	}
	return m
}

// waitStatus waits up to 10 s for the container to reach status.
func (r runtime) waitStatus(t *testing.T, id, status string) map[string]any {
	t.Helper()
	var st map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st = r.state(t, id); st["status"] == status {
			return st
		}
	}
	t.Fatalf("%s: container %s is %v, not %s, after 10 s", r.name, id, st["status"], status)
	return nil
}

// bundle writes a bundle whose root is the shared busybox (read-only, a
// tmpfs on /tmp) running args, made by the reference runc's spec command
// and changed by edit; its containers' cgroups go under cgroupParent.
func bundle(t *testing.T, name string, edit func(spec map[string]any), args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(refRunc, "spec", "--bundle", dir).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	spec["root"] = map[string]any{"path": busybox, "readonly": true}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = args
	spec["mounts"] = append(spec["mounts"].([]any), map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "size=16m"}})
	spec["linux"].(map[string]any)["cgroupsPath"] = "/" + cgroupParent + "/" + name
	if edit != nil {
		edit(spec)
	}
	if data, err = json.MarshalIndent(spec, "", " "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
