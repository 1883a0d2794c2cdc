package isolate

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// This test binary never calls Init, as an embedding program that forgot
// it: Start refuses with a clear error before it creates anything, instead
// of libcontainer running the program's own main inside the sandbox.
func TestStartWithoutInit(t *testing.T) {
	state := t.TempDir()
	_, err := Start(state, &Spec{ID: "noinit", Rootfs: "/", Args: []string{"true"}}, IO{})
	if !errors.Is(err, ErrNoInit) {
		t.Fatalf("Start without Init: %v, want ErrNoInit", err)
	}
	if !strings.Contains(err.Error(), "isolate.Init()") || !strings.Contains(err.Error(), "first line of main") {
		t.Errorf("error does not say what to do: %v", err)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("Start without Init left %d entries in its state directory", len(entries))
	}
}
