package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/sandbox"
	"golang.org/x/sys/unix"
)

// Phases of a create, from the Host's CreateTimings.
const (
	PhaseAdmit  = "admit: limits, id, first record"
	PhaseCRoot  = "rootfs: overlay on tmpfs"
	PhaseCStart = "container start: cgroup, namespaces, mounts, init re-exec"
	PhaseReady  = "executor ready: first answer on its socket"
	PhaseCOther = "other: record, lock"
)

// hostEnv is a private sandbox.Host with its state in temporary
// directories, so the bench never touches the user's sandboxes; it uses
// the workload's image cache.
type hostEnv struct {
	h             *sandbox.Host
	root, runRoot string
	w             Workload
}

func newHostEnv(w Workload) (*hostEnv, error) {
	return newHostEnvWith(w, nil)
}

// newHostEnvWith is newHostEnv with the host's configuration adjusted by
// config (nil: as is).
func newHostEnvWith(w Workload, config func(*sandbox.HostConfig)) (*hostEnv, error) {
	root, err := os.MkdirTemp("", "sbx-bench-state-")
	if err != nil {
		return nil, err
	}
	// Short: executor socket paths must fit in sun_path.
	runRoot := fmt.Sprintf("/run/sbx-bench-%d-%d", os.Getpid(), runID.Add(1))
	cfg := sandbox.HostConfig{Root: root, RunRoot: runRoot, Pull: sbx.PullNever}
	if w.imageStore != nil {
		cfg.Images = w.imageStore.Root()
	}
	if config != nil {
		config(&cfg)
	}
	h, err := sandbox.Open(cfg)
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("open a sandbox host: %w", err)
	}
	return &hostEnv{h: h, root: root, runRoot: runRoot, w: w}, nil
}

// options are the create options of the workload: its image, or its root.
func (e *hostEnv) options() sbx.Options {
	// In the host's user namespace, as the anchors run; the cold scenario
	// measures sbx's default (a private one) beside it.
	if e.w.Image != "" && e.w.imageStore != nil {
		return sbx.Options{Image: e.w.Image, UserNS: sbx.UserNSHost}
	}
	return sbx.Options{Rootfs: e.w.Rootfs, UserNS: sbx.UserNSHost}
}

// close removes every sandbox of the env and its directories.
func (e *hostEnv) close() error {
	if e == nil {
		return nil
	}
	list, err := e.h.List(context.Background(), sbx.Filter{})
	errs := []error{err, e.removeAll(list)}
	errs = append(errs, e.h.Close(), unmountUnder(e.runRoot), os.RemoveAll(e.runRoot), os.RemoveAll(e.root))
	return errors.Join(errs...)
}

// removeAll removes sandboxes a few at a time, with a deadline that grows
// with their number: density leaves up to 1,000 behind, whose removal
// under load outlasted a fixed two minutes (every remove after it failed
// at once).
func (e *hostEnv) removeAll(list []*sbx.Sandbox) error {
	const workers = 4
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(len(list))*time.Second/2)
	defer cancel()
	ids := make(chan string)
	errc := make(chan error, len(list))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				errc <- e.h.Remove(ctx, id, sbx.RemoveOptions{Force: true})
			}
		}()
	}
	for _, sb := range list {
		ids <- sb.ID
	}
	close(ids)
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func createPhases(t *sbx.CreateTimings, total time.Duration) []Phase {
	if t == nil {
		return nil
	}
	ph := []Phase{
		{PhaseAdmit, t.AdmitS * 1000},
		{PhaseCRoot, t.RootfsS * 1000},
		{PhaseCStart, t.StartS * 1000},
		{PhaseReady, t.ReadyS * 1000},
	}
	return append(ph, Phase{PhaseCOther, max(Ms(total)-t.TotalS*1000, 0) + max(t.TotalS-t.AdmitS-t.RootfsS-t.StartS-t.ReadyS, 0)*1000})
}

