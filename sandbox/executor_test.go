package sandbox

import (
	"slices"
	"testing"
)

// PID 1 runs on one P whatever the sandbox's variables say; the rest of
// its environment is kept.
func TestExecutorProcessEnv(t *testing.T) {
	in := []string{"PATH=/bin", "GOMAXPROCS=8", "HOME=/root", "GOMAXPROCS=3"}
	got := executorProcessEnv(in)
	want := []string{"PATH=/bin", "HOME=/root", "GOMAXPROCS=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("executorProcessEnv(%q) = %q, want %q", in, got, want)
	}
	if in[1] != "GOMAXPROCS=8" {
		t.Fatalf("the caller's slice was changed: %q", in)
	}
}
