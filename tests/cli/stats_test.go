package cli

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerStats: stats without a sandbox shows every running one, with
// a CPU % column (a busy loop shows tens of percent, an idle sandbox
// about none); several sandboxes can be named; streaming prints the
// header once.
func TestDockerStats(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")
	busy := create(t, h, "--name", "busy", "busybox", "sh", "-c", "while :; do :; done")
	idle := create(t, h, "--name", "idle", "busybox", "sleep", "600")

	out := h.Must(t, "stats", "--no-stream")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "CPU %") {
		t.Fatalf("stats --no-stream of all: %q", out)
	}
	cpu := map[string]float64{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		p, err := strconv.ParseFloat(strings.TrimSuffix(f[2], "%"), 64)
		if err != nil {
			t.Fatalf("stats row %q: %v", l, err)
		}
		cpu[f[1]] = p
	}
	// A busy loop gets what the machine's other work leaves it (a few
	// percent of a CPU on a loaded 2-CPU machine): it shows several times
	// the idle sandbox's share, not a fixed figure.
	if cpu["busy"] < 2 || cpu["busy"] < 4*cpu["idle"] || cpu["idle"] > 5 {
		t.Fatalf("CPU %%: busy %v, idle %v (from %q)", cpu["busy"], cpu["idle"], out)
	}
	if out := h.Must(t, "stats", "--no-stream", "--format", "json", "busy", idle); strings.Count(out, "\n") != 2 || !strings.Contains(out, `"name":"busy"`) || !strings.Contains(out, `"id":"`+idle+`"`) {
		t.Fatalf("stats --format json busy IDLE: %q", out)
	}
	if r := h.Sbx(t, "", "stats", "--no-stream", "nosuch"); r.Code != 1 {
		t.Fatalf("stats of a sandbox that does not exist: %d %q", r.Code, r.Stderr)
	}

	// Streaming: read until two rows came (the first one waits for the
	// process to start, which takes seconds on a loaded machine), then
	// interrupt.
	cmd := h.Command("stats", "busy")
	cmd.Env = append(os.Environ(), h.Env...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		stdout strings.Builder
	)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := pipe.Read(buf)
			mu.Lock()
			stdout.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	read := func() string { mu.Lock(); defer mu.Unlock(); return stdout.String() }
	for deadline := time.Now().Add(30 * time.Second); strings.Count(read(), "busy") < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	<-readDone
	_ = cmd.Wait()
	if s := read(); strings.Count(s, "CPU %") != 1 || strings.Count(s, "busy") < 2 {
		t.Fatalf("streaming stats: the header once and a row a second, got %q", s)
	}
	h.Must(t, "rm", "-f", busy, idle)
	harness.AssertNoLeftovers(t)
}
