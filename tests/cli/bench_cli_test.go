package cli

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/bench"
	benchreport "github.com/sbxrun/sbx/bench/report"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// benchEnv runs `sbx bench` with a private runtime root and temporary
// directory, so that its leftover checks see only what this test's bench
// made: other sbx processes on the machine use /run/sbx, /tmp and their
// own benches at the same time. Cgroups are this test binary's own too:
// TestMain gives it a private parent cgroup.
type benchEnv struct {
	t        *testing.T
	runRoot  string
	tmp      string // $TMPDIR of the bench
	pids     []int  // of the bench processes, which name their state after them
	cgBefore map[string]bool
}

func newBenchEnv(t *testing.T) *benchEnv {
	t.Helper()
	e := &benchEnv{t: t, runRoot: fmt.Sprintf("/run/sbxbt-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6),
		tmp: filepath.Join(t.TempDir(), "tmp"), cgBefore: map[string]bool{}}
	if err := os.Mkdir(e.tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for id := range cgroup.Leftovers() {
		e.cgBefore[id] = true
	}
	t.Cleanup(e.check)
	return e
}

// command is `sbx ARGS...` with the bench's private $TMPDIR and env added.
func (e *benchEnv) command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(harness.SbxBin, args...)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+e.tmp), env...)
	return cmd
}

// exec runs cmd, remembering its pid, and returns its output and exit code.
func (e *benchEnv) exec(cmd *exec.Cmd) harness.Result {
	e.t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("sbx bench: %v", err)
	}
	e.pids = append(e.pids, cmd.Process.Pid)
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("sbx bench: %v", err)
	}
	return harness.Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// run runs `sbx --run-root PRIVATE bench ARGS...` with env added.
func (e *benchEnv) run(env []string, args ...string) harness.Result {
	e.t.Helper()
	return e.exec(e.command(env, append([]string{"--run-root", e.runRoot, "bench"}, args...)...))
}

// check fails the test if the bench left mounts, state, temporary
// directories or cgroups behind.
func (e *benchEnv) check() {
	t := e.t
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, e.runRoot+"/") {
			t.Errorf("leftover mount: %s", line)
		}
	}
	for _, sub := range []string{"runs", "containers"} {
		if entries, _ := os.ReadDir(filepath.Join(e.runRoot, sub)); len(entries) > 0 {
			t.Errorf("leftover %s in %s: %d", sub, e.runRoot, len(entries))
		}
	}
	if entries, _ := os.ReadDir(e.tmp); len(entries) > 0 {
		for _, en := range entries {
			t.Errorf("leftover bench state: %s", filepath.Join(e.tmp, en.Name()))
		}
	}
	for _, pid := range e.pids {
		// The bench's runtime roots and the anchors' cgroups (outside the
		// parent: runc and crun put them at the top) carry its pid.
		for _, g := range []string{fmt.Sprintf("/run/sbx-bench-%d-*", pid), fmt.Sprintf("%s/*/sbx-bench-*-%d-*", cgroup.Root, pid), fmt.Sprintf("%s/sbx-bench-*-%d-*", cgroup.Root, pid)} {
			m, _ := filepath.Glob(g)
			for _, p := range m {
				t.Errorf("leftover bench state: %s", p)
			}
		}
	}
	// Every cgroup under this test binary's parent that appeared during
	// the test is the bench's; teardown is synchronous, so none may stay.
	var stale []string
	for id := range cgroup.Leftovers() {
		if !e.cgBefore[id] {
			stale = append(stale, id)
		}
	}
	if len(stale) > 0 {
		t.Errorf("leftover cgroups: %v", stale)
	}
	_ = os.RemoveAll(e.runRoot)
}

