package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	units "github.com/docker/go-units"

	"github.com/sbxrun/sbx/bench"
)

// WriteJSON writes rep as indented JSON to path.
func WriteJSON(path string, rep *bench.Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write JSON report: %w", err)
	}
	return nil
}

// Header returns the lines that describe the machine and the method.
func Header(rep *bench.Report) []string {
	m := rep.Machine
	lines := []string{
		fmt.Sprintf("machine: %s, %d CPUs (%s), %s RAM, cgroup mode %s", m.Kernel, m.CPUs, m.CPUModel,
			units.BytesSize(float64(m.MemoryBytes)), m.CgroupMode),
		fmt.Sprintf("load average: %s at start, %s at end; CPUs busy before the run: %.0f%% (other work on the host)",
			m.LoadStart, m.LoadEnd, 100*m.BusyBefore),
		fmt.Sprintf("%s, %s; %s UTC; %d measured rounds after %d warm-up rounds, subjects interleaved",
			m.SbxVersion, m.GoVersion, rep.Started.Format("2006-01-02 15:04"), rep.Samples, rep.Warmup),
	}
	return lines
}

// fmtV formats a value of the table.
func fmtV(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func fmtP(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmtV(*v)
}

// ratioHeader names the ratio column for a scenario.
func ratioHeader(sc *bench.ScenarioResult) string {
	return "sbx/this p50"
}

// row returns the cells of one subject.
func row(s *bench.SubjectResult) []string {
	name := s.Name
	if s.Summary == nil {
		msg := s.Error
		if msg == "" {
			msg = "no samples"
		}
		return []string{name, s.Version, "0", "-", "-", "-", "-", "-", "FAILED"}
	}
	ratio := "-"
	if s.Ratio != nil {
		ratio = fmt.Sprintf("%.2f", s.Ratio.P50)
	}
	sum := s.Summary
	cells := []string{name, s.Version, fmt.Sprint(sum.N), fmtV(sum.Min), fmtV(sum.P50), fmtP(sum.P90), fmtP(sum.P99), fmtV(sum.Max), ratio}
	return cells
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}

// targetLines describe the targets checked in rep.
func targetLines(rep *bench.Report) []string {
	var out []string
	for _, t := range rep.Targets {
		var v string
		switch {
		case t.Missing != "":
			v = "not measured: " + oneLine(t.Missing)
		case t.Met:
			v = fmt.Sprintf("met (%s)", fmtV(t.Value))
		default:
			v = fmt.Sprintf("MISSED (%s)", fmtV(t.Value))
		}
		out = append(out, t.Text+": "+v)
	}
	return out
}

// Text writes the report as aligned plain text.
func Text(w io.Writer, rep *bench.Report) error {
	for _, l := range Header(rep) {
		fmt.Fprintln(w, l)
	}
	for i := range rep.Scenarios {
		sc := &rep.Scenarios[i]
		better := "lower is better"
		if sc.HigherIsBetter {
			better = "higher is better"
		}
		fmt.Fprintf(w, "\n%s: %s (%s, %s)\n", sc.Name, sc.Description, sc.Unit, better)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "runtime\tversion\tn\tmin\tp50\tp90\tp99\tmax\t%s\t\n", ratioHeader(sc))
		for j := range sc.Subjects {
			fmt.Fprintln(tw, strings.Join(row(&sc.Subjects[j]), "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(sc.Breakdown) > 0 {
			fmt.Fprintln(w, "where sbx's time goes (medians; probes measured alone in the same rounds):")
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, p := range sc.Breakdown {
				fmt.Fprintf(tw, "  %s\t%s\t%s ms\t%s\t%s\t\n", p.Source, p.Name, fmtV(p.P50), pct(p.Share), p.Note)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		for _, s := range anchors(sc) {
			if len(s.Phases) > 0 {
				fmt.Fprintf(w, "%s's phases: %s\n", s.Name, phaseList(s.Phases))
			}
		}
		for _, l := range subjectNotes(sc) {
			fmt.Fprintln(w, l)
		}
		for _, n := range sc.Notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	if lines := targetLines(rep); len(lines) > 0 {
		fmt.Fprintln(w, "\ntargets:")
		for _, l := range lines {
			fmt.Fprintln(w, "  "+l)
		}
	}
	return nil
}

func pct(v float64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// Markdown writes the report as Markdown tables, e.g. for BENCHMARKS.md.
func Markdown(w io.Writer, rep *bench.Report) error {
	for _, l := range Header(rep) {
		fmt.Fprintf(w, "- %s\n", l)
	}
	for i := range rep.Scenarios {
		sc := &rep.Scenarios[i]
		better := "lower is better"
		if sc.HigherIsBetter {
			better = "higher is better"
		}
		fmt.Fprintf(w, "\n**%s**: %s (%s, %s)\n\n", sc.Name, sc.Description, sc.Unit, better)
		fmt.Fprintf(w, "| runtime | version | n | min | p50 | p90 | p99 | max | %s |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n", ratioHeader(sc))
		for j := range sc.Subjects {
			cells := row(&sc.Subjects[j])
			for k := range cells {
				cells[k] = strings.ReplaceAll(cells[k], "|", "\\|")
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
		if len(sc.Breakdown) > 0 {
			fmt.Fprintf(w, "\n| where sbx's time goes | source | p50 ms | share | note |\n|---|---|--:|--:|---|\n")
			for _, p := range sc.Breakdown {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", p.Name, p.Source, fmtV(p.P50), pct(p.Share), p.Note)
			}
		}
		fmt.Fprintln(w)
		for _, s := range anchors(sc) {
			if len(s.Phases) > 0 {
				fmt.Fprintf(w, "- %s's phases: %s\n", s.Name, phaseList(s.Phases))
			}
		}
		for _, l := range subjectNotes(sc) {
			fmt.Fprintf(w, "- %s\n", l)
		}
		for _, n := range sc.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	if lines := targetLines(rep); len(lines) > 0 {
		fmt.Fprint(w, "\n**targets**\n\n")
		for _, l := range lines {
			fmt.Fprintf(w, "- %s\n", l)
		}
	}
	return nil
}

// subjectNotes are the errors and notes of a scenario's subjects: why a
// runtime has no figures, how many runs failed, how its isolation differs.
func subjectNotes(sc *bench.ScenarioResult) []string {
	var out []string
	for _, s := range sc.Subjects {
		switch {
		case s.Summary == nil:
			msg := s.Error
			if msg == "" {
				msg = "no samples"
			}
			out = append(out, fmt.Sprintf("error: %s: %s", s.Name, oneLine(msg)))
		case s.Failures > 0:
			out = append(out, fmt.Sprintf("error: %s: %d runs failed: %s", s.Name, s.Failures, oneLine(s.Error)))
		}
	}
	for _, s := range sc.Subjects {
		if s.Note != "" {
			out = append(out, fmt.Sprintf("note: %s: %s", s.Name, s.Note))
		}
	}
	return out
}

// phaseList formats phases on one line: "name 1.20 ms (10%), ...".
func phaseList(ph []bench.PhaseResult) string {
	var parts []string
	for _, p := range ph {
		parts = append(parts, fmt.Sprintf("%s %s ms (%s)", p.Name, fmtV(p.P50), pct(p.Share)))
	}
	return strings.Join(parts, "; ")
}

// anchors are the subjects after sbx.
func anchors(sc *bench.ScenarioResult) []bench.SubjectResult {
	if len(sc.Subjects) < 2 {
		return nil
	}
	return sc.Subjects[1:]
}