// ReadyScenario measures creating a long-lived sandbox until its executor
// answers, against runc run -d and docker run -d of a sleeping process.
func ReadyScenario(w Workload, c Compare) *Scenario {
	sc := &Scenario{
		Name:        "ready",
		Description: "create a long-lived sandbox until its executor answers (removal not timed)",
		Unit:        "ms",
		Subjects:    []Subject{&sbxReady{w: w}},
		Probes:      append(imageProbe(w), Probe{Name: ProbeExecutor, Note: "the executor is a start of the small sbx-executor", Once: helperProbe(helperbin.Executor)}),
	}
	for _, name := range c.Runtimes {
		sc.Subjects = append(sc.Subjects, newDetached(name, w, c, "ready"))
	}
	return sc
}

type sbxReady struct {
	w    Workload
	env  *hostEnv
	name string // "" is "sbx"
}

func (s *sbxReady) Name() string {
	if s.name != "" {
		return s.name
	}
	return "sbx"
}

func (s *sbxReady) Setup(context.Context) (Info, error) {
	var err error
	s.env, err = newHostEnv(s.w)
	return Info{Version: SbxVersion(), Command: "sandbox.Host.Create of the image (or root) until the executor answers; then Remove"}, err
}

func (s *sbxReady) Once(ctx context.Context) (Sample, error) {
	t0 := time.Now()
	sb, err := s.env.h.Create(ctx, s.env.options())
	d := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	if err := s.env.h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		return Sample{}, fmt.Errorf("remove: %w", err)
	}
	return Sample{Value: Ms(d), Phases: createPhases(sb.CreateTimings, d)}, nil
}

func (s *sbxReady) Close() error { return s.env.close() }

// ExecScenario measures one /v1/exec round trip of the command in a
// running sandbox, against runc exec and docker exec.
func ExecScenario(w Workload, c Compare) *Scenario {
	sc := &Scenario{
		Name:        "exec",
		Description: "run `" + strings.Join(w.Args, " ") + "` in a running sandbox: one /v1/exec round trip through the executor client",
		Unit:        "ms",
		Subjects:    []Subject{&sbxExec{w: w}},
	}
	for _, name := range c.Runtimes {
		sc.Subjects = append(sc.Subjects, newDetached(name, w, c, "exec"))
	}
	return sc
}

type sbxExec struct {
	w   Workload
	env *hostEnv
	c   *client.Client
}

func (s *sbxExec) Name() string { return "sbx" }

func (s *sbxExec) Setup(ctx context.Context) (Info, error) {
	info := Info{Version: SbxVersion(), Command: "executor client Exec({argv: " + fmt.Sprintf("%q", s.w.Args) + "}) on one running sandbox"}
	var err error
	if s.env, err = newHostEnv(s.w); err != nil {
		return info, err
	}
	sb, err := s.env.h.Create(ctx, s.env.options())
	if err != nil {
		return info, err
	}
	s.c = client.New(sb.Socket, client.Options{})
	return info, nil
}

func (s *sbxExec) Once(ctx context.Context) (Sample, error) {
	t0 := time.Now()
	res, err := s.c.Exec(ctx, api.ExecRequest{Argv: s.w.Args})
	d := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	if res.ExitCode != 0 {
		return Sample{}, fmt.Errorf("%v exited %d: %s", s.w.Args, res.ExitCode, res.Stderr)
	}
	return Sample{Value: Ms(d), Phases: []Phase{
		{"command in the executor", res.DurationS * 1000},
		{"HTTP round trip and client", max(Ms(d)-res.DurationS*1000, 0)},
	}}, nil
}

func (s *sbxExec) Close() error {
	if s.c != nil {
		s.c.Close()
	}
	return s.env.close()
}

// SessionScenario measures one command round trip in a shell session,
// against runc exec and docker exec of the command.
func SessionScenario(w Workload, c Compare) *Scenario {
	sc := &Scenario{
		Name:        "session",
		Description: "run `" + strings.Join(w.Args, " ") + "` in a shell session of a running sandbox: one session command round trip",
		Unit:        "ms",
		Subjects:    []Subject{&sbxSession{sbxExec: sbxExec{w: w}}},
	}
	for _, name := range c.Runtimes {
		sc.Subjects = append(sc.Subjects, newDetached(name, w, c, "exec"))
	}
	return sc
}

type sbxSession struct {
	sbxExec
	id string
}

