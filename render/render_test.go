package render

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

func TestHumanForms(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 1500000: "1.5 MB", 3 << 40: "3.3 TB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Age(time.Time{}); got != "unknown" {
		t.Errorf("Age(zero) = %q", got)
	}
	if got := Age(time.Now().Add(-3 * time.Minute)); got != "3 minutes ago" {
		t.Errorf("Age(3m) = %q", got)
	}
	if got := ShortID("sha256:0123456789abcdef"); got != "0123456789ab" {
		t.Errorf("ShortID = %q", got)
	}
	if got := ShortID("abc"); got != "abc" {
		t.Errorf("ShortID(short) = %q", got)
	}
	if got := Truncate("héllo wörld", 5); got != "héll…" {
		t.Errorf("Truncate = %q", got)
	}
	if got := Truncate("abc", 3); got != "abc" {
		t.Errorf("Truncate(fits) = %q", got)
	}
	if got := Labels(map[string]string{"b": "2", "a": "1"}); got != "a=1,b=2" {
		t.Errorf("Labels = %q", got)
	}
	if got := ImageOf(&sbx.Options{Rootfs: "/r"}); got != "/r" {
		t.Errorf("ImageOf(rootfs) = %q", got)
	}
}

func testSandboxes() []*sbx.Sandbox {
	return []*sbx.Sandbox{
		{ID: "0123456789abcdef0123", Name: "web", Status: sbx.StatusRunning, Created: time.Now().Add(-time.Hour), Started: ptr(time.Now().Add(-time.Minute)),
			Options: sbx.Options{Image: "busybox:1", Cmd: []string{"sh", "-c", "while true; do sleep 1; done"}, Labels: map[string]string{"k": "v"}},
			Network: &sbx.NetworkInfo{Mode: "bridge", IP: netip.MustParseAddr("10.88.0.2")}},
		{ID: "fedcba9876543210fedc", Status: sbx.StatusStopped, Options: sbx.Options{Rootfs: "/srv/root"}},
	}
}

func TestSandboxesTable(t *testing.T) {
	var b bytes.Buffer
	if err := Sandboxes(&b, testSandboxes(), ListOptions{Format: "table"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SANDBOX ID     IMAGE       COMMAND") {
		t.Fatalf("table: %q", b.String())
	}
	for _, want := range []string{"0123456789ab", "busybox:1", `"sh -c while true; d…"`, "Up About a minute", "About an hour ago", "web", "k=v"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], "/srv/root") || !strings.Contains(lines[2], " - ") {
		t.Errorf("row of a rootfs sandbox never started: %q", lines[2])
	}
	if !strings.Contains(lines[2], "Exited ") {
		t.Errorf("row of a stopped sandbox: %q", lines[2])
	}
	ended := testSandboxes()
	ended[0].CmdExit = &sbx.Exit{ExitCode: 3, FinishedAt: time.Now().Add(-3 * time.Second)}
	b.Reset()
	_ = Sandboxes(&b, ended, ListOptions{Format: "table"})
	if !strings.Contains(b.String(), "Exited (3) 3 seconds ago") {
		t.Errorf("row of a sandbox whose command ended: %q", b.String())
	}
	restarting := testSandboxes()
	restarting[0].CmdRestarting = &sbx.Exit{ExitCode: 1, FinishedAt: time.Now().Add(-2 * time.Second)}
	b.Reset()
	_ = Sandboxes(&b, restarting, ListOptions{Format: "table"})
	if !strings.Contains(b.String(), "Restarting (1) 2 seconds ago") {
		t.Errorf("row of a sandbox whose command waits to restart: %q", b.String())
	}
	b.Reset()
	_ = Sandboxes(&b, testSandboxes(), ListOptions{Format: "table", NoTrunc: true})
	if !strings.Contains(b.String(), "0123456789abcdef0123") || !strings.Contains(b.String(), "done\"") {
		t.Errorf("--no-trunc: %q", b.String())
	}
	b.Reset()
	_ = Sandboxes(&b, testSandboxes(), ListOptions{Quiet: true, Format: "json"})
	if b.String() != "0123456789abcdef0123\nfedcba9876543210fedc\n" {
		t.Errorf("quiet: %q", b.String())
	}
	b.Reset()
	_ = Sandboxes(&b, nil, ListOptions{Format: "json"})
	if b.String() != "[]\n" {
		t.Errorf("json of none: %q", b.String())
	}
}

