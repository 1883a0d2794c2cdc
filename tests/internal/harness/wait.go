package harness

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/cgroup"
)

// CountHostProcesses counts the processes of this test binary's sandboxes
// (in cgroups under its private parent, see Main) whose command line
// is s; other sbx users' processes on the machine, e.g. the same test run
// by someone else, do not count.
func CountHostProcesses(t testing.TB, s string) int {
	t.Helper()
	n := 0
	mine := ":/" + cgroup.Parent() + "/"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")) != s {
			continue
		}
		if cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup"); err == nil && strings.Contains(string(cg), mine) {
			n++
		}
	}
	return n
}

// WaitFor polls cond until it holds, failing the test after 30 s (a
// sandbox's start, or a process's exit, takes seconds on a loaded 2-CPU
// machine; the bound only matters when the test fails).
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitUntil polls cond every 50 ms until it holds, failing after d.
func WaitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Context is a context for one test: it ends with the test, or after two
// minutes.
func Context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Median is the middle of d (the upper one of an even count), 0 if empty.
func Median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
