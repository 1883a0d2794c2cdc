package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/hashicorp/nomad/api"

	"github.com/sbxrun/sbx/tests/fixture"
)

// TestSbxDriver runs the driver on a real cluster, one scenario after the
// other on the same cluster: placement, logs, exit codes and exec; limits;
// a node drain; a client killed and restarted; stop and purge.
func TestSbxDriver(t *testing.T) {
	reg := fixture.StartRegistry(t)
	image := reg.Push(t, "e2e/busybox:1", fixture.BusyboxImage(t))
	c := startCluster(t, clusterOptions{netns: true, pluginConfig: fmt.Sprintf(`    insecure_registries = [%q]`, reg.Host)})
	e := &env{c: c, image: image}

	steps := []struct {
		name string
		run  func(*testing.T, *env)
	}{
		{"DistinctHostsLogsExitCodesExec", testDistinctHosts},
		{"PoolTaskDirs", testPoolTaskDirs},
		{"BridgePorts", testBridgePorts},
		{"Limits", testLimits},
		{"Drain", testDrain},
		{"ClientRestartRecovers", testClientRestart},
		{"StopAndPurge", testStopAndPurge},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, e) }) {
			// Later steps build on a healthy cluster; a broken one would
			// only bury the first failure.
			t.Fatalf("%s failed; skipping the steps after it", s.name)
		}
	}
}

// env is what the scenarios share.
type env struct {
	c     *cluster
	image string
	// seen are the sandboxes the scenarios saw, checked for leftovers at
	// the end.
	mu   sync.Mutex
	seen []sandboxRecord
}

// on returns the cluster bound to the running subtest.
func (e *env) on(t *testing.T) *cluster { return e.c.with(t) }

