package sandbox

import (
	"strings"
	"testing"
	"time"

	execapi "github.com/sbxrun/sbx/executor/api"
)

// TestCmdExitCapsExecutorWords: what an executor says about its main
// command's end is capped before it reaches a record (a huge signal name
// made the record larger than can be read back), and the rest is kept.
func TestCmdExitCapsExecutorWords(t *testing.T) {
	now := time.Now()
	huge := strings.Repeat("S", 1<<20)
	e := cmdExit(&execapi.MainCmdExit{ExitCode: 137, Signal: huge, Error: huge, StartedAt: now, FinishedAt: now})
	if len(e.Signal) != maxExecutorWord || len(e.Error) != maxExitError {
		t.Fatalf("signal of %d bytes and error of %d kept, want %d and %d", len(e.Signal), len(e.Error), maxExecutorWord, maxExitError)
	}
	if e.ExitCode != 137 || !e.StartedAt.Equal(now) || !e.FinishedAt.Equal(now) {
		t.Fatalf("the exit lost its fields: %+v", e)
	}
	if e := cmdExit(&execapi.MainCmdExit{Signal: "SIGRTMIN+15"}); e.Signal != "SIGRTMIN+15" {
		t.Fatalf("a real signal name was cut: %q", e.Signal)
	}
}
