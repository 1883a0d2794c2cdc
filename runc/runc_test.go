package runc_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// transcript records, per step, what a test expects to be the same for
// sbx-runc and runc.
type transcript []string

func (tr *transcript) add(format string, args ...any) {
	*tr = append(*tr, fmt.Sprintf(format, args...))
}

// compare fails the test where the two transcripts differ.
func compare(t *testing.T, sbx, ref transcript) {
	t.Helper()
	for i := 0; i < max(len(sbx), len(ref)); i++ {
		var a, b string
		if i < len(sbx) {
			a = sbx[i]
		}
		if i < len(ref) {
			b = ref[i]
		}
		if a != b {
			t.Errorf("step %d: sbx-runc %q, runc %q", i, a, b)
		}
	}
}

// keys returns the sorted keys of a JSON object.
func keys(m map[string]any) string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return strings.Join(k, ",")
}

// cgroupFile reads a file of a process's v1 cgroup of controller.
func cgroupFile(t *testing.T, pid int, controller, file string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				matches, _ := filepath.Glob("/sys/fs/cgroup/*")
				for _, m := range matches {
					if slices.Contains(strings.Split(filepath.Base(m), ","), controller) {
						v, err := os.ReadFile(filepath.Join(m, parts[2], file))
						if err != nil {
							t.Fatal(err)
						}
						return strings.TrimSpace(string(v))
					}
				}
			}
		}
	}
	if v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(strings.SplitN(strings.TrimSpace(string(data)), "::", 2)[1], "/"), file)); err == nil {
		return strings.TrimSpace(string(v)) // v2
	}
	t.Fatalf("no %s cgroup for pid %d", controller, pid)
	return ""
}