// sandboxOf returns the sandbox of an allocation's task on its client,
// and remembers it.
func (e *env) sandboxOf(t *testing.T, a *agent, allocID string) sandboxRecord {
	t.Helper()
	c := e.on(t)
	sbs, err := c.sandboxes(a)
	if err != nil {
		t.Fatal(err)
	}
	var found []sandboxRecord
	for _, sb := range sbs {
		if sb.Spec.Labels["nomad.alloc_id"] == allocID {
			found = append(found, sb)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want 1 sandbox of allocation %s, found %d: %+v", a.name, allocID, len(found), found)
	}
	e.mu.Lock()
	e.seen = append(e.seen, found[0])
	e.mu.Unlock()
	return found[0]
}

// clientOf returns the client agent an allocation runs on.
func (e *env) clientOf(t *testing.T, alloc *api.AllocationListStub) *agent {
	t.Helper()
	for _, a := range e.c.clients {
		if a.nodeID == alloc.NodeID {
			return a
		}
	}
	t.Fatalf("allocation %s is on unknown node %s", alloc.ID, alloc.NodeID)
	return nil
}

// serviceJob is a long-running job of count tasks printing a line to
// stdout and stderr, then a heartbeat every second.
func (e *env) serviceJob(id string, count int, extra string) string {
	return fmt.Sprintf(`
job %q {
  datacenters = ["dc1"]
  %s
  group "g" {
    count = %d
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "t" {
      driver = "sbx"
      config {
        image   = %q
        command = "/bin/sh"
        args    = ["-c", "echo hello from $NOMAD_ALLOC_INDEX; echo oops >&2; i=0; while true; do i=$((i+1)); echo beat $i; sleep 1; done"]
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}`, id, extra, count, e.image)
}

// batchJob runs one command once, with no restarts or reschedules.
func (e *env) batchJob(id, config, resources string) string {
	return fmt.Sprintf(`
job %q {
  datacenters = ["dc1"]
  type = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "t" {
      driver = "sbx"
      config {
        image = %q
        %s
      }
      resources {
        %s
      }
    }
  }
}`, id, e.image, config, resources)
}

func testDistinctHosts(t *testing.T, e *env) {
	c := e.on(t)
	job := c.runJob(e.serviceJob("web", 2, `constraint {
    operator = "distinct_hosts"
    value    = "true"
  }`))
	allocs := c.waitRunning(job, 2, 2*time.Minute)
	if allocs[0].NodeID == allocs[1].NodeID {
		t.Fatalf("distinct_hosts: both allocations on node %s", allocs[0].NodeID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, a := range allocs {
		client := e.clientOf(t, a)
		sb := e.sandboxOf(t, client, a.ID)
		if sb.Status != "running" || sb.Pid == 0 {
			t.Errorf("sandbox %s of %s: status %s pid %d", sb.ID, a.ID, sb.Status, sb.Pid)
		}
		c.eventually(30*time.Second, "stdout in nomad alloc logs", func() error {
			out, err := c.nomadCLI(ctx, "", "alloc", "logs", a.ID, "t")
			if err != nil || !strings.Contains(out, "hello from") || !strings.Contains(out, "beat 2") {
				return errorf("nomad alloc logs: %v: %q", err, out)
			}
			return nil
		})
		out, err := c.nomadCLI(ctx, "", "alloc", "logs", "-stderr", a.ID, "t")
		if err != nil || strings.TrimSpace(out) != "oops" {
			t.Errorf("nomad alloc logs -stderr: %v: %q", err, out)
		}
		// A command through the driver's exec, with its exit code.
		out, err = c.nomadCLI(ctx, "", "alloc", "exec", "-task", "t", a.ID, "/bin/sh", "-c", "echo $((6*7)); cat /etc/hostname >/dev/null; exit 3")
		if code := exitCode(err); code != 3 || !strings.Contains(out, "42") {
			t.Errorf("nomad alloc exec: exit %d (%v), output %q; want 3 and 42", code, err, out)
		}
		// Nomad's directories are where the task expects them.
		out, err = c.nomadCLI(ctx, "", "alloc", "exec", "-task", "t", a.ID, "/bin/sh", "-c", "test -d /alloc/logs && test -d /local && test -d /secrets && echo dirs-ok")
		if err != nil || !strings.Contains(out, "dirs-ok") {
			t.Errorf("task directories: %v: %q", err, out)
		}
	}
	testExecTTY(t, c, allocs[0].ID)

	// Exit codes: a batch task that fails, and one that succeeds.
	failJob := c.runJob(e.batchJob("exit3", `command = "/bin/sh"
        args = ["-c", "echo bye; exit 3"]`, "memory = 32"))
	ev := c.waitTerminated(failJob, 2*time.Minute)
	if ev.Details["exit_code"] != "3" || ev.Details["oom_killed"] == "true" {
		t.Errorf("exit3: terminated event %+v; want exit_code 3", ev.Details)
	}
	okJob := c.runJob(e.batchJob("exit0", `command = "/bin/true"`, "memory = 32"))
	if ev := c.waitTerminated(okJob, 2*time.Minute); ev.Details["exit_code"] != "0" {
		t.Errorf("exit0: terminated event %+v; want exit_code 0", ev.Details)
	}
	for _, a := range c.allocs(failJob) {
		if out, err := c.nomadCLI(ctx, "", "alloc", "logs", a.ID, "t"); err != nil || strings.TrimSpace(out) != "bye" {
			t.Errorf("logs of a task that ended: %v: %q", err, out)
		}
	}
	e.purge(t, job, failJob, okJob)
}

// purge stops and purges jobs.
func (e *env) purge(t *testing.T, jobs ...string) {
	t.Helper()
	for _, j := range jobs {
		if _, _, err := e.c.api.Jobs().Deregister(j, true, nil); err != nil {
			t.Fatalf("purge %s: %v", j, err)
		}
	}
}

// testExecTTY runs `nomad alloc exec -i -t` under a terminal and checks the
// shell in the sandbox has one too.
func testExecTTY(t *testing.T, c *cluster, allocID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.nomad, "alloc", "exec", "-i", "-t", "-task", "t", allocID, "/bin/sh")
	cmd.Env = append(os.Environ(), fmt.Sprintf("NOMAD_ADDR=http://127.0.0.1:%d", c.server.http), "TERM=dumb")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatalf("start nomad alloc exec -i -t: %v", err)
	}
	defer ptmx.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&out, ptmx)
		close(copied)
	}()
	_, _ = io.WriteString(ptmx, "busybox tty; stty size; echo sum=$((40+2)); exit 7\n")
	err = cmd.Wait()
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	got := out.String()
	if code := exitCode(err); code != 7 || !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "sum=42") || !strings.Contains(got, "30 100") {
		t.Errorf("nomad alloc exec -i -t: exit %d (%v); want 7, a /dev/pts terminal of 30x100 and sum=42 in:\n%s", code, err, got)
	}
}

