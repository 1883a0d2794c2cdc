package bench

import "fmt"

// Target is one of sbx's speed targets, checked against a report.
type Target struct {
	Scenario string `json:"scenario"`
	// What is compared: "ratio" (sbx's p50 over the Anchor runtime's),
	// "p50" or "p99" (sbx's own), or "figure" (the subject's Figure).
	What string `json:"what"`
	// Figure names a figure of the subject (see Figurer).
	Figure string  `json:"figure,omitempty"`
	Limit  float64 `json:"limit"`
	// AtLeast is set for throughputs: the value must reach Limit.
	AtLeast bool `json:"at_least,omitempty"`
	// Subject is the sbx subject measured, e.g. "sbx c=4"; "" means "sbx".
	Subject string `json:"subject,omitempty"`
	// Anchor names the runtime of a ratio target.
	Anchor string `json:"anchor,omitempty"`
}

// Targets are sbx's speed targets on the development machine kind (issue
// 12's table).
var Targets = []Target{
	{Scenario: "cold", What: "ratio", Anchor: "runc", Limit: 0.5},
	{Scenario: "ready", What: "p50", Limit: 10},
	{Scenario: "pool", What: "p50", Limit: 2},
	{Scenario: "pool", What: "p99", Limit: 5},
	{Scenario: "pool", What: "p50", Subject: "sbx server", Limit: 2},
	{Scenario: "pool", What: "p99", Subject: "sbx server", Limit: 5},
	{Scenario: "pool", What: "p50", Subject: "sbx cli", Limit: 2},
	{Scenario: "pool", What: "figure", Figure: FigureCLIClaimP50, Subject: "sbx cli", Limit: 2},
	{Scenario: "claim", What: "p50", Subject: "sbx personalised", Limit: 2},
	{Scenario: "claim", What: "p99", Subject: "sbx personalised", Limit: 5},
	{Scenario: "exec", What: "p50", Limit: 0.5},
	{Scenario: "session", What: "p50", Limit: 0.3},
	{Scenario: "churn", What: "p50", Subject: "sbx c=4", Limit: 150, AtLeast: true},
	{Scenario: "density", What: "figure", Figure: FigureMemoryPerSandbox, Limit: 2},
	{Scenario: "density", What: "figure", Figure: FigureLastOverFirst, Limit: 1.5},
}

// TargetResult is a target checked against a report.
type TargetResult struct {
	Target
	Text string `json:"text"` // e.g. "cold: sbx/runc p50 ≤ 0.6"
	// Value is the measured figure; Met says whether it meets the target.
	// Missing is set when the report lacks the figures (scenario not run,
	// runtime failed), with the reason.
	Value   float64 `json:"value"`
	Met     bool    `json:"met"`
	Missing string  `json:"missing,omitempty"`
}

// CheckTargets checks every target whose scenario is in rep.
func CheckTargets(rep *Report) []TargetResult {
	var out []TargetResult
	for _, t := range Targets {
		var sc *ScenarioResult
		for i := range rep.Scenarios {
			if rep.Scenarios[i].Name == t.Scenario {
				sc = &rep.Scenarios[i]
			}
		}
		if sc == nil {
			continue
		}
		subj := t.Subject
		if subj == "" {
			subj = "sbx"
		}
		r := TargetResult{Target: t}
		cmp := "≤"
		if t.AtLeast {
			cmp = "≥"
		}
		unit := " " + sc.Unit
		switch t.What {
		case "ratio":
			r.Text = fmt.Sprintf("%s: %s/%s p50 %s %g", t.Scenario, subj, t.Anchor, cmp, t.Limit)
		case "figure":
			r.Text = fmt.Sprintf("%s: %s %s %g", t.Scenario, t.Figure, cmp, t.Limit)
		default:
			r.Text = fmt.Sprintf("%s: %s %s %s %g%s", t.Scenario, subj, t.What, cmp, t.Limit, unit)
		}
		s := find(sc, subj)
		switch {
		case s == nil || s.Summary == nil:
			r.Missing = "no figures for " + subj
		case t.What == "ratio":
			a := find(sc, t.Anchor)
			if a == nil || a.Summary == nil {
				r.Missing = "no figures for " + t.Anchor
				if a != nil && a.Error != "" {
					r.Missing += ": " + a.Error
				}
				break
			}
			r.Value = s.Summary.P50 / a.Summary.P50
		case t.What == "figure":
			v, ok := s.Figures[t.Figure]
			if !ok {
				r.Missing = "no figure " + t.Figure
				break
			}
			r.Value = v
		case t.What == "p99":
			if s.Summary.P99 == nil {
				r.Missing = "too few samples for a p99"
				break
			}
			r.Value = *s.Summary.P99
		default:
			r.Value = s.Summary.P50
		}
		if r.Missing == "" {
			r.Met = r.Value <= t.Limit
			if t.AtLeast {
				r.Met = r.Value >= t.Limit
			}
		}
		out = append(out, r)
	}
	return out
}

func find(sc *ScenarioResult, name string) *SubjectResult {
	for i := range sc.Subjects {
		if sc.Subjects[i].Name == name {
			return &sc.Subjects[i]
		}
	}
	return nil
}