// TestLifecycleMatchesRunc takes one container through every command the
// shim uses, with sbx-runc and with runc on the same bundle, and compares
// exit codes, state JSON and error texts.
func TestLifecycleMatchesRunc(t *testing.T) {
	var got [2]transcript
	for i, r := range runtimes(t) {
		b := bundle(t, "life", nil, "sh", "-c", "echo started; sleep 300")
		tr := &got[i]
		id := "life"
		pidFile := filepath.Join(t.TempDir(), "init.pid")
		res := r.run(t, "", "create", "--bundle", b, "--pid-file", pidFile, id)
		tr.add("create %d", res.code)
		if res.code != 0 {
			t.Fatalf("%s create: %s", r.name, res.stderr)
		}
		data, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("%s: pid file: %v", r.name, err)
		}
		pid, _ := strconv.Atoi(string(data))
		st := r.state(t, id)
		tr.add("state keys %s", keys(st))
		tr.add("state %v %v pid-file-matches=%v bundle=%v rootfs=%v", st["id"], st["status"], st["pid"] == float64(pid), st["bundle"] == b, st["rootfs"] == busybox)
		if _, err := time.Parse(time.RFC3339Nano, st["created"].(string)); err != nil {
			t.Errorf("%s: created %v: %v", r.name, st["created"], err)
		}
		res = r.run(t, "", "start", id)
		tr.add("start %d", res.code)
		tr.add("state %v", r.state(t, id)["status"])
		res = r.run(t, "", "start", id)
		tr.add("start again %d %v", res.code, strings.Contains(res.stderr, "cannot start an already running container"))

		res = r.run(t, "", "ps", "--format", "json", id)
		var pids []int
		_ = json.Unmarshal([]byte(res.stdout), &pids)
		tr.add("ps %d has-init=%v", res.code, slices.Contains(pids, pid))

		res = r.run(t, "", "exec", id, "sh", "-c", "exit 3")
		tr.add("exec exit 3: %d", res.code)
		proc := filepath.Join(t.TempDir(), "process.json")
		if err := os.WriteFile(proc, []byte(`{"args":["sleep","300"],"cwd":"/","env":["PATH=/bin"],"user":{"uid":0,"gid":0}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		execPid := filepath.Join(t.TempDir(), "exec.pid")
		res = r.run(t, "", "exec", "--process", proc, "--detach", "--pid-file", execPid, id)
		data, _ = os.ReadFile(execPid)
		ep, _ := strconv.Atoi(string(data))
		tr.add("exec --detach %d pid-alive=%v", res.code, ep > 0 && syscall.Kill(ep, 0) == nil)
		res = r.run(t, "", "ps", "--format", "json", id)
		pids = nil
		_ = json.Unmarshal([]byte(res.stdout), &pids)
		tr.add("ps %d has-exec=%v", res.code, slices.Contains(pids, ep))

		res = r.run(t, "", "pause", id)
		tr.add("pause %d %v", res.code, r.state(t, id)["status"])
		res = r.run(t, "", "exec", id, "true")
		tr.add("exec paused %d %v", res.code, strings.Contains(res.stderr, "cannot exec in a paused container"))
		res = r.run(t, "", "resume", id)
		tr.add("resume %d %v", res.code, r.state(t, id)["status"])

		res = r.run(t, `{"memory":{"limit":67108864,"swap":67108864},"pids":{"limit":40},"cpu":{"quota":50000,"period":100000}}`, "update", "--resources", "-", id)
		tr.add("update %d", res.code)
		if res.code != 0 {
			t.Errorf("%s update: %s", r.name, res.stderr)
		} else {
			tr.add("memory %s pids %s quota %s", cgroupFile(t, pid, "memory", "memory.limit_in_bytes"),
				cgroupFile(t, pid, "pids", "pids.max"), cgroupFile(t, pid, "cpu", "cpu.cfs_quota_us"))
		}

		res = r.run(t, "", "kill", id, "9")
		tr.add("kill 9 %d", res.code)
		st = r.waitStatus(t, id, "stopped")
		tr.add("stopped pid %v", st["pid"])
		res = r.run(t, "", "kill", id, "KILL")
		tr.add("kill stopped %d %v", res.code, strings.Contains(res.stderr, "container not running"))
		res = r.run(t, "", "kill", "--all", id, "9")
		tr.add("kill --all stopped %d", res.code)
		res = r.run(t, "", "exec", id, "true")
		tr.add("exec stopped %d %v", res.code, strings.Contains(res.stderr, "cannot exec in a stopped container"))
		res = r.run(t, "", "start", id)
		tr.add("start stopped %d", res.code)

		res = r.run(t, "", "delete", id)
		tr.add("delete %d", res.code)
		for _, args := range [][]string{{"state", id}, {"delete", id}, {"kill", id, "9"}, {"start", id}, {"pause", id}, {"resume", id}, {"ps", "--format", "json", id}, {"exec", id, "true"}} {
			res = r.run(t, "", args...)
			tr.add("%s missing %d %v", args[0], res.code, strings.Contains(res.stderr, "does not exist"))
		}
		res = r.run(t, "", "delete", "--force", id)
		tr.add("delete --force missing %d", res.code)
		if syscall.Kill(ep, 0) == nil {
			t.Errorf("%s: the exec'd process %d outlived its container", r.name, ep)
		}
		if entries, _ := os.ReadDir(r.root); len(entries) != 0 {
			t.Errorf("%s: state left in %s: %v", r.name, r.root, entries)
		}
	}
	t.Logf("sbx-runc: %q", got[0])
	compare(t, got[0], got[1])
	if len(got[0]) == 0 || got[0][len(got[0])-1] != "delete --force missing 0" {
		t.Errorf("sbx-runc did not finish the lifecycle: %q", got[0])
	}
}

// TestDeleteForceRunning: delete --force kills a running container and its
// exec'd processes and removes it, as runc's does.
func TestDeleteForceRunning(t *testing.T) {
	var got [2]transcript
	for i, r := range runtimes(t) {
		b := bundle(t, "force", nil, "sleep", "300")
		tr := &got[i]
		res := r.run(t, "", "create", "--bundle", b, "force")
		tr.add("create %d", res.code)
		res = r.run(t, "", "delete", "force")
		tr.add("delete created %d", res.code)
		res = r.run(t, "", "create", "--bundle", b, "force")
		tr.add("create %d", res.code)
		res = r.run(t, "", "start", "force")
		tr.add("start %d", res.code)
		res = r.run(t, "", "delete", "force")
		tr.add("delete running %d %v", res.code, strings.Contains(res.stderr, "is not stopped"))
		res = r.run(t, "", "delete", "--force", "force")
		tr.add("delete --force %d", res.code)
		res = r.run(t, "", "state", "force")
		tr.add("state %d", res.code)
	}
	compare(t, got[0], got[1])
}

// TestFeatures: features prints the OCI features document.
func TestFeatures(t *testing.T) {
	for _, r := range runtimes(t) {
		res := r.run(t, "", "features")
		var f map[string]any
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &f) != nil {
			t.Fatalf("%s features: exit %d, %q %s", r.name, res.code, res.stdout, res.stderr)
		}
		if f["ociVersionMin"] != "1.0.0" || f["ociVersionMax"] == nil || f["linux"] == nil {
			t.Errorf("%s features: %v", r.name, f)
		}
		if r.name == "sbx-runc" {
			cg := f["linux"].(map[string]any)["cgroup"].(map[string]any)
			if cg["v1"] != true || cg["systemd"] != false {
				t.Errorf("sbx-runc features: cgroup %v, want v1 and no systemd", cg)
			}
		}
	}
}

// TestJSONLog: errors reach --log as JSON lines with level "error", where
// containerd's shim reads them.
func TestJSONLog(t *testing.T) {
	for _, r := range runtimes(t) {
		log := filepath.Join(t.TempDir(), "log.json")
		res := r.run(t, "", "--log", log, "--log-format", "json", "kill", "nothere", "9")
		if res.code != 1 {
			t.Errorf("%s kill of a missing container: exit %d", r.name, res.code)
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		var last struct{ Level, Msg string }
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
			t.Fatalf("%s: log line %q: %v", r.name, lines[len(lines)-1], err)
		}
		if last.Level != "error" || !strings.Contains(last.Msg, "does not exist") {
			t.Errorf("%s: last log entry %+v", r.name, last)
		}
	}
}