func testBridgePorts(t *testing.T, e *env) {
	c := e.on(t)
	job := c.runJob(fmt.Sprintf(`
job "ports" {
  datacenters = ["dc1"]
  group "g" {
    network {
      port "http" {
        to = 8080
      }
    }
    task "web" {
      driver = "sbx"
      template {
        data        = <<EOT
served by {{ env "NOMAD_ALLOC_ID" }}
EOT
        destination = "local/index.html"
      }
      config {
        image   = %q
        command = "/bin/busybox"
        args    = ["httpd", "-f", "-p", "8080", "-h", "/local"]
        network = "bridge"
        ports   = ["http"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}`, e.image))
	allocs := c.waitRunning(job, 1, 2*time.Minute)
	client := e.clientOf(t, allocs[0])
	sb := e.sandboxOf(t, client, allocs[0].ID)
	if sb.Network == nil || sb.Network.HostVeth == "" || !c.linkExists(sb.Network.HostVeth) {
		t.Fatalf("bridged sandbox %s has no veth on the host side: %+v", sb.ID, sb.Network)
	}
	alloc, _, err := c.api.Allocations().Info(allocs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	port := 0
	for _, p := range alloc.AllocatedResources.Shared.Ports {
		if p.Label == "http" {
			port = p.Value
		}
	}
	if port == 0 {
		t.Fatalf("no http port allocated: %+v", alloc.AllocatedResources.Shared.Ports)
	}
	// The stand-in host reaches the task through the port Nomad allocated.
	c.eventually(30*time.Second, "the published port to answer", func() error {
		get := fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:%d/index.html', timeout=5).read().decode(), end='')", port)
		out, err := exec.Command("ip", "netns", "exec", c.netns, "python3", "-c", get).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "served by "+allocs[0].ID {
			return errorf("wget 127.0.0.1:%d: %v: %q", port, err, out)
		}
		return nil
	})
	e.purge(t, job)
	c.eventually(time.Minute, "the veth to go", func() error {
		if c.linkExists(sb.Network.HostVeth) {
			return errorf("veth %s still exists", sb.Network.HostVeth)
		}
		return nil
	})
}

func testLimits(t *testing.T, e *env) {
	c := e.on(t)
	// Over its memory: dd allocates a 256 MiB buffer in a 32 MiB task.
	oom := c.runJob(e.batchJob("oom", `command = "/bin/dd"
        args = ["if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]`, "memory = 32"))
	ev := c.waitTerminated(oom, 2*time.Minute)
	if ev.Details["oom_killed"] != "true" || ev.Details["exit_code"] != "137" {
		t.Errorf("oom: terminated event %+v; want oom_killed true and exit code 137", ev.Details)
	}

	// CPU: a busy loop with cpu = 200 MHz gets no more than its share of
	// the node; pids: a fork bomb stops at pids_limit.
	job := c.runJob(fmt.Sprintf(`
job "limits" {
  datacenters = ["dc1"]
  group "g" {
    task "cpu" {
      driver = "sbx"
      config {
        image   = %q
        command = "/bin/sh"
        args    = ["-c", "while :; do :; done"]
      }
      resources {
        cpu    = 200
        memory = 32
      }
    }
    task "pids" {
      driver = "sbx"
      config {
        image      = %q
        command    = "/bin/sleep"
        args       = ["1000"]
        pids_limit = 16
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}`, e.image, e.image))
	allocs := c.waitRunning(job, 1, 2*time.Minute)
	client := e.clientOf(t, allocs[0])
	node, _, err := c.api.Nodes().Info(client.nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	totalMHz, _ := strconv.ParseFloat(node.Attributes["cpu.totalcompute"], 64)
	cores, _ := strconv.ParseFloat(node.Attributes["cpu.numcores"], 64)
	if totalMHz <= 0 || cores <= 0 {
		t.Fatalf("node has no cpu.totalcompute/numcores: %q %q", node.Attributes["cpu.totalcompute"], node.Attributes["cpu.numcores"])
	}
	wantCPUs := 200 / (totalMHz / cores)
	var cpuSb, pidsSb sandboxRecord
	sbs, err := c.sandboxes(client)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.Spec.Labels["nomad.alloc_id"] != allocs[0].ID {
			continue
		}
		switch sb.Spec.Labels["nomad.task"] {
		case "cpu":
			cpuSb = sb
		case "pids":
			pidsSb = sb
		}
		e.mu.Lock()
		e.seen = append(e.seen, sb)
		e.mu.Unlock()
	}
	if cpuSb.ID == "" || pidsSb.ID == "" {
		t.Fatalf("sandboxes of the limits job not found: %+v", sbs)
	}
	u1 := c.stats(client, cpuSb.ID)
	start := time.Now()
	time.Sleep(3 * time.Second)
	u2 := c.stats(client, cpuSb.ID)
	used := (u2.CPUTimeS - u1.CPUTimeS) / time.Since(start).Seconds()
	t.Logf("busy loop used %.3f CPUs with a limit of %.3f", used, wantCPUs)
	if used <= 0 || used > wantCPUs*1.25+0.02 {
		t.Errorf("cpu = 200 MHz: the busy loop used %.3f CPUs; want (0, %.3f]", used, wantCPUs*1.25+0.02)
	}

	// A fork loop run in the task stops at the limit; busybox's shell
	// gives up at its first failed fork.
	out, _ := c.nomadCLI(context.Background(), "", "alloc", "exec", "-task", "pids", allocs[0].ID,
		"/bin/sh", "-c", "for i in $(busybox seq 1 64); do sleep 1000 & done")
	if !strings.Contains(out, "fork") {
		t.Errorf("64 forks under pids_limit = 16 did not fail: %q", out)
	}
	c.eventually(30*time.Second, "the fork loop to hit pids_limit", func() error {
		u := c.stats(client, pidsSb.ID)
		if u.PidsLimit < 16 || u.PidsLimit > 16+32 {
			return errorf("pids limit %d; want 16 (plus sbx's own allowance)", u.PidsLimit)
		}
		if u.Pids > u.PidsLimit || u.Pids < 8 {
			return errorf("%d processes with a limit of %d; want the loop's sleeps up to the limit", u.Pids, u.PidsLimit)
		}
		return nil
	})
	e.purge(t, oom, job)
}

// usage is the part of `sbx stats --format json` the tests read.
type usage struct {
	CPUTimeS  float64 `json:"cpu_time_s"`
	Pids      uint64  `json:"pids"`
	PidsLimit uint64  `json:"pids_limit"`
}

// stats reads a sandbox's usage with the sbx CLI.
func (c *cluster) stats(a *agent, id string) usage {
	c.t.Helper()
	out, err := c.sbxCLI(a, "stats", "--no-stream", "--format", "json", id)
	if err != nil {
		c.t.Fatalf("sbx stats %s: %v: %s", id, err, out)
	}
	var u usage
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		c.t.Fatalf("sbx stats %s: %v: %s", id, err, out)
	}
	return u
}

