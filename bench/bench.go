package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sbxrun/sbx/cgroup"
)

// Sample is the outcome of one measured iteration of a subject.
type Sample struct {
	// Value is in the scenario's unit (milliseconds for latencies).
	Value float64
	// Phases break Value down where the subject can tell, in milliseconds.
	Phases []Phase
}

// Phase is the time one step of an iteration took.
type Phase struct {
	Name string
	Ms   float64
}

// Info describes a subject once it is set up.
type Info struct {
	Version string // e.g. "runc 1.1.5"
	Command string // what one iteration runs, for the reader
	Note    string // how its isolation differs from sbx's, if it does
}

// Subject is one runtime measured in a scenario: sbx or an anchor.
type Subject interface {
	// Name is the short name shown in tables, e.g. "sbx" or "runc".
	Name() string
	// Setup prepares the subject. An error (e.g. the runtime is not
	// installed or cannot run on this host) is reported in place of its
	// figures; the subject is never silently dropped.
	Setup(ctx context.Context) (Info, error)
	// Once runs one measured iteration.
	Once(ctx context.Context) (Sample, error)
	// Close releases what Setup created.
	Close() error
}

// Figurer is a subject with named figures beyond its samples, e.g. the
// memory per sandbox, taken after the measured rounds.
type Figurer interface {
	Figures() map[string]float64
}

// Noter is a subject with remarks to add to its scenario after the
// rounds, e.g. memory per sandbox in the density scenario.
type Noter interface {
	Notes() []string
}

// Probe measures one component of sbx's path in isolation (e.g. creating
// a network namespace), to explain where the time of a scenario goes.
type Probe struct {
	Name string
	Note string
	Once func(ctx context.Context) (time.Duration, error)
}

// Scenario is a set of subjects measured in the same interleaved rounds.
type Scenario struct {
	Name        string
	Description string
	// Unit of the samples: "ms" for latencies, or e.g. "sandboxes/s".
	Unit string
	// HigherIsBetter is set for throughputs.
	HigherIsBetter bool
	// Subjects[0] is the reference for ratios (sbx).
	Subjects []Subject
	Probes   []Probe
	// Samples and Warmup override the options when nonzero; a negative
	// Warmup means none.
	Samples, Warmup int
	Notes           []string
}

// Options control how scenarios are measured.
type Options struct {
	// Samples is the number of measured rounds (each subject once per round).
	Samples int
	// Warmup rounds run first and are not counted.
	Warmup int
	// MaxTime bounds the measured rounds of one scenario; fewer samples
	// are taken when it runs out.
	MaxTime time.Duration
	// MaxConsecutiveFailures drops a subject after that many failed
	// iterations in a row (its first error is reported).
	MaxConsecutiveFailures int
	// Progress, when set, receives one line per step.
	Progress func(msg string)
}

func (o *Options) defaults() {
	if o.Samples <= 0 {
		o.Samples = 100
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.MaxTime <= 0 {
		o.MaxTime = 5 * time.Minute
	}
	if o.MaxConsecutiveFailures <= 0 {
		o.MaxConsecutiveFailures = 3
	}
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// Report is the outcome of a benchmark run.
type Report struct {
	Machine   Machine          `json:"machine"`
	Started   time.Time        `json:"started"`
	Samples   int              `json:"samples"`
	Warmup    int              `json:"warmup"`
	Scenarios []ScenarioResult `json:"scenarios"`
	// Targets are sbx's speed targets checked against these figures.
	Targets []TargetResult `json:"targets,omitempty"`
}

// ScenarioResult holds the figures of one scenario.
type ScenarioResult struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Unit           string          `json:"unit"`
	HigherIsBetter bool            `json:"higher_is_better,omitempty"`
	Subjects       []SubjectResult `json:"subjects"`
	// Breakdown is where sbx's time goes: its phases (median of each)
	// followed by probes measured in isolation in the same rounds.
	Breakdown []PhaseResult `json:"breakdown,omitempty"`
	Notes     []string      `json:"notes,omitempty"`
	DurationS float64       `json:"duration_s"`
}

// SubjectResult holds the figures of one subject in one scenario.
type SubjectResult struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Command string `json:"command,omitempty"`
	Note    string `json:"note,omitempty"`
	// Error says why the subject has no figures (or fewer than asked).
	Error    string    `json:"error,omitempty"`
	Failures int       `json:"failures,omitempty"`
	Samples  []float64 `json:"samples"`
	Summary  *Summary  `json:"summary,omitempty"`
	// Ratio is sbx's statistic divided by this subject's: below 1 means
	// sbx took less time (or, for throughputs, did less).
	Ratio *Ratios `json:"ratio_sbx_to_this,omitempty"`
	// Phases are the medians of the phases this subject reports, with
	// shares of its own median.
	Phases []PhaseResult `json:"phases,omitempty"`
	// Figures are named measurements beyond the samples (see Figurer).
	Figures map[string]float64 `json:"figures,omitempty"`
}

