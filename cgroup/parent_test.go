package cgroup

import (
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
)

// The parent's memory limit can be set and read back, and cleared. The
// parent is shared with every sandbox on the host, so the test uses a
// limit far above the machine's memory and restores what was there.
func TestParentMemoryLimit(t *testing.T) {
	roottest.Require(t, "it writes the parent cgroup")
	old, err := ParentMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := SetParentMemory(old); err != nil {
			t.Errorf("restore the parent's memory limit: %v", err)
		}
	})
	const huge = 1 << 40 // 1 TiB: harmless to every sandbox of this host
	if err := SetParentMemory(huge); err != nil {
		t.Fatal(err)
	}
	if got, err := ParentMemoryLimit(); err != nil || got != huge {
		t.Fatalf("parent limit after setting %d: %d, %v", int64(huge), got, err)
	}
	if err := SetParentMemory(0); err != nil {
		t.Fatal(err)
	}
	if got, err := ParentMemoryLimit(); err != nil || got != 0 {
		t.Fatalf("parent limit after clearing: %d, %v; want 0 (none)", got, err)
	}
	if SetParentMemory(-1) == nil {
		t.Fatal("a negative limit was accepted")
	}
}