func testDrain(t *testing.T, e *env) {
	c := e.on(t)
	job := c.runJob(e.serviceJob("drainme", 1, ""))
	allocs := c.waitRunning(job, 1, 2*time.Minute)
	from := e.clientOf(t, allocs[0])
	old := e.sandboxOf(t, from, allocs[0].ID)
	if _, err := c.api.Nodes().UpdateDrainOpts(from.nodeID, &api.DrainOptions{
		DrainSpec: &api.DrainSpec{Deadline: time.Minute}, MarkEligible: false,
	}, nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = c.api.Nodes().UpdateDrainOpts(from.nodeID, &api.DrainOptions{DrainSpec: nil, MarkEligible: true}, nil)
	}()
	var moved *api.AllocationListStub
	c.eventually(2*time.Minute, "the allocation to migrate off the drained node", func() error {
		for _, a := range c.allocs(job) {
			if a.NodeID != from.nodeID && a.ClientStatus == api.AllocClientStatusRunning && allTasksRunning(a) {
				moved = a
				return nil
			}
		}
		return errorf("no running allocation on another node yet")
	})
	to := e.clientOf(t, moved)
	e.sandboxOf(t, to, moved.ID)
	// Nomad keeps a stopped allocation's directory (its own secrets and
	// private mounts in it) until its client collects it: collect it now.
	c.eventually(time.Minute, "the old allocation to stop", func() error {
		a, _, err := c.api.Allocations().Info(allocs[0].ID, nil)
		if err != nil {
			return err
		}
		if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
			return errorf("still %s", a.ClientStatus)
		}
		return nil
	})
	c.eventually(time.Minute, "the drained client to be left with nothing", func() error {
		// Every stopped allocation of the node is collected (earlier
		// steps' too: their directories hold Nomad's own secrets and
		// private mounts until then), asked again on every try: a
		// collection asked for before the client has finished an
		// allocation's runner does nothing, and one after it was
		// collected is refused ("no such allocation").
		_ = c.api.Nodes().GcAlloc(allocs[0].ID, nil)
		if onNode, _, err := c.api.Nodes().Allocations(from.nodeID, nil); err == nil {
			for _, a := range onNode {
				if a.ClientTerminalStatus() {
					_ = c.api.Nodes().GcAlloc(a.ID, nil)
				}
			}
		}
		if left := c.leftovers(from, []sandboxRecord{old}); len(left) > 0 {
			return errorf("%s still has: %v", from.name, left)
		}
		return nil
	})
	e.purge(t, job)
}