// Ratios are sbx's statistics divided by another subject's.
type Ratios struct {
	Min float64  `json:"min"`
	P50 float64  `json:"p50"`
	P90 *float64 `json:"p90,omitempty"`
	P99 *float64 `json:"p99,omitempty"`
	Max float64  `json:"max"`
}

// PhaseResult is the median of one phase or probe.
type PhaseResult struct {
	Name string  `json:"name"`
	P50  float64 `json:"p50_ms"`
	// Share is P50 over the median total of sbx in this scenario.
	Share float64 `json:"share"`
	// Source is "sbx" for phases of sbx's own samples, "probe" for
	// components measured in isolation.
	Source string `json:"source"`
	Note   string `json:"note,omitempty"`
}

// Run measures each scenario in turn.
func Run(ctx context.Context, scenarios []*Scenario, o Options) *Report {
	o.defaults()
	defer RemoveProbeHelpers()
	// The bench's sandboxes, and those of the sbx processes it starts, live
	// under a parent cgroup of its own, removed at the end, never beside
	// the host's sandboxes in the shared one.
	release := cgroup.PrivateParent("sbx-bench")
	defer func() {
		if err := release(); err != nil {
			o.progress("remove the bench's parent cgroup %s: %v", cgroup.Parent(), err)
		}
	}()
	rep := &Report{Started: time.Now().UTC(), Samples: o.Samples, Warmup: o.Warmup}
	for _, sc := range scenarios {
		if ctx.Err() != nil {
			break
		}
		rep.Scenarios = append(rep.Scenarios, RunScenario(ctx, sc, o))
	}
	rep.Targets = CheckTargets(rep)
	return rep
}

// subjectState tracks one subject through a scenario.
type subjectState struct {
	s           Subject
	res         *SubjectResult
	active      bool
	consecutive int
	phases      map[string][]float64
	phaseOrder  []string
}

func (st *subjectState) once(ctx context.Context, o *Options, record bool) {
	sample, err := st.s.Once(ctx)
	if err != nil {
		st.res.Failures++
		st.consecutive++
		if st.res.Error == "" {
			st.res.Error = err.Error()
		}
		if st.consecutive >= o.MaxConsecutiveFailures {
			st.active = false
			o.progress("  %s: dropped after %d failures in a row: %v", st.s.Name(), st.consecutive, err)
		}
		return
	}
	st.consecutive = 0
	if !record {
		return
	}
	st.res.Samples = append(st.res.Samples, sample.Value)
	for _, p := range sample.Phases {
		if _, ok := st.phases[p.Name]; !ok {
			st.phaseOrder = append(st.phaseOrder, p.Name)
		}
		st.phases[p.Name] = append(st.phases[p.Name], p.Ms)
	}
}

