package bench

import (
	"fmt"
	"slices"
	"strings"
)

// ScenarioNames are the scenarios sbx bench knows, in the order they run.
var ScenarioNames = []string{"cold", "lib", "ready", "pool", "claim", "exec", "session", "churn", "density"}

// ScenarioHelp says in one line (for sbx bench --help) what one sample of
// each scenario of ScenarioNames is, naming every way of sbx's it
// measures beside plain "sbx" (a test checks that it does).
var ScenarioHelp = map[string]string{
	"cold":    `one-shot "sbx run IMAGE true" as its own process in the host's user namespace, as the other runtimes run ("sbx": --userns host), in a private one, sbx's default ("sbx --userns private"), and claiming a warm pool's member ("sbx run, pooled")`,
	"lib":     "the same run in-process through sandbox.Host.Run",
	"ready":   "create a long-lived sandbox until its executor answers",
	"pool":    `a create that claims a warm pool's member: in-process ("sbx"), through sbx serve ("sbx server"), as a fresh sbx create process ("sbx cli"); a create with no pool ("sbx cold")`,
	"claim":   `a claim from a bridged pool personalised with env, a volume, a hostname, an egress allow-list, limits and a published port ("sbx personalised"), beside a claim with a name only ("sbx plain claim"), in the host's user namespace; the personalised claim of a member with a private one ("sbx personalised, private userns")`,
	"exec":    `one /v1/exec round trip of "true" in a running sandbox`,
	"session": "one shell-session command round trip",
	"churn":   "sandboxes created and removed per second at concurrency 1-16",
	"density": "N idle sandboxes: time of each create, memory per sandbox",
}

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