func testClientRestart(t *testing.T, e *env) {
	c := e.on(t)
	job := c.runJob(e.serviceJob("survivor", 2, `constraint {
    operator = "distinct_hosts"
    value    = "true"
  }`))
	allocs := c.waitRunning(job, 2, 2*time.Minute)
	victim := e.clientOf(t, allocs[0])
	before := e.sandboxOf(t, victim, allocs[0].ID)
	beforeTask := c.taskState(allocs[0].ID, "t")

	c.kill(victim)
	// The sandbox lives on without its client.
	time.Sleep(2 * time.Second)
	if !processAlive(before.Pid, before.PidStart) {
		t.Fatalf("sandbox %s died with its client (PID 1 %d)", before.ID, before.Pid)
	}
	c.start(victim)
	c.waitReady(2 * time.Minute)

	c.eventually(time.Minute, "the allocation to run again on its node", func() error {
		a, _, err := c.api.Allocations().Info(allocs[0].ID, nil)
		if err != nil {
			return err
		}
		if a.ClientStatus != api.AllocClientStatusRunning {
			return errorf("allocation %s", a.ClientStatus)
		}
		return nil
	})
	after := e.sandboxOf(t, victim, allocs[0].ID)
	if after.ID != before.ID || after.Pid != before.Pid || after.PidStart != before.PidStart {
		t.Errorf("the task was not recovered in place: sandbox %s pid %d before, %s pid %d after", before.ID, before.Pid, after.ID, after.Pid)
	}
	afterTask := c.taskState(allocs[0].ID, "t")
	if afterTask.Restarts != beforeTask.Restarts || !afterTask.StartedAt.Equal(beforeTask.StartedAt) {
		t.Errorf("the task restarted: restarts %d -> %d, started %s -> %s", beforeTask.Restarts, afterTask.Restarts, beforeTask.StartedAt, afterTask.StartedAt)
	}
	for _, ev := range afterTask.Events {
		if ev.Type == api.TaskStarted && ev.Time > beforeTask.StartedAt.UnixNano()+int64(time.Second) {
			t.Errorf("a Started event after the restart: %+v", ev)
		}
	}
	// The recovered task still logs, execs and stops.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// What it writes after the restart reaches `nomad alloc logs` (the new
	// plugin forwards it into the restarted client's new logmon), and
	// every line is there exactly once: the old plugin stopped between
	// two chunks, the new one resumed from the saved offset, and what the
	// replaced logmon left in the FIFO reached the new one.
	last := lastBeat(c, ctx, allocs[0].ID)
	c.eventually(30*time.Second, "new log lines after the recovery, each once", func() error {
		bs := beats(c, ctx, allocs[0].ID)
		for i, n := range bs {
			if n != i+1 {
				return backoffFatal{fmt.Errorf("heartbeats not each once in order: got %d at line %d of %v", n, i+1, bs)}
			}
		}
		if len(bs) <= last+1 {
			return errorf("last beat %d, was %d", len(bs), last)
		}
		return nil
	})
	if out, err := c.nomadCLI(ctx, "", "alloc", "exec", "-task", "t", allocs[0].ID, "echo", "still-here"); err != nil || !strings.Contains(out, "still-here") {
		t.Errorf("exec after recovery: %v: %q", err, out)
	}
	// The killed client's plugin does not linger next to the new one.
	c.eventually(30*time.Second, "one plugin process per client", func() error {
		if n := len(processesUnder(c.plugins)); n != len(c.clients) {
			return errorf("%d plugin processes for %d clients", len(processesUnder(c.plugins)), len(c.clients))
		}
		return nil
	})
}

// beats returns the heartbeat numbers in an allocation's stdout log, in
// order.
func beats(c *cluster, ctx context.Context, allocID string) []int {
	out, _ := c.nomadCLI(ctx, "", "alloc", "logs", allocID, "t")
	var bs []int
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "beat "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				bs = append(bs, n)
			}
		}
	}
	return bs
}

// lastBeat is the highest heartbeat number in an allocation's log.
func lastBeat(c *cluster, ctx context.Context, allocID string) int {
	bs := beats(c, ctx, allocID)
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1]
}

