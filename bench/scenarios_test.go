package bench

import (
	"os"
	"strings"
	"testing"
)

func TestScenarios(t *testing.T) {
	all, err := Scenarios(nil, Workload{}, Compare{}, 100, 10)
	if err != nil || len(all) != len(ScenarioNames) {
		t.Fatalf("all scenarios: %d %v", len(all), err)
	}
	for i, sc := range all {
		if sc == nil || sc.Name != ScenarioNames[i] {
			t.Errorf("scenario %d: %+v, want %s", i, sc, ScenarioNames[i])
		}
	}
	for _, sc := range all {
		help := ScenarioHelp[sc.Name]
		if help == "" {
			t.Errorf("scenario %s has no help line (ScenarioHelp)", sc.Name)
		}
		for _, s := range sc.Subjects {
			if namedSubject(s.Name()) && !strings.Contains(help, `"`+s.Name()+`"`) {
				t.Errorf("the help line of scenario %s does not name its subject %q: %s", sc.Name, s.Name(), help)
			}
		}
	}
	if len(ScenarioHelp) != len(ScenarioNames) {
		t.Errorf("ScenarioHelp has %d lines for %d scenarios", len(ScenarioHelp), len(ScenarioNames))
	}
	if _, err := Scenarios([]string{"cold", "warm"}, Workload{}, Compare{}, 1, 1); err == nil || !strings.Contains(err.Error(), `unknown scenario "warm"`) {
		t.Errorf("an unknown scenario: %v", err)
	}
}

// namedSubject says whether the help and docs must name a subject: each
// of sbx's own ways of doing a scenario beside plain "sbx" (churn's
// concurrency rows are one subject family, described as such).
func namedSubject(name string) bool {
	return strings.HasPrefix(name, "sbx ") && !strings.HasPrefix(name, "sbx c=")
}

// TestScenariosDocumented: docs/bench.md's table has a row for every
// scenario, and names every sbx subject beside plain "sbx" (namedSubject).
func TestScenariosDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if i := strings.Index(name, "` |"); i > 0 {
				rows[name[:i]] = line
			}
		}
	}
	all, err := Scenarios(nil, Workload{}, Compare{}, 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range all {
		row, ok := rows[sc.Name]
		if !ok {
			t.Errorf("docs/bench.md has no row for scenario %s", sc.Name)
			continue
		}
		for _, s := range sc.Subjects {
			if namedSubject(s.Name()) && !strings.Contains(row, "`"+s.Name()+"`") {
				t.Errorf("docs/bench.md's row of %s does not name its subject `%s`", sc.Name, s.Name())
			}
		}
	}
}