// TestBenchMissingRuntimeIsReported: a runtime that is not installed keeps
// its row with FAILED and its error; sbx's own figures are still there.
func TestBenchMissingRuntimeIsReported(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	e := newBenchEnv(t)
	// An empty PATH hides every runtime; sbx itself needs none.
	r := e.run([]string{"PATH=/nonexistent"}, "--rootfs", root, "--samples", "3", "--warmup", "0",
		"--compare", "runc,podman", "cold")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{
		"machine: Linux", "cgroup mode", "load average:",
		"error: runc: runc: not installed (apt-get install runc",
		"error: podman: podman: not installed (apt-get install podman",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.Stdout)
		}
	}
	rows := tableRows(r.Stdout, "cold")
	if len(rows) != 5 {
		t.Fatalf("want rows for sbx, sbx --userns private, sbx run pooled, runc and podman, got %q", rows)
	}
	if f := strings.Fields(rows[0]); f[0] != "sbx" || f[len(f)-1] != "1.00" {
		t.Errorf("sbx row %q: want figures and ratio 1.00", rows[0])
	}
	if !strings.HasPrefix(rows[1], bench.UserNSSubject+" ") || strings.HasSuffix(strings.TrimSpace(rows[1]), "FAILED") {
		t.Errorf("row %q: want the figures of %s", rows[1], bench.UserNSSubject)
	}
	if !strings.HasPrefix(rows[2], "sbx run, pooled ") || strings.HasSuffix(strings.TrimSpace(rows[2]), "FAILED") {
		t.Errorf("row %q: want the figures of the pooled sbx run", rows[2])
	}
	for _, row := range rows[3:] {
		if !strings.HasSuffix(strings.TrimSpace(row), "FAILED") {
			t.Errorf("row %q: want FAILED", row)
		}
	}
}

// TestBenchEveryRuntimeHasFiguresOrError: with the runtimes of this host,
// each row has figures or an error line, never silence. The anchors are
// not dependencies of sbx: runc and crun have figures where they are
// installed (make deps-test), and where they are not their rows say so.
func TestBenchEveryRuntimeHasFiguresOrError(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "rep.json")
	e := newBenchEnv(t)
	r := e.run(nil, "--rootfs", root, "--samples", "4", "--warmup", "1",
		"--compare", "runc,crun,bwrap", "--json", jsonPath, "cold", "lib")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	var rep bench.Report
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("JSON report: %v", err)
	}
	if len(rep.Scenarios) != 2 || rep.Scenarios[0].Name != "cold" || rep.Scenarios[1].Name != "lib" {
		t.Fatalf("scenarios: %+v", rep.Scenarios)
	}
	if rep.Machine.CPUs == 0 || rep.Machine.Kernel == "" || rep.Machine.CgroupMode == "" {
		t.Errorf("machine header incomplete: %+v", rep.Machine)
	}
	cold := rep.Scenarios[0]
	if len(cold.Subjects) != 6 {
		t.Fatalf("cold subjects: %d, want sbx, sbx --userns private, sbx run pooled, runc, crun, bwrap", len(cold.Subjects))
	}
	for _, s := range cold.Subjects {
		switch {
		case s.Summary != nil:
			if len(s.Samples) != 4 || s.Summary.N != 4 || s.Ratio == nil || s.Summary.Min <= 0 {
				t.Errorf("%s: %d samples, summary %+v", s.Name, len(s.Samples), s.Summary)
			}
		case s.Error == "":
			t.Errorf("%s has neither figures nor an error", s.Name)
		default:
			if !strings.Contains(r.Stdout, "error: "+s.Name+": ") {
				t.Errorf("%s's error %q is not in the table", s.Name, s.Error)
			}
		}
	}
	for _, s := range cold.Subjects[:3] {
		if s.Summary == nil {
			t.Fatalf("%s must have figures: %+v", s.Name, s)
		}
	}
	for _, s := range cold.Subjects[3:] {
		if !anchorInstalled(s.Name) && !strings.Contains(s.Error, "not installed") {
			t.Errorf("%s is not installed on this host, yet its row says %q", s.Name, s.Error)
		}
	}
	// crun 1.8 refuses this kind of hybrid cgroup host unless the bench
	// runs it in a mount namespace without the cgroup2 mount.
	for _, s := range cold.Subjects[3:5] {
		if anchorInstalled(s.Name) && s.Summary == nil {
			t.Fatalf("%s is installed and must have figures: %+v", s.Name, s)
		}
	}
	var phases []string
	for _, p := range cold.Breakdown {
		phases = append(phases, p.Name)
		if p.Source == "sbx" && p.P50 <= 0 && !strings.HasPrefix(p.Name, "sbx process") {
			t.Errorf("phase %q has no time", p.Name)
		}
	}
	for _, want := range []string{bench.PhaseRootfs, bench.PhaseStart, bench.PhaseCommand, bench.PhaseTeardown, bench.ProbeNetns, bench.ProbeCgroup} {
		if !strings.Contains(strings.Join(phases, "\n"), want) {
			t.Errorf("breakdown lacks %q: %q", want, phases)
		}
	}
}