func TestTemplates(t *testing.T) {
	for _, f := range []string{"table", "json"} {
		if tmpl, err := ParseFormat(f); tmpl != nil || err != nil {
			t.Errorf("ParseFormat(%q) = %v, %v", f, tmpl, err)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil || !strings.Contains(err.Error(), "invalid --format") {
		t.Errorf("ParseFormat(yaml): %v", err)
	}
	if _, err := ParseFormat("{{.ID"); err == nil {
		t.Error("an unclosed action parsed")
	}
	tmpl, err := ParseFormat("table {{.Name}} {{json .Network}}")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Each(&b, tmpl, testSandboxes()); err != nil {
		t.Fatal(err)
	}
	if b.String() != "web {\"sandbox_id\":\"\",\"mode\":\"bridge\",\"ip\":\"10.88.0.2\"}\n null\n" {
		t.Errorf("template output: %q", b.String())
	}
	bad, _ := ParseFormat("{{.Nope}}")
	b.Reset()
	if err := Each(&b, bad, testSandboxes()); err == nil || !strings.HasPrefix(err.Error(), "--format: ") || b.Len() != 0 {
		t.Errorf("a failing template: %v, wrote %q", err, b.String())
	}
}

func TestImagesAndHistory(t *testing.T) {
	imgs := []sbx.Image{{Name: "docker.io/library/busybox:1", Digest: "sha256:aaaaaaaaaaaabbbb", SizeBytes: 2_000_000, DiffIDs: []string{"x", "y"}}}
	list := Summaries(imgs)
	if len(list) != 1 || list[0].Layers != 2 {
		t.Fatalf("Summaries: %+v", list)
	}
	var b bytes.Buffer
	_ = Images(&b, list, "table", false)
	if !strings.Contains(b.String(), "busybox:1") || !strings.Contains(b.String(), "aaaaaaaaaaaa ") || !strings.Contains(b.String(), "2.0 MB") || !strings.Contains(b.String(), "unknown") {
		t.Errorf("images table: %q", b.String())
	}
	b.Reset()
	_ = Images(&b, list, "", true)
	if b.String() != "aaaaaaaaaaaa\n" {
		t.Errorf("images -q: %q", b.String())
	}
	if err := Images(&b, list, "yaml", false); err == nil || !strings.Contains(err.Error(), `invalid --format "yaml"`) {
		t.Errorf("images --format yaml: %v", err)
	}
	steps := []sbx.ImageHistoryEntry{{CreatedBy: "/bin/sh -c   echo  a very long command that goes on and on and on", DiffID: "sha256:0123456789abcdef", SizeBytes: 1500}, {Comment: "empty"}}
	b.Reset()
	_ = History(&b, steps, HistoryOptions{Format: "table"})
	out := b.String()
	if !strings.Contains(out, "0123456789ab ") || !strings.Contains(out, "<missing>") || !strings.Contains(out, "/bin/sh -c echo a very long command that goe…") || !strings.Contains(out, "1.5 kB") {
		t.Errorf("history: %q", out)
	}
	b.Reset()
	_ = History(&b, steps, HistoryOptions{Quiet: true})
	if b.String() != "sha256:0123456789abcdef\n" {
		t.Errorf("history -q: %q", b.String())
	}
	b.Reset()
	_ = History(&b, nil, HistoryOptions{Format: "json"})
	if b.String() != "[]\n" {
		t.Errorf("history json of none: %q", b.String())
	}
}

func TestReports(t *testing.T) {
	var b bytes.Buffer
	pids := uint64(3)
	rep := &sbx.Report{Status: sbx.RunSignaled, ExitCode: 137, Signal: "SIGKILL", WallTimeS: 1.5, CPUTimeS: 0.25, MemoryPeakBytes: 1 << 20, OOMKilled: true, PidsPeak: &pids}
	Report(&b, rep)
	want := "status: signaled  exit: 137  signal: 9\nwall: 1.500s  cpu: 0.250s (user 0.000s, sys 0.000s)\npeak memory: 1MiB  oom killed: true  timed out: false  peak pids: 3\n"
	if b.String() != want {
		t.Errorf("report:\n%q\nwant\n%q", b.String(), want)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteReportFile(path, rep); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !bytes.Contains(data, []byte(`"signal": "SIGKILL"`)) {
		t.Errorf("report file: %s", data)
	}
	if err := WriteReportFile(filepath.Join(t.TempDir(), "no", "r.json"), rep); err == nil || !strings.HasPrefix(err.Error(), "write --report: ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("report into a missing directory: %v", err)
	}
	b.Reset()
	GCReport(&b, &sbx.GCReport{Runs: []string{"a"}, Expired: []string{"b"}, Orphans: []string{"/x"}, Pooled: []string{"p"}, AutoRemoved: []string{"r"}})
	if b.String() != "removed a\nremoved expired b\nremoved orphan /x\nremoved pool member p\nremoved (--rm, its command ended) r\n" {
		t.Errorf("gc report: %q", b.String())
	}
	b.Reset()
	PruneReport(&b, &sbx.PruneReport{Sandboxes: []string{"s"}, Images: []string{"docker.io/library/alpine:3"}, Layers: sbx.ImageGCReport{RemovedLayers: []string{"l"}, FreedBytes: 2000}})
	if b.String() != "removed sandbox s\nremoved image "+sbx.FamiliarName("docker.io/library/alpine:3")+"\nremoved 1 layers, freed 2.0 kB\n" {
		t.Errorf("prune report: %q", b.String())
	}
	b.Reset()
	ImageGCReport(&b, &sbx.ImageGCReport{KeptInUse: []string{"k"}})
	if b.String() != "removed 0 layers, freed 0 B\nkept 1 unused layers that a mount still uses\n" {
		t.Errorf("image gc report: %q", b.String())
	}
	b.Reset()
	rows := []sbx.StatsRow{{ID: "0123456789abcdef", Name: "web", CPUPercent: 12.345, Usage: &sbx.Usage{CPUTimeS: 1.2345, MemoryCurrentBytes: 1 << 20, Pids: 2}},
		{ID: "fedcba9876543210", Usage: &sbx.Usage{}}}
	_ = StatsRows(&b, rows, "table", true)
	if lines := strings.Split(b.String(), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "CPU %") ||
		!strings.HasPrefix(lines[1], "0123456789ab   web    12.35%   1.235s") || !strings.Contains(lines[1], " - ") || !strings.HasPrefix(lines[2], "fedcba987654   -") {
		t.Errorf("stats: %q", b.String())
	}
	b.Reset()
	_ = StatsRows(&b, rows[:1], "table", false) // streaming: the header once
	if strings.Contains(b.String(), "CPU %") || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("stats without the header: %q", b.String())
	}
	b.Reset()
	_ = StatsRows(&b, rows, "json", false)
	if lines := strings.Split(b.String(), "\n"); len(lines) != 3 || !strings.Contains(lines[0], `"id":"0123456789abcdef","name":"web","cpu_percent":12.345,"cpu_time_s":1.2345`) {
		t.Errorf("stats json: %q", b.String())
	}
	b.Reset()
	_ = Processes(&b, []sbx.ProcessInfo{{PID: 1, HostPID: 4242, State: "S", CPUTimeS: 0.123, RSSBytes: 4096, Command: "sleep 9"}})
	if !strings.Contains(b.String(), "4242") || !strings.Contains(b.String(), "120ms") || !strings.Contains(b.String(), "4.1 kB") {
		t.Errorf("top: %q", b.String())
	}
	b.Reset()
	_ = Pools(&b, []*sbx.Pool{{PoolSpec: sbx.PoolSpec{Name: "p", Size: 2, Options: sbx.Options{Image: "i"}}, Key: "0123456789abcdefgh"}})
	if !strings.Contains(b.String(), "0123456789ab\n") {
		t.Errorf("pools: %q", b.String())
	}
}

// TestProgressRate checks that a rate is shown while downloading only: an
// unpacking layer's bytes no longer flow.
func TestProgressRate(t *testing.T) {
	p := &Progress{start: []time.Time{time.Now().Add(-2 * time.Second)}}
	if bar := p.bar(0, sbx.PullProgress{Phase: "downloading", CurrentBytes: 2000, TotalBytes: 4000}); !strings.HasSuffix(bar, "/s") {
		t.Errorf("downloading bar without a rate: %q", bar)
	}
	if bar := p.bar(0, sbx.PullProgress{Phase: "unpacking", CurrentBytes: 4000, TotalBytes: 4000}); strings.Contains(bar, "/s") {
		t.Errorf("unpacking bar with a rate measured from the download's start: %q", bar)
	}
}

// TestProgressLines checks the lines shown when not on a terminal: one
// per layer once it is done or cached, none for a hostile index.
func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	p.Update(sbx.PullProgress{Index: 0, Count: 2, Layer: "sha256:0123456789abcdef", Phase: "downloading", TotalBytes: 10})
	p.Update(sbx.PullProgress{Index: 0, Count: 2, Layer: "sha256:0123456789abcdef", Phase: "done", TotalBytes: 1000})
	p.Update(sbx.PullProgress{Index: 0, Count: 2, Layer: "sha256:0123456789abcdef", Phase: "done", TotalBytes: 1000})
	p.Update(sbx.PullProgress{Index: 1, Count: 2, Layer: "sha256:fedcba", Phase: "cached"})
	p.Update(sbx.PullProgress{Index: -1, Count: 2, Phase: "done"})
	p.Update(sbx.PullProgress{Index: 7, Count: 2, Phase: "done"})
	p.Finish()
	if b.String() != "layer 1/2 0123456789ab: done 1.0 kB\nlayer 2/2 fedcba: cached 0 B\n" {
		t.Errorf("progress lines: %q", b.String())
	}
	q := NewProgress(&b, true)
	q.Update(sbx.PullProgress{Index: 0, Count: 1, Phase: "done"})
	if b.Len() != len("layer 1/2 0123456789ab: done 1.0 kB\nlayer 2/2 fedcba: cached 0 B\n") {
		t.Errorf("quiet progress wrote: %q", b.String())
	}
	// A bar never breaks on sizes a server made up.
	if bar := (&Progress{start: []time.Time{{}}}).bar(0, sbx.PullProgress{Phase: "downloading", CurrentBytes: -5, TotalBytes: 10}); !strings.HasPrefix(bar, "[ ") {
		t.Errorf("bar of a negative size: %q", bar)
	}
}

func ptr[T any](v T) *T { return &v }