// RunScenario sets up every subject, runs warm-up rounds and then
// interleaved measured rounds (the order of subjects rotates each round so
// that no subject always follows the same one), and summarises.
func RunScenario(ctx context.Context, sc *Scenario, o Options) ScenarioResult {
	o.defaults()
	if sc.Samples > 0 {
		o.Samples = sc.Samples
	}
	if sc.Warmup > 0 {
		o.Warmup = sc.Warmup
	} else if sc.Warmup < 0 {
		o.Warmup = 0
	}
	t0 := time.Now()
	out := ScenarioResult{Name: sc.Name, Description: sc.Description, Unit: sc.Unit, HigherIsBetter: sc.HigherIsBetter,
		Notes: append([]string(nil), sc.Notes...)}
	out.Subjects = make([]SubjectResult, len(sc.Subjects))
	states := make([]*subjectState, len(sc.Subjects))
	for i, s := range sc.Subjects {
		out.Subjects[i].Name = s.Name()
		st := &subjectState{s: s, res: &out.Subjects[i], phases: map[string][]float64{}}
		states[i] = st
		o.progress("%s: setting up %s", sc.Name, s.Name())
		info, err := s.Setup(ctx)
		st.res.Version, st.res.Command, st.res.Note = info.Version, info.Command, info.Note
		if err != nil {
			st.res.Error = err.Error()
			o.progress("  %s: %v", s.Name(), err)
			continue
		}
		st.active = true
	}
	defer func() {
		for _, st := range states {
			if err := st.s.Close(); err != nil {
				o.progress("  %s: cleanup: %v", st.s.Name(), err)
			}
		}
	}()

	probeSamples := make([][]float64, len(sc.Probes))
	probeErr := make([]error, len(sc.Probes))
	round := func(r int, record bool) {
		n := len(states)
		for k := 0; k < n; k++ {
			st := states[(r+k)%n]
			if st.active && ctx.Err() == nil {
				st.once(ctx, &o, record)
			}
		}
		for i, p := range sc.Probes {
			if probeErr[i] != nil || ctx.Err() != nil {
				continue
			}
			d, err := p.Once(ctx)
			if err != nil {
				probeErr[i] = err
				continue
			}
			if record {
				probeSamples[i] = append(probeSamples[i], Ms(d))
			}
		}
	}
	if o.Warmup > 0 {
		o.progress("%s: %d warm-up rounds", sc.Name, o.Warmup)
	}
	for w := 0; w < o.Warmup && ctx.Err() == nil; w++ {
		round(w, false)
	}
	// A subject that failed every warm-up round keeps its error but gets
	// another chance in the measured rounds only if it ever succeeded.
	for _, st := range states {
		if st.active && o.Warmup > 0 && st.res.Failures >= o.Warmup {
			st.active = false
		}
		if st.active {
			st.res.Failures, st.res.Error, st.consecutive = 0, "", 0
		}
	}
	o.progress("%s: %d interleaved rounds (at most %s)", sc.Name, o.Samples, o.MaxTime)
	deadline := time.Now().Add(o.MaxTime)
	for r := 0; r < o.Samples && ctx.Err() == nil; r++ {
		if time.Now().After(deadline) {
			out.Notes = append(out.Notes, fmt.Sprintf("stopped after %d of %d rounds: the time limit of %s ran out", r, o.Samples, o.MaxTime))
			break
		}
		round(r, true)
		if (r+1)%20 == 0 {
			o.progress("%s: %d/%d rounds", sc.Name, r+1, o.Samples)
		}
	}
	if err := ctx.Err(); err != nil {
		out.Notes = append(out.Notes, "interrupted: "+err.Error())
	}

	for _, st := range states {
		if n, ok := st.s.(Noter); ok && st.res.Error == "" {
			out.Notes = append(out.Notes, n.Notes()...)
		}
		if f, ok := st.s.(Figurer); ok && st.res.Error == "" {
			st.res.Figures = f.Figures()
		}
		st.res.Summary = Summarize(st.res.Samples)
		if st.res.Summary == nil && st.res.Error == "" {
			st.res.Error = "no samples"
		}
	}
	ref := out.Subjects[0].Summary
	for i, st := range states {
		res := &out.Subjects[i]
		res.Ratio = ratios(ref, res.Summary)
		if res.Summary == nil {
			continue
		}
		for _, name := range st.phaseOrder {
			v := Summarize(st.phases[name])
			res.Phases = append(res.Phases, PhaseResult{Name: name, P50: v.P50, Share: share(v.P50, res.Summary.P50), Source: res.Name})
		}
	}
	out.Breakdown = append(out.Breakdown, out.Subjects[0].Phases...)
	for i, p := range sc.Probes {
		pr := PhaseResult{Name: p.Name, Source: "probe", Note: p.Note}
		if v := Summarize(probeSamples[i]); v != nil {
			pr.P50 = v.P50
			if ref != nil && !sc.HigherIsBetter {
				pr.Share = share(v.P50, ref.P50)
			}
		} else if probeErr[i] != nil {
			pr.Note = "failed: " + probeErr[i].Error()
		}
		out.Breakdown = append(out.Breakdown, pr)
	}
	out.DurationS = time.Since(t0).Seconds()
	return out
}

func share(v, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return v / total
}

func ratios(ref, s *Summary) *Ratios {
	if ref == nil || s == nil {
		return nil
	}
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	r := &Ratios{Min: div(ref.Min, s.Min), P50: div(ref.P50, s.P50), Max: div(ref.Max, s.Max)}
	if ref.P90 != nil && s.P90 != nil {
		v := div(*ref.P90, *s.P90)
		r.P90 = &v
	}
	if ref.P99 != nil && s.P99 != nil {
		v := div(*ref.P99, *s.P99)
		r.P99 = &v
	}
	return r
}

// ErrNotFound is wrapped by Setup errors of runtimes that are not installed.
var ErrNotFound = errors.New("not installed")