func testStopAndPurge(t *testing.T, e *env) {
	c := e.on(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs, _, err := c.api.Jobs().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if out, err := c.nomadCLI(ctx, "", "job", "stop", "-purge", j.ID); err != nil {
			t.Errorf("nomad job stop -purge %s: %v: %s", j.ID, err, out)
		}
	}
	e.mu.Lock()
	seen := append([]sandboxRecord(nil), e.seen...)
	e.mu.Unlock()
	for _, a := range c.clients {
		c.eventually(2*time.Minute, a.name+" to be left with nothing", func() error {
			if left := c.leftovers(a, seen); len(left) > 0 {
				return errorf("%v", left)
			}
			return nil
		})
	}
}

// taskState returns a task's state in an allocation.
func (c *cluster) taskState(allocID, task string) *api.TaskState {
	c.t.Helper()
	a, _, err := c.api.Allocations().Info(allocID, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	ts := a.TaskStates[task]
	if ts == nil {
		c.t.Fatalf("allocation %s has no task %s", allocID, task)
	}
	return ts
}

// waitTerminated waits for a one-allocation job's task to end and returns
// its Terminated event.
func (c *cluster) waitTerminated(jobID string, timeout time.Duration) *api.TaskEvent {
	c.t.Helper()
	var ev *api.TaskEvent
	c.eventually(timeout, "job "+jobID+" to end", func() error {
		for _, a := range c.allocs(jobID) {
			for _, ts := range a.TaskStates {
				if ts.State != "dead" {
					continue
				}
				for _, e := range ts.Events {
					if e.Type == api.TaskTerminated {
						ev = e
						return nil
					}
				}
				return errorf("task dead without a Terminated event: %s", taskEvents(a))
			}
		}
		return errorf("not ended")
	})
	return ev
}

// exitCode is the exit code of a command's error (0 for none, -1 if it did
// not run).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// testPoolTaskDirs: a task with pool claims an idle member of the node's
// warm pool, and Nomad's task directories are mounted in it at the claim:
// a template rendered into /local is read, /alloc is written.
func testPoolTaskDirs(t *testing.T, e *env) {
	c := e.on(t)
	for _, a := range c.clients {
		// The image is in each client's cache since the first step.
		if out, err := c.sbxCLI(a, "pool", "create", "e2e", "--size", "1", "--pull", "never", e.image); err != nil {
			t.Fatalf("%s: sbx pool create: %v: %s", a.name, err, out)
		}
		if out, err := c.sbxCLI(a, "pool", "fill", "e2e"); err != nil {
			t.Fatalf("%s: sbx pool fill: %v: %s", a.name, err, out)
		}
	}
	defer func() {
		for _, a := range c.clients {
			if out, err := c.sbxCLI(a, "pool", "rm", "e2e"); err != nil {
				t.Errorf("%s: sbx pool rm: %v: %s", a.name, err, out)
			}
		}
	}()
	job := c.runJob(fmt.Sprintf(`
job "pooled" {
  datacenters = ["dc1"]
  type = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "t" {
      driver = "sbx"
      config {
        image   = %q
        pool    = "e2e"
        command = "/bin/sh"
        args    = ["-c", "cat /local/greeting.txt && echo written > /alloc/data/by-task && test -d /secrets"]
      }
      template {
        data        = "hello from a template"
        destination = "local/greeting.txt"
      }
      resources {
        memory = 32
      }
    }
  }
}`, e.image))
	ev := c.waitTerminated(job, 2*time.Minute)
	if ev.Details["exit_code"] != "0" {
		t.Fatalf("pooled task with task directories: terminated event %+v", ev.Details)
	}
	allocs := c.allocs(job)
	if len(allocs) != 1 {
		t.Fatalf("want 1 allocation, got %d", len(allocs))
	}
	claimed := false
	var events []string
	for _, ev := range allocs[0].TaskStates["t"].Events {
		msg := ev.DisplayMessage + " " + ev.Message + " " + ev.DriverMessage
		events = append(events, ev.Type+": "+msg)
		if strings.Contains(msg, "Claimed an idle member of warm pool e2e") {
			claimed = true
		}
	}
	if !claimed {
		t.Errorf("the task did not claim a pool member; its events: %q", events)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.nomadCLI(ctx, "", "alloc", "logs", allocs[0].ID, "t")
	if err != nil || !strings.Contains(out, "hello from a template") {
		t.Errorf("the task's output: %q, %v", out, err)
	}
}
