package bench

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

func TestSummarizePercentiles(t *testing.T) {
	var vals []float64
	for i := 100; i >= 1; i-- { // unsorted input
		vals = append(vals, float64(i))
	}
	s := Summarize(vals)
	if s.N != 100 || s.Min != 1 || s.Max != 100 || s.P50 != 50 || s.Mean != 50.5 {
		t.Fatalf("summary of 1..100: %+v", s)
	}
	if s.P90 == nil || *s.P90 != 90 || s.P99 == nil || *s.P99 != 99 {
		t.Fatalf("p90/p99 of 1..100: %v %v", s.P90, s.P99)
	}
	if math.Abs(s.Stddev-29.011) > 0.01 {
		t.Fatalf("stddev of 1..100 = %v, want 29.01", s.Stddev)
	}
	if vals[0] != 100 {
		t.Fatal("Summarize reordered its input")
	}
}

func TestSummarizeTooFewSamplesForPercentile(t *testing.T) {
	s := Summarize([]float64{3, 1, 2, 5, 4, 6, 7, 8, 9})
	if s.P90 != nil || s.P99 != nil {
		t.Fatalf("9 samples must not give p90 or p99: %v %v", s.P90, s.P99)
	}
	if s.P50 != 5 {
		t.Fatalf("p50 of 1..9 = %v", s.P50)
	}
	if Summarize(nil) != nil {
		t.Fatal("no samples must give no summary")
	}
	if MinSamples(0.9) != 10 || MinSamples(0.99) != 100 || MinSamples(0.5) != 2 {
		t.Fatalf("MinSamples: %d %d %d", MinSamples(0.9), MinSamples(0.99), MinSamples(0.5))
	}
}

// scripted is a subject whose iterations return given values or errors,
// recording the order in which subjects ran.
type scripted struct {
	name     string
	setupErr error
	values   []float64 // consumed in order; NaN means fail
	log      *[]string
	closed   bool
}

func (s *scripted) Name() string { return s.name }
func (s *scripted) Setup(context.Context) (Info, error) {
	return Info{Version: s.name + " 1.0"}, s.setupErr
}
func (s *scripted) Once(context.Context) (Sample, error) {
	*s.log = append(*s.log, s.name)
	v := 1.0
	if len(s.values) > 0 {
		v, s.values = s.values[0], s.values[1:]
	}
	if math.IsNaN(v) {
		return Sample{}, errors.New(s.name + " broke")
	}
	return Sample{Value: v, Phases: []Phase{{"a", v / 2}, {"b", v / 2}}}, nil
}
func (s *scripted) Close() error { s.closed = true; return nil }

func TestRunScenarioInterleavesAndSkipsWarmup(t *testing.T) {
	var log []string
	a := &scripted{name: "sbx", values: []float64{100, 100, 10, 20, 30, 40}, log: &log}
	b := &scripted{name: "other", values: []float64{100, 100, 20, 40, 60, 80}, log: &log}
	res := RunScenario(context.Background(), &Scenario{Name: "t", Unit: "ms", Subjects: []Subject{a, b}},
		Options{Samples: 4, Warmup: 2})
	want := []string{"sbx", "other", "other", "sbx", "sbx", "other", "other", "sbx", "sbx", "other", "other", "sbx"}
	if len(log) != len(want) {
		t.Fatalf("order %v, want %v", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("order %v, want %v (rounds must alternate who goes first)", log, want)
		}
	}
	s0, s1 := res.Subjects[0], res.Subjects[1]
	if len(s0.Samples) != 4 || s0.Summary.Max != 40 || s1.Summary.Min != 20 {
		t.Fatalf("warm-up samples counted: %+v %+v", s0.Samples, s1.Samples)
	}
	if s0.Ratio.P50 != 1 || s1.Ratio.P50 != 0.5 {
		t.Fatalf("ratios sbx/this at p50: %v %v, want 1 and 0.5", s0.Ratio.P50, s1.Ratio.P50)
	}
	if len(res.Breakdown) != 2 || res.Breakdown[0].Name != "a" || res.Breakdown[0].P50 != 10 || res.Breakdown[0].Share != 0.5 {
		t.Fatalf("breakdown: %+v", res.Breakdown)
	}
	if !a.closed || !b.closed {
		t.Fatal("subjects not closed")
	}
}

