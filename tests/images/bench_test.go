package images

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
)

// imagesBenchLayers returns the two gzip layers of the large benchmark
// image, built once and cached under fixture.CacheDir: the Debian minbase
// root and a 160 MB layer of random-ish (partly compressible) files.
func imagesBenchLayers(b *testing.B) []string {
	b.Helper()
	dir := filepath.Join(fixture.CacheDir, "images-bench")
	debian := filepath.Join(dir, "debian.tar.gz")
	big := filepath.Join(dir, "big.tar.gz")
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return []string{debian, big}
	}
	root := fixture.DebianRootfs(b)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	write := func(dst string, fill func(gz *gzip.Writer) error) {
		f, err := os.Create(dst)
		if err != nil {
			b.Fatal(err)
		}
		gz := gzip.NewWriter(f)
		if err := fill(gz); err != nil {
			b.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	write(debian, func(gz *gzip.Writer) error { return fixture.TarDir(gz, root) })
	src := filepath.Join(b.TempDir(), "big")
	rng := rand.New(rand.NewPCG(1, 2))
	for d := 0; d < 8; d++ {
		sub := filepath.Join(src, "data", fmt.Sprintf("d%d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			// 1 MiB per file: random bytes from a 16-letter alphabet compress
			// about 2:1, like binaries and data files do.
			buf := make([]byte, 1<<20)
			for j := range buf {
				buf[j] = "abcdefghijklmnop"[rng.IntN(16)]
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d.bin", i)), buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	write(big, func(gz *gzip.Writer) error { return fixture.TarDir(gz, src) })
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return []string{debian, big}
}

// BenchmarkImagesPullLarge pulls and unpacks a large image (Debian minbase
// plus a 160 MB layer, about 390 MB unpacked) from the in-process registry
// with sbx, and with skopeo copy + umoci unpack in the same run. It reports
// seconds per pull for both and the ratio (target: sbx at least 1.5x).
//
//	go test -tags 'seccomp netgo osusergo' -run '^$' -bench ImagesPullLarge -benchtime 3x ./tests/
func BenchmarkImagesPullLarge(b *testing.B) {
	for _, tool := range []string{"skopeo", "umoci"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s not installed (make deps-bench): %v", tool, err)
		}
	}
	var layers []v1.Layer
	for _, p := range imagesBenchLayers(b) {
		l, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			b.Fatal(err)
		}
		layers = append(layers, l)
	}
	img := fixture.NewImage(b, v1.Config{Cmd: []string{"/bin/bash"}}, layers...)
	reg := fixture.StartRegistry(b)
	ref := reg.Push(b, "bench/large:1", img)
	work := b.TempDir()
	var sbxTotal, anchorTotal, sbxCPU, anchorCPU time.Duration
	var unpacked int64
	store := filepath.Join(work, "sbx")
	oci, bundle := filepath.Join(work, "oci"), filepath.Join(work, "bundle")
	runSbx := func() {
		cpu0 := imagesSelfCPU()
		start := time.Now()
		s, err := imagecache.Open(store, imagecache.Options{})
		if err != nil {
			b.Fatal(err)
		}
		got, err := s.Pull(context.Background(), ref, nil)
		if err != nil {
			b.Fatal(err)
		}
		sbxTotal += time.Since(start)
		sbxCPU += imagesSelfCPU() - cpu0
		unpacked = got.Size
	}
	runAnchor := func() {
		cpu0 := imagesSelfCPU()
		start := time.Now()
		for _, args := range [][]string{
			{"skopeo", "copy", "--quiet", "--src-tls-verify=false", "docker://" + ref, "oci:" + oci + ":1"},
			{"umoci", "unpack", "--image", oci + ":1", bundle},
		} {
			cmd := exec.Command(args[0], args[1:]...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %v\n%s", args, err, out)
			}
			anchorCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		anchorTotal += time.Since(start)
		anchorCPU += imagesSelfCPU() - cpu0 // the in-process registry serving skopeo
	}
	// settle writes back what a run left dirty (sbx syncs its layers within
	// its time, umoci does not) and commits deletions, untimed, so that one
	// run does not slow the next.
	settle := func() {
		b.StopTimer()
		syscall.Sync()
		b.StartTimer()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate the order: ext4 allocates inodes more slowly right
		// after mass deletions, which would favour whoever runs second.
		if i%2 == 0 {
			runSbx()
			settle()
			runAnchor()
		} else {
			runAnchor()
			settle()
			runSbx()
		}
		b.StopTimer()
		for _, d := range []string{store, oci, bundle} {
			if err := os.RemoveAll(d); err != nil {
				b.Fatal(err)
			}
		}
		syscall.Sync()
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(sbxTotal.Seconds()/n, "sbx-s/pull")
	b.ReportMetric(anchorTotal.Seconds()/n, "skopeo+umoci-s/pull")
	b.ReportMetric(anchorTotal.Seconds()/sbxTotal.Seconds(), "speedup-x")
	b.ReportMetric(float64(unpacked)/1e6, "unpacked-MB")
	// CPU seconds (user+sys) include the in-process registry on both sides.
	b.ReportMetric(sbxCPU.Seconds()/n, "sbx-cpu-s/pull")
	b.ReportMetric(anchorCPU.Seconds()/n, "skopeo+umoci-cpu-s/pull")
}

// imagesSelfCPU returns the user+system CPU time of this process so far.
func imagesSelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
