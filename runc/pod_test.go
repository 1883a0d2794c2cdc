package runc_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestAppContainerJoinsThePodSandbox does what containerd's CRI does for a
// pod: a sandbox ("pause") container with its own network, IPC and UTS
// namespaces, then an app container whose config.json names those
// namespaces by path (/proc/PID/ns/...) and a cgroup beside the
// sandbox's. The app container must share them, for sbx-runc as for runc.
func TestAppContainerJoinsThePodSandbox(t *testing.T) {
	var got [2]transcript
	// The pod's cgroup, made by the runtimes below the tests' parent, is
	// the caller's (the kubelet's) to remove.
	t.Cleanup(func() {
		for _, d := range append(mustGlob("/sys/fs/cgroup/*/"+cgroupParent+"/pod"), mustGlob("/sys/fs/cgroup/"+cgroupParent+"/pod")...) {
			_ = os.Remove(d)
		}
	})
	for i, r := range runtimes(t) {
		tr := &got[i]
		pause := bundle(t, "pod/pause", func(spec map[string]any) {
			spec["hostname"] = "the-pod"
		}, "sleep", "300")
		if res := r.run(t, "", "create", "--bundle", pause, "pause"); res.code != 0 {
			t.Fatalf("%s create pause: %s", r.name, res.stderr)
		}
		t.Cleanup(func() { r.run(t, "", "delete", "--force", "pause") })
		if res := r.run(t, "", "start", "pause"); res.code != 0 {
			t.Fatalf("%s start pause: %s", r.name, res.stderr)
		}
		pid := int(r.state(t, "pause")["pid"].(float64))
		app := bundle(t, "pod/app", func(spec map[string]any) {
			linux := spec["linux"].(map[string]any)
			var ns []any
			for _, n := range linux["namespaces"].([]any) {
				m := n.(map[string]any)
				switch m["type"] {
				case "network", "ipc", "uts":
					m["path"] = fmt.Sprintf("/proc/%d/ns/%s", pid, map[string]string{"network": "net", "ipc": "ipc", "uts": "uts"}[m["type"].(string)])
				}
				ns = append(ns, m)
			}
			linux["namespaces"] = ns
			delete(spec, "hostname")
		}, "sh", "-c", "hostname; for n in net ipc uts pid; do readlink /proc/self/ns/$n; done")
		out := r.runApp(t, app)
		self := func(pid any, ns string) string {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%v/ns/%s", pid, ns))
			return l
		}
		lines := strings.Fields(out.stdout)
		if len(lines) != 5 {
			t.Fatalf("%s app: %q %s", r.name, out.stdout, out.stderr)
		}
		tr.add("hostname %s", lines[0])
		tr.add("net shared %v ipc shared %v uts shared %v pid shared %v", lines[1] == self(pid, "net"), lines[2] == self(pid, "ipc"),
			lines[3] == self(pid, "uts"), lines[4] == self(pid, "pid"))
		if res := r.run(t, "", "delete", "--force", "pause"); res.code != 0 {
			t.Errorf("%s delete pause: %s", r.name, res.stderr)
		}
	}
	compare(t, got[0], got[1])
	if len(got[0]) != 2 || got[0][0] != "hostname the-pod" || got[0][1] != "net shared true ipc shared true uts shared true pid shared false" {
		t.Errorf("sbx-runc: %q", got[0])
	}
}

// runApp creates and starts the container "app" from the bundle, waits for
// it to stop, deletes it and returns its output (written to the file
// create's stdout was).
func (r runtime) runApp(t *testing.T, bundle string) result {
	t.Helper()
	res := r.run(t, "", "create", "--bundle", bundle, "app")
	if res.code != 0 {
		return res
	}
	if res := r.run(t, "", "start", "app"); res.code != 0 {
		return res
	}
	r.waitStatus(t, "app", "stopped")
	data, err := os.ReadFile(res.stdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	out := string(data)
	if res := r.run(t, "", "delete", "app"); res.code != 0 {
		t.Errorf("%s delete app: %s", r.name, res.stderr)
	}
	return result{0, out, "", res.stdoutPath}
}
