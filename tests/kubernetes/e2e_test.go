//go:build kubernetes

// Package kubernetes_test runs sbx as a Kubernetes RuntimeClass end to end
// on this machine: etcd, kube-apiserver, kube-scheduler and a kubelet
// (built by scripts/k8s-bin.sh), Debian's containerd with a runtime "sbx"
// (its runc shim with sbx-runc), pods with runtimeClassName sbx beside pods
// under runc, and agent-sandbox's controller with a warm pool of sbx pods.
// Run with `make test-kubernetes` (as root), which sets SBX_K8S_BIN and
// SBX_BIN; SBX_K8S_BENCH=1 also measures pod and claim start-up.
package kubernetes_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pod is the part of a Pod the test reads.
type pod struct {
	Metadata struct {
		UID string `json:"uid"`
	} `json:"metadata"`
	Status struct {
		Phase             string `json:"phase"`
		ContainerStatuses []struct {
			ContainerID string `json:"containerID"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// podManifest is a busybox pod on the host network, under runtimeClass
// ("" for the default, runc), limited to 64 MiB and half a CPU. It
// tolerates every taint: with no CNI the node stays NotReady (and tainted),
// which host-network pods do not mind.
func podManifest(name, runtimeClass string) string {
	return benchPodManifest(name, runtimeClass, false)
}

// benchPodManifest is podManifest, with the runtime's default seccomp
// profile (seccompProfile RuntimeDefault) if seccomp is set.
func benchPodManifest(name, runtimeClass string, seccomp bool) string {
	rc := ""
	if runtimeClass != "" {
		rc = fmt.Sprintf(`"runtimeClassName": %q,`, runtimeClass)
	}
	if seccomp {
		rc += `"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},`
	}
	return fmt.Sprintf(`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": %q},
 "spec": {%s "hostNetwork": true, "automountServiceAccountToken": false, "enableServiceLinks": false,
  "terminationGracePeriodSeconds": 1, "tolerations": [{"operator": "Exists"}],
  "containers": [{"name": "main", "image": %q, "imagePullPolicy": "Never",
   "command": ["sh", "-c", "echo hello-from-pod; exec sleep 3600"],
   "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}}}]}}`, name, rc, busyboxImage)
}

func TestKubernetes(t *testing.T) {
	bin, sbx := os.Getenv("SBX_K8S_BIN"), os.Getenv("SBX_BIN")
	if bin == "" || sbx == "" || os.Geteuid() != 0 {
		t.Fatal("needs root, SBX_K8S_BIN (scripts/k8s-bin.sh) and SBX_BIN: run make test-kubernetes")
	}
	sbx, _ = filepath.Abs(sbx)
	c := startCluster(t, bin, sbx)
	t.Run("PodsUnderSbxAndRunc", func(t *testing.T) { testPods(t, c) })
	if !t.Failed() {
		t.Run("AgentSandboxWarmPool", func(t *testing.T) { testAgentSandbox(t, c) })
	}
	if os.Getenv("SBX_K8S_BENCH") != "" && !t.Failed() {
		t.Run("BenchPodStart", func(t *testing.T) { benchPods(t, c) })
	}
}

// waitPhase waits for the pod to reach phase and returns it.
func (c *cluster) waitPhase(t *testing.T, name, phase string, timeout time.Duration) pod {
	t.Helper()
	var p pod
	waitFor(t, "pod "+name+" "+phase, timeout, func() bool {
		return c.getJSON("/api/v1/namespaces/default/pods/"+name, &p) && p.Status.Phase == phase
	})
	return p
}

// deletePod deletes the pod and waits until the API has forgotten it.
func (c *cluster) deletePod(t *testing.T, name string) {
	t.Helper()
	c.request("DELETE", "/api/v1/namespaces/default/pods/"+name, []byte(`{"gracePeriodSeconds": 0}`))
	waitFor(t, "pod "+name+" gone", 60*time.Second, func() bool {
		code, _ := c.request("GET", "/api/v1/namespaces/default/pods/"+name, nil)
		return code == 404
	})
}

// sbxContainers lists the containers sbx-runc holds for containerd.
func (c *cluster) sbxContainers() []string {
	entries, _ := os.ReadDir(c.sbxRoot)
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// testPods runs the same pod under sbx and runc side by side: logs, exec,
// limits, and nothing left behind after delete.
func testPods(t *testing.T, c *cluster) {
	links := hostLinks(t)
	c.kubectl("apply", "-f", "-").stdin(podManifest("sbx-pod", "sbx")).must(t)
	c.kubectl("apply", "-f", "-").stdin(podManifest("runc-pod", "")).must(t)
	sp := c.waitPhase(t, "sbx-pod", "Running", 120*time.Second)
	rp := c.waitPhase(t, "runc-pod", "Running", 120*time.Second)
	ids := c.sbxContainers()
	if len(ids) != 2 {
		t.Errorf("sbx-runc holds %v, want the sbx pod's sandbox and container", ids)
	}
	for _, cs := range sp.Status.ContainerStatuses {
		if !slices.Contains(ids, strings.TrimPrefix(cs.ContainerID, "containerd://")) {
			t.Errorf("container %s of the sbx pod is not run by sbx-runc (%v)", cs.ContainerID, ids)
		}
	}
	for _, cs := range rp.Status.ContainerStatuses {
		if slices.Contains(ids, strings.TrimPrefix(cs.ContainerID, "containerd://")) {
			t.Errorf("container %s of the runc pod is run by sbx-runc", cs.ContainerID)
		}
	}

	for _, name := range []string{"sbx-pod", "runc-pod"} {
		var logs string
		waitFor(t, name+" logs", 30*time.Second, func() bool {
			logs, _, _ = c.kubectl("logs", name).run()
			return strings.Contains(logs, "hello-from-pod")
		})
	}
	status := func(name string) string {
		out, errs, code := c.kubectl("exec", name, "--", "sh", "-c", "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr -d ' \\t'; cat /sys/fs/cgroup/memory/memory.limit_in_bytes; echo quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)").run()
		if code != 0 {
			t.Errorf("kubectl exec %s: exit %d: %s", name, code, errs)
		}
		return out
	}
	// Half a CPU is a CFS quota of 50 ms per 100 ms period.
	if out := status("sbx-pod"); !strings.Contains(out, "NoNewPrivs:1") || !strings.Contains(out, "Seccomp:2") || !strings.Contains(out, "67108864") || !strings.Contains(out, "quota=50000") {
		t.Errorf("sbx pod: %q, want no_new_privs, sbx's seccomp filter, the 64 MiB limit and half a CPU", out)
	}
	if out := status("runc-pod"); !strings.Contains(out, "Seccomp:0") || !strings.Contains(out, "67108864") || !strings.Contains(out, "quota=50000") {
		t.Errorf("runc pod: %q, want no seccomp filter (Kubernetes' default), the 64 MiB limit and half a CPU", out)
	}
	// The memory limit holds: a process that takes all it can is OOM-killed.
	_, errs, code := c.kubectl("exec", "sbx-pod", "--", "tail", "/dev/zero").run()
	if code != 137 {
		t.Errorf("kubectl exec sbx-pod -- tail /dev/zero: exit %d (%s), want 137 (OOM-killed at 64 MiB)", code, errs)
	}
	if p := c.waitPhase(t, "sbx-pod", "Running", 10*time.Second); p.Metadata.UID != sp.Metadata.UID {
		t.Error("the sbx pod was replaced")
	}

	c.deletePod(t, "sbx-pod")
	c.deletePod(t, "runc-pod")
	waitFor(t, "sbx-runc's containers removed", 30*time.Second, func() bool { return len(c.sbxContainers()) == 0 })
	for _, p := range []pod{sp, rp} {
		marker := "pod" + p.Metadata.UID
		if procs := processesIn(marker); len(procs) > 0 {
			t.Errorf("processes of pod %s left: %v", p.Metadata.UID, procs)
		}
		waitFor(t, "cgroups of pod "+p.Metadata.UID+" removed", 30*time.Second, func() bool {
			left, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupRoot + "/kubepods*/*/" + marker)
			more, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupRoot + "/kubepods*/" + marker)
			return len(left)+len(more) == 0
		})
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, id := range ids {
		if strings.Contains(string(mounts), id) {
			t.Errorf("mounts of container %s left", id)
		}
	}
	if strings.Contains(string(mounts), sp.Metadata.UID) {
		t.Errorf("mounts of the sbx pod left")
	}
	// Only links that appeared during the test count (the machine is
	// shared); the pods' veths may go a moment after the pods.
	var added []string
	waitFor(t, "the pods' network links removed", 30*time.Second, func() bool {
		added = added[:0]
		for name := range hostLinks(t) {
			if !links[name] {
				added = append(added, name)
			}
		}
		return len(added) == 0
	})
}

// processesIn returns the PIDs whose cgroup path contains marker.
func processesIn(marker string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscan(d.Name(), &pid); err != nil {
			continue
		}
		data, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cgroup"))
		if strings.Contains(string(data), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hostLinks returns the names of the host's network interfaces.
func hostLinks(t *testing.T) map[string]bool {
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// testAgentSandbox runs agent-sandbox's controller with a SandboxTemplate
// whose pods use runtimeClassName sbx, a SandboxWarmPool of 2 and a
// SandboxClaim that becomes Ready from the pool.
func testAgentSandbox(t *testing.T, c *cluster) {
	crds, _ := filepath.Glob(filepath.Join(c.bin, "crds", "*.yaml"))
	for _, f := range crds {
		c.kubectl("apply", "--server-side", "-f", f).must(t)
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		name = name[strings.Index(name, "_")+1:] + "." + name[:strings.Index(name, "_")]
		// The conversion webhook serves versions this test does not use.
		c.kubectl("patch", "crd", name, "--type", "merge", "-p", `{"spec":{"conversion":{"strategy":"None","webhook":null}}}`).must(t)
	}
	for _, f := range crds {
		c.kubectl("wait", "--for", "condition=Established", "-f", f, "--timeout", "60s").must(t)
	}
	c.start("agent-sandbox-controller", []string{"KUBECONFIG=" + c.kubeconfig}, filepath.Join(c.bin, "agent-sandbox-controller"),
		"--extensions", "--enable-webhook=false", "--manage-webhook-certs=false", "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	c.applyPool(t)
	c.waitPoolReady(t, 2, 180*time.Second)
	if n := len(c.sbxContainers()); n != 4 {
		t.Errorf("sbx-runc holds %d containers, want 4 (two warm pods of two containers)", n)
	}
	took := c.claim(t, "claim-1")
	t.Logf("SandboxClaim claim-1 Ready in %s (warm pool of 2)", took.Round(time.Millisecond))
	c.kubectl("delete", "sandboxclaim", "claim-1", "--wait=false").must(t)
	c.deletePool(t)
}

// applyPool applies a SandboxTemplate whose pods use runtimeClassName sbx
// and a SandboxWarmPool of 2 of them, named sbx-pool.
func (c *cluster) applyPool(t *testing.T) {
	t.Helper()
	c.kubectl("apply", "-f", "-").stdin(fmt.Sprintf(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: sbx-busybox, namespace: default}
spec:
  networkPolicyManagement: Unmanaged
  podTemplate:
    spec:
      runtimeClassName: sbx
      hostNetwork: true
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: 1
      tolerations: [{operator: Exists}]
      containers:
      - name: main
        image: %s
        imagePullPolicy: Never
        command: ["sh", "-c", "echo sandbox-ready; exec sleep 3600"]
        # Small requests: claimed sandboxes stay after their claims go, and
        # the benchmark's refills must still fit on the node's 2 CPUs.
        resources: {limits: {memory: 64Mi, cpu: 500m}, requests: {memory: 16Mi, cpu: 10m}}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: sbx-pool, namespace: default}
spec:
  replicas: 2
  sandboxTemplateRef: {name: sbx-busybox}
`, busyboxImage)).must(t)
}

// deletePool deletes the warm pool, the sandboxes and pods, and waits
// until sbx-runc's containers are gone with them.
func (c *cluster) deletePool(t *testing.T) {
	t.Helper()
	c.kubectl("delete", "sandboxclaims", "--all", "--wait=false").must(t)
	c.kubectl("delete", "sandboxwarmpool", "sbx-pool").must(t)
	c.kubectl("delete", "sandboxes", "--all").must(t)
	c.kubectl("delete", "pods", "--all", "--grace-period", "0").must(t)
	waitFor(t, "sbx-runc's containers removed", 60*time.Second, func() bool { return len(c.sbxContainers()) == 0 })
}

// waitPoolReady waits until the warm pool has n ready sandboxes.
func (c *cluster) waitPoolReady(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	ready := func() bool {
		var wp struct {
			Status struct {
				ReadyReplicas int `json:"readyReplicas"`
			} `json:"status"`
		}
		return c.getJSON("/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxwarmpools/sbx-pool", &wp) && wp.Status.ReadyReplicas >= n
	}
	for deadline := time.Now().Add(timeout); !ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			state, errs, _ := c.kubectl("get", "sandboxwarmpools,sandboxes,sandboxclaims,pods", "-o", "wide").run()
			pool, _, _ := c.kubectl("get", "sandboxwarmpool", "sbx-pool", "-o", "jsonpath={.status}").run()
			t.Fatalf("warm pool with %d ready sandboxes: not within %s; pool status %s\n%s%s", n, timeout, pool, state, errs)
		}
	}
}

// claim creates a SandboxClaim on the warm pool and returns how long it
// took to become Ready.
func (c *cluster) claim(t *testing.T, name string) time.Duration {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":%q},"spec":{"warmPoolRef":{"name":"sbx-pool"}}}`, name)
	start := time.Now()
	if code, data := c.request("POST", "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims", []byte(body)); code != 201 {
		t.Fatalf("create claim: %d %s", code, data)
	}
	var took time.Duration
	waitFor(t, "claim "+name+" Ready", 120*time.Second, func() bool {
		var cl struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		if !c.getJSON("/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims/"+name, &cl) {
			return false
		}
		for _, cond := range cl.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				took = time.Since(start)
				return true
			}
		}
		return false
	})
	return took
}

// benchPods measures pod create until Running with runtimeClassName sbx
// and with runc, alternating, 10 of each, and warm claims until Ready.
func benchPods(t *testing.T, c *cluster) {
	var load syscall.Sysinfo_t
	times := map[string][]time.Duration{}
	// started: until containerd's event that the pod's container started,
	// which the kubelet's once-a-second relist of container states does
	// not round up.
	started := map[string][]time.Duration{}
	taskStart := c.watchTaskStarts(t)
	// runc runs pods without a seccomp filter unless they ask for one (the
	// kubelet's default); sbx always adds Docker's profile, so runc with
	// RuntimeDefault (containerd's profile, compiled by runc) runs too.
	variants := []struct {
		key, runtimeClass string
		seccomp           bool
	}{{"sbx", "sbx", false}, {"runc", "", false}, {"runc-seccomp", "", true}}
	for i := range 10 {
		for _, v := range variants {
			rc := v.key
			name := fmt.Sprintf("bench-%s-%d", v.key, i)
			start := time.Now()
			if code, data := c.request("POST", "/api/v1/namespaces/default/pods", []byte(benchPodManifest(name, v.runtimeClass, v.seccomp))); code != 201 {
				t.Fatalf("create pod: %d %s", code, data)
			}
			var p pod
			for !(c.getJSON("/api/v1/namespaces/default/pods/"+name, &p) && p.Status.Phase == "Running") {
				if time.Since(start) > 2*time.Minute {
					t.Fatalf("pod %s not Running after 2 minutes", name)
				}
				time.Sleep(10 * time.Millisecond)
			}
			times[rc] = append(times[rc], time.Since(start))
			if len(p.Status.ContainerStatuses) != 1 {
				t.Fatalf("pod %s: container statuses %+v", name, p.Status.ContainerStatuses)
			}
			at := taskStart(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://"))
			if at.IsZero() {
				t.Fatalf("pod %s: no containerd event of its container's start", name)
			}
			started[rc] = append(started[rc], at.Sub(start))
			c.deletePod(t, name)
		}
	}
	_ = syscall.Sysinfo(&load)
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	for _, v := range variants {
		t.Logf("pods until Running, %s: %v", v.key, msList(times[v.key]))
		t.Logf("pods until their container started, %s: %v", v.key, msList(started[v.key]))
	}
	// The warm pool of the claims: the same template as AgentSandboxWarmPool.
	c.applyPool(t)
	defer c.deletePool(t)
	var claims []time.Duration
	for i := range 5 {
		c.waitPoolReady(t, 2, 120*time.Second)
		name := fmt.Sprintf("bench-claim-%d", i)
		claims = append(claims, c.claim(t, name))
		t.Logf("%s Ready in %s", name, claims[i].Round(time.Millisecond))
		c.kubectl("delete", "sandboxclaim", name, "--wait=false").must(t)
	}
	slices.Sort(claims)
	res, _ := json.Marshal(map[string]any{
		"pod_running_sbx_median_ms":          med(times["sbx"]).Milliseconds(),
		"pod_running_runc_median_ms":         med(times["runc"]).Milliseconds(),
		"pod_running_runc_seccomp_median_ms": med(times["runc-seccomp"]).Milliseconds(),
		"pod_started_sbx_median_ms":          med(started["sbx"]).Milliseconds(),
		"pod_started_runc_median_ms":         med(started["runc"]).Milliseconds(),
		"pod_started_runc_seccomp_median_ms": med(started["runc-seccomp"]).Milliseconds(),
		"claim_ready_median_ms":              claims[len(claims)/2].Milliseconds(),
		"claims_ms":                          msList(claims),
		"load1":                              float64(load.Loads[0]) / 65536,
	})
	t.Logf("bench: %s", res)
}

// msList converts durations to milliseconds.
func msList(d []time.Duration) []int64 {
	var ms []int64
	for _, x := range d {
		ms = append(ms, x.Milliseconds())
	}
	return ms
}

// watchTaskStarts follows containerd's events (ctr events) until the test
// ends; the function it returns waits up to 10 s for the start of the
// container with the given id and returns when containerd published it
// (zero if it did not).
func (c *cluster) watchTaskStarts(t *testing.T) func(id string) time.Time {
	cmd := exec.Command("ctr", "--address", c.sock, "events")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("ctr events: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var mu sync.Mutex
	starts := map[string]time.Time{}
	go func() {
		// "2026-11-28 01:00:00.123456789 +0000 UTC k8s.io /tasks/start {"container_id":...}"
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 7)
			if len(f) < 7 || f[5] != "/tasks/start" {
				continue
			}
			at, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", strings.Join(f[:4], " "))
			var ev struct {
				ContainerID string `json:"container_id"`
			}
			if err == nil && json.Unmarshal([]byte(f[6]), &ev) == nil {
				mu.Lock()
				starts[ev.ContainerID] = at
				mu.Unlock()
			}
		}
	}()
	return func(id string) time.Time {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			at, ok := starts[id]
			mu.Unlock()
			if ok {
				return at
			}
		}
		return time.Time{}
	}
}
