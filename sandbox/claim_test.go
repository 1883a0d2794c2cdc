package sandbox

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/sbxrun/sbx"
)

// TestCheckMemberUserAfterPIDReuse: a claimant's user is looked up in the
// member's root through /proc/PID/root, and taken only if that PID is
// still the member's PID 1 afterwards: a PID another process reused (a
// start time other than the member's) gives errMemberGone, not that
// process's answer.
func TestCheckMemberUserAfterPIDReuse(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	start, ok := procStart(cmd.Process.Pid)
	if !ok {
		t.Fatal("no start time for the sleep process")
	}
	claimant := func(user string) *sbx.Sandbox {
		return &sbx.Sandbox{Options: sbx.Options{Image: "test", User: user}}
	}
	member := &sbx.Sandbox{Pid: cmd.Process.Pid, PidStart: start}
	if err := checkMemberUser(member, claimant("root")); err != nil {
		t.Fatalf("root in the member's root: %v", err)
	}
	if err := checkMemberUser(member, claimant("no-such-user-here")); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("a user the root lacks: got %v, want ErrInvalid", err)
	}
	reused := &sbx.Sandbox{Pid: cmd.Process.Pid, PidStart: start + 1}
	if err := checkMemberUser(reused, claimant("root")); !errors.Is(err, errMemberGone) {
		t.Fatalf("a reused PID: got %v, want errMemberGone", err)
	}
	if err := checkMemberUser(reused, claimant("no-such-user-here")); !errors.Is(err, errMemberGone) {
		t.Fatalf("a reused PID, a user it lacks: got %v, want errMemberGone", err)
	}
}
