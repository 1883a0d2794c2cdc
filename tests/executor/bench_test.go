package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// BenchmarkExecutorRoundTrip times `true` run through the executor's
// /v1/exec and through a shell session, against `runc exec` into a running
// runc container and `docker exec` into a running Docker container (a
// private dockerd), all in the same run and interleaved. It reports the
// medians and the ratios of runc and docker to the executor, and two
// floors: starting and waiting for `true` directly from Go (spawn-ms) and an
// API round trip that runs nothing (health-ms).
//
//	go test -tags 'seccomp netgo osusergo' -run '^$' -bench ExecutorRoundTrip -benchtime 200x ./tests/
func BenchmarkExecutorRoundTrip(b *testing.B) {
	e := startExecutor(b)
	ctx := context.Background()
	s, err := e.client.CreateSession(ctx, api.SessionRequest{Shell: "bash"})
	if err != nil {
		b.Fatal(err)
	}
	root := fixture.BusyboxRootfs(b)
	runcExec := runcContainer(b, root)
	dockerExec := dockerContainer(b, root)

	execTrue := func() {
		res, err := e.client.Exec(ctx, api.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true: %+v %v", res, err)
		}
	}
	sessionTrue := func() {
		res, err := e.client.Run(ctx, s.ID, api.RunRequest{Command: "true"})
		if err != nil || res.Status != api.StatusCompleted || *res.ExitCode != 0 {
			b.Fatalf("session true: %+v %v", res, err)
		}
	}
	run := func(cmd *exec.Cmd) {
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
	}
	for i := 0; i < 20; i++ { // warm-up
		execTrue()
		sessionTrue()
	}
	run(runcExec())
	run(dockerExec())

	// The floor: starting and waiting for `true` directly from Go.
	spawnTrue := func() {
		if err := exec.Command("/usr/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
	// The other floor: an API round trip that runs nothing.
	health := func() {
		if _, err := e.client.Health(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var execT, sessT, spawnT, httpT, runcT, dockerT []time.Duration
	timeIt := func(into *[]time.Duration, f func()) {
		t0 := time.Now()
		f()
		*into = append(*into, time.Since(t0))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		timeIt(&execT, execTrue)
		timeIt(&sessT, sessionTrue)
		timeIt(&spawnT, spawnTrue)
		timeIt(&httpT, health)
		if i%10 == 0 { // the anchors are slow; a tenth of the samples suffice
			timeIt(&runcT, func() { run(runcExec()) })
			timeIt(&dockerT, func() { run(dockerExec()) })
		}
	}
	b.StopTimer()
	me, ms, mr, md := harness.Median(execT), harness.Median(sessT), harness.Median(runcT), harness.Median(dockerT)
	b.ReportMetric(float64(harness.Median(spawnT).Microseconds())/1000, "spawn-ms")
	b.ReportMetric(float64(harness.Median(httpT).Microseconds())/1000, "health-ms")
	b.ReportMetric(float64(me.Microseconds())/1000, "exec-ms")
	b.ReportMetric(float64(ms.Microseconds())/1000, "session-ms")
	b.ReportMetric(float64(mr.Microseconds())/1000, "runc-exec-ms")
	b.ReportMetric(float64(md.Microseconds())/1000, "docker-exec-ms")
	b.ReportMetric(float64(mr)/float64(me), "runc/exec")
	b.ReportMetric(float64(mr)/float64(ms), "runc/session")
	b.ReportMetric(float64(md)/float64(me), "docker/exec")
	b.ReportMetric(float64(md)/float64(ms), "docker/session")
}

// runcContainer starts a long-lived runc container over root from a bundle
// made with `runc spec`, and returns a command that runs `true` in it.
func runcContainer(b *testing.B, root string) func() *exec.Cmd {
	runc, err := exec.LookPath("runc")
	if err != nil {
		b.Fatal("runc is not installed: make deps-bench")
	}
	bundle := b.TempDir()
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		b.Fatalf("runc spec: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(bundle, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		b.Fatal(err)
	}
	cfg["root"] = map[string]any{"path": root, "readonly": true}
	proc := cfg["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = []string{"sleep", "100000"}
	if data, err = json.Marshal(cfg); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		b.Fatal(err)
	}
	id := fmt.Sprintf("sbx-bench-exec-%d", os.Getpid())
	state := b.TempDir()
	// The detached container keeps its stdio: give it a file, not a pipe
	// that would never reach EOF.
	logf, err := os.Create(filepath.Join(state, "run.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	start := exec.Command(runc, "--root", state, "run", "-d", "--bundle", bundle, id)
	start.Stdout, start.Stderr = logf, logf
	if err := start.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		b.Fatalf("runc run -d: %v\n%s", err, out)
	}
	b.Cleanup(func() {
		if out, err := exec.Command(runc, "--root", state, "delete", "-f", id).CombinedOutput(); err != nil {
			b.Errorf("runc delete: %v\n%s", err, out)
		}
	})
	return func() *exec.Cmd { return exec.Command(runc, "--root", state, "exec", id, "true") }
}

// dockerContainer starts a private dockerd (own data root, socket, no
// networking changes), imports root as an image, runs a container from it
// and returns a command that runs `true` in it. Everything is removed in
// cleanup.
func dockerContainer(b *testing.B, root string) func() *exec.Cmd {
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		b.Fatal("dockerd is not installed: make deps-bench (docker.io)")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Fatal("docker is not installed: make deps-bench (docker.io)")
	}
	dir, err := os.MkdirTemp("", "sbx-bench-docker-")
	if err != nil {
		b.Fatal(err)
	}
	sock := "unix://" + filepath.Join(dir, "docker.sock")
	var logb lockedWriter
	logb.w = &strings.Builder{}
	d := exec.Command(dockerd, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"), "-H", sock, "--bridge=none", "--iptables=false", "--ip6tables=false")
	d.Stdout, d.Stderr = &logb, &logb
	if err := d.Start(); err != nil {
		b.Fatalf("start dockerd: %v", err)
	}
	dockerCmd := func(args ...string) *exec.Cmd {
		c := exec.Command(docker, args...)
		c.Env = append(os.Environ(), "DOCKER_HOST="+sock)
		return c
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	b.Cleanup(func() {
		_ = dockerCmd("rm", "-f", "sbx-bench").Run()
		_ = dockerCmd("rmi", "-f", "sbx-bench-busybox").Run()
		_ = d.Process.Signal(sigterm)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = d.Process.Kill()
			<-exited
		}
		if err := os.RemoveAll(dir); err != nil {
			b.Errorf("remove docker data: %v", err)
		}
	})
	ready := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			b.Fatalf("dockerd exited: %v\n%s", err, logb.String())
		default:
		}
		if dockerCmd("version").Run() == nil {
			ready = true
			break
		}
	}
	if !ready {
		b.Fatalf("dockerd did not come up in 60s:\n%s", logb.String())
	}
	imp := dockerCmd("import", "-", "sbx-bench-busybox")
	tarCmd := exec.Command("tar", "-C", root, "-c", ".")
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	imp.Stdin = pipe
	if err := tarCmd.Start(); err != nil {
		b.Fatal(err)
	}
	if out, err := imp.CombinedOutput(); err != nil {
		b.Fatalf("docker import: %v\n%s", err, out)
	}
	if err := tarCmd.Wait(); err != nil {
		b.Fatal(err)
	}
	if out, err := dockerCmd("run", "-d", "--network", "none", "--name", "sbx-bench", "sbx-bench-busybox", "sleep", "100000").CombinedOutput(); err != nil {
		b.Fatalf("docker run: %v\n%s", err, out)
	}
	return func() *exec.Cmd { return dockerCmd("exec", "sbx-bench", "true") }
}
