package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/fixture"
)

// lifecycleBenchRounds is how many sandboxes each side creates and removes.
const lifecycleBenchRounds = 200

// BenchmarkLifecycleCreateRemove measures, through the CLI, create-to-ready
// (`sbx create` returns once the executor answers) and `sbx rm -f`, median
// and p99 over 200 sandboxes, against `docker run -d` + `docker rm -f` of
// the same busybox root in the same run when a Docker daemon answers
// (DOCKER_HOST or /var/run/docker.sock). Run it with -benchtime 1x:
//
//	make build && SBX_BIN=$PWD/bin/sbx go test -tags 'seccomp netgo osusergo' \
//	    -run '^$' -bench LifecycleCreateRemove -benchtime 1x ./tests/
func BenchmarkLifecycleCreateRemove(b *testing.B) {
	root := fixture.BusyboxRootfs(b)
	dir, err := os.MkdirTemp("", "sbxlb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sbx := func(args ...string) (time.Duration, string) {
		cmd := exec.Command(sbxBin, append([]string{"--root", filepath.Join(dir, "root"), "--run-root", filepath.Join(dir, "run")}, args...)...)
		t0 := time.Now()
		out, err := cmd.Output()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("sbx %v: %v", args, err)
		}
		return d, strings.TrimSpace(string(out))
	}
	for range b.N {
		create, rm := make([]time.Duration, 0, lifecycleBenchRounds), make([]time.Duration, 0, lifecycleBenchRounds)
		for range lifecycleBenchRounds {
			d, id := sbx("create", "--rootfs", root)
			create = append(create, d)
			d, _ = sbx("rm", "-f", id)
			rm = append(rm, d)
		}
		report(b, "sbx-create", create)
		report(b, "sbx-rm", rm)
	}

	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Logf("docker: not installed (%v); no comparison", err)
		return
	}
	if out, err := exec.Command(docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		b.Logf("docker: daemon not reachable: %v: %s; no comparison", err, strings.TrimSpace(string(out)))
		return
	}
	const image = "sbx-bench-busybox:latest"
	imp := exec.Command("sh", "-c", "tar -C "+root+" -c . | "+docker+" import - "+image)
	if out, err := imp.CombinedOutput(); err != nil {
		b.Logf("docker import of the busybox root failed: %v: %s", err, out)
		return
	}
	defer exec.Command(docker, "rmi", "-f", image).Run()
	dockerRun := func(args ...string) (time.Duration, string) {
		t0 := time.Now()
		out, err := exec.Command(docker, args...).Output()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("docker %v: %v", args, err)
		}
		return d, strings.TrimSpace(string(out))
	}
	create, rm := make([]time.Duration, 0, lifecycleBenchRounds), make([]time.Duration, 0, lifecycleBenchRounds)
	for range lifecycleBenchRounds {
		d, id := dockerRun("run", "-d", "--network", "none", image, "sleep", "1000000")
		create = append(create, d)
		d, _ = dockerRun("rm", "-f", id)
		rm = append(rm, d)
	}
	report(b, "docker-run-d", create)
	report(b, "docker-rm-f", rm)
}

// report logs and reports the median and p99 of ds in milliseconds.
func report(b *testing.B, what string, ds []time.Duration) {
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	p50 := sorted[len(sorted)/2]
	p99 := sorted[min(len(sorted)-1, len(sorted)*99/100)]
	b.ReportMetric(float64(p50.Microseconds())/1000, what+"-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, what+"-p99-ms")
	b.Logf("%s: n=%d median %v p99 %v", what, len(ds), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
}
