package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/helper/testlog"
	"github.com/hashicorp/nomad/helper/uuid"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
)

// taskEnv is a driver served over Nomad's plugin gRPC (Nomad's driver test
// harness), with an sbx root of its own and a registry holding a busybox
// image.
type taskEnv struct {
	h     *dtestutil.DriverHarness
	d     *Driver
	image string
	root  string
}

func newTaskEnv(t *testing.T) *taskEnv {
	t.Helper()
	reg := fixture.StartRegistry(t)
	image := reg.Push(t, "unit/busybox:1", fixture.BusyboxImage(t))
	root := t.TempDir()
	runRoot, err := os.MkdirTemp("/run", "sbx-nd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runRoot) })
	ctx, cancel := context.WithCancel(context.Background())
	d := New(ctx, testlog.HCLogger(t))
	h := dtestutil.NewDriverHarness(t, d)
	var data []byte
	pc := PluginConfig{Root: root, RunRoot: runRoot, PullPolicy: "missing", GCInterval: "0", InsecureRegistries: []string{reg.Host}}
	if err := base.MsgPackEncode(&data, &pc); err != nil {
		t.Fatal(err)
	}
	if err := h.SetConfig(&base.Config{PluginConfig: data, AgentConfig: &base.AgentConfig{Driver: &base.ClientDriverConfig{}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Every sandbox of the test is gone.
		host, err := d.sbxHost()
		if err == nil {
			sbs, _ := host.List(context.Background(), sbx.Filter{})
			for _, sb := range sbs {
				t.Errorf("left behind: sandbox %s (%s)", sb.ID, sb.Status)
				_ = d.removeSandbox(sb.ID)
			}
		}
		cancel()
		h.Kill()
	})
	return &taskEnv{h: h, d: d, image: image, root: root}
}

// task makes a task config for tc, with an allocation directory and
// Nomad's log collector.
func (e *taskEnv) task(t *testing.T, name string, tc TaskConfig, memoryMB int64) *drivers.TaskConfig {
	t.Helper()
	tc.Image = e.image
	alloc := uuid.Generate()
	cfg := &drivers.TaskConfig{
		AllocID: alloc,
		ID:      fmt.Sprintf("%s/%s/%s", alloc, name, uuid.Generate()[:8]),
		Name:    name,
		JobName: "unit",
		Resources: &drivers.Resources{
			NomadResources: &structs.AllocatedTaskResources{
				Memory: structs.AllocatedMemoryResources{MemoryMB: memoryMB},
				Cpu:    structs.AllocatedCpuResources{CpuShares: 100},
			},
			LinuxResources: &drivers.LinuxResources{MemoryLimitBytes: memoryMB << 20, CPUShares: 100},
		},
	}
	if err := cfg.EncodeConcreteDriverConfig(&tc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.h.MkAllocDir(cfg, true))
	return cfg
}

// wait waits for a task to end.
func (e *taskEnv) wait(t *testing.T, id string, timeout time.Duration) *drivers.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ch, err := e.h.WaitTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		if res == nil {
			t.Fatalf("task %s: no exit result within %s", id, timeout)
		}
		return res
	case <-ctx.Done():
		t.Fatalf("task %s did not end within %s", id, timeout)
	}
	return nil
}

// logs reads what Nomad's log collector wrote for a task's stream.
func logs(t *testing.T, cfg *drivers.TaskConfig, stream string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(cfg.TaskDir().LogDir, cfg.Name+"."+stream+".0"))
	return string(b)
}

// waitLog waits up to 10 s for Nomad's log collector to hold want for a
// task's stream.
func waitLog(t *testing.T, cfg *drivers.TaskConfig, stream, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for logs(t, cfg, stream) != want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := logs(t, cfg, stream); got != want {
		t.Errorf("%s log %q, want %q", stream, got, want)
	}
}

func TestTaskRunsAndExits(t *testing.T) {
	e := newTaskEnv(t)
	cfg := e.task(t, "hello", TaskConfig{Command: "/bin/sh", Args: []string{"-c", "echo out; echo err >&2; test -d /alloc/logs && test -d /local && exit 7"}}, 64)
	handle, _, err := e.h.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := e.wait(t, cfg.ID, time.Minute)
	if res.ExitCode != 7 || res.Signal != 0 || res.OOMKilled || res.Err != nil {
		t.Errorf("exit %+v; want code 7", res)
	}
	// Each stream has its forwarder: stdout's being in says nothing of
	// stderr's.
	waitLog(t, cfg, "stdout", "out\n")
	waitLog(t, cfg, "stderr", "err\n")
	st, err := e.h.InspectTask(cfg.ID)
	if err != nil || st.State != drivers.TaskStateExited || st.ExitResult.ExitCode != 7 || st.DriverAttributes["sandbox_id"] == "" {
		t.Errorf("inspect: %+v %v", st, err)
	}
	if err := e.h.DestroyTask(handle.Config.ID, false); err != nil {
		t.Fatal(err)
	}
}

