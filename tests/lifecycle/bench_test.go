package lifecycle

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
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
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sbx := func(args ...string) (time.Duration, string) {
		cmd := exec.Command(harness.SbxBin, append([]string{"--root", filepath.Join(dir, "root"), "--run-root", filepath.Join(dir, "run")}, args...)...)
		t0 := time.Now()
		out, err := cmd.Output()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("sbx %v: %v", args, err)
		}
		return d, strings.TrimSpace(string(out))
	}
	docker := dockerForBench(b, root)
	for range b.N {
		var sc, sr, dc, dr []time.Duration
		// Interleaved, so that machine noise hits both alike.
		for range lifecycleBenchRounds {
			d, id := sbx("create", "--rootfs", root)
			sc = append(sc, d)
			d, _ = sbx("rm", "-f", id)
			sr = append(sr, d)
			if docker != nil {
				d, id := docker("run", "-d", "--network", "none", dockerBenchImage, "sleep", "1000000")
				dc = append(dc, d)
				d, _ = docker("rm", "-f", id)
				dr = append(dr, d)
			}
		}
		c50, _ := report(b, "sbx-create", sc)
		r50, _ := report(b, "sbx-rm", sr)
		if docker != nil {
			d50, _ := report(b, "docker-run-d", dc)
			e50, _ := report(b, "docker-rm-f", dr)
			b.ReportMetric(float64(c50)/float64(d50), "create/docker-run")
			b.ReportMetric(float64(r50)/float64(e50), "rm/docker-rm")
			b.Logf("medians: sbx create / docker run -d = %.2f, sbx rm / docker rm -f = %.2f", float64(c50)/float64(d50), float64(r50)/float64(e50))
		}
	}
}

const dockerBenchImage = "sbx-bench-busybox:latest"

// dockerForBench returns a function running the docker CLI, after importing
// root as dockerBenchImage, or nil (with the reason logged) when no Docker
// daemon answers.
func dockerForBench(b *testing.B, root string) func(args ...string) (time.Duration, string) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Logf("docker: not installed (%v); no comparison", err)
		return nil
	}
	if out, err := exec.Command(docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		b.Logf("docker: daemon not reachable: %v: %s; no comparison", err, strings.TrimSpace(string(out)))
		return nil
	}
	imp := exec.Command("sh", "-c", "tar -C "+root+" -c . | "+docker+" import - "+dockerBenchImage)
	if out, err := imp.CombinedOutput(); err != nil {
		b.Logf("docker import of the busybox root failed: %v: %s", err, out)
		return nil
	}
	b.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", dockerBenchImage).Run() })
	return func(args ...string) (time.Duration, string) {
		t0 := time.Now()
		out, err := exec.Command(docker, args...).Output()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("docker %v: %v", args, err)
		}
		return d, strings.TrimSpace(string(out))
	}
}

// report logs and reports the median and p99 of ds in milliseconds.
func report(b *testing.B, what string, ds []time.Duration) (p50, p99 time.Duration) {
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	p50 = sorted[len(sorted)/2]
	p99 = sorted[min(len(sorted)-1, len(sorted)*99/100)]
	b.ReportMetric(float64(p50.Microseconds())/1000, what+"-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, what+"-p99-ms")
	b.Logf("%s: n=%d median %v p99 %v", what, len(ds), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
	return p50, p99
}
