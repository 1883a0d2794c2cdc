package bench

import (
	"fmt"
	"slices"
	"strings"
)

// ScenarioNames are the scenarios sbx bench knows, in the order they run.
var ScenarioNames = []string{"cold", "lib", "ready", "pool", "claim", "exec", "session", "churn", "density"}

// CheckScenarios returns an error naming the first of names that is not a
// scenario.
func CheckScenarios(names []string) error {
	for _, name := range names {
		if !slices.Contains(ScenarioNames, name) {
			return fmt.Errorf("unknown scenario %q: choose from %s", name, strings.Join(ScenarioNames, ", "))
		}
	}
	return nil
}

// Scenarios returns the scenarios of names (all of ScenarioNames when
// empty) over w, compared with c; churn runs at most samples rounds of 10
// and density creates density sandboxes.
func Scenarios(names []string, w Workload, c Compare, samples, density int) ([]*Scenario, error) {
	if err := CheckScenarios(names); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		names = ScenarioNames
	}
	var list []*Scenario
	for _, name := range names {
		var sc *Scenario
		switch name {
		case "cold":
			sc = ColdScenario(w, c)
		case "lib":
			sc = LibScenario(w)
		case "ready":
			sc = ReadyScenario(w, c)
		case "pool":
			sc = PoolScenario(w, c)
		case "claim":
			sc = ClaimScenario(w)
		case "exec":
			sc = ExecScenario(w, c)
		case "session":
			sc = SessionScenario(w, c)
		case "churn":
			sc = ChurnScenario(w, c, min(samples, 10))
		case "density":
			sc = DensityScenario(w, density)
		}
		list = append(list, sc)
	}
	return list, nil
}
