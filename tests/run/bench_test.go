package run

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// BenchmarkColdRun times one-shot `sbx run --rootfs <busybox> true` end to
// end against `runc run` of an equivalent bundle (same root, namespaces,
// capabilities, masked paths, Docker seccomp profile) in the same run,
// interleaved, and reports both medians and their ratio.
func BenchmarkColdRun(b *testing.B) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		b.Fatal("runc is not installed: make deps-bench")
	}
	root := fixture.BusyboxRootfs(b)
	bundle := runcBundle(b, root, []string{"true"})
	sbxCmd := func() *exec.Cmd { return exec.Command(harness.SbxBin, "run", "--rootfs", root, "true") }
	runcCmd := func(i int) *exec.Cmd {
		c := exec.Command(runc, "run", "--bundle", bundle, fmt.Sprintf("sbx-bench-%d-%d", os.Getpid(), i))
		return c
	}
	for i := 0; i < 3; i++ { // warm-up
		_ = sbxCmd().Run()
		_ = runcCmd(-1 - i).Run()
	}
	var sbxT, runcT []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if out, err := sbxCmd().CombinedOutput(); err != nil {
			b.Fatalf("sbx run: %v\n%s", err, out)
		}
		sbxT = append(sbxT, time.Since(t0))
		t0 = time.Now()
		if out, err := runcCmd(i).CombinedOutput(); err != nil {
			b.Fatalf("runc run: %v\n%s", err, out)
		}
		runcT = append(runcT, time.Since(t0))
	}
	b.StopTimer()
	ms, mr := harness.Median(sbxT), harness.Median(runcT)
	b.ReportMetric(float64(ms.Microseconds())/1000, "sbx-ms")
	b.ReportMetric(float64(mr.Microseconds())/1000, "runc-ms")
	b.ReportMetric(float64(ms)/float64(mr), "sbx/runc")
}

// runcBundle writes an OCI bundle equivalent to what sbx runs.
func runcBundle(b testing.TB, root string, args []string) string {
	dir := b.TempDir()
	spec, err := isolate.OCISpec(&isolate.Spec{ID: "bench", Rootfs: root, ReadonlyRootfs: true, Args: args,
		Env: []string{"PATH=" + isolate.DefaultPath}, Hostname: "bench", Seccomp: "default"})
	if err != nil {
		b.Fatal(err)
	}
	spec.Linux.CgroupsPath = ""
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}
