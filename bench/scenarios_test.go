package bench

import (
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
	if _, err := Scenarios([]string{"cold", "warm"}, Workload{}, Compare{}, 1, 1); err == nil || !strings.Contains(err.Error(), `unknown scenario "warm"`) {
		t.Errorf("an unknown scenario: %v", err)
	}
}
