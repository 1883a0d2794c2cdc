package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/bench"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestBenchLifecycleScenarios runs ready, exec, session, churn and density
// for a few samples: each has sbx figures, a breakdown where sbx reports
// one, the density notes, and nothing is left behind.
func TestBenchLifecycleScenarios(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	jsonPath := filepath.Join(t.TempDir(), "rep.json")
	r := newBenchEnv(t).run(nil, "--rootfs", root, "--samples", "3", "--warmup", "1", "--density", "3",
		"--compare", "runc,bwrap", "--json", jsonPath, "ready", "exec", "session", "churn", "density")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	byName := map[string]bench.ScenarioResult{}
	for _, sc := range rep.Scenarios {
		byName[sc.Name] = sc
		if s := sc.Subjects[0]; s.Summary == nil || s.Error != "" {
			t.Errorf("%s: sbx has no figures: %+v", sc.Name, s)
		}
	}
	for _, name := range []string{"ready", "exec", "session", "churn", "density"} {
		if _, ok := byName[name]; !ok {
			t.Fatalf("scenario %s missing", name)
		}
	}
	if sc := byName["ready"]; !hasPhase(sc, bench.PhaseReady) || !hasPhase(sc, bench.PhaseCStart) {
		t.Errorf("ready breakdown: %+v", sc.Breakdown)
	}
	// bwrap has no long-lived containers: reported, not dropped.
	for _, name := range []string{"ready", "exec"} {
		found := false
		for _, s := range byName[name].Subjects {
			if s.Name == "bwrap" {
				found = s.Summary == nil && strings.Contains(s.Error, "no detached")
			}
		}
		if !found {
			t.Errorf("%s: bwrap not reported as not applicable: %+v", name, byName[name].Subjects)
		}
	}
	churn := byName["churn"]
	if !churn.HigherIsBetter || churn.Unit != "sandboxes/s" || len(churn.Subjects) < len(bench.ChurnConcurrency) {
		t.Errorf("churn: %+v", churn)
	}
	// Each of sbx's churn subjects says its CPU per create+remove; a cycle
	// starts three processes, so it cannot take less than a millisecond.
	for _, s := range churn.Subjects[:len(bench.ChurnConcurrency)] {
		if cpu := s.Figures[bench.FigureChurnCPU]; cpu < 1 || cpu > 10000 {
			t.Errorf("%s: CPU per create+remove %.2f ms", s.Name, cpu)
		}
		if !strings.Contains(strings.Join(churn.Notes, "\n"), s.Name+": ") {
			t.Errorf("%s: no note of its CPU per cycle in %q", s.Name, churn.Notes)
		}
	}
	dens := byName["density"]
	if dens.Subjects[0].Summary.N != 3 || !strings.Contains(strings.Join(dens.Notes, "\n"), "MiB per sandbox") {
		t.Errorf("density: %d samples, notes %q", dens.Subjects[0].Summary.N, dens.Notes)
	}
}

func hasPhase(sc bench.ScenarioResult, name string) bool {
	for _, p := range sc.Breakdown {
		if p.Name == name && p.P50 > 0 {
			return true
		}
	}
	return false
}
