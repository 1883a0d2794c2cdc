package userns

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
)

func TestLeases(t *testing.T) {
	a, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a.count = 3
	r1, err := a.Acquire("root|a")
	if err != nil || r1 != (Range{HostID: DefaultBase, Size: DefaultSize}) {
		t.Fatalf("first: %+v %v", r1, err)
	}
	if again, err := a.Acquire("root|a"); err != nil || again != r1 {
		t.Fatalf("the owner's lease again: %+v %v", again, err)
	}
	var wg sync.WaitGroup
	got := make([]Range, 2)
	for i, o := range []string{"root|b", "root|c"} {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = a.Acquire(o) }()
	}
	wg.Wait()
	if got[0] == got[1] || got[0] == r1 || got[1] == r1 || got[0].Size == 0 || got[1].Size == 0 {
		t.Fatalf("ranges overlap: %+v %+v %+v", r1, got[0], got[1])
	}
	if _, err := a.Acquire("root|d"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a fourth of three: %v", err)
	}
	if err := a.Release("root|b"); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Acquire("root|d"); err != nil || r != got[0] {
		t.Fatalf("after a release: %+v %v", r, err)
	}
	if _, err := a.Acquire("bad\nowner"); err == nil {
		t.Fatal("an owner with a newline was accepted")
	}
	leases, _ := a.Leases()
	if len(leases) != 3 || leases["root|a"] != r1 {
		t.Fatalf("leases %v", leases)
	}
}

func TestNewMapsTheRange(t *testing.T) {
	roottest.Require(t, "it makes user namespaces and id-mapped mounts")
	r := Range{HostID: DefaultBase + 17*DefaultSize, Size: DefaultSize}
	f, err := New(r)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The namespace's map, read through a process that joins it is what
	// runtimes do; here it is enough that it is a user namespace other
	// than ours.
	self, _ := os.Readlink("/proc/self/ns/user")
	other, err := os.Readlink(Path(f))
	if err != nil || other == self || !strings.HasPrefix(other, "user:[") {
		t.Fatalf("new namespace %q (ours %q): %v", other, self, err)
	}
}
