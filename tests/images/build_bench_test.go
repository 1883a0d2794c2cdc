package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// buildBenchDockerfile is a 10-step Dockerfile (FROM and nine more: RUNs,
// COPYs, WORKDIR and metadata) on the busybox image.
const buildBenchDockerfile = `FROM bench-base:1
ENV APP=/app
WORKDIR /app
COPY a.txt ./
RUN cat a.txt > copy.txt
COPY dir/ ./dir/
RUN ls dir > list.txt
LABEL purpose=bench
USER 0:0
CMD ["cat", "/app/copy.txt"]
`

// BenchmarkBuildCached measures `sbx build` of an unchanged 10-step
// Dockerfile through the CLI: the build that follows a first one, every
// step cached (cached-ms, median of 20), against the first build
// (uncached-ms) and, as the floor of any CLI call on the same root,
// `sbx image inspect` (inspect-ms). Run it with -benchtime 1x:
//
//	make build && SBX_BIN=$PWD/bin/sbx go test -tags 'seccomp netgo osusergo' \
//	    -run '^$' -bench BuildCached -benchtime 1x ./tests/images/
func BenchmarkBuildCached(b *testing.B) {
	busybox := fixture.BusyboxRootfs(b)
	dir, err := os.MkdirTemp("", "sbxbb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sbx := func(args ...string) (time.Duration, string) {
		cmd := exec.Command(harness.SbxBin, append([]string{"--root", filepath.Join(dir, "root"), "--run-root", filepath.Join(dir, "run")}, args...)...)
		cmd.Env = append(os.Environ(), "SBX_PULL=never")
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("sbx %v: %v\n%s", args, err, out)
		}
		return d, string(out)
	}
	tarball := filepath.Join(dir, "busybox.tar")
	if out, err := exec.Command("tar", "-C", busybox, "-cf", tarball, ".").CombinedOutput(); err != nil {
		b.Fatalf("tar: %v: %s", err, out)
	}
	sbx("import", "-q", tarball, "bench-base:1")
	ctx := filepath.Join(dir, "ctx")
	for name, data := range map[string]string{"Dockerfile": buildBenchDockerfile, "a.txt": "a\n", "dir/x": "x\n", "dir/y": "y\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ctx, name)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ctx, name), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	const rounds = 20
	for range b.N {
		sbx("build", "prune", "-f")
		first, out := sbx("build", "-t", "bench-built:1", ctx)
		if m := builtSteps.FindStringSubmatch(out); m == nil || m[1] != "10" || m[2] != "0" {
			b.Fatalf("the first build should do its 10 steps:\n%s", out)
		}
		var cached, inspect []time.Duration
		for range rounds {
			d, out := sbx("build", "-t", "bench-built:1", ctx)
			if m := builtSteps.FindStringSubmatch(out); m == nil || m[2] != "5" {
				b.Fatalf("a build of the unchanged file should reuse the results of its 5 steps that make layers:\n%s", out)
			}
			cached = append(cached, d)
			d, _ = sbx("image", "inspect", "bench-built:1")
			inspect = append(inspect, d)
		}
		c, i := median(cached), median(inspect)
		b.ReportMetric(ms(first), "uncached-ms")
		b.ReportMetric(ms(c), "cached-ms")
		b.ReportMetric(ms(i), "inspect-ms")
		b.Logf("cached build %.1f ms (%.3f of the first build, %.2fx an image inspect)", ms(c), float64(c)/float64(first), float64(c)/float64(i))
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