// TestBenchPlot draws the JSON report with sbx-bench-plot, found in PATH.
func TestBenchPlot(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "sbx-bench-plot")
	build := exec.Command("go", "build", "-tags", "seccomp netgo osusergo", "-o", helper, "github.com/sbxrun/sbx/bench/chart/cmd/sbx-bench-plot")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sbx-bench-plot: %v\n%s", err, out)
	}
	root := fixture.BusyboxRootfs(t)
	e := newBenchEnv(t)
	for _, name := range []string{"out.svg", "out.png"} {
		out := filepath.Join(dir, name)
		r := e.run([]string{"PATH=" + dir + ":" + os.Getenv("PATH")}, "--rootfs", root, "--samples", "3",
			"--warmup", "0", "--compare", "nosuchruntime-is-rejected-below", "--plot", out, "lib")
		if r.Code != 125 || !strings.Contains(r.Stderr, `unknown runtime "nosuchruntime-is-rejected-below"`) {
			t.Fatalf("an unknown runtime must be rejected before anything runs: exit %d %s", r.Code, r.Stderr)
		}
		r = e.run([]string{"PATH=" + dir + ":" + os.Getenv("PATH")}, "--rootfs", root, "--samples", "3",
			"--warmup", "0", "--plot", out, "lib")
		if r.Code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(name) {
		case ".svg":
			if !bytes.Contains(data[:min(len(data), 512)], []byte("<svg")) {
				t.Errorf("%s is not an SVG: %q", name, data[:min(len(data), 80)])
			}
		case ".png":
			if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("%s is not a PNG", name)
			}
		}
	}
	// Without the helper (neither next to sbx nor in PATH), --plot fails
	// at once with a message saying how to get it.
	lone := filepath.Join(t.TempDir(), "sbx")
	if out, err := exec.Command("cp", harness.SbxBin, lone).CombinedOutput(); err != nil {
		t.Fatalf("copy sbx: %v %s", err, out)
	}
	cmd := exec.Command(lone, "bench", "--rootfs", root, "--plot", filepath.Join(dir, "x.svg"), "lib")
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "go build -o bin/sbx-bench-plot") ||
		strings.Contains(string(out), "setting up") {
		t.Fatalf("missing helper: %v, %s", err, out)
	}
}

// TestBenchBadInput: bad flags give a clear error and exit 125.
func TestBenchBadInput(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rootfs", root, "warm"}, `unknown scenario "warm"`},
		{[]string{"--rootfs", "/nonexistent", "cold"}, "is not a directory"},
		{[]string{"--rootfs", root, "--format", "html", "cold"}, `invalid --format "html"`},
		{[]string{"--rootfs", root, "--plot", "x.jpg", "cold"}, "use a .svg or .png"},
		{[]string{"--rootfs", root, "--samples", "0", "cold"}, "--samples must be at least 1"},
	} {
		r := newBenchEnv(t).run(nil, tc.args...)
		if r.Code != 125 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("sbx bench %v: exit %d, stderr %q; want 125 and %q", tc.args, r.Code, r.Stderr, tc.want)
		}
	}
}

