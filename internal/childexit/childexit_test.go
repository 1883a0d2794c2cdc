package childexit

import (
	"errors"
	"os/exec"
	"testing"
)

// TestExitedWaitsForTheChild starts a child that lives until its stdin
// closes: Exited has not returned while it lives, returns once it has
// exited, and leaves it to be reaped (its exit status intact).
func TestExitedWaitsForTheChild(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read _; exit 3")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Exited(cmd.Process.Pid) }()
	select {
	case err := <-done:
		t.Fatalf("Exited returned (%v) while the child still waits for its input", err)
	default:
	}
	stdin.Close()
	if err := <-done; err != nil {
		t.Fatalf("Exited: %v", err)
	}
	var exit *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("the child's wait after Exited: %v, want exit status 3", err)
	}
}