func TestRunScenarioReportsFailingSubjects(t *testing.T) {
	var log []string
	nan := math.NaN()
	ok := &scripted{name: "sbx", log: &log}
	missing := &scripted{name: "missing", setupErr: errors.New("missing: not installed"), log: &log}
	broken := &scripted{name: "broken", values: []float64{nan, nan, nan, nan, nan, nan}, log: &log}
	flaky := &scripted{name: "flaky", values: []float64{1, 2, nan, 3, 4, 5, 6, 7, 8, 9, 10}, log: &log}
	res := RunScenario(context.Background(), &Scenario{Name: "t", Unit: "ms", Subjects: []Subject{ok, missing, broken, flaky}},
		Options{Samples: 8, Warmup: 1, MaxTime: time.Minute})
	if len(res.Subjects) != 4 {
		t.Fatalf("a subject was dropped from the result: %+v", res.Subjects)
	}
	if m := res.Subjects[1]; m.Error != "missing: not installed" || m.Summary != nil || m.Version != "missing 1.0" {
		t.Fatalf("missing runtime: %+v", m)
	}
	for _, name := range log {
		if name == "missing" {
			t.Fatal("a subject whose setup failed was run")
		}
	}
	if b := res.Subjects[2]; b.Error != "broken broke" || b.Summary != nil {
		t.Fatalf("broken runtime: %+v", b)
	}
	if f := res.Subjects[3]; f.Failures != 1 || f.Error != "flaky broke" || f.Summary == nil || f.Summary.N != 7 {
		t.Fatalf("flaky runtime: %+v", f)
	}
}

func TestRunScenarioStopsAtMaxTime(t *testing.T) {
	var log []string
	slow := &slowSubject{scripted{name: "sbx", log: &log}, 30 * time.Millisecond}
	res := RunScenario(context.Background(), &Scenario{Name: "t", Unit: "ms", Subjects: []Subject{slow}},
		Options{Samples: 1000, MaxTime: 100 * time.Millisecond})
	// A loaded machine may stretch one 30 ms sleep past the whole 100 ms:
	// at least the first sample is kept, and far fewer than asked are taken.
	if n := len(res.Subjects[0].Samples); n < 1 || n > 10 {
		t.Fatalf("%d samples in 100ms of 30ms iterations", n)
	}
	if len(res.Notes) == 0 {
		t.Fatal("no note says the time limit cut the rounds short")
	}
}

type slowSubject struct {
	scripted
	d time.Duration
}

func (s *slowSubject) Once(ctx context.Context) (Sample, error) {
	time.Sleep(s.d)
	return s.scripted.Once(ctx)
}

func TestCheckTargets(t *testing.T) {
	sum := func(v float64) *Summary { return Summarize([]float64{v}) }
	rep := &Report{Scenarios: []ScenarioResult{
		{Name: "cold", Unit: "ms", Subjects: []SubjectResult{
			{Name: "sbx", Summary: sum(30)}, {Name: "runc", Summary: sum(60)}, {Name: "docker", Error: "no daemon"}}},
		{Name: "churn", Unit: "sandboxes/s", Subjects: []SubjectResult{{Name: "sbx c=4", Summary: sum(40)}}},
	}}
	got := CheckTargets(rep)
	if len(got) != 2 {
		t.Fatalf("want the targets of cold (1) and churn (1), got %+v", got)
	}
	if r := got[0]; r.Anchor != "runc" || r.Value != 0.5 || !r.Met || r.Text != "cold: sbx/runc p50 ≤ 0.5" {
		t.Errorf("cold vs runc: %+v", r)
	}
	if r := got[1]; r.Met || r.Value != 40 || r.Text != "churn: sbx c=4 p50 ≥ 150 sandboxes/s" {
		t.Errorf("churn: %+v", r)
	}
	// A ratio whose anchor failed is missing, with the anchor's error.
	rep.Scenarios[0].Subjects[1] = SubjectResult{Name: "runc", Error: "not installed"}
	if r := CheckTargets(rep)[0]; r.Met || r.Missing != "no figures for runc: not installed" {
		t.Errorf("cold vs runc without figures: %+v", r)
	}
	// Figures: density's memory per sandbox.
	dens := &Report{Scenarios: []ScenarioResult{{Name: "density", Unit: "ms", Subjects: []SubjectResult{
		{Name: "sbx", Summary: sum(20), Figures: map[string]float64{FigureMemoryPerSandbox: 1.5}}}}}}
	got = CheckTargets(dens)
	if len(got) != 2 || !got[0].Met || got[0].Value != 1.5 || got[1].Missing == "" {
		t.Errorf("density figures: %+v", got)
	}
}

// A run's phases count the user namespace once: its making is inside
// the rootfs step's time, and the phases add up to the run's total.
func TestRunPhasesCountTheUserNamespaceOnce(t *testing.T) {
	ph := runPhases(sbx.Timings{UserNSS: 0.002, RootfsS: 0.005, StartS: 0.010, CommandS: 0.012, TeardownS: 0.004}, 30*time.Millisecond, "rest")
	got := map[string]float64{}
	sum := 0.0
	for _, p := range ph {
		got[p.Name] = p.Ms
		sum += p.Ms
	}
	near := func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
	if !near(got[PhaseUserNS], 2) || !near(got[PhaseRootfs], 3) || !near(got[PhaseCommand], 2) || !near(got["rest"], 30-2-3-10-2-4) || !near(sum, 30) {
		t.Errorf("phases %v (sum %v ms): want userns 2, rootfs 3, command 2, rest 9, summing to 30", got, sum)
	}
}