// TestBenchMarkdownTable checks the Markdown table of a report: header,
// one row per runtime with ratios, a failed runtime with its error.
func TestBenchMarkdownTable(t *testing.T) {
	ten := func(base float64) []float64 {
		var v []float64
		for i := 1; i <= 10; i++ {
			v = append(v, base*float64(i))
		}
		return v
	}
	sc := bench.ScenarioResult{Name: "cold", Description: "one-shot run", Unit: "ms",
		Subjects: []bench.SubjectResult{
			{Name: "sbx", Samples: ten(1), Version: "sbx 1"},
			{Name: "runc", Samples: ten(2), Version: "runc 1.1.5"},
			{Name: "crun", Error: "cgroups in hybrid mode not supported"},
		},
		Breakdown: []bench.PhaseResult{{Name: "rootfs", P50: 0.5, Share: 0.1, Source: "sbx"}}}
	for i := range sc.Subjects {
		sc.Subjects[i].Summary = bench.Summarize(sc.Subjects[i].Samples)
	}
	sc.Subjects[1].Ratio = &bench.Ratios{P50: 0.5}
	sc.Subjects[0].Ratio = &bench.Ratios{P50: 1}
	rep := &bench.Report{Machine: bench.DescribeMachine(0), Samples: 10, Scenarios: []bench.ScenarioResult{sc}}
	var b bytes.Buffer
	if err := benchreport.Markdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| runtime | version | n | min | p50 | p90 | p99 | max | sbx/this p50 |",
		"| sbx | sbx 1 | 10 | 1.00 | 5.00 | 9.00 | - | 10.0 | 1.00 |",
		"| runc | runc 1.1.5 | 10 | 2.00 | 10.0 | 18.0 | - | 20.0 | 0.50 |",
		"| crun |  | 0 | - | - | - | - | - | FAILED |",
		"- error: crun: cgroups in hybrid mode not supported",
		"| rootfs | sbx | 0.50 | 10% |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

// anchorInstalled reports whether the bench finds the binary of anchor
// name (runc, crun, bwrap) in PATH, as the bench itself looks for it.
func anchorInstalled(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// tableRows returns the data rows of a scenario's text table.
func tableRows(out, scenario string) []string {
	var rows []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, scenario+": "):
			in = true
		case in && strings.HasPrefix(l, "runtime "):
		case in && (l == "" || strings.HasPrefix(l, "where ") || strings.HasPrefix(l, "error:") || strings.HasPrefix(l, "note:")):
			return rows
		case in:
			rows = append(rows, l)
		}
	}
	return rows
}

// TestBenchDefaultRoot: without --rootfs the bench builds (once) and uses
// a busybox root from the host's busybox-static.
func TestBenchDefaultRoot(t *testing.T) {
	r := newBenchEnv(t).run(nil, "--samples", "2", "--warmup", "0", "cold")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, f := range []string{".complete", "bin/busybox", "bin/true", "bin/sleep"} {
		if _, err := os.Lstat(filepath.Join(bench.DefaultRootDir, f)); err != nil {
			t.Errorf("default root: %v", err)
		}
	}
	if rows := tableRows(r.Stdout, "cold"); len(rows) != 3 || !strings.HasPrefix(rows[0], "sbx ") || !strings.HasPrefix(rows[1], bench.UserNSSubject+" ") || !strings.HasPrefix(rows[2], "sbx run, pooled ") {
		t.Errorf("rows: %q", rows)
	}
}