func (s *sbxSession) Setup(ctx context.Context) (Info, error) {
	info, err := s.sbxExec.Setup(ctx)
	info.Command = "executor client Run(session, {command: " + fmt.Sprintf("%q", strings.Join(s.w.Args, " ")) + "})"
	if err != nil {
		return info, err
	}
	sess, err := s.c.CreateSession(ctx, api.SessionRequest{})
	if err != nil {
		return info, fmt.Errorf("create a session: %w", err)
	}
	s.id = sess.ID
	return info, nil
}

func (s *sbxSession) Once(ctx context.Context) (Sample, error) {
	t0 := time.Now()
	res, err := s.c.Run(ctx, s.id, api.RunRequest{Command: strings.Join(s.w.Args, " ")})
	d := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	if res.Status != "completed" || res.ExitCode == nil || *res.ExitCode != 0 {
		return Sample{}, fmt.Errorf("session command: status %s, exit %v", res.Status, res.ExitCode)
	}
	return Sample{Value: Ms(d)}, nil
}

// ChurnConcurrency are the concurrency levels of the churn scenario.
var ChurnConcurrency = []int{4, 1, 2, 8, 16}

// ChurnScenario measures sandboxes created and removed per second at
// several concurrency levels; one sample is one batch of creates and
// removes. The reference is concurrency 4. samples is the number of
// batches of each subject.
func ChurnScenario(w Workload, c Compare, samples int) *Scenario {
	sc := &Scenario{
		Name:           "churn",
		Description:    "create (until the executor answers) and remove sandboxes, N at a time: sandboxes per second",
		Unit:           "sandboxes/s",
		HigherIsBetter: true,
		Samples:        samples,
		Warmup:         1,
	}
	for _, n := range ChurnConcurrency {
		sc.Subjects = append(sc.Subjects, &sbxChurn{w: w, n: n})
	}
	for _, name := range c.Runtimes {
		sc.Subjects = append(sc.Subjects, newChurnAnchor(name, w, c, 4))
	}
	return sc
}

type sbxChurn struct {
	w   Workload
	n   int
	env *hostEnv
	// cpu and cycles add up every round's CPU time (see cpuTime) and
	// create+remove cycles.
	cpu    time.Duration
	cycles int
}

func (s *sbxChurn) Name() string { return fmt.Sprintf("sbx c=%d", s.n) }

func (s *sbxChurn) Setup(context.Context) (Info, error) {
	var err error
	s.env, err = newHostEnv(s.w)
	return Info{Version: SbxVersion(), Command: fmt.Sprintf("%d workers, each Create then Remove, %d cycles per sample", s.n, churnBatch(s.n))}, err
}

func churnBatch(n int) int { return max(2*n, 8) }

func (s *sbxChurn) Once(ctx context.Context) (Sample, error) {
	cpu0 := cpuTime()
	sample, err := churn(ctx, s.n, churnBatch(s.n), func(ctx context.Context) error {
		sb, err := s.env.h.Create(ctx, s.env.options())
		if err != nil {
			return err
		}
		return s.env.h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
	})
	if err == nil {
		s.cpu += cpuTime() - cpu0
		s.cycles += churnBatch(s.n)
	}
	return sample, err
}

// FigureChurnCPU is the CPU time of one create+remove in the churn scenario.
const FigureChurnCPU = "CPU per create+remove (ms)"

// Figures is the CPU time per create+remove cycle.
func (s *sbxChurn) Figures() map[string]float64 {
	if s.cycles == 0 {
		return nil
	}
	return map[string]float64{FigureChurnCPU: Ms(s.cpu) / float64(s.cycles)}
}

// Notes says the CPU time per create+remove cycle.
func (s *sbxChurn) Notes() []string {
	if s.cycles == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %.1f ms of CPU per create+remove (this process and the sandboxes' processes it reaps: libcontainer's init stage, the executor), over %d cycles",
		s.Name(), Ms(s.cpu)/float64(s.cycles), s.cycles)}
}

