package sandbox

import (
	"os"
	"testing"
	"time"
)

// A run directory without its owner record is taken for a crashed run's
// only once it is older than the grace a run being created has.
func TestRunDirWithoutOwnerBeingCreated(t *testing.T) {
	dir := t.TempDir()
	if !beingCreated(dir) {
		t.Fatal("a directory made now is not taken for one being created")
	}
	old := time.Now().Add(-2 * runOwnerGrace)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	if beingCreated(dir) {
		t.Fatal("a directory older than the grace is taken for one being created")
	}
}