// TestBenchImageWithLayers: --image runs a cached two-layer image with sbx
// and gives the other runtimes the same files through a read-only overlay
// of its layers, unmounted afterwards.
func TestBenchImageWithLayers(t *testing.T) {
	stateRoot := t.TempDir()
	store, err := imagecache.Open(filepath.Join(stateRoot, "images"), imagecache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := bench.ImportRoot(context.Background(), store, fixture.BusyboxRootfs(t), "bench-test/base:1")
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	body := []byte("#!/bin/sh\nexit 0\n")
	if err := tw.WriteHeader(&tar.Header{Name: "usr/local/bin/ok", Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(body)
	tw.Close()
	img, err := store.Commit(context.Background(), base, "bench-test/two:1", &layer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.LayerDirs) != 2 {
		t.Fatalf("want a two-layer image, got %d layers", len(img.LayerDirs))
	}
	// What the other runtimes get, checked without them: a read-only
	// overlay with the files of both layers, gone after the cleanup.
	var w bench.Workload
	mnt := filepath.Join(t.TempDir(), "bench-image-root")
	unmount, err := bench.UseImage(&w, store, stateRoot, "bench-test/two:1", mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bin/busybox", "usr/local/bin/ok"} {
		if _, err := os.Stat(filepath.Join(w.Rootfs, f)); err != nil || w.Rootfs != mnt {
			t.Errorf("the anchors' root %s lacks %s: %v", w.Rootfs, f, err)
		}
	}
	if err := os.WriteFile(filepath.Join(mnt, "x"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("the anchors' root is writable: %v", err)
	}
	if err := unmount(); err != nil {
		t.Fatalf("unmount the anchors' root: %v", err)
	}
	if _, err := os.Stat(mnt); !os.IsNotExist(err) {
		t.Errorf("the anchors' root %s is still there: %v", mnt, err)
	}

	e := newBenchEnv(t)
	r := e.exec(e.command(nil, "--root", stateRoot, "--run-root", e.runRoot, "bench", "--image", "bench-test/two:1",
		"--samples", "2", "--warmup", "0", "--compare", "runc,bwrap", "cold", "lib"))
	if r.Code != 0 {
		t.Fatalf("sbx bench --image: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	s := r.Stdout
	if !strings.Contains(s, "sbx run bench-test/two:1 true") || !strings.Contains(s, bench.ProbeImage) {
		t.Errorf("cold does not run the image or lacks the image lookup:\n%s", s)
	}
	// The anchors are not dependencies: one that is installed must run
	// on the overlay of the image's layers, one that is not is reported.
	for _, row := range append(tableRows(s, "cold"), tableRows(s, "lib")...) {
		name := strings.Fields(row)[0]
		switch {
		case !strings.Contains(row, "FAILED"):
		case anchorInstalled(name):
			t.Errorf("%s failed on the image's root: %q\n%s", name, row, s)
		case !strings.Contains(s, "error: "+name+": "+name+": not installed"):
			t.Errorf("%s is not installed, but its error does not say so: %q\n%s", name, row, s)
		}
	}
	// Only this bench's overlay (under its run root) counts: other
	// engineers' benches on the machine mount their own.
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), filepath.Join(e.runRoot, "bench-image-")) {
		t.Error("the overlay of the image's layers is still mounted")
	}
}

// TestBenchPool: the pool scenario claims from a warm pool in-process,
// over a server and from the CLI, next to a cold create, and leaves
// nothing behind (the env's check).
func TestBenchPool(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	jsonPath := filepath.Join(t.TempDir(), "rep.json")
	e := newBenchEnv(t)
	r := e.run(nil, "--rootfs", root, "--samples", "3", "--warmup", "1", "--json", jsonPath, "pool")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	var rep bench.Report
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("JSON report: %v, %d scenarios", err, len(rep.Scenarios))
	}
	sc := rep.Scenarios[0]
	var names []string
	for _, s := range sc.Subjects {
		names = append(names, s.Name)
		if s.Summary == nil || s.Summary.N != 3 {
			t.Errorf("%s: no figures: %s", s.Name, s.Error)
		}
	}
	if strings.Join(names, ",") != "sbx,sbx server,sbx cli,sbx cold" {
		t.Fatalf("subjects %q", names)
	}
	if cli := sc.Subjects[2]; cli.Figures[bench.FigureCLIClaimP50] <= 0 {
		t.Errorf("no claim figure for the CLI: %+v", cli.Figures)
	}
	if !strings.Contains(r.Stdout, bench.PhaseClaim) || !strings.Contains(r.Stdout, "pool: sbx p50 ≤ 2") {
		t.Errorf("the table lacks the claim phase or the pool target:\n%s", r.Stdout)
	}
}

// TestBenchStopsWhenItsOutputCloses: a bench whose output is closed
// (`sbx bench ... | head`) stops and removes its pool, sandboxes,
// network namespace and cgroups before it ends, instead of being killed
// by SIGPIPE with them running (the env's check, and the claim
// scenario's namespace).
func TestBenchStopsWhenItsOutputCloses(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	e := newBenchEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := e.command(nil, "--run-root", e.runRoot, "bench", "--rootfs", root, "--samples", "100000", "--warmup", "1", "claim")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	e.pids = append(e.pids, cmd.Process.Pid)
	// Read until the measured rounds start, then close the reading end.
	out := bufio.NewReader(r)
	line, err := out.ReadString('\n')
	for err == nil && !strings.Contains(line, "interleaved rounds") {
		line, err = out.ReadString('\n')
	}
	r.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the bench's output ended before its rounds: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("the bench ran on 2 minutes after its output closed")
	}
	t.Logf("the bench ended: %v", err) // SIGPIPE at its last message, once it has cleaned up, as `yes | head` ends
	if _, err := os.Stat(fmt.Sprintf("/run/netns/sbx-bench-claim-%d", cmd.Process.Pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the claim scenario's network namespace is left: %v", err)
	}
}
