package lifecycle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestNamedVolumeInUseByRun: a one-shot sbx run (no -d) that mounts a
// named volume has it in use while it runs, as a sandbox has: sbx volume
// rm refuses it and sbx volume prune leaves it with its files; once the
// run ended, rm removes it.
func TestNamedVolumeInUseByRun(t *testing.T) {
	h := harness.NewHost(t)
	// The run writes a file, then waits (bounded) for the test's.
	run := h.Command("run", "--rootfs", fixture.BusyboxRootfs(t), "-v", "runvol:/data", "--", "sh", "-c",
		"echo kept > /data/file; i=0; while [ ! -e /data/stop ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done")
	var out strings.Builder
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	t.Cleanup(func() {
		_ = run.Process.Kill()
		<-done
	})
	var mp string
	harness.WaitUntil(t, 60*time.Second, "the run writes into its volume", func() bool {
		r := h.Sbx(t, "", "volume", "inspect", "runvol")
		var infos []sbx.VolumeInfo
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &infos) != nil || len(infos) != 1 {
			return false
		}
		mp = infos[0].Mountpoint
		_, err := os.Stat(filepath.Join(mp, "file"))
		return err == nil
	})
	if r := h.Sbx(t, "", "volume", "rm", "runvol"); r.Code == 0 || !strings.Contains(r.Stderr, "in use") {
		t.Fatalf("volume rm of a volume a run has: %d %s", r.Code, r.Stderr)
	}
	if got := h.Must(t, "volume", "prune"); strings.Contains(got, "runvol") {
		t.Fatalf("volume prune removed a volume a run has: %s", got)
	}
	if data, err := os.ReadFile(filepath.Join(mp, "file")); err != nil || string(data) != "kept\n" {
		t.Fatalf("the run's file after rm and prune: %q %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(mp, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Fatalf("the run: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the run did not end:\n%s", out.String())
	}
	if got := h.Must(t, "volume", "rm", "runvol"); got != "runvol\n" {
		t.Fatalf("volume rm after the run: %q", got)
	}
}