func TestTaskStopSignalStatsExec(t *testing.T) {
	e := newTaskEnv(t)
	cfg := e.task(t, "svc", TaskConfig{Command: "/bin/sh", Args: []string{"-c", "trap 'echo got-usr1' USR1; trap 'echo bye; exit 0' INT; while :; do sleep 0.2; done"}}, 64)
	if _, _, err := e.h.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.h.WaitUntilStarted(cfg.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Exec, with the exit code.
	res, err := e.h.ExecTask(cfg.ID, []string{"/bin/sh", "-c", "echo $((2+3)); exit 4"}, 30*time.Second)
	if err != nil || res.ExitResult.ExitCode != 4 || strings.TrimSpace(string(res.Stdout)) != "5" {
		t.Errorf("exec: %+v %v", res, err)
	}
	// Stats from the sandbox's cgroups.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := e.h.TaskStats(ctx, cfg.ID, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	u := <-ch
	if u == nil || u.ResourceUsage.MemoryStats.Usage == 0 {
		t.Errorf("stats: %+v", u)
	}
	cancel()
	// A signal reaches the main command.
	if err := e.h.SignalTask(cfg.ID, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs(t, cfg, "stdout"), "got-usr1") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs(t, cfg, "stdout"), "got-usr1") {
		t.Errorf("SIGUSR1 did not reach the task: %q", logs(t, cfg, "stdout"))
	}
	// Stop sends the kill signal; the task's trap ends it cleanly.
	if err := e.h.StopTask(cfg.ID, 10*time.Second, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	if res := e.wait(t, cfg.ID, 30*time.Second); res.ExitCode != 0 {
		t.Errorf("after stop: %+v", res)
	}
	if err := e.h.DestroyTask(cfg.ID, false); err != nil {
		t.Fatal(err)
	}
}

func TestTaskOOMKilled(t *testing.T) {
	e := newTaskEnv(t)
	cfg := e.task(t, "oom", TaskConfig{Command: "/bin/dd", Args: []string{"if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"}}, 32)
	if _, _, err := e.h.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	res := e.wait(t, cfg.ID, time.Minute)
	if !res.OOMKilled || res.Signal != 9 {
		t.Errorf("exit %+v; want OOM-killed with SIGKILL", res)
	}
	if err := e.h.DestroyTask(cfg.ID, true); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverTaskReattaches(t *testing.T) {
	e := newTaskEnv(t)
	cfg := e.task(t, "long", TaskConfig{Command: "/bin/sleep", Args: []string{"600"}}, 32)
	handle, _, err := e.h.StartTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.h.WaitUntilStarted(cfg.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	before, _ := e.h.InspectTask(cfg.ID)

	// A second plugin on the same sbx state, as after a client restart.
	d2 := New(context.Background(), testlog.HCLogger(t))
	var data []byte
	pc := e.d.pluginConfig()
	if err := base.MsgPackEncode(&data, &pc); err != nil {
		t.Fatal(err)
	}
	if err := d2.SetConfig(&base.Config{PluginConfig: data}); err != nil {
		t.Fatal(err)
	}
	if err := d2.RecoverTask(handle); err != nil {
		t.Fatal(err)
	}
	after, err := d2.InspectTask(cfg.ID)
	if err != nil || after.State != drivers.TaskStateRunning || after.DriverAttributes["sandbox_id"] != before.DriverAttributes["sandbox_id"] {
		t.Fatalf("recovered: %+v %v; before %+v", after, err, before)
	}
	// A handle naming another task's sandbox is refused.
	other := handle.Copy()
	other.Config.ID = "someone/else/1"
	if err := d2.RecoverTask(other); err == nil {
		t.Error("RecoverTask took a sandbox of another task")
	}
	if err := d2.StopTask(cfg.ID, time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	if err := d2.DestroyTask(cfg.ID, true); err != nil {
		t.Fatal(err)
	}
	_ = e.h.DestroyTask(cfg.ID, true) // the first plugin forgets it too
}

func TestStartTaskRefusesWhatPolicyForbids(t *testing.T) {
	e := newTaskEnv(t)
	for _, tc := range []struct {
		name string
		cfg  TaskConfig
		want string
	}{
		{"volume", TaskConfig{Command: "/bin/true", Volumes: []string{"/etc:/hostetc"}}, "volume"},
		{"hostnet", TaskConfig{Command: "/bin/true", Network: "host"}, "host"},
		{"capadd", TaskConfig{Command: "/bin/true", CapAdd: []string{"SYS_ADMIN"}}, "cap_add"},
		{"import", TaskConfig{Command: "/bin/true", ImagePath: "/etc/shadow"}, "/etc/shadow"},
	} {
		cfg := e.task(t, tc.name, tc.cfg, 32)
		if tc.cfg.ImagePath != "" {
			// image_path applies only to images not cached yet.
			var dc TaskConfig
			_ = cfg.DecodeDriverConfig(&dc)
			dc.Image = "unit/imported:" + tc.name
			_ = cfg.EncodeConcreteDriverConfig(&dc)
		}
		_, _, err := e.h.StartTask(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: StartTask: %v; want a refusal naming %q", tc.name, err, tc.want)
		}
	}
}

// TestTaskFromWarmPool: a task naming a pool claims an idle member (its
// environment, command and Nomad's task directories applied at the
// claim), the plugin refills the pool, and a task that sets what the pool
// fixes to another value is refused.
func TestTaskFromWarmPool(t *testing.T) {
	e := newTaskEnv(t)
	host, err := e.d.sbxHost()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := host.CreatePool(ctx, sbx.PoolSpec{Name: "unit", Size: 1, Options: sbx.Options{Image: e.image}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := host.RemovePool(context.Background(), "unit"); err != nil {
			t.Errorf("remove the pool: %v", err)
		}
	}()
	if _, err := host.FillPool(ctx, "unit"); err != nil {
		t.Fatal(err)
	}
	cfg := e.task(t, "pooled", TaskConfig{Pool: "unit", Env: map[string]string{"GREETING": "from-the-claim"},
		Command: "/bin/sh", Args: []string{"-c", "echo $GREETING; cat /local/from-nomad && echo written >/alloc/data/by-task && exit 3; exit 1"}}, 32)
	if err := os.WriteFile(filepath.Join(cfg.TaskDir().LocalDir, "from-nomad"), []byte("task dir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.h.StartTask(cfg); err != nil {
		t.Fatal(err)
	}
	st, err := e.h.InspectTask(cfg.ID)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := host.Get(ctx, st.DriverAttributes["sandbox_id"])
	if err != nil || sb.FromPool != "unit" {
		t.Fatalf("the task's sandbox was not claimed from the pool: %+v %v", sb, err)
	}
	if res := e.wait(t, cfg.ID, time.Minute); res.ExitCode != 3 {
		t.Errorf("exit %+v; want 3 (Nomad's task directories mounted in the claimed sandbox)", res)
	}
	waitLog(t, cfg, "stdout", "from-the-claim\ntask dir\n")
	// Into /alloc/data, which Nomad makes writable by every user (the
	// sandbox's root is an unprivileged host id in its user namespace).
	if data, err := os.ReadFile(filepath.Join(cfg.TaskDir().SharedAllocDir, "data", "by-task")); err != nil || string(data) != "written\n" {
		t.Errorf("the task's write to /alloc/data: %q, %v", data, err)
	}
	if err := e.h.DestroyTask(cfg.ID, false); err != nil {
		t.Fatal(err)
	}
	// The plugin refills the pool after the claim.
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := host.GetPool(ctx, "unit")
		if err == nil && len(p.Ready) == 1 && p.Starting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool was not refilled: %+v %v", p, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// What a pool fixes cannot come from the task.
	bad := e.task(t, "badpool", TaskConfig{Pool: "unit", Command: "/bin/true", Seccomp: "unconfined", CapDrop: []string{"NET_RAW"}}, 32)
	if _, _, err := e.h.StartTask(bad); err == nil || !strings.Contains(err.Error(), "seccomp") || !strings.Contains(err.Error(), "cap_drop") {
		t.Errorf("StartTask with seccomp and cap_drop other than the pool's: %v; want a refusal naming both", err)
	}
	other := e.task(t, "nopool", TaskConfig{Pool: "no-such-pool", Command: "/bin/true"}, 32)
	if _, _, err := e.h.StartTask(other); err == nil || !strings.Contains(err.Error(), "no-such-pool") {
		t.Errorf("StartTask naming a missing pool: %v", err)
	}
}