// cpuTime is the user and system time of this process and of its children
// that have been waited for.
func cpuTime() time.Duration {
	var self, children unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &self)
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &children)
	tv := func(t unix.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

func (s *sbxChurn) Close() error { return s.env.close() }

// churn runs total cycles on n workers and returns cycles per second.
func churn(ctx context.Context, n, total int, cycle func(context.Context) error) (Sample, error) {
	jobs := make(chan struct{}, total)
	for i := 0; i < total; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if err := cycle(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	if len(errs) > 0 {
		// One worker's error says it; the others repeat it.
		return Sample{}, fmt.Errorf("%w (%d workers failed)", errs[0], len(errs))
	}
	return Sample{Value: float64(total) / d.Seconds()}, nil
}

// DensityScenario creates n idle sandboxes one after another and keeps
// them: each sample is the time of one more create; the notes give host
// memory per sandbox and the time to create the nth.
func DensityScenario(w Workload, n int) *Scenario {
	return &Scenario{
		Name:        "density",
		Description: fmt.Sprintf("create %d idle sandboxes one after another and keep them: time of each create", n),
		Unit:        "ms",
		Samples:     n,
		Warmup:      -1,
		Subjects:    []Subject{&sbxDensity{w: w}},
	}
}

type sbxDensity struct {
	w       Workload
	env     *hostEnv
	avail0  uint64
	samples []float64
	ids     []string
}

// Figures of the density scenario.
const (
	FigureMemoryPerSandbox = "memory per sandbox (MiB)"
	FigureLastOverFirst    = "last 100 creates / first 100 (p50)"
)

func (s *sbxDensity) Name() string { return "sbx" }

func (s *sbxDensity) Setup(context.Context) (Info, error) {
	var err error
	s.env, err = newHostEnv(s.w)
	s.avail0 = memAvailable()
	return Info{Version: SbxVersion(), Command: "sandbox.Host.Create, keeping every sandbox"}, err
}

func (s *sbxDensity) Once(ctx context.Context) (Sample, error) {
	t0 := time.Now()
	sb, err := s.env.h.Create(ctx, s.env.options())
	d := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	s.ids = append(s.ids, sb.ID)
	s.samples = append(s.samples, Ms(d))
	return Sample{Value: Ms(d), Phases: createPhases(sb.CreateTimings, d)}, nil
}

// Figures are the memory charged per sandbox and how much slower the last
// creates are than the first (the last and first 100, or halves of fewer).
func (s *sbxDensity) Figures() map[string]float64 {
	n := len(s.ids)
	if n == 0 {
		return nil
	}
	out := map[string]float64{FigureMemoryPerSandbox: float64(s.memoryCharged()) / float64(n) / (1 << 20)}
	if k := min(100, len(s.samples)/2); k > 0 {
		first, last := Summarize(s.samples[:k]), Summarize(s.samples[len(s.samples)-k:])
		out[FigureLastOverFirst] = last.P50 / first.P50
	}
	return out
}

// memoryCharged sums the memory charged to the sandboxes' cgroups.
func (s *sbxDensity) memoryCharged() uint64 {
	var cg uint64
	for _, id := range s.ids {
		if u, err := s.env.h.Stats(context.Background(), id); err == nil {
			cg += u.MemoryCurrentBytes
		}
	}
	return cg
}

// Notes report memory per sandbox and the time to create the last one.
func (s *sbxDensity) Notes() []string {
	n := len(s.ids)
	if n == 0 {
		return nil
	}
	avail1 := memAvailable()
	out := []string{fmt.Sprintf("%d idle sandboxes; the %dth create took %.1f ms", n, n, s.samples[len(s.samples)-1]),
		fmt.Sprintf("memory charged to the sandboxes' cgroups: %.2f MiB per sandbox", float64(s.memoryCharged())/float64(n)/(1<<20))}
	if k := min(100, len(s.samples)/2); k > 0 {
		out = append(out, fmt.Sprintf("the last %d creates took %.2fx the time of the first %d (medians)", k,
			Summarize(s.samples[len(s.samples)-k:]).P50/Summarize(s.samples[:k]).P50, k))
	}
	if s.avail0 > avail1 {
		out = append(out, fmt.Sprintf("host MemAvailable dropped by %.2f MiB per sandbox (includes tmpfs, page tables and kernel objects; noisy while other work runs)",
			float64(s.avail0-avail1)/float64(n)/(1<<20)))
	}
	return out
}

func (s *sbxDensity) Close() error { return s.env.close() }

// memAvailable returns MemAvailable from /proc/meminfo in bytes.
func memAvailable() uint64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			var kb uint64
			fmt.Sscan(f[1], &kb)
			return kb << 10
		}
	}
	return 0
}
